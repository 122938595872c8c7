"""The fight's rules, written once: when it is over, who won, and how much damage was dealt and
taken. The env, the reward, the dataset builder, the recorder's episode cutter and the scripted
expert all ask a ``FightRules``, so they cannot disagree about a fight.

A fight ends when a fighter's HP reaches 0. On the real game that is a real death
(a loading screen, a respawn outside the fog wall) or a real kill (the boss gone from the save),
and no memory write brings the fight back; so a profile can set HP *floors*: the fight is over,
for the env and its datasets, when a fighter's HP falls to its floor (a fraction of max HP), and
the env restores it by memory writes before the game registers anything (``EldenRingEnv``).
The simulator's profile keeps that rule exactly (floors 0).

Every rule works on one snapshot (a ``GameState`` or any mapping of attribute values) and,
unchanged, on columns of many (a mapping of NumPy arrays): the dataset builder scores a whole
recorded episode at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

State = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class FightRules:
    """When each fighter is down: at or below ``player_floor`` / ``boss_floor`` of max HP."""

    player_floor: float = 0.0
    boss_floor: float = 0.0

    def player_down(self, state: State) -> Any:
        return state["HeroHp"] <= self.player_floor * state["HeroMaxHp"]

    def boss_down(self, state: State) -> Any:
        return state["NpcHp"] <= self.boss_floor * state["NpcMaxHp"]

    def is_over(self, state: State) -> Any:
        """A fighter is down: the episode terminates here."""
        return self.player_down(state) | self.boss_down(state)

    def won(self, state: State) -> Any:
        """The boss is down and the player is not (both down at once is a loss)."""
        return self.boss_down(state) & ~np.asarray(self.player_down(state))

    def outcome(self, state: State) -> str | None:
        """``"death"``, ``"win"``, or None while the fight goes on (one snapshot)."""
        if self.player_down(state):
            return "death"
        if self.boss_down(state):
            return "win"
        return None

    def just_lost(self, before: State, after: State) -> Any:
        """The player went down in this step."""
        return np.asarray(self.player_down(after)) & ~np.asarray(self.player_down(before))

    def just_won(self, before: State, after: State) -> Any:
        """The boss went down in this step."""
        return np.asarray(self.boss_down(after)) & ~np.asarray(self.boss_down(before))


AT_DEATH = FightRules()
"""Over when a fighter's HP reaches 0 (what the game itself calls a death or a kill)."""


def fresh(state: State) -> bool:
    """A fight that has just started or restarted: both fighters alive at full HP (one snapshot).
    What a restart must reach, and what starts a recorded episode."""
    return bool(state["HeroHp"] >= state["HeroMaxHp"] > 0 and state["NpcHp"] >= state["NpcMaxHp"] > 0)


def hp_lost(before: State, after: State, hp: str, max_hp: str) -> Any:
    """The fraction of max HP lost between two snapshots (0 if HP rose, e.g. a heal)."""
    return np.maximum(0.0, (before[hp] - after[hp]) / np.maximum(1, after[max_hp]))


def damage_taken(before: State, after: State) -> Any:
    """The player's HP lost, as a fraction of max HP."""
    return hp_lost(before, after, "HeroHp", "HeroMaxHp")


def hp_regained(before: State, after: State) -> Any:
    """The player's HP gained (a drink), as a fraction of max HP."""
    return hp_lost(after, before, "HeroHp", "HeroMaxHp")


def damage_dealt(before: State, after: State) -> Any:
    """The boss's HP removed, as a fraction of its max HP."""
    return hp_lost(before, after, "NpcHp", "NpcMaxHp")
