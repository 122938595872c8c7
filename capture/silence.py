"""Noticing a recorder that hears nothing while the game plainly moves.

On Windows a low-level keyboard hook (pynput) in a process without Administrator rights receives
no events while an elevated window has focus (UIPI), and Siphon often runs the game elevated. The
recording then has frames and memory but no actions, which is useless for learning and silent.
``InputSilence`` watches for that: the player moving or animating for a while, with not one input
event heard, and says once what to do about it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

log = logging.getLogger(__name__)

SILENCE_S = 10.0
"""How long the game may change with no input heard before the recorder says so."""
MOVED_M = 0.01
"""A position change between two samples that counts as the player moving."""


class InputSilence:
    def __init__(self, active: bool = True, silence_s: float = SILENCE_S) -> None:
        self.active = active
        self.silence_s = silence_s
        self.warned = False
        self._first_change: float | None = None
        self._last_state: tuple[float, float, float] | None = None

    def update(self, t: float, state: Mapping[str, float], events: np.ndarray) -> None:
        """Feed every sample: its time, the game state and the input events since the last one."""
        if not self.active or self.warned:
            return
        if len(events):
            self._first_change = None
            return
        now = (
            float(state.get("HeroLocalPosX", 0.0)),
            float(state.get("HeroLocalPosY", 0.0)),
            float(state.get("HeroAnimId", 0)),
        )
        before, self._last_state = self._last_state, now
        if before is None:
            return
        moved = np.hypot(now[0] - before[0], now[1] - before[1]) > MOVED_M or now[2] != before[2]
        if moved and self._first_change is None:
            self._first_change = t
        if self._first_change is not None and t - self._first_change >= self.silence_s:
            self.warned = True
            log.warning(
                "the game has been changing for %.0f s but the recorder has heard no key or mouse event: "
                "if the game (or Siphon) runs as Administrator, run the recorder as Administrator too "
                "(Windows keeps keyboard events from elevated windows away from non-elevated programs)",
                t - self._first_change,
            )
