"""Where episodes begin and end, read from game memory: a fight starts when both fighters are
alive at full HP (``env.fight_rules.fresh``: a fresh or restarted fight) and ends when one of them dies
(for real: the game's own outcome, whatever floors the env's rules set)."""

from __future__ import annotations

from collections.abc import Mapping

from env import fight_rules


class FightTracker:
    """Feed every sampled state to ``update``; it answers ``"start"``, ``"win"``, ``"death"`` or
    ``None``. Recording may begin mid-fight: the first state with both alive starts one. With
    ``boss_npc_id``, only a fight against that NPC starts one (Siphon's NPC attributes follow
    whatever the player targeted last: on the game, a soldier on the way back to the boss)."""

    def __init__(self, boss_npc_id: int | None = None) -> None:
        self.boss_npc_id = boss_npc_id
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
        self._seen_any = True
        return None

    def stop(self, until_new_fight: bool = False) -> None:
        """The episode ended without the fight's end (a hotkey, a pause): wait for a fresh fight.
        ``until_new_fight``: not the one in progress, even while nobody has been hit in it yet
        (a person who stops recording a fight by hand, with nothing restarting it for them)."""
        self.fighting = False
        self._until_new_fight = until_new_fight
