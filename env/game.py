"""The Game interface: one small protocol the env, the recorder and the trainer talk to.

Two implementations exist so that nothing above this layer cares which game is behind it:

* ``SimGame`` (``env.sim.game``): the simulator in-process and lock-step. Its clock is game time;
  waiting advances simulated ticks, with no sockets and no sleeping.
* ``SiphonGame`` (``env.siphon.game``, over ``env.siphon.client``): a Siphon server, which is
  either the real game or ``python -m env.sim``. Its clock is ``time.monotonic()``; waiting sleeps until a deadline.

Both use one notion of time: ``now()`` on the game's own clock, and ``wait_until(t)`` on that same
clock. The env schedules steps on absolute deadlines over this pair, so timing code is shared.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from env.common.errors import GameError
from env.profile import Profile

AttributeValue = int | float | bool


@dataclass(frozen=True, slots=True)
class GameState(Mapping[str, AttributeValue]):
    """One consistent snapshot of every attribute of a profile, taken at ``timestamp``.

    ``timestamp`` is on the game's clock (see ``Game.now``). Values keep the profile's types:
    HP as ``int``, positions as ``float``, flags as ``bool``. A snapshot never holds ``None``:
    a failed read raises instead.
    """

    attributes: Mapping[str, AttributeValue]
    timestamp: float

    def __getitem__(self, name: str) -> AttributeValue:
        try:
            return self.attributes[name]
        except KeyError:
            raise KeyError(
                f"attribute {name!r} is not in this snapshot; it has: {', '.join(self.attributes)}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)


class Unreadable(GameError):
    """The game cannot be read right now, with nothing broken: the loading screen after a death,
    a boss killed for good, no frame of the window yet. Both backends raise it; a caller that can
    wait (the recorder) pauses and reads again, one that cannot says so."""


class PausedTap(GameError):
    """A tap sent to a paused game: its press and its release would both arrive before the game's
    next tick (the simulator then sees a tap of no length), or, on the real game, perhaps never
    be seen at all. Resume the game (``set_speed``) before tapping."""


TAP_WHILE_PAUSED = (
    "a key was tapped while the game is paused: its press and release would both land before the game's "
    "next tick, or never reach it; resume the game (set_speed) first, then tap"
)


@dataclass(frozen=True, slots=True)
class Frame:
    """A captured frame: RGB ``uint8`` (H, W, 3), its capture time on the game's clock, and the
    game's frame number (ticks for the simulator), so stale or repeated frames are visible."""

    rgb: np.ndarray = field(repr=False)
    timestamp: float
    number: int


@runtime_checkable
class Game(Protocol):
    """What every game backend offers. Key names are Siphon names (``W``, ``LEFT_SHIFT``, ...)."""

    profile: Profile
    realtime: bool
    """True when the game runs on its own clock (a Siphon server), False when lock-step."""

    def now(self) -> float:
        """The game's clock in seconds (game time in-process, ``time.monotonic()`` live)."""
        ...

    def read_state(self, names: Sequence[str] | None = None) -> GameState:
        """``names`` (default: every profile attribute), read together as one snapshot."""
        ...

    def capture_frame(self) -> Frame: ...

    def picture(self, frame: Frame, size: tuple[int, int]) -> np.ndarray:
        """``frame`` (the last one observed) as RGB at ``size`` (width, height), for a person to
        watch (``env.render()``), whatever size the observation is: a captured game scales its
        frame (``scaled``), the simulator draws the same moment again at that size."""
        ...

    def observe(self, names: Sequence[str] | None = None) -> tuple[GameState, Frame]:
        """A snapshot and a frame, taken together (concurrently where the backend can)."""
        ...

    def write(self, name: str, value: AttributeValue) -> None:
        """Write one attribute with its configured type (HP, positions: what the game allows)."""
        ...

    def hold_keys(self, keys: Collection[str]) -> None:
        """Hold exactly ``keys``: press the new ones, release every other key held before."""
        ...

    def tap_keys(self, keys: Collection[str], hold_ms: int = 50) -> None:
        """Press ``keys`` and release them ``hold_ms`` of game time later, without blocking the
        caller. The game must be running (``PausedTap`` otherwise): a tap needs game time to
        pass between its press and its release."""
        ...

    def wait_until(self, deadline: float) -> None:
        """Let game time pass until ``now() >= deadline`` (returns at once if already past)."""
        ...

    def set_speed(self, speed: float) -> None:
        """Scale game time; 0 pauses the game, 1 is normal speed."""
        ...

    def reset_fight(self, seed: int | None = None) -> GameState:
        """Restart the boss fight in place, verify that it restarted, and return the new state."""
        ...

    def close(self) -> None:
        """Release every key, leave a live game at real time, and free the connection. Safe to
        call twice. (A live game is taken back on connecting too, from whatever the last client
        left: one killed before it could close, as SIGKILL kills, left its keys and speed.)"""
        ...


def scaled(rgb: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``rgb`` resized to ``size`` (width, height): area-averaged down, bilinear up."""
    height, width = rgb.shape[:2]
    if (width, height) == tuple(size):
        return rgb
    import cv2

    shrink = size[0] * size[1] < width * height
    return cv2.resize(rgb, tuple(size), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
