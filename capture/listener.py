"""pynput -> the recorder: the human's keyboard and mouse, named as Siphon names them.

pynput reports X11/Windows key objects; the game is driven by Siphon names. Keys are normalised
here (``Key.shift`` -> ``LEFT_SHIFT``, ``'w'`` -> ``W``, ``Button.x2`` -> ``BUTTON5``) so the
recorded key log speaks the same language as the profile's keybinds. On Windows, where the game
runs, a key is named by its physical position (the scancode pynput's low-level hook sees), as
Siphon names the keys it sends: a French or German layout records the same names as QWERTY.
Elsewhere (X11, for the simulator's window) the character the layout gives is used. Hotkeys (start/stop an
episode, discard the last one, quit) are taken out before logging: they never become actions.
A held key is reported pressed again at every OS auto-repeat, with no release in between: a
hotkey acts on the first press only, until it is released (held F6 otherwise discarded one
episode after another), and the input log keeps a held game key held once.

pynput needs a display: import this module only once ``DISPLAY`` is set (on Linux).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from env.keys import KEY_AT, normalize_key

from capture.inputs import InputLog

log = logging.getLogger(__name__)

SPECIAL_KEYS = {
    "esc": "ESC",
    "enter": "ENTER",
    "space": "SPACE",
    "tab": "TAB",
    "backspace": "BACKSPACE",
    "caps_lock": "CAPSLOCK",
    "num_lock": "NUMLOCK",
    "scroll_lock": "SCROLLLOCK",
    "shift": "LEFT_SHIFT",
    "shift_l": "LEFT_SHIFT",
    "shift_r": "RIGHT_SHIFT",
    "ctrl": "LEFT_CTRL",
    "ctrl_l": "LEFT_CTRL",
    "alt": "LEFT_ALT",
    "alt_l": "LEFT_ALT",
    "up": "UP_ARROW",
    "down": "DOWN_ARROW",
    "left": "LEFT_ARROW",
    "right": "RIGHT_ARROW",
    **{f"f{i}": f"F{i}" for i in range(1, 13)},
}
CHARACTERS = {
    "-": "MINUS",
    "=": "EQUALS",
    "[": "LEFT_BRACKET",
    "]": "RIGHT_BRACKET",
    ";": "SEMICOLON",
    "'": "APOSTROPHE",
    "`": "GRAVE",
    "\\": "BACKSLASH",
    ",": "COMMA",
    ".": "PERIOD",
    "/": "SLASH",
    # the same keys with shift held
    "_": "MINUS",
    "+": "EQUALS",
    "{": "LEFT_BRACKET",
    "}": "RIGHT_BRACKET",
    ":": "SEMICOLON",
    '"': "APOSTROPHE",
    "~": "GRAVE",
    "|": "BACKSLASH",
    "<": "COMMA",
    ">": "PERIOD",
    "?": "SLASH",
    **dict(zip(")!@#$%^&*(", "0123456789")),
}
LLKHF_EXTENDED = 0x01
"""KBDLLHOOKSTRUCT.flags: the key came with the E0 prefix (arrows, right-hand Ctrl/Alt...)."""
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


def name_at(scan_code: int, flags: int) -> str | None:
    """The Siphon name of the key at a physical position (Windows: scancode and hook flags)."""
    return KEY_AT.get((scan_code, bool(flags & LLKHF_EXTENDED)))


class PynputListener:
    """Feeds an ``InputLog`` from pynput's keyboard and mouse listeners (background threads)."""

    def __init__(self, log_: InputLog, hotkeys: Mapping[str, Callable[[], None]] | None = None) -> None:
        from pynput import keyboard, mouse  # needs DISPLAY: imported only when listening

        self.log = log_
        self.hotkeys = {normalize_key(k): fn for k, fn in (hotkeys or {}).items()}
        self._last_xy: tuple[int, int] | None = None
        self._hotkeys_down: set[str] = set()  # pressed and not yet released: a press again is a repeat
        self._position: str | None = None  # the physical key of the event being handled (Windows)
        self._keyboard = keyboard.Listener(
            on_press=self._on_press, on_release=self._on_release, win32_event_filter=self._at_position
        )
        self._mouse = mouse.Listener(on_move=self._on_move, on_click=self._on_click)

    def start(self) -> None:
        self._keyboard.start()
        self._mouse.start()
        self._keyboard.wait()
        self._mouse.wait()

    def stop(self) -> None:
        self._keyboard.stop()
        self._mouse.stop()

    def _at_position(self, msg: int, data: object) -> bool:
        """Windows only: called with each low-level keyboard event just before ``_on_press`` or
        ``_on_release``, on the same thread; remembers where the key is. Never suppresses."""
        self._position = name_at(data.scanCode, data.flags)
        return True

    def _name(self, key: object) -> str | None:
        position, self._position = self._position, None
        return position or siphon_name(key)

    def _on_press(self, key: object) -> None:
        name = self._name(key)
        if name in self.hotkeys:
            if name not in self._hotkeys_down:  # the press edge; auto-repeats are ignored
                self._hotkeys_down.add(name)
                self.hotkeys[name]()
        elif name is not None:
            self.log.key(name, True)

    def _on_release(self, key: object) -> None:
        name = self._name(key)
        if name in self.hotkeys:
            self._hotkeys_down.discard(name)
        elif name is not None:
            self.log.key(name, False)

    def _on_move(self, x: int, y: int) -> None:
        if self._last_xy is not None:
            self.log.mouse_move(x - self._last_xy[0], y - self._last_xy[1])
        self._last_xy = (x, y)

    def _on_click(self, x: int, y: int, button: object, pressed: bool) -> None:
        name = MOUSE_BUTTONS.get(getattr(button, "name", ""))
        if name is not None:
            self.log.key(name, pressed)
