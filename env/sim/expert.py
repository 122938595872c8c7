"""The scripted expert: plays the simulator from game state alone, one decision per step.

It reads what a player reads: which attack the boss has started (``NpcAnimId``), how long ago
(it notes when the id changed), the distance, its own HP, stamina and animation. From the move
table it knows when each blow falls, so it rolls to put its invincibility frames over the blow,
attacks only in the boss's recovery, and drinks a flask when low and safe. Its knowledge of when
a move began is only as fine as its decision step, which is why it wins most fights but not all.

It knows every boss the simulator has (``env.sim.boss``) and tells which one it faces by its
``NpcId``, as a person knows a boss by sight: the same expert plays Margit, Godrick or the Tree
Sentinel from that boss's own move table, times a shockwave by when its ring reaches it and a
sweeping breath by when the cone comes round to it.

It answers with names from the profile's discrete action table (``"roll_left"``, ``"attack"``),
so the same expert drives the env (evaluation's reference policy) and, through key presses, the
game itself (the recorder's autopilot).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from env import fight_rules
from env.sim.boss import BossSpec, boss_by_npc_id, load_boss
from env.sim.geometry import PLAYER_RADIUS, Hitbox, Shape
from env.sim.moves import ROLL, BossMove, Strike
from env.sim.world import LUNGE_STOPS_SHORT

ROLL_START = ROLL.iframe_start / 60
"""From the roll's start to its first invincible frame."""
ATTACK_REACH = 3.6
HEAL_BELOW = 0.45


class ScriptedExpert:
    """``act(state) -> action name``. Call ``reset()`` at the start of every fight."""

    ATTRIBUTES = (
        "HeroHp",
        "HeroMaxHp",
        "HeroSp",
        "HeroAnimId",
        "HeroLocalPosX",
        "HeroLocalPosY",
        "NpcHp",
        "NpcMaxHp",
        "NpcAnimId",
        "NpcLocalPosX",
        "NpcLocalPosY",
        "HeroFlaskCharges",
        "NpcId",
    )
    """What it reads (``HeroFlaskCharges`` only where the game has it; else it counts flasks;
    ``NpcId``, which boss it faces, where the state has it; else the last it knew)."""

    def __init__(self, step_seconds: float = 0.2, tap_seconds: float = 0.05, boss: BossSpec | None = None) -> None:
        self.step = step_seconds
        self.boss = boss or load_boss("margit")
        self.roll_delay = tap_seconds + ROLL_START
        """From the decision to the first invincible frame: the dodge tap's hold, then the roll's start."""
        self.reset()

    def reset(self) -> None:
        self._anim = -1
        self._anim_start = 0.0
        self._fight_start: float | None = None
        self._flasks_used = 0
        self._dodged_for = -1.0
        self.attack_coming = False

    def observe(self, state: Mapping[str, float]) -> bool:
        """See a frame between decisions; True when what it shows calls for a decision now. The
        expert sees only at its decisions (a person watches all the time: ``env.sim.person``)."""
        return False

    def tap_ms(self) -> int | None:
        """How long to hold the next tapped key: None, the env's own tap."""
        return None

    def act(self, state: Mapping[str, float]) -> str:
        """The action for this step; also sets ``attack_coming``: whether a boss blow is winding
        up that can still reach the player (what a watching person reacts to)."""
        self.attack_coming = False
        now = self._since_fight_start(float(state.timestamp) if hasattr(state, "timestamp") else 0.0)
        anim = int(state["NpcAnimId"])
        if anim != self._anim:
            self._anim, self._anim_start = anim, self._onset(now)
        if fight_rules.AT_DEATH.is_over(state):
            return "idle"
        if "NpcId" in state:
            self.boss = boss_by_npc_id(int(state["NpcId"])) or self.boss
        phase = 1 if state["NpcHp"] > self.boss.phase_two_below * state["NpcMaxHp"] else 2
        move = self.boss.move_by_anim(anim, phase)
        elapsed = now - self._anim_start
        dist = math.hypot(
            state["NpcLocalPosX"] - state["HeroLocalPosX"], state["NpcLocalPosY"] - state["HeroLocalPosY"]
        )
        if move is not None:
            coming = self._next_strike(move, elapsed, dist)
            self.attack_coming = coming is not None
            dodge = self._dodge(move, coming, state)
            if dodge:
                return dodge
            if self._in_recovery(move, elapsed, need=0.55):
                return self._punish_or_heal(state, dist, move, elapsed)
            return "idle" if dist < 6.0 else "move_forward"
        # Between moves: the boss walks in and will attack within a second.
        if self._should_heal(state) and dist > 6.0:
            return self._heal()
        return "move_forward" if dist > 3.0 else "idle"

    def _since_fight_start(self, timestamp: float) -> float:
        """Seconds since the first state of this fight, to the microsecond. The game clock runs
        on across fights, and seconds at different distances from its origin round differently:
        on the absolute clock, a fight's rolls and timings would depend on how long the game ran
        before it, not on the fight alone."""
        if self._fight_start is None:
            self._fight_start = timestamp
        return round(timestamp - self._fight_start, 6)

    # ------------------------------------------------------------------------------ decisions
    def _onset(self, now: float) -> float:
        """When the move first seen ``now`` began: at some point during the last step, so
        assume the middle of it."""
        return now - self.step / 2

    def _next_strike(self, move: BossMove, elapsed: float, dist: float) -> tuple[Strike, float] | None:
        """The move's next blow still to land, and in how many seconds; None when none is left
        or the player is out of its reach."""
        for strike in move.strikes:
            hit_at = strike.start / 60 + self._arrival(move, strike, dist)
            until = hit_at - elapsed
            if until < -0.05:
                continue
            if strike.hitbox is not None and dist > self._threat_range(move) + 0.8:
                return None
            return strike, until
        return None

    def _arrival(self, move: BossMove, strike: Strike, dist: float) -> float:
        """Seconds from a strike's start to when it reaches the player ``dist`` metres away:
        projectiles fly, a ring travels, a sweep comes round (to a player straight ahead), a
        charge's hitbox is carried in as the boss runs."""
        hitbox = strike.hitbox
        if hitbox is None:
            return max(0.0, dist - 1.0) / self.boss.projectiles.speed
        if hitbox.shape is Shape.RING:
            return max(0.0, hitbox.travel_seconds(dist - hitbox.half_width - PLAYER_RADIUS))
        if hitbox.sweep:
            return strike.active / 60 * max(0.0, 0.5 - hitbox.half_angle / hitbox.sweep)
        travel_end = move.travel_start + move.travel_ticks
        if move.overshoot and strike.start < travel_end and strike.end > move.travel_start:
            covered = min(move.travel_max, max(0.0, dist - LUNGE_STOPS_SHORT + move.overshoot))
            to_go = max(0.0, dist - _reach(hitbox) - PLAYER_RADIUS)
            run_from = max(0, move.travel_start - strike.start) / 60
            return run_from + move.travel_ticks / 60 * min(1.0, to_go / max(covered, 1e-6))
        return 0.0

    def _dodge(self, move: BossMove, coming: tuple[Strike, float] | None, state: Mapping[str, float]) -> str | None:
        if coming is None:
            return None
        strike, until = coming
        # Roll now if waiting one more step would put the blow past the invincible frames'
        # start, i.e. this is the last decision before it lands.
        if until - self.step < self.roll_delay + 0.02:
            if until < self.roll_delay - 0.12:
                return None  # too late to roll through it: take it rather than waste a roll
            if state["HeroSp"] < 10:
                return None
            return self._roll_direction(move, strike.hitbox)
        return None

    def _threat_range(self, move: BossMove) -> float:
        reach = max((_reach(s.hitbox) for s in move.strikes if s.hitbox is not None), default=0.0)
        pulled = move.pull * move.windup / 60  # a whirlwind draws the player in after the decision
        return reach + move.travel_max + move.overshoot + pulled + max((s.step for s in move.strikes), default=0.0)

    def _roll_direction(self, move: BossMove, hitbox) -> str:
        if hitbox is not None and hitbox.shape is Shape.RING:
            return "roll_forward"  # through the wave, towards the boss: out of its band at once
        if hitbox is not None and hitbox.sweep:
            return "roll_left"  # into the sweep, which comes from the player's left: it passes at once
        if hitbox is not None and (hitbox.low or hitbox.shape is Shape.CIRCLE and not hitbox.offset):
            return "roll_back"  # out of a blow all around the boss
        # Sideways out of frontal blows; alternate sides so the boss's tracking is not predictable.
        return "roll_left" if int(self._anim_start * 10) % 2 else "roll_right"

    def _in_recovery(self, move: BossMove, elapsed: float, need: float) -> bool:
        last_end = move.strikes[-1].end / 60
        return last_end <= elapsed and move.length / 60 - elapsed >= need

    def _punish_or_heal(self, state, dist: float, move: BossMove, elapsed: float) -> str:
        remaining = move.length / 60 - elapsed
        if self._should_heal(state) and remaining >= 0.9:
            return self._heal()
        if dist <= ATTACK_REACH:
            return "attack" if state["HeroSp"] > 12 else "idle"
        return "move_forward"

    def _should_heal(self, state: Mapping[str, float]) -> bool:
        flasks = state["HeroFlaskCharges"] if "HeroFlaskCharges" in state else 3 - self._flasks_used
        return flasks > 0 and state["HeroHp"] < HEAL_BELOW * state["HeroMaxHp"]

    def _heal(self) -> str:
        self._flasks_used += 1
        return "heal"


def _reach(hitbox: Hitbox) -> float:
    """How far from the boss a hitbox can touch: a ring's band reaches past its circle."""
    band = hitbox.half_width if hitbox.shape is Shape.RING else 0.0
    return hitbox.reach + hitbox.offset + band
