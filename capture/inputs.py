"""What the player does, on the recorder's one clock: key, mouse and controller state between samples.

``InputLog`` is where input arrives (from pynput and SDL for a human, from the autopilot for the
scripted expert). Each sample takes, with ``drain()``, the keys held at that moment, every key
pressed since the previous sample (so a tap shorter than a sample period is never lost), the
mouse movement since then, the same for a game controller's buttons and the position of its
sticks and triggers, and the raw events with their times. Only the profile's keys are logged:
the recorder is not a keylogger, and its own hotkeys never become actions. A controller's
buttons and axes are all logged (``env.controller.BUTTONS``, ``AXES``): they are the game's.

A press (a profile key or mouse button going down, or a controller control the layout maps to an
action coming on) also sets ``press_heard`` until the next drain: a live recorder samples at once
on it (``capture.sampler``), so that the step a press begins is paired with the game as the
press landed rather than with a sample up to a period older.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from env.controller import AXES, BUTTONS, ControllerLayout
from env.keys import MOUSE_BUTTONS, normalize_key

EVENT_DTYPE = np.dtype([("t", "f8"), ("kind", "u1"), ("key", "i2"), ("dx", "f4"), ("dy", "f4")])
KEY_DOWN, KEY_UP, MOUSE_MOVE, BUTTON_DOWN, BUTTON_UP, PAD_DOWN, PAD_UP, PAD_AXIS = range(8)
"""Event kinds. ``key`` is the column: of the keys (``KEY_*``, mouse ``BUTTON_*``), of the
controller's buttons (``PAD_DOWN``/``PAD_UP``, in ``env.controller.BUTTONS``) or of its axes
(``PAD_AXIS``: ``dx`` holds the axis's new value, from -1 to 1 for a stick, 0 to 1 for a trigger)."""


@dataclass(frozen=True, slots=True)
class InputWindow:
    """Everything input did since the previous drain."""

    held: np.ndarray  # (K,) bool, at drain time
    pressed: np.ndarray  # (K,) bool, pressed at least once since the previous drain
    mouse_dx: float
    mouse_dy: float
    events: np.ndarray  # EVENT_DTYPE rows
    pad_held: np.ndarray  # (len(BUTTONS),) bool: the controller's buttons down at drain time
    pad_pressed: np.ndarray  # (len(BUTTONS),) bool: pressed at least once since the previous drain
    pad_axes: np.ndarray  # (len(AXES),) float32: where its sticks and triggers are at drain time


class InputLog:
    """Thread-safe accumulator of key and mouse input over the profile's keys (Siphon names);
    ``layout`` (the profile's controller table) says which controller changes are presses."""

    def __init__(
        self,
        key_names: Sequence[str],
        clock: Callable[[], float] = time.monotonic,
        layout: ControllerLayout | None = None,
    ) -> None:
        self.key_names = tuple(normalize_key(k) for k in key_names)
        self._index = {k: i for i, k in enumerate(self.key_names)}
        self.clock = clock
        self._lock = threading.Lock()
        self._held = np.zeros(len(self.key_names), bool)
        self._pressed = np.zeros(len(self.key_names), bool)
        self._dx = self._dy = 0.0
        self._events: list[tuple[float, int, int, float, float]] = []
        self._pad_held = np.zeros(len(BUTTONS), bool)
        self._pad_pressed = np.zeros(len(BUTTONS), bool)
        self._pad_axes = np.zeros(len(AXES), np.float32)
        self.controller = ""
        """The controller being heard (its name, as SDL gives it), or "" while there is none."""
        self.layout = layout
        self._pad_actions: frozenset[str] = frozenset()  # what the controller holds, by the layout
        self.press_heard = threading.Event()
        """Set by a press, cleared by ``drain``: a sample drained after it holds it."""
        self.on_press: Callable[[], None] = lambda: None
        """Called on the listener's thread after each press (the live sampler's wake-up)."""

    def key(self, name: str, down: bool, t: float | None = None) -> None:
        """A key or mouse button went down or up. Keys outside the profile are ignored."""
        i = self._index.get(name)
        if i is None:
            return
        t = self.clock() if t is None else t
        button = name in MOUSE_BUTTONS
        with self._lock:
            if down:
                if self._held[i]:
                    return  # auto-repeat: the key is already down
                self._held[i] = True
                self._pressed[i] = True
                self._heard_a_press()
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
        t = self.clock() if t is None else t
        with self._lock:
            self._dx += dx
            self._dy += dy
            self._events.append((t, MOUSE_MOVE, -1, dx, dy))

    def pad_button(self, index: int, down: bool, t: float | None = None) -> None:
        """The controller's button ``BUTTONS[index]`` went down or up."""
        t = self.clock() if t is None else t
        with self._lock:
            if self._pad_held[index] == down:
                return
            self._pad_held[index] = down
            self._pad_pressed[index] |= down
            self._events.append((t, PAD_DOWN if down else PAD_UP, index, 0.0, 0.0))
            self._note_pad_press(button_down=down)

    def pad_axis(self, index: int, value: float, t: float | None = None) -> None:
        """The controller's axis ``AXES[index]`` moved to ``value``."""
        t = self.clock() if t is None else t
        with self._lock:
            self._pad_axes[index] = value
            self._events.append((t, PAD_AXIS, index, value, 0.0))
            self._note_pad_press(button_down=False)

    def _note_pad_press(self, button_down: bool) -> None:
        """After a controller change (under the lock): a press if the layout now holds an action
        it did not; without a layout, any button going down (a stick's every tremor is not one)."""
        if self.layout is None:
            if button_down:
                self._heard_a_press()
            return
        held = self.layout.held(self._pad_held, self._pad_axes)
        actions = frozenset(action for action, column in held.items() if column[0])
        if actions - self._pad_actions:
            self._heard_a_press()
        self._pad_actions = actions

    def _heard_a_press(self) -> None:
        self.press_heard.set()
        self.on_press()

    def pad_gone(self, t: float | None = None) -> None:
        """The controller was unplugged: everything on it lets go, as the game sees it."""
        t = self.clock() if t is None else t
        for index in np.flatnonzero(self._pad_held):
            self.pad_button(int(index), False, t)
        for index in np.flatnonzero(self._pad_axes):
            self.pad_axis(int(index), 0.0, t)

    def drain(self) -> InputWindow:
        with self._lock:
            window = InputWindow(
                held=self._held.copy(),
                pressed=self._pressed.copy(),
                mouse_dx=self._dx,
                mouse_dy=self._dy,
                events=np.array(self._events, dtype=EVENT_DTYPE),
                pad_held=self._pad_held.copy(),
                pad_pressed=self._pad_pressed.copy(),
                pad_axes=self._pad_axes.copy(),
            )
            self._pressed[:] = False  # a key still down was pressed once, in an earlier window
            self._pad_pressed[:] = False
            self._dx = self._dy = 0.0
            self._events.clear()
            self.press_heard.clear()
        return window
