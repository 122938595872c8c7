"""Siphon's key-name vocabulary.

The real Siphon server maps names to scancodes with a lookup that silently inserts scancode 0
for an unknown name and still reports success, so a typo in a keybind makes a key that does
nothing. Every name we send is therefore validated here first, on the client side.
"""

from __future__ import annotations

import string

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
