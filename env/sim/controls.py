"""The simulator's controller: the semantic buttons a player presses.

Siphon sends key names; a profile's keybinds say which key is which button (``W`` is
``move_forward`` by default), exactly as the in-game key configuration does for the real game.
The world itself only ever sees buttons, as bit masks, so a tick costs no string handling.
"""

from __future__ import annotations

from enum import IntEnum


class Button(IntEnum):
    """One bit each; masks of several are plain ints (``Button.ATTACK | Button.DODGE``). Not an
    ``IntFlag``: its ``&`` on an int builds a flag object in Python, a fifth of a world tick's
    time; an ``IntEnum`` leaves ``mask & Button.DODGE`` to int's own operator."""

    MOVE_FORWARD = 1 << 0
    MOVE_BACK = 1 << 1
    MOVE_LEFT = 1 << 2
    MOVE_RIGHT = 1 << 3
    DODGE = 1 << 4
    JUMP = 1 << 5
    CROUCH = 1 << 6
    LOCK_ON = 1 << 7
    ATTACK = 1 << 8
    STRONG_ATTACK = 1 << 9
    SKILL = 1 << 10
    USE_ITEM = 1 << 11
    EVENT_ACTION = 1 << 12

    @classmethod
    def from_name(cls, name: str) -> Button:
        """``"move_forward"`` -> ``Button.MOVE_FORWARD``; raises ``ValueError`` naming the valid ones."""
        try:
            return cls[name.upper()]
        except KeyError:
            valid = ", ".join(b.name.lower() for b in cls)  # type: ignore[union-attr]
            raise ValueError(f"unknown button {name!r}; the simulator's buttons are: {valid}") from None


BUTTON_NAMES: tuple[str, ...] = tuple(b.name.lower() for b in Button)  # type: ignore[union-attr]
