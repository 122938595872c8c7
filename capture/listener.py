"""pynput -> the recorder: the human's keyboard and mouse, named as Siphon names them.

pynput reports X11/Windows key objects; the game is driven by Siphon names. Keys are normalised
here (``Key.shift`` -> ``LEFT_SHIFT``, ``'w'`` -> ``W``, ``Button.x2`` -> ``BUTTON5``) so the
recorded key log speaks the same language as the profile's keybinds. Hotkeys (start/stop an
episode, discard the last one, quit) are taken out before logging: they never become actions.

pynput needs a display: import this module only once ``DISPLAY`` is set (on Linux).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from env.keys import normalize_key

from capture.inputs import InputLog

log = logging.getLogger(__name__)

SPECIAL_KEYS = {
    "esc": "ESC", "enter": "ENTER", "space": "SPACE", "tab": "TAB", "backspace": "BACKSPACE",
    "caps_lock": "CAPSLOCK", "num_lock": "NUMLOCK", "scroll_lock": "SCROLLLOCK",
    "shift": "LEFT_SHIFT", "shift_l": "LEFT_SHIFT", "shift_r": "RIGHT_SHIFT",
    "ctrl": "LEFT_CTRL", "ctrl_l": "LEFT_CTRL", "alt": "LEFT_ALT", "alt_l": "LEFT_ALT",
    "up": "UP_ARROW", "down": "DOWN_ARROW", "left": "LEFT_ARROW", "right": "RIGHT_ARROW",
    **{f"f{i}": f"F{i}" for i in range(1, 13)},
}
CHARACTERS = {
    "-": "MINUS", "=": "EQUALS", "[": "LEFT_BRACKET", "]": "RIGHT_BRACKET", ";": "SEMICOLON",
    "'": "APOSTROPHE", "`": "GRAVE", "\\": "BACKSLASH", ",": "COMMA", ".": "PERIOD", "/": "SLASH",
    # the same keys with shift held
    "_": "MINUS", "+": "EQUALS", "{": "LEFT_BRACKET", "}": "RIGHT_BRACKET", ":": "SEMICOLON",
    '"': "APOSTROPHE", "~": "GRAVE", "|": "BACKSLASH", "<": "COMMA", ">": "PERIOD", "?": "SLASH",
    **dict(zip(")!@#$%^&*(", "0123456789")),
}
MOUSE_BUTTONS = {"left": "LEFT", "right": "RIGHT", "middle": "MIDDLE", "x1": "BUTTON4", "x2": "BUTTON5"}


def siphon_name(key: object) -> str | None:
    """The Siphon name of a pynput key, or None for keys Siphon cannot send."""
    name = getattr(key, "name", None)  # pynput.keyboard.Key members
    if name is not None:
        return SPECIAL_KEYS.get(name)
    char = getattr(key, "char", None)
    if not char:
        return None
    if char in CHARACTERS:
        return CHARACTERS[char]
    try:
        return normalize_key(char)
    except ValueError:
        return None


class PynputListener:
    """Feeds an ``InputLog`` from pynput's keyboard and mouse listeners (background threads)."""

    def __init__(self, log_: InputLog, hotkeys: Mapping[str, Callable[[], None]] | None = None) -> None:
        from pynput import keyboard, mouse  # needs DISPLAY: imported only when listening

        self.log = log_
        self.hotkeys = {normalize_key(k): fn for k, fn in (hotkeys or {}).items()}
        self._last_xy: tuple[int, int] | None = None
        self._keyboard = keyboard.Listener(on_press=self._on_press, on_release=self._on_release)
        self._mouse = mouse.Listener(on_move=self._on_move, on_click=self._on_click)

    def start(self) -> None:
        self._keyboard.start()
        self._mouse.start()
        self._keyboard.wait()
        self._mouse.wait()

    def stop(self) -> None:
        self._keyboard.stop()
        self._mouse.stop()

    def _on_press(self, key: object) -> None:
        name = siphon_name(key)
        if name in self.hotkeys:
            self.hotkeys[name]()
        elif name is not None:
            self.log.key(name, True)

    def _on_release(self, key: object) -> None:
        name = siphon_name(key)
        if name is not None and name not in self.hotkeys:
            self.log.key(name, False)

    def _on_move(self, x: int, y: int) -> None:
        if self._last_xy is not None:
            self.log.mouse_move(x - self._last_xy[0], y - self._last_xy[1])
        self._last_xy = (x, y)

    def _on_click(self, x: int, y: int, button: object, pressed: bool) -> None:
        name = MOUSE_BUTTONS.get(getattr(button, "name", ""))
        if name is not None:
            self.log.key(name, pressed)
