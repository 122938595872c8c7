"""Sampling the game on absolute deadlines: a frame, a memory snapshot and the input since the
previous sample, all stamped on one clock: the game's (``Game.now``), which for a live game is
``time.monotonic()`` and for the in-process simulator is game time, so the same sampler records
the real game in real time and the simulator lock-step, as fast as it can render.

Each sample asks for the frame and every attribute in one concurrent round (``Game.observe``),
downscales the frame at once with the env's own preprocessing, and drains the input log at the
sample's time. A sample that starts late is counted; when a whole period is missed its slot is
dropped and counted rather than squeezed in, so the rate stays honest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from env.game import Frame, Game, GameState
from env.observations import FrameSpec

from capture.episode import Sample
from capture.inputs import InputLog


@dataclass(slots=True)
class SamplerStats:
    started_at: float
    samples: int = 0
    late: int = 0  # started more than half a period after their deadline
    dropped: int = 0  # deadlines skipped because a whole period was missed
    last_t: float = 0.0

    @property
    def achieved_rate_hz(self) -> float:
        elapsed = self.last_t - self.started_at
        return (self.samples - 1) / elapsed if self.samples > 1 and elapsed > 0 else 0.0


class Sampler:
    def __init__(self, game: Game, inputs: InputLog, frame: FrameSpec, rate_hz: float = 30.0) -> None:
        if rate_hz <= 0:
            raise ValueError(f"sampling rate must be positive, got {rate_hz}")
        self.game = game
        self.inputs = inputs
        self.frame = frame
        self.period = 1.0 / rate_hz
        self.names = game.profile.attribute_names
        self.restart_clock()

    def restart_clock(self) -> None:
        """Begin a fresh schedule now (after a pause in sampling, e.g. a fight restart)."""
        self._next = self.game.now()
        self.stats = SamplerStats(started_at=self._next)

    def count_from(self, first: Sample) -> None:
        """Count rate, late and dropped samples from ``first`` on, so that each episode's
        numbers are its own even when sampling runs on across episodes."""
        self.stats = SamplerStats(started_at=first.t, samples=1, last_t=first.t)

    def next_sample(self) -> tuple[Sample, GameState, Frame, np.ndarray]:
        """Wait for the next deadline and take one sample; returns the sample, the raw state
        and full-size frame (for the live view and the video sidecar) and the input events."""
        game = self.game
        if game.now() < self._next:
            game.wait_until(self._next)
        now = game.now()
        late = now - self._next
        if late >= self.period:
            missed = math.floor(late / self.period)
            self.stats.dropped += missed
            self._next += missed * self.period
            late -= missed * self.period
        if late > self.period / 2:
            self.stats.late += 1
        t = now
        window = self.inputs.drain()
        state, frame = self.game.observe(self.names)
        sample = Sample(
            t=t,
            frame_t=frame.timestamp,
            frame=self.frame.process(frame.rgb),
            state=np.array([float(state[n]) for n in self.names], np.float64),
            held=window.held,
            pressed=window.pressed,
            mouse_dx=window.mouse_dx,
            mouse_dy=window.mouse_dy,
        )
        self.stats.samples += 1
        self.stats.last_t = t
        self._next += self.period
        return sample, state, frame, window.events
