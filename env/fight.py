"""The fight's rules, written once: when it is over, who won, and how much damage was dealt and
taken. The env, the reward, the dataset builder, the recorder's episode cutter and the scripted
expert all ask these functions, so they cannot disagree about a fight.

Every function works on one snapshot (a ``GameState`` or any mapping of attribute values) and,
unchanged, on columns of many (a mapping of NumPy arrays): the dataset builder scores a whole
recorded episode at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

State = Mapping[str, Any]


def player_dead(state: State) -> Any:
    return state["HeroHp"] <= 0


def boss_dead(state: State) -> Any:
    return state["NpcHp"] <= 0


def is_over(state: State) -> Any:
    """A fighter is down: the episode terminates here."""
    return player_dead(state) | boss_dead(state)


def won(state: State) -> Any:
    """The boss is down and the player is not (both down at once is a loss)."""
    return boss_dead(state) & ~np.asarray(player_dead(state))


def outcome(state: State) -> str | None:
    """``"death"``, ``"win"``, or None while the fight goes on (one snapshot)."""
    if player_dead(state):
        return "death"
    if boss_dead(state):
        return "win"
    return None


def hp_lost(before: State, after: State, hp: str, max_hp: str) -> Any:
    """The fraction of max HP lost between two snapshots (0 if HP rose, e.g. a heal)."""
    return np.maximum(0.0, (before[hp] - after[hp]) / np.maximum(1, after[max_hp]))


def damage_taken(before: State, after: State) -> Any:
    """The player's HP lost, as a fraction of max HP."""
    return hp_lost(before, after, "HeroHp", "HeroMaxHp")


def damage_dealt(before: State, after: State) -> Any:
    """The boss's HP removed, as a fraction of its max HP."""
    return hp_lost(before, after, "NpcHp", "NpcMaxHp")


def just_happened(event: Any, before: State, after: State) -> Any:
    """``event`` (``player_dead``, ``boss_dead``) is true after and was not before."""
    return np.asarray(event(after)) & ~np.asarray(event(before))
