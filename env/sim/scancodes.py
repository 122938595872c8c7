"""Siphon's key names as the keyboard positions it sends (src/process_input.cpp:16-130).

Siphon injects scancodes, set 1, arrows with the E0 prefix: a name stands for a physical key
position, whatever the keyboard layout prints on it, and the game binds actions to positions.
Real-server mode resolves names exactly as Siphon does: keyboard names are upper-cased and looked
up here, and a name not found becomes scancode 0, a key that does nothing, while the call still
reports success (``std::map::operator[]`` inserts a 0); mouse buttons are honoured by taps only,
by their exact name (:264), so a mouse button sent through InputKeyToggle is scancode 0 too.
"""

from __future__ import annotations

from env.keys import MOUSE_BUTTONS

SCANCODES: dict[str, tuple[int, bool]] = {
    **dict(zip("QWERTYUIOP", ((c, False) for c in range(0x10, 0x1A)))),
    **dict(zip("ASDFGHJKL", ((c, False) for c in range(0x1E, 0x27)))),
    **dict(zip("ZXCVBNM", ((c, False) for c in range(0x2C, 0x33)))),
    **dict(zip("1234567890", ((c, False) for c in range(0x02, 0x0C)))),
    **{f"F{i}": (0x3A + i, False) for i in range(1, 11)}, "F11": (0x57, False), "F12": (0x58, False),
    "ESC": (0x01, False), "BACKSPACE": (0x0E, False), "TAB": (0x0F, False), "ENTER": (0x1C, False),
    "SPACE": (0x39, False), "CAPSLOCK": (0x3A, False), "NUMLOCK": (0x45, False), "SCROLLLOCK": (0x46, False),
    "LEFT_SHIFT": (0x2A, False), "RIGHT_SHIFT": (0x36, False), "LEFT_CTRL": (0x1D, False), "LEFT_ALT": (0x38, False),
    "MINUS": (0x0C, False), "EQUALS": (0x0D, False), "LEFT_BRACKET": (0x1A, False), "RIGHT_BRACKET": (0x1B, False),
    "SEMICOLON": (0x27, False), "APOSTROPHE": (0x28, False), "GRAVE": (0x29, False), "BACKSLASH": (0x2B, False),
    "COMMA": (0x33, False), "PERIOD": (0x34, False), "SLASH": (0x35, False),
    "KEYPAD_0": (0x52, False), "KEYPAD_1": (0x4F, False), "KEYPAD_2": (0x50, False), "KEYPAD_3": (0x51, False),
    "KEYPAD_4": (0x4B, False), "KEYPAD_5": (0x4C, False), "KEYPAD_6": (0x4D, False), "KEYPAD_7": (0x47, False),
    "KEYPAD_8": (0x48, False), "KEYPAD_9": (0x49, False), "KEYPAD_STAR": (0x37, False),
    "KEYPAD_PLUS": (0x4E, False), "KEYPAD_MINUS": (0x4A, False), "KEYPAD_PERIOD": (0x53, False),
    "UP_ARROW": (0x48, True), "DOWN_ARROW": (0x50, True), "LEFT_ARROW": (0x4B, True), "RIGHT_ARROW": (0x4D, True),
}
"""Siphon's ``scancodeMap``: name -> (scancode, sent with E0)."""

KEY_AT: dict[tuple[int, bool], str] = {position: name for name, position in SCANCODES.items()}
"""The key at each position: what the game's key configuration binds."""


def tapped(name: str) -> str | None:
    """What InputKeyTap presses for ``name``: a mouse button by its exact name, else the key at
    the position the name's scancode stands for, or None (scancode 0: nothing)."""
    if name in MOUSE_BUTTONS:
        return name
    return toggled(name)


def toggled(name: str) -> str | None:
    """What InputKeyToggle presses for ``name``: always the keyboard path (a mouse button name
    is not in the scancode map), or None for scancode 0."""
    position = SCANCODES.get(name.upper())
    return None if position is None else KEY_AT[position]
