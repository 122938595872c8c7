"""Siphon's key names as the keyboard positions it sends (src/process_input.cpp:16-130).

Siphon injects scancodes, set 1, arrows with the E0 prefix: a name stands for a physical key
position, whatever the keyboard layout prints on it, and the game binds actions to positions.
Real-server mode resolves names exactly as Siphon does: keyboard names are upper-cased and looked
up here, and a name not found becomes scancode 0, a key that does nothing, while the call still
reports success (``std::map::operator[]`` inserts a 0); mouse buttons are honoured by taps only,
by their exact name (:264), so a mouse button sent through InputKeyToggle is scancode 0 too.
"""

from __future__ import annotations

from env.keys import KEY_AT, MOUSE_BUTTONS, SCANCODES


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
