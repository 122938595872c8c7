"""What a boss move is, and the player's own actions, as data.

Every boss move is a telegraphed attack: a wind-up (the boss tracks the player and the hit area
is drawn growing on the floor), one or more active windows (the strikes), then a recovery in
which the boss neither turns nor moves: the window a player punishes. Each move has its own
animation id, as in the game, so a policy (or the scripted expert) can read what is coming from
``NpcAnimId`` and, from the frame, how far the wind-up has gone. Each boss's moves are in its
own file (``env.sim.boss``); the player's, the same against every boss, are here.

Times are in ticks of 1/60 s. Damage is in HP; the player has 1100: a boss kills in two or three
blows, so every mistake counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

from env.sim import seconds_to_ticks as t
from env.sim.geometry import Hitbox, Shape

deg = math.radians


@dataclass(frozen=True, slots=True)
class Strike:
    """One active window of a move, starting ``start`` ticks after the move began."""

    start: int
    active: int
    damage: int
    hitbox: Hitbox | None  # None: the strike throws projectiles instead
    projectiles: int = 0
    spread: float = 0.0  # radians between neighbouring projectiles
    step: float = 0.0  # metres the boss steps forward as the strike begins

    @property
    def end(self) -> int:
        return self.start + self.active


@dataclass(frozen=True, slots=True)
class BossMove:
    name: str
    anim_id: int
    windup: int  # ticks before the first strike
    strikes: tuple[Strike, ...]
    recovery: int  # ticks after the last strike ends
    min_range: float  # the boss chooses this move only within [min_range, max_range] metres
    max_range: float
    weight: float
    phases: tuple[int, ...] = (1, 2)
    track_rate: float = deg(240)  # rad/s the boss turns towards the player while tracking
    track_stop: int = 6  # tracking stops this many ticks before the first strike
    travel_start: int = 0  # the boss closes in on the player from this tick ...
    travel_ticks: int = 0  # ... for this many ticks ...
    travel_max: float = 0.0  # ... covering at most this many metres ...
    overshoot: float = 0.0  # ... and running on this far past the player (a charge)
    airborne: bool = False  # drawn lifted while travelling (a leap)
    pull: float = 0.0  # m/s the player is drawn towards the boss while it winds up (a whirlwind)

    @property
    def length(self) -> int:
        return self.strikes[-1].end + self.recovery


class BossAnim(IntEnum):
    IDLE = 1000
    WALK = 7000
    RUN = 7010
    PHASE_SHIFT = 20000
    DEATH = 18000


class PlayerAnim(IntEnum):
    """Player animation ids (``HeroAnimId``)."""

    IDLE = 0
    WALK = 20000
    SPRINT = 20100
    CROUCH = 20200
    ROLL = 27010
    BACKSTEP = 27000
    JUMP = 60000
    LIGHT_ATTACK = 30000
    HEAVY_ATTACK = 31000
    SKILL = 33000
    HEAL = 50010
    HIT = 80000
    KNOCKDOWN = 80100
    DEATH = 17002
    FOG_ENTRY = 69000  # walking through a fog wall (the simulator's id)


@dataclass(frozen=True, slots=True)
class PlayerAttack:
    anim: PlayerAnim
    length: int
    hit_start: int
    hit_ticks: int
    damage: int
    hitbox: Hitbox
    stamina: float = 0.0
    fp: int = 0
    lunge: float = 0.0  # metres stepped forward during the wind-up, as attacks do in the game


PLAYER_ATTACKS = {
    PlayerAnim.LIGHT_ATTACK: PlayerAttack(
        PlayerAnim.LIGHT_ATTACK,
        t(0.70),
        t(0.25),
        t(0.10),
        150,
        Hitbox(Shape.SECTOR, reach=2.3, half_angle=deg(60)),
        stamina=12,
        lunge=0.6,
    ),
    PlayerAnim.HEAVY_ATTACK: PlayerAttack(
        PlayerAnim.HEAVY_ATTACK,
        t(1.10),
        t(0.55),
        t(0.10),
        270,
        Hitbox(Shape.SECTOR, reach=2.5, half_angle=deg(60)),
        stamina=22,
        lunge=0.8,
    ),
    PlayerAnim.SKILL: PlayerAttack(
        PlayerAnim.SKILL,
        t(1.00),
        t(0.40),
        t(0.12),
        340,
        Hitbox(Shape.LINE, reach=3.2, half_width=0.7),
        fp=25,
    ),
}


@dataclass(frozen=True, slots=True)
class Dodge:
    anim: PlayerAnim
    length: int
    iframe_start: int
    iframe_end: int
    distance: float
    move_ticks: int
    stamina: float


ROLL = Dodge(PlayerAnim.ROLL, t(0.60), 2, t(0.43), 3.0, t(0.40), 14)
BACKSTEP = Dodge(PlayerAnim.BACKSTEP, t(0.40), 1, t(0.22), 1.6, t(0.25), 10)

DODGE_TAP_TICKS = t(0.30)
"""Dodge released within this many ticks of its press is a roll; held longer, it sprints."""

HEAL_TICKS = t(0.90)
HEAL_AT = t(0.45)
HEAL_AMOUNT = 400
JUMP_TICKS = t(0.70)
JUMP_HEIGHT = 0.9
HIT_TICKS = t(0.45)
KNOCKDOWN_TICKS = t(1.10)
KNOCKDOWN_DAMAGE = 480  # a blow at least this hard knocks the player down (with wake-up i-frames)
KNOCKDOWN_IFRAMES = t(0.90)
BUFFER_TICKS = t(0.25)
"""An action pressed this close to the end of the current one is buffered, as in the game."""
