"""A game controller as the game reads it: a profile's controller layout and its rules.

A person may play with a controller (Xbox, DualShock, DualSense) while the agent plays through
the profile's keyboard bindings: the game takes both at once. The recorder logs the controller's
own buttons and axes (SDL's game-controller names: the same on every make of pad, ``a`` being
the bottom face button), and the profile's ``[controller]`` table says which button does which
action, as the game's controller settings do. The stick moves the character.

The rules that turn a controller's state into held actions live here once, written over arrays
so that the same code serves one live reading (the simulator's play window) and a whole
episode's input log (the dataset builder):

- a stick counts as pushed beyond ``dead_zone`` (of its full travel, measured radially); it
  then holds the moves whose direction lies within 67.5 degrees of where it points, so that the
  eight directions of a stick are the eight of W, A, S, D (a diagonal holds two moves, as W + D);
- a trigger (an axis) counts as pressed beyond ``trigger_threshold`` of its travel;
- any other button is pressed while it is down.

A button's press and release are then what a key's are: the dodge button rolls on release and
sprints while held, as the dodge key does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from env.common.errors import ConfigError
from env.common.fields import is_number

BUTTONS: tuple[str, ...] = (
    "a",
    "b",
    "x",
    "y",
    "back",
    "guide",
    "start",
    "leftstick",
    "rightstick",
    "leftshoulder",
    "rightshoulder",
    "dpup",
    "dpdown",
    "dpleft",
    "dpright",
    "misc1",
    "paddle1",
    "paddle2",
    "paddle3",
    "paddle4",
    "touchpad",
)
"""SDL's game-controller buttons, in SDL's order (``SDL_CONTROLLER_BUTTON_A`` = 0 ...): by
position, so ``a`` is the bottom face button (A on Xbox, cross on PlayStation), ``b`` the right
one (B, circle), ``x`` the left (X, square), ``y`` the top (Y, triangle); ``leftstick`` and
``rightstick`` are the sticks' clicks (L3, R3)."""
AXES: tuple[str, ...] = ("leftx", "lefty", "rightx", "righty", "lefttrigger", "righttrigger")
"""SDL's game-controller axes, in SDL's order. Sticks run from -1 to 1 (``lefty`` -1 is pushed
up, away from the player); triggers from 0 (released) to 1."""
TRIGGERS: tuple[str, ...] = ("lefttrigger", "righttrigger")
STICKS: dict[str, tuple[str, str]] = {"left": ("leftx", "lefty"), "right": ("rightx", "righty")}
MOVES: tuple[str, ...] = ("move_forward", "move_back", "move_left", "move_right")
"""The actions a stick holds, by where it points: up, down, left, right."""
SECTOR = math.sin(math.radians(22.5))
"""A move is held when the stick's component along it is at least this share of the stick's
push: every direction within 67.5 degrees of it, eight sectors of 45 degrees in all."""

STICK_DEAD_ZONE = 7849 / 32767
"""XInput's documented dead zone of the left thumbstick (``XINPUT_GAMEPAD_LEFT_THUMB_DEADZONE``):
a stick at rest reads within it on any worn pad."""
TRIGGER_THRESHOLD = 30 / 255
"""XInput's documented trigger threshold (``XINPUT_GAMEPAD_TRIGGER_THRESHOLD``)."""


@dataclass(frozen=True)
class ControllerLayout:
    """Which control does which of a profile's actions (the profile's ``[controller]`` table)."""

    buttons: dict[str, str]
    """Action -> the SDL button (``BUTTONS``) or trigger (``TRIGGERS``) that does it."""
    stick: str = "left"
    """The stick that moves the character (``STICKS``): it holds ``MOVES``."""
    dead_zone: float = STICK_DEAD_ZONE
    """Share of the stick's travel within which it counts as at rest."""
    trigger_threshold: float = TRIGGER_THRESHOLD
    """Share of a trigger's travel beyond which it counts as pressed."""

    def held(self, buttons: np.ndarray, axes: np.ndarray) -> dict[str, np.ndarray]:
        """Each action this layout drives -> (N,) bool: held in each of N controller states
        (``buttons`` (N, len(BUTTONS)) bool, ``axes`` (N, len(AXES)) float, as the recorder logs them)."""
        buttons, axes = np.atleast_2d(buttons), np.atleast_2d(axes)
        held = {}
        for action, control in self.buttons.items():
            if control in TRIGGERS:
                held[action] = axes[:, AXES.index(control)] > self.trigger_threshold
            else:
                held[action] = buttons[:, BUTTONS.index(control)].astype(bool)
        x_axis, y_axis = STICKS[self.stick]
        x, y = axes[:, AXES.index(x_axis)], axes[:, AXES.index(y_axis)]
        push = np.hypot(x, y)
        pushed = push > self.dead_zone
        for move, along in zip(MOVES, (-y, y, -x, x)):
            held[move] = pushed & (along >= SECTOR * push)
        return held

    def control_of(self, action: str) -> str:
        """What a player presses for ``action``, in words (``b``, ``the left stick up``)."""
        if action in MOVES:
            direction = ("up", "down", "left", "right")[MOVES.index(action)]
            return f"the {self.stick} stick {direction}"
        return self.buttons[action]


def load_controller_layout(path: Path, table: object, actions: tuple[str, ...]) -> ControllerLayout | None:
    """The ``[controller]`` table of ``path`` (a profile.toml) for a profile binding ``actions``;
    None where it has none. Every action but the moves needs a button, so that nothing a person
    does on a controller goes unrecorded as an action (the moves are the stick's)."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [controller] must be a table (buttons, stick, dead_zone, trigger_threshold)")
    unknown = sorted(set(table) - {"buttons", "stick", "dead_zone", "trigger_threshold"})
    if unknown:
        raise ConfigError(
            f"{path}: controller.{unknown[0]} is not a setting: use buttons, stick, dead_zone, trigger_threshold"
        )
    stick = table.get("stick", "left")
    if stick not in STICKS:
        raise ConfigError(f"{path}: controller.stick = {stick!r}: use one of {', '.join(map(repr, STICKS))}")
    shares = {}
    for name, default in (("dead_zone", STICK_DEAD_ZONE), ("trigger_threshold", TRIGGER_THRESHOLD)):
        value = table.get(name, default)
        if not (is_number(value) and 0 <= value < 1):
            raise ConfigError(f"{path}: controller.{name} = {value!r} must be a share of the travel, from 0 to below 1")
        shares[name] = float(value)
    buttons = table.get("buttons", {})
    if not isinstance(buttons, dict):
        raise ConfigError(f'{path}: controller.buttons must be a table of action = "button"')
    for action, control in buttons.items():
        if action not in actions or action in MOVES:
            raise ConfigError(
                f"{path}: controller.buttons.{action}: "
                + (
                    f"the moves are the {stick} stick's, not a button's"
                    if action in MOVES
                    else f"not an action of [keybinds] ({', '.join(actions)})"
                )
            )
        if control not in BUTTONS and control not in TRIGGERS:
            raise ConfigError(
                f"{path}: controller.buttons.{action} = {control!r}: use one of SDL's buttons "
                f"({', '.join(BUTTONS)}) or triggers ({', '.join(TRIGGERS)})"
            )
    missing = [a for a in actions if a not in MOVES and a not in buttons]
    if missing:
        raise ConfigError(
            f"{path}: controller.buttons has no button for {', '.join(missing)}: a controller player could not "
            f"{'do them' if len(missing) > 1 else 'do it'}, nor could the recorder label it; add "
            f'{missing[0]} = "<button>" (docs/guide.md lists the game\'s layout)'
        )
    shared = [c for c in set(buttons.values()) if list(buttons.values()).count(c) > 1]
    if shared:
        doers = [a for a, c in buttons.items() if c == shared[0]]
        raise ConfigError(f"{path}: controller.buttons: {' and '.join(doers)} are both {shared[0]}: give each its own")
    return ControllerLayout(dict(buttons), stick, shares["dead_zone"], shares["trigger_threshold"])
