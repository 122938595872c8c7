"""Where episodes begin and end, read from game memory: a fight starts when both fighters are
alive at full HP (``env.fight_rules.fresh``: a fresh or restarted fight) and ends when one of them dies
(for real: the game's own outcome, whatever floors the env's rules set)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from env import fight_rules
from env.profile import NotTheBoss, not_the_boss

log = logging.getLogger(__name__)


class FightTracker:
    """Feed every sampled state to ``update``; it answers ``"start"``, ``"win"``, ``"death"`` or
    ``None``. Recording may begin mid-fight: the first state with both alive starts one. With
    ``boss_npc_id``, only a fight against that NPC starts one (Siphon's NPC attributes follow
    whatever the player targeted last: on the game, a soldier on the way back to the boss); with
    ``boss_npc_param_id`` too, only one whose ``NpcParamId`` (where the state has it) is that
    (Morgott has Margit's model, so her NpcId). A fight against another NPC starts none, and
    where the boss would have started one (a fresh fight, or the first state seen) says so once
    per NPC: a profile that names the boss by a number the game does not show
    would otherwise record nothing, silently. ``profile``: where ``[fight]`` is, for that line."""

    def __init__(
        self, boss_npc_id: int | None = None, profile: str = "the profile", boss_npc_param_id: int | None = None
    ) -> None:
        self.boss_npc_id = boss_npc_id
        self.boss_npc_param_id = boss_npc_param_id
        self.profile = profile
        self._not_the_boss: set[tuple[str, object]] = set()  # the other NPCs already named, by what told them
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
        other = not_the_boss(state, self.boss_npc_id, self.boss_npc_param_id)
        the_boss = other is None
        if self._until_new_fight:
            self._until_new_fight = the_boss and fresh  # the stopped fight, still untouched
            return None
        if the_boss and not fight_rules.AT_DEATH.is_over(state) and (fresh or not self._seen_any):
            self._seen_any = True
            self.fighting = True
            return "start"
        if other is not None and (fresh or not self._seen_any):  # as the boss would have started one
            self._name_the_other_target(other)
        self._seen_any = True
        return None

    def _name_the_other_target(self, other: NotTheBoss) -> None:
        if other.read is None or (other.attribute, other.read) in self._not_the_boss:
            return
        self._not_the_boss.add((other.attribute, other.read))
        log.warning(
            "the targeted NPC is %d, not %s's fight.%s %d: no episode starts until the boss is "
            "targeted (lock on to it); if this is the boss, set fight.%s = %d there "
            "(python -m env.doctor reads it too)",
            other.read,
            self.profile,
            other.key,
            other.wanted,
            other.key,
            other.read,
        )

    def stop(self, until_new_fight: bool = False) -> None:
        """The episode ended without the fight's end (a hotkey, a pause): wait for a fresh fight.
        ``until_new_fight``: not the one in progress, even while nobody has been hit in it yet
        (a person who stops recording a fight by hand, with nothing restarting it for them)."""
        self.fighting = False
        self._until_new_fight = until_new_fight
