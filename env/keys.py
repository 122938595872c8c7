"""Siphon's key-name vocabulary.

The real Siphon server maps names to scancodes with a lookup that silently inserts scancode 0
for an unknown name and still reports success, so a typo in a keybind makes a key that does
nothing. Every name we send is therefore validated here first, on the client side.

A name stands for a physical key position (Siphon sends set-1 scancodes, src/process_input.cpp
16-130), so the recorder names the keys it hears by position too (``KEY_AT``): on an AZERTY
keyboard the key left of S is "A" in the game's and Siphon's eyes, whatever is printed on it.
"""

from __future__ import annotations

import argparse
import string
from collections.abc import Callable

KEYBOARD_KEYS: frozenset[str] = frozenset(
    [*string.ascii_uppercase]
    + [*string.digits]
    + [f"F{i}" for i in range(1, 13)]
    + ["ESC", "BACKSPACE", "TAB", "ENTER", "SPACE", "CAPSLOCK", "NUMLOCK", "SCROLLLOCK"]
    + ["LEFT_SHIFT", "RIGHT_SHIFT", "LEFT_CTRL", "LEFT_ALT"]
    + ["MINUS", "EQUALS", "LEFT_BRACKET", "RIGHT_BRACKET", "SEMICOLON", "APOSTROPHE", "GRAVE"]
    + ["BACKSLASH", "COMMA", "PERIOD", "SLASH"]
    + [f"KEYPAD_{i}" for i in range(10)]
    + ["KEYPAD_STAR", "KEYPAD_PLUS", "KEYPAD_MINUS", "KEYPAD_PERIOD"]
    + ["UP_ARROW", "DOWN_ARROW", "LEFT_ARROW", "RIGHT_ARROW"]
)
"""Keyboard names. The server upper-cases them, so ``w`` and ``W`` are the same key."""

MOUSE_BUTTONS: frozenset[str] = frozenset(["LEFT", "RIGHT", "MIDDLE", "BUTTON4", "BUTTON5"])
"""Mouse button names. Case-sensitive, and honoured by InputKeyTap only (taps, never holds)."""


SCANCODES: dict[str, tuple[int, bool]] = {
    **dict(zip("QWERTYUIOP", ((c, False) for c in range(0x10, 0x1A)))),
    **dict(zip("ASDFGHJKL", ((c, False) for c in range(0x1E, 0x27)))),
    **dict(zip("ZXCVBNM", ((c, False) for c in range(0x2C, 0x33)))),
    **dict(zip("1234567890", ((c, False) for c in range(0x02, 0x0C)))),
    **{f"F{i}": (0x3A + i, False) for i in range(1, 11)},
    "F11": (0x57, False),
    "F12": (0x58, False),
    "ESC": (0x01, False),
    "BACKSPACE": (0x0E, False),
    "TAB": (0x0F, False),
    "ENTER": (0x1C, False),
    "SPACE": (0x39, False),
    "CAPSLOCK": (0x3A, False),
    "NUMLOCK": (0x45, False),
    "SCROLLLOCK": (0x46, False),
    "LEFT_SHIFT": (0x2A, False),
    "RIGHT_SHIFT": (0x36, False),
    "LEFT_CTRL": (0x1D, False),
    "LEFT_ALT": (0x38, False),
    "MINUS": (0x0C, False),
    "EQUALS": (0x0D, False),
    "LEFT_BRACKET": (0x1A, False),
    "RIGHT_BRACKET": (0x1B, False),
    "SEMICOLON": (0x27, False),
    "APOSTROPHE": (0x28, False),
    "GRAVE": (0x29, False),
    "BACKSLASH": (0x2B, False),
    "COMMA": (0x33, False),
    "PERIOD": (0x34, False),
    "SLASH": (0x35, False),
    "KEYPAD_0": (0x52, False),
    "KEYPAD_1": (0x4F, False),
    "KEYPAD_2": (0x50, False),
    "KEYPAD_3": (0x51, False),
    "KEYPAD_4": (0x4B, False),
    "KEYPAD_5": (0x4C, False),
    "KEYPAD_6": (0x4D, False),
    "KEYPAD_7": (0x47, False),
    "KEYPAD_8": (0x48, False),
    "KEYPAD_9": (0x49, False),
    "KEYPAD_STAR": (0x37, False),
    "KEYPAD_PLUS": (0x4E, False),
    "KEYPAD_MINUS": (0x4A, False),
    "KEYPAD_PERIOD": (0x53, False),
    "UP_ARROW": (0x48, True),
    "DOWN_ARROW": (0x50, True),
    "LEFT_ARROW": (0x4B, True),
    "RIGHT_ARROW": (0x4D, True),
}
"""Siphon's ``scancodeMap``: name -> (scancode, sent with E0)."""

KEY_AT: dict[tuple[int, bool], str] = {position: name for name, position in SCANCODES.items()}
"""The key at each position: what the game's key configuration binds."""


def normalize_key(name: str) -> str:
    """Return the canonical Siphon name for ``name`` or raise ``ValueError`` saying what is valid.

    Mouse buttons are matched case-sensitively before upper-casing, exactly as the server does.
    """
    if name in MOUSE_BUTTONS:
        return name
    upper = name.upper()
    if upper in KEYBOARD_KEYS:
        return upper
    raise ValueError(
        f"unknown Siphon key name {name!r}: use A-Z, 0-9, F1-F12, ESC, ENTER, SPACE, TAB, "
        "LEFT_SHIFT, LEFT_CTRL, LEFT_ALT, UP_ARROW/DOWN_ARROW/LEFT_ARROW/RIGHT_ARROW, ... "
        "or a mouse button LEFT/RIGHT/MIDDLE/BUTTON4/BUTTON5"
    )


def is_mouse_button(name: str) -> bool:
    return name in MOUSE_BUTTONS


PYGAME_NAMES: dict[str, str] = {
    "left shift": "LEFT_SHIFT",
    "right shift": "RIGHT_SHIFT",
    "left ctrl": "LEFT_CTRL",
    "left alt": "LEFT_ALT",
    "space": "SPACE",
    "return": "ENTER",
    "escape": "ESC",
    "tab": "TAB",
    "backspace": "BACKSPACE",
    "up": "UP_ARROW",
    "down": "DOWN_ARROW",
    "left": "LEFT_ARROW",
    "right": "RIGHT_ARROW",
    "caps lock": "CAPSLOCK",
}
"""pygame's key names that differ from Siphon's (the others are Siphon's, lower-cased)."""


def pygame_key(name: str) -> int | None:
    """The pygame key code of Siphon's key ``name`` (``LEFT_SHIFT`` -> ``K_LSHIFT``), or None
    for a key a keyboard window cannot press (a mouse button, a name pygame lacks)."""
    import warnings

    import pygame

    if is_mouse_button(name):
        return None
    pygame_name = {v: k for k, v in PYGAME_NAMES.items()}.get(normalize_key(name), name.lower())
    with warnings.catch_warnings():  # key_code warns before pygame.init(); the codes are fixed
        warnings.simplefilter("ignore")
        try:
            return pygame.key.key_code(pygame_name)
        except ValueError:
            return None


def key_names(count: int) -> Callable[[str], tuple[str, ...]]:
    """``"F5,F6,F8"`` -> ``("F5", "F6", "F8")``: exactly ``count`` different Siphon key names."""

    def parse(text: str) -> tuple[str, ...]:
        try:
            keys = tuple(normalize_key(k.strip()) for k in text.split(","))
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if len(keys) != count or len(set(keys)) != count:
            raise argparse.ArgumentTypeError(
                f"{text!r} must be {count} different keys, comma-separated (e.g. F5,F6,F8)"
            )
        return keys

    return parse
