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
from typing import Any

import numpy as np

from env import fight_rules
from env.fight_rules import AT_DEATH, FightRules

State = Mapping[str, float]
RewardFn = Callable[[State, State], float]


@dataclass(frozen=True, slots=True)
class BaseReward:
    """``dealt * boss HP fraction removed - taken * player HP fraction lost``, plus ``win`` when
    the boss dies and ``death`` (negative) when the player does. Killing the boss from full HP
    is worth ``dealt + win``. Given columns of states (arrays), it scores every step at once."""

    dealt: float = 10.0
    taken: float = 5.0
    win: float = 10.0
    death: float = -5.0
    rules: FightRules = AT_DEATH
    """When the boss and the player count as down (the profile's floors; the env passes them)."""

    def __call__(self, before: State, after: State) -> Any:
        reward = self.dealt * fight_rules.damage_dealt(before, after) - self.taken * fight_rules.damage_taken(
            before, after
        )
        reward = reward + self.win * self.rules.just_won(before, after)
        reward = reward + self.death * self.rules.just_lost(before, after)
        return float(reward) if np.ndim(reward) == 0 else reward


@dataclass(frozen=True, slots=True)
class HealReward:
    """``weight * player HP fraction regained`` (a drink): a term to add to the base reward while
    training (``env.wrappers.RewardBonus``). The base charges ``taken`` for HP lost and nothing
    back for HP restored, so a drink's step only costs the damage the agent could have dealt in
    it; with ``weight`` equal to ``taken`` a drink pays back what the hits it heals cost."""

    weight: float

    def __call__(self, before: State, after: State) -> Any:
        reward = self.weight * fight_rules.hp_regained(before, after)
        return float(reward) if np.ndim(reward) == 0 else reward
