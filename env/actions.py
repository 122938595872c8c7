"""Actions as keys: the discrete action table and the multi-binary layout of a profile.

Both action modes come down to a ``KeyCommand`` per step: the keys to hold during the step and
the keys to tap once at its start. Holding versus tapping matters in Elden Ring: a roll fires
when dodge is *released*, and holding it sprints, so a discrete roll is a tap, never a hold.
The recorder uses the same tables in reverse, to label human key states with actions.
"""

from __future__ import annotations

from dataclasses import dataclass

from env.profile import Profile


@dataclass(frozen=True, slots=True)
class KeyCommand:
    hold: frozenset[str]
    tap: tuple[str, ...] = ()


class DiscreteActions:
    """The profile's discrete action table: index -> ``KeyCommand`` (Siphon key names)."""

    def __init__(self, profile: Profile) -> None:
        if not profile.discrete_actions:
            raise ValueError(f"profile {profile.name!r} has no [[discrete_actions]] table")
        self.names: tuple[str, ...] = tuple(a.name for a in profile.discrete_actions)
        self.commands: tuple[KeyCommand, ...] = tuple(
            KeyCommand(
                frozenset(profile.key_for(a) for a in action.hold),
                tuple(profile.key_for(a) for a in action.tap),
            )
            for action in profile.discrete_actions
        )
        self._index = {name: i for i, name in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.commands)

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise ValueError(f"no discrete action {name!r}; the table has: {', '.join(self.names)}") from None

    def command(self, action: int) -> KeyCommand:
        if not 0 <= int(action) < len(self.commands):
            raise ValueError(f"discrete action {action!r} is out of range 0..{len(self.commands) - 1}")
        return self.commands[int(action)]
