"""Where episodes begin and end, read from game memory: a fight starts when both fighters are
alive at full HP (``env.fight_rules.fresh``: a fresh or restarted fight) and ends when one of them dies
(for real: the game's own outcome, whatever floors the env's rules set)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from env import fight_rules

log = logging.getLogger(__name__)


class FightTracker:
    """Feed every sampled state to ``update``; it answers ``"start"``, ``"win"``, ``"death"`` or
    ``None``. Recording may begin mid-fight: the first state with both alive starts one. With
    ``boss_npc_id``, only a fight against that NPC starts one (Siphon's NPC attributes follow
    whatever the player targeted last: on the game, a soldier on the way back to the boss). A
    fresh fight against another NPC starts none, and says so once per NPC: a profile that names
    the boss by a number the game does not show would otherwise record nothing, silently.
    ``profile``: where ``fight.boss_npc_id`` is set, for that line."""

    def __init__(self, boss_npc_id: int | None = None, profile: str = "the profile") -> None:
        self.boss_npc_id = boss_npc_id
        self.profile = profile
        self._not_the_boss: set[float] = set()  # the other NPCs already named
        self.fighting = False
        self._seen_any = False
        self._until_new_fight = False

    def update(self, state: Mapping[str, float]) -> str | None:
        if self.fighting:
            ended = fight_rules.AT_DEATH.outcome(state)
            if ended is not None:
                self.fighting = False
            return ended
        fresh = fight_rules.fresh(state)
        the_boss = self.boss_npc_id is None or state.get("NpcId") == self.boss_npc_id
        if self._until_new_fight:
            self._until_new_fight = the_boss and fresh  # the stopped fight, still untouched
            return None
        if the_boss and not fight_rules.AT_DEATH.is_over(state) and (fresh or not self._seen_any):
            self._seen_any = True
            self.fighting = True
            return "start"
        if not the_boss and fresh:
            self._name_the_other_target(state.get("NpcId"))
        self._seen_any = True
        return None

    def _name_the_other_target(self, npc_id: float | None) -> None:
        if npc_id is None or npc_id in self._not_the_boss:
            return
        self._not_the_boss.add(npc_id)
        log.warning(
            "the targeted NPC is %d, not %s's fight.boss_npc_id %d: no episode starts until the boss is "
            "targeted (lock on to it); if this is the boss, set fight.boss_npc_id = %d there "
            "(python -m env.doctor reads it too)",
            npc_id,
            self.profile,
            self.boss_npc_id,
            npc_id,
        )

    def stop(self, until_new_fight: bool = False) -> None:
        """The episode ended without the fight's end (a hotkey, a pause): wait for a fresh fight.
        ``until_new_fight``: not the one in progress, even while nobody has been hit in it yet
        (a person who stops recording a fight by hand, with nothing restarting it for them)."""
        self.fighting = False
        self._until_new_fight = until_new_fight
