"""Actions as keys: a profile's actions in one action mode, and the one way keys reach a game.

Both action modes come down to a ``KeyCommand`` per step: the keys to hold during the step and
the keys to tap once at its start. Holding versus tapping matters in Elden Ring: a roll fires
when dodge is *released*, and holding it sprints, so a discrete roll is a tap, never a hold. A
binding may be a chord (Shift + left click): its keys are tapped in order, the modifier first,
as Siphon's one ``InputKeyTap`` presses them. A mouse button can only be tapped (Siphon holds
keyboard keys alone), so in ``multi_binary`` a bit bound to one taps it when the bit turns on
and holds nothing while it stays on, as a person's button held down attacks once.

``ActionTable`` is the single source of an action mode's space, its commands and its *idle*
action (the one that presses nothing). The env pads its action history with that idle action,
the dataset builder starts every episode from it and the labeller falls back to it, so they
agree by construction. The recorder uses the same tables in reverse, to label key states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from env.common.errors import ConfigError
from env.profile import Profile

if TYPE_CHECKING:
    from env.game import Game


@dataclass(frozen=True, slots=True)
class KeyCommand:
    hold: frozenset[str]
    tap: tuple[str, ...] = ()


class ActionTable:
    """A profile's actions in ``discrete`` or ``multi_binary`` mode.

    * ``discrete``: the profile's ``[[discrete_actions]]`` table; action ``i`` is its row ``i``.
    * ``multi_binary``: one bit per keybind, in the profile's keybind order; a set bit holds its key.
    """

    def __init__(self, profile: Profile, mode: str) -> None:
        self.profile = profile
        self.mode = mode
        if mode == "discrete":
            if not profile.discrete_actions:
                raise ConfigError(f"profile {profile.name!r} has no [[discrete_actions]] table")
            self.names: tuple[str, ...] = tuple(a.name for a in profile.discrete_actions)
            self.commands: tuple[KeyCommand, ...] = tuple(
                KeyCommand(
                    frozenset(key for a in action.hold for key in profile.keys_for(a)),
                    tuple(dict.fromkeys(key for a in action.tap for key in profile.keys_for(a))),
                )
                for action in profile.discrete_actions
            )
            idle = [i for i, c in enumerate(self.commands) if not c.hold and not c.tap]
            if not idle:
                raise ConfigError(
                    f"profile {profile.name!r}: the discrete action table needs an entry that presses "
                    'nothing (e.g. [[discrete_actions]] name = "idle"): episodes start from it'
                )
            self.space: spaces.Space = spaces.Discrete(len(self.commands))
            self.idle: Any = idle[0]
            self._index = {name: i for i, name in enumerate(self.names)}
        elif mode == "multi_binary":
            self.names = tuple(profile.keybinds)
            self.bindings: tuple[tuple[str, ...], ...] = tuple(profile.keybinds.values())
            self.tapped_bits = np.array([not profile.holdable(a) for a in self.names])
            self.space = spaces.MultiBinary(len(self.names))
            self.idle = np.zeros(len(self.names), np.int8)
        else:
            raise ConfigError(f"action_mode = {mode!r}: must be discrete or multi_binary")

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """The discrete action called ``name`` (``"roll_left"``)."""
        try:
            return self._index[name]
        except (KeyError, AttributeError):
            raise ValueError(f"no discrete action {name!r}; the table has: {', '.join(self.names)}") from None

    def command(self, action: Any, previous: Any = None) -> KeyCommand:
        """The keys one action sends, after ``previous`` (the action of the step before, None at
        an episode's start): in ``multi_binary`` a bit bound to a mouse button taps it only as
        it turns on."""
        if self.mode == "discrete":
            if not 0 <= int(action) < len(self.commands):
                raise ValueError(f"discrete action {action!r} is out of range 0..{len(self.commands) - 1}")
            return self.commands[int(action)]
        on = np.asarray(action).astype(bool)
        was = np.zeros_like(on) if previous is None else np.asarray(previous).astype(bool)
        hold = frozenset(key for binding, bit in zip(self.bindings, on & ~self.tapped_bits) if bit for key in binding)
        rising = on & self.tapped_bits & ~was
        tap = tuple(dict.fromkeys(key for binding, bit in zip(self.bindings, rising) if bit for key in binding))
        return KeyCommand(hold, tap)

    def presses(self, keybind: str, actions: np.ndarray) -> np.ndarray:
        """Which of ``actions`` (one per row) press the profile's ``keybind`` (``"use_item"``):
        in ``discrete``, the rows whose table entry holds or taps it; in ``multi_binary``, the
        rows with its bit set. A name works alike in both modes, as the profile's keybinds do."""
        if keybind not in self.profile.keybinds:
            raise ValueError(
                f"profile {self.profile.name!r} has no keybind {keybind!r}; its keybinds: "
                f"{', '.join(self.profile.keybinds)}"
            )
        if self.mode == "discrete":
            pressing = np.array([keybind in (*a.hold, *a.tap) for a in self.profile.discrete_actions])
            return pressing[np.asarray(actions, np.intp)]
        return np.asarray(actions)[:, self.names.index(keybind)].astype(bool)

    def bits(self, actions: frozenset[str]) -> np.ndarray:
        """``multi_binary``: the action pressing exactly ``actions`` (bound action names)."""
        return np.array([name in actions for name in self.names], np.int8)


def send(game: Game, command: KeyCommand, tap_ms: int) -> None:
    """Make the game hold exactly ``command.hold`` and tap ``command.tap``: how every player in
    this project (env, autopilot) presses keys, so a command means the same everywhere."""
    game.hold_keys(command.hold)
    if command.tap:
        game.tap_keys(command.tap, tap_ms)
