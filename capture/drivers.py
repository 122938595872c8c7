"""Who plays while the recorder records: one ``Driver``.

The recorder (``capture.record``) owns the clock, the files and where episodes begin and end; it
holds exactly one driver and shows it every sample. Drivers:

- ``PersonDriver``: a person at the keyboard and mouse, heard through pynput, or at a game
  controller, heard through SDL (both at once, as the game takes both);
- ``capture.autopilot.Autopilot``: the scripted expert (or the person-like player), sending keys
  through the game's input and logging them as it sends them;
- ``elden_il.pilot.PolicyDriver``: a trained policy, which the person (or the simulator's
  scripted human) may take over at any moment.

A driver that plays through the game's keys decides on a ``DecisionClock`` (once per env step of
game time) and presses through a ``KeyDriver`` (keys sent and logged as the same act), both here.

A new way of playing while recording (another correction strategy, say) is another driver; the
recorder does not change.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import ClassVar, Protocol

import numpy as np

from env.actions import KeyCommand, send
from env.common.errors import ConfigError, GameError, SetupError
from env.game import Game, GameState

from capture.episode_writer import Sample
from capture.inputs import InputLog
from capture.pad_listener import PadListener, PadSink
from capture.silence import InputSilence

log = logging.getLogger(__name__)


class RecordError(ConfigError):
    """A recording that cannot start as asked (two players at once, a policy for another
    profile); the message says how to ask instead."""


Hotkeys = Mapping[str, Callable[[], None]]
"""The recorder's own keys (start/stop, discard, quit): a key name and what it asks for."""


class KeySink(PadSink, Protocol):
    """Where input is logged as it happens: an ``InputLog``, or a ``Takeover`` in front of one."""

    def key(self, name: str, down: bool, t: float | None = None) -> None: ...

    def tap(self, names: tuple[str, ...], t: float | None = None) -> None: ...

    def mouse_move(self, dx: float, dy: float, t: float | None = None) -> None: ...


class DecisionClock:
    """Once per env step of game time, from the first sample of a fight on."""

    def __init__(self, step_seconds: float) -> None:
        self.step_seconds = step_seconds
        self._next = float("-inf")

    def reset(self) -> None:
        self._next = float("-inf")

    def due(self, t: float) -> bool:
        """Whether a decision falls due at time ``t`` (and if so, schedule the next one)."""
        if t + 1e-6 < self._next:
            return False
        self._next = max(self._next + self.step_seconds, t)
        return True


class KeyDriver:
    """Sends key commands to the game and logs each key into ``sink`` as it is sent; remembers
    what it holds itself, so it releases only its own keys."""

    def __init__(self, game: Game, sink: KeySink, tap_ms: int) -> None:
        self.game = game
        self.sink = sink
        self.tap_ms = tap_ms
        self.holding: frozenset[str] = frozenset()

    def play(self, command: KeyCommand, tap_ms: int | None = None) -> None:
        """``tap_ms``: how long this command's tap is held (None: the driver's own)."""
        send(self.game, command, self.tap_ms if tap_ms is None else tap_ms)
        for key in self.holding - command.hold:
            self.sink.key(key, False)
        for key in command.hold - self.holding:
            self.sink.key(key, True)
        if command.tap:
            self.sink.tap(command.tap)
        self.holding = command.hold

    def release(self, keep_logged: frozenset[str] = frozenset()) -> None:
        """Let go of every key held; ``keep_logged``: keys someone else holds too, whose release
        is not logged (they are still down)."""
        try:
            self.game.hold_keys(())
        except GameError as e:
            log.warning("could not release the keys: %s", e)
        for key in self.holding - keep_logged:
            self.sink.key(key, False)
        self.holding = frozenset()


class Driver:
    """The player the recorder records. The recorder calls, from its sampling loop only:
    ``mark`` and ``on_sample`` for every sample, ``new_fight`` when an episode starts,
    ``episode_over`` when one is saved or dropped, ``release`` before the fight restarts, and
    ``close`` once at the end. Each does nothing unless a driver needs it."""

    source: ClassVar[str]
    """Who played, as each episode records it (``EpisodeMeta.source``)."""

    def mark(self, sample: Sample) -> Sample:
        """The sample as it is recorded (a driver sharing the keys with a person marks the
        samples the person had control in)."""
        return sample

    def on_sample(
        self, sample: Sample, state: GameState, frame: np.ndarray, events: np.ndarray, recording: bool
    ) -> None:
        """A sample that ends no episode, with its state, its frame as captured and the input
        events since the previous one; ``recording``: an episode is being written."""

    def new_fight(self) -> None:
        """An episode starts."""

    def episode_over(self) -> None:
        """The episode ended: nobody plays between fights unless the driver says otherwise."""
        self.release()

    def release(self) -> None:
        """Let go of every key the driver holds."""

    def close(self) -> None:
        self.release()


MakeDriver = Callable[[Game, InputLog, Hotkeys], Driver]
"""Makes a driver once the game is up: the game, the recorder's input log, its hotkeys."""


def need_display(what: str, instead: str = "") -> None:
    """pynput needs an X display on Linux: say so before anything waits on it, with ``instead``,
    what the command the person ran can do without one (each command says its own)."""
    if sys.platform.startswith("linux") and not os.environ.get("DISPLAY"):
        raise SetupError(f"{what} needs an X display (set DISPLAY){instead}")


class Listening:
    """The person's keyboard and mouse, heard through pynput, and their game controller (unless
    ``controller`` is False), heard through SDL, on threads of their own: game input goes into
    ``sink``, the recorder's hotkeys to what they ask for. A recorder that hears nothing while the
    game plainly moves says so once (``InputSilence``)."""

    def __init__(self, sink: KeySink, hotkeys: Hotkeys, controller: bool = True) -> None:
        need_display("hearing your keyboard")
        from capture.listener import PynputListener  # needs DISPLAY: imported only when listening

        self.silence = InputSilence()
        self._listener = PynputListener(sink, hotkeys)
        self._listener.start()
        self._pad = PadListener(sink) if controller else None
        if self._pad is not None:
            self._pad.start()

    def heard(self, sample: Sample, state: GameState, events: np.ndarray) -> None:
        self.silence.update(sample.t, state, events)

    def stop(self) -> None:
        self._listener.stop()
        if self._pad is not None:
            self._pad.stop()


class PersonDriver(Driver):
    """A person plays: the recorder only listens."""

    source = "human"

    def __init__(self, sink: KeySink, hotkeys: Hotkeys, controller: bool = True) -> None:
        self.listening = Listening(sink, hotkeys, controller)

    def on_sample(
        self, sample: Sample, state: GameState, frame: np.ndarray, events: np.ndarray, recording: bool
    ) -> None:
        self.listening.heard(sample, state, events)

    def close(self) -> None:
        self.listening.stop()
