"""Sampling the game on absolute deadlines: a frame, a memory snapshot and the input since the
previous sample, all stamped on one clock: the game's (``Game.now``), which for a live game is
``time.monotonic()`` and for the in-process simulator is game time, so the same sampler records
the real game in real time and the simulator lock-step, as fast as it can render.

Each sample asks for the frame and every attribute in one concurrent round (``Game.observe``),
keeps the frame as captured (the episode's video keeps the whole picture; training frames are
made from it later), and drains the input log at the sample's time. A sample that starts late is counted; when a whole period is missed its slot is
dropped and counted rather than squeezed in, so the rate stays honest.

Against a live game up to six samples may be in flight at once, each started on its own deadline and
taken by a worker thread: a round's time varies, and on a busy machine now and then one runs past
the sample period (``benchmarks/bench_recorder.py`` times them; BENCHMARKS.md, the recorder), so a
sampler that finished each sample before starting the next dropped one whenever a single round ran
over the period. Samples still come back in time order, each as soon as it is complete. In lock-step
(the in-process simulator) there is no real time to overlap, and samples are taken inline.

Against a live game a press (``InputLog.press_heard``) is sampled at once too, and the schedule
starts again from it. A person presses off the recorder's schedule, so the last scheduled sample
before a press shows the game up to a period earlier than it was when the press landed, and a
policy trained on that pairing acts that much early in the env, whose observations are the game
at the moment it acts: a dodge timed to a boss's swing by a game tick or two misses
(elden_il/studies/STUDIES.md, the human path). The dataset builder pairs a step beginning with a press with
the sample taken as it landed (``capture.build_dataset.step_starts``). In lock-step the
autopilot presses at sample times, so its presses already have theirs.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from concurrent import futures
from dataclasses import dataclass

import numpy as np

from env.game import Frame, Game, GameState

from capture.episode_writer import Sample
from capture.inputs import InputLog, InputWindow

LIVE_IN_FLIGHT = 6
"""Samples a live game may have in flight at once (see the module docstring): enough to ride out a
round of six periods (200 ms at 30 Hz), few enough that frames in flight stay small (6 x 6 MB at
720p)."""

Taken = tuple[Sample, GameState, Frame, np.ndarray]


@dataclass(slots=True)
class SamplerStats:
    started_at: float
    samples: int = 0
    at_presses: int = 0  # taken at once on a press (a live game), off the schedule
    late: int = 0  # started more than half a period after their deadline
    dropped: int = 0  # deadlines skipped because a whole period was missed
    last_t: float = 0.0

    @property
    def achieved_rate_hz(self) -> float:
        elapsed = self.last_t - self.started_at
        return (self.samples - 1) / elapsed if self.samples > 1 and elapsed > 0 else 0.0


class Sampler:
    def __init__(self, game: Game, inputs: InputLog, rate_hz: float = 30.0) -> None:
        if rate_hz <= 0:
            raise ValueError(f"sampling rate must be positive, got {rate_hz}")
        self.game = game
        self.inputs = inputs
        self.period = 1.0 / rate_hz
        self.names = game.profile.attribute_names
        self._pool = futures.ThreadPoolExecutor(LIVE_IN_FLIGHT, thread_name_prefix="sampler") if game.realtime else None
        self._in_flight: deque[futures.Future[Taken]] = deque()
        self._wake = threading.Event()  # a press heard, or a sample in flight complete
        if self._pool is not None:
            inputs.on_press = self._wake.set
        self.restart_clock()

    def restart_clock(self) -> None:
        """Begin a fresh schedule now (after a pause in sampling, e.g. a fight restart); samples
        still in flight belong to the time before and are dropped."""
        while self._in_flight:
            futures.wait([self._in_flight.popleft()])
        self._next = self.game.now()
        self.stats = SamplerStats(started_at=self._next)

    def count_from(self, first: Sample) -> None:
        """Count rate, late and dropped samples from ``first`` on, so that each episode's
        numbers are its own even when sampling runs on across episodes."""
        self.stats = SamplerStats(started_at=first.t, samples=1, last_t=first.t)

    def next_sample(self) -> Taken:
        """The next sample in time order: the sample, the raw state and frame (for the live view
        and a policy at the keys) and the input events."""
        if self._pool is None:  # lock-step: wait (advancing the game) and sample inline
            if self.game.now() < self._next:
                self.game.wait_until(self._next)
            return self._count(self._take(*self._start()))
        while True:
            self._wake.clear()  # before looking: a press or a completion from now on wakes the wait below
            if self._in_flight and self._in_flight[0].done():
                return self._count(self._in_flight.popleft().result())
            if len(self._in_flight) == LIVE_IN_FLIGHT:
                futures.wait([self._in_flight[0]])
                continue
            at_press = self.inputs.press_heard.is_set()
            wait = self._next - self.game.now()
            if at_press or wait <= 0:
                taking = self._pool.submit(self._take, *self._start(at_press))
                taking.add_done_callback(lambda _: self._wake.set())
                self._in_flight.append(taking)
            else:  # until the next deadline, a press, or the oldest sample's completion
                self._wake.wait(timeout=wait)

    def _start(self, at_press: bool = False) -> tuple[float, InputWindow]:
        """Claim the current deadline (counting it late, or the ones missed as dropped), or
        (``at_press``) start the schedule again from now, and drain the input since the previous
        sample, on the caller's thread so windows stay in order."""
        now = self.game.now()
        if at_press:
            self.stats.at_presses += 1
            self._next = now + self.period
            return now, self.inputs.drain()
        late = now - self._next
        if late >= self.period:
            missed = math.floor(late / self.period)
            self.stats.dropped += missed
            self._next += missed * self.period
            late -= missed * self.period
        if late > self.period / 2:
            self.stats.late += 1
        self._next += self.period
        return now, self.inputs.drain()

    def _take(self, t: float, window: InputWindow) -> Taken:
        state, frame = self.game.observe(self.names)
        sample = Sample(
            t=t,
            frame_t=frame.timestamp,
            frame=frame.rgb,
            state=np.array([float(state[n]) for n in self.names], np.float64),
            held=window.held,
            pressed=window.pressed,
            mouse_dx=window.mouse_dx,
            mouse_dy=window.mouse_dy,
            pad_held=window.pad_held,
            pad_pressed=window.pad_pressed,
            pad_axes=window.pad_axes,
        )
        return sample, state, frame, window.events

    def _count(self, taken: Taken) -> Taken:
        self.stats.samples += 1
        self.stats.last_t = taken[0].t
        return taken

    def close(self) -> None:
        """Let samples in flight finish, then stop the worker threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
