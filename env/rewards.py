"""The base reward: damage dealt, damage taken, and the fight's outcome.

A reward function sees the state before and after a step (``GameState`` snapshots) and returns a
float. Pass any such callable as ``reward_fn=`` to override the base, or wrap the env
(``env.wrappers.RewardOverride``, ``env.wrappers.BossHpCurriculum``). The base reads HP by
attribute name, so it works unchanged against the game and the simulator (EldenGym's default
read a key that did not exist and always returned 0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

State = Mapping[str, float]
RewardFn = Callable[[State, State], float]


def hp_fraction_lost(before: State, after: State, hp: str, max_hp: str) -> float:
    """The fraction of max HP lost in a step (0 if HP rose, e.g. a heal)."""
    return max(0.0, (before[hp] - after[hp]) / max(1, after[max_hp]))


@dataclass(frozen=True, slots=True)
class BaseReward:
    """``dealt * boss HP fraction removed - taken * player HP fraction lost``, plus ``win`` when
    the boss dies and ``death`` (negative) when the player does. Killing the boss from full HP
    is worth ``dealt + win``."""

    dealt: float = 10.0
    taken: float = 5.0
    win: float = 10.0
    death: float = -5.0

    def __call__(self, before: State, after: State) -> float:
        reward = self.dealt * hp_fraction_lost(before, after, "NpcHp", "NpcMaxHp")
        reward -= self.taken * hp_fraction_lost(before, after, "HeroHp", "HeroMaxHp")
        if after["NpcHp"] <= 0 < before["NpcHp"]:
            reward += self.win
        if after["HeroHp"] <= 0 < before["HeroHp"]:
            reward += self.death
        return float(reward)
