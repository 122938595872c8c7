"""Noticing HP floors set below the blows that actually land.

On a profile with HP floors (the real game's), an episode ends when a fighter's HP falls to its
floor, and the env gives the HP back before the game registers a death or a kill. That works only
if no single blow is harder than the floor: a fighter just above it is otherwise taken straight to
0, which on the game is a real death (a loading screen, a walk back through the fog wall) or a
real kill (the boss gone from the save until a backup is restored). How hard the boss hits depends
on the character (level, Vigor, armour), so no default fits everyone. ``FloorWatch`` watches every
blow the env sees and says, once per fighter, when one was harder than that fighter's floor, with
the floor that would have caught it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from env.fight_rules import FightRules, hp_lost

log = logging.getLogger(__name__)

SAFETY = 1.1
"""A floor that catches a blow sits this much above it (10 %): blows vary a little."""

FIGHTERS = (
    ("the player", "HeroHp", "HeroMaxHp", "player_hp_floor", "death (the loading screen, then reset() walks back in)"),
    (
        "the boss",
        "NpcHp",
        "NpcMaxHp",
        "boss_hp_floor",
        "kill (the boss gone from the save until you restore its backup)",
    ),
)


def floor_for(blow: float) -> float:
    """The floor (a fraction of max HP) that catches a blow of ``blow`` (a fraction of max HP)."""
    return math.ceil(round(blow * SAFETY * 100, 6)) / 100  # 620/1100 is 0.62, not 0.63 by rounding error


class FloorWatch:
    """Feed ``update`` every step's snapshots; it warns once per fighter whose floor a blow beat.
    A fighter with floor 0 (down means dead) is not watched."""

    def __init__(self, rules: FightRules, profile: str) -> None:
        self.profile = profile
        self._floors = {"player_hp_floor": rules.player_floor, "boss_hp_floor": rules.boss_floor}
        self.warned: set[str] = set()

    def update(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        for who, hp, max_hp, key, real in FIGHTERS:
            floor = self._floors[key]
            if floor <= 0 or key in self.warned:
                continue
            blow = float(hp_lost(before, after, hp, max_hp))
            if blow < floor:
                continue
            self.warned.add(key)
            log.warning(
                "a blow took %d HP from %s, %.0f %% of max HP, more than fight.%s = %g of profile %r keeps in "
                "reserve: the same blow from just above the floor is a real %s. Set %s to %.2f or more in the "
                'profile\'s [fight] table (docs/guide.md, "HP floors")',
                before[hp] - after[hp],
                who,
                blow * 100,
                key,
                floor,
                self.profile,
                real,
                key,
                floor_for(blow),
            )
