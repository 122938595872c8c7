"""What the player does, on the recorder's one clock: key and mouse state between samples.

``InputLog`` is where input arrives (from pynput for a human, from the autopilot for the scripted
expert). Each sample takes, with ``drain()``, the keys held at that moment, every key pressed
since the previous sample (so a tap shorter than a sample period is never lost), the mouse
movement since then, and the raw events with their times. Only the profile's keys are logged:
the recorder is not a keylogger, and its own hotkeys never become actions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from env.keys import normalize_key

EVENT_DTYPE = np.dtype([("t", "f8"), ("kind", "u1"), ("key", "i2"), ("dx", "f4"), ("dy", "f4")])
KEY_DOWN, KEY_UP, MOUSE_MOVE, BUTTON_DOWN, BUTTON_UP = range(5)


@dataclass(frozen=True, slots=True)
class InputWindow:
    """Everything input did since the previous drain."""

    held: np.ndarray  # (K,) bool, at drain time
    pressed: np.ndarray  # (K,) bool, pressed at least once since the previous drain
    mouse_dx: float
    mouse_dy: float
    events: np.ndarray  # EVENT_DTYPE rows


class InputLog:
    """Thread-safe accumulator of key and mouse input over the profile's keys (Siphon names)."""

    def __init__(self, key_names: Sequence[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.key_names = tuple(normalize_key(k) for k in key_names)
        self._index = {k: i for i, k in enumerate(self.key_names)}
        self._clock = clock
        self._lock = threading.Lock()
        self._held = np.zeros(len(self.key_names), bool)
        self._pressed = np.zeros(len(self.key_names), bool)
        self._dx = self._dy = 0.0
        self._events: list[tuple[float, int, int, float, float]] = []

    def key(self, name: str, down: bool, t: float | None = None) -> None:
        """A key or mouse button went down or up. Keys outside the profile are ignored."""
        i = self._index.get(name)
        if i is None:
            return
        t = self._clock() if t is None else t
        button = name in ("LEFT", "RIGHT", "MIDDLE", "BUTTON4", "BUTTON5")
        with self._lock:
            if down:
                if self._held[i]:
                    return  # auto-repeat: the key is already down
                self._held[i] = True
                self._pressed[i] = True
                kind = BUTTON_DOWN if button else KEY_DOWN
            else:
                if not self._held[i]:
                    return
                self._held[i] = False
                kind = BUTTON_UP if button else KEY_UP
            self._events.append((t, kind, i, 0.0, 0.0))

    def tap(self, names: Sequence[str], t: float | None = None) -> None:
        """A tap sent without waiting for its release (the autopilot's dodge): down and up now."""
        for name in names:
            self.key(name, True, t)
            self.key(name, False, t)

    def mouse_move(self, dx: float, dy: float, t: float | None = None) -> None:
        t = self._clock() if t is None else t
        with self._lock:
            self._dx += dx
            self._dy += dy
            self._events.append((t, MOUSE_MOVE, -1, dx, dy))

    def held_names(self) -> set[str]:
        with self._lock:
            return {k for k, h in zip(self.key_names, self._held) if h}

    def drain(self) -> InputWindow:
        with self._lock:
            window = InputWindow(
                held=self._held.copy(),
                pressed=self._pressed.copy(),
                mouse_dx=self._dx,
                mouse_dy=self._dy,
                events=np.array(self._events, dtype=EVENT_DTYPE),
            )
            self._pressed[:] = False  # a key still down was pressed once, in an earlier window
            self._dx = self._dy = 0.0
            self._events.clear()
        return window
