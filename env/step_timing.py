"""What a live step cannot make exact, drawn in-process, so the simulator is never kinder than the
live path.

A live env paused between steps (``EldenRingEnv`` over a Siphon server) holds the step's keys
while the game is still paused, resumes it, taps the step's taps while it runs and asks for the
pause early enough that it lands at the step's end. Three things stay inexact however carefully
that is done, since the game runs on its own clock while the calls travel: the tick a tap's
press reaches (a call that is slow to arrive comes a tick late), how many ticks the tap is held
(Siphon holds it on the wall's clock), and the tick the pause lands on (after a scan of the
game's memory, as long as the server takes). The in-process simulator is lock-step and would
make all three exact; with ``EnvConfig.step_timing = "live"`` the env draws each of them per
step from how often each happened on the live path (``LIVE``), so a policy trained and judged
in-process meets the spread of the game it will fight.

Each draw is game time in whole ticks of the simulator (60 a second), as the live path was
measured on the simulator's own clock; the env waits and taps in milliseconds of game time, and
the lock-step simulator rounds them to the same ticks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

TICK_MS = 1000 / 60
"""One tick of the simulator's game time, the unit the live path was measured in."""


@dataclass(frozen=True)
class TickShare:
    """How many ticks (an offset from the exact value) happened how often: ``{0: 0.98, 1: 0.02}``."""

    counts: Mapping[int, float]
    _ticks: np.ndarray = field(init=False, repr=False, compare=False)
    _cumulative: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        total = sum(self.counts.values())
        if not self.counts or total <= 0 or any(v < 0 for v in self.counts.values()):
            raise ValueError(f"a share of ticks needs counts that sum above 0, got {dict(self.counts)}")
        weights = np.fromiter(self.counts.values(), float)
        cumulative = (weights / weights.sum()).cumsum()
        cumulative /= cumulative[-1]
        object.__setattr__(self, "_ticks", np.fromiter(self.counts, float))
        object.__setattr__(self, "_cumulative", cumulative)

    def draw_ms(self, rng: np.random.Generator) -> float:
        """One draw, exactly ``rng.choice(ticks, p=shares)``'s (the same uniform, the same
        cumulative shares, so the same tick for the same generator), without building the arrays
        and checking the shares again at every one of an env's three draws a step."""
        return float(self._ticks[self._cumulative.searchsorted(rng.random(), side="right")]) * TICK_MS


@dataclass(frozen=True)
class StepDraw:
    """One step's timing, in milliseconds of game time past the exact step."""

    tap_delay_ms: float
    """How long after the step's start its taps are pressed."""
    tap_hold_ms: float
    """How much longer (or shorter) than ``tap_ms`` they are held."""
    length_ms: float
    """How much longer (or shorter) than its timestep the step runs."""


@dataclass(frozen=True)
class StepTiming:
    """The live path's spread, as counts of how often each offset happened."""

    tap_delay: TickShare
    tap_hold: TickShare
    length: TickShare

    def draw(self, rng: np.random.Generator) -> StepDraw:
        return StepDraw(self.tap_delay.draw_ms(rng), self.tap_hold.draw_ms(rng), self.length.draw_ms(rng))


LIVE = StepTiming(
    tap_delay=TickShare({0: 9419, 1: 3944, 2: 184, 3: 6}),
    tap_hold=TickShare({-1: 57, 0: 11618, 1: 1870, 2: 7, 6: 1}),
    length=TickShare({-2: 3, -1: 3096, 0: 42283, 1: 2854, 2: 115, 3: 9, 4: 1, 6: 1, 7: 1}),
)
"""The live path's spread, as counted on the game's own clock over 48,363 steps and 13,553 taps of
100 fights: a simulator server in its real-server mode at 3x, paused between steps as the env plays
it (each step's pause asked by the game's clock, ``[clock]``), two fight processes and two busy
processes on this project's two-core machine (elden_il/studies/STUDIES.md, "The live spread re-counted on the game's clock, and each fight's own odds")."""
