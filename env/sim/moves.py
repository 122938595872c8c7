"""The boss's move set and the player's actions, as data.

Every boss move is a telegraphed attack: a wind-up (the boss tracks the player and the hit area
is drawn growing on the floor), one or more active windows (the strikes), then a recovery in
which the boss neither turns nor moves: the window a player punishes. Each move has its own
animation id, as in the game, so a policy (or the scripted expert) can read what is coming from
``NpcAnimId`` and, from the frame, how far the wind-up has gone.

Times are in ticks of 1/60 s. Damage is in HP; the player has 1100, the boss 4174 (Margit's):
like Margit, the boss kills in two or three blows, so every mistake counts.
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
    travel_max: float = 0.0  # ... covering at most this many metres
    airborne: bool = False  # drawn lifted while travelling (a leap)

    @property
    def length(self) -> int:
        return self.strikes[-1].end + self.recovery


def _strike(start: float, active: float, damage: int, hitbox: Hitbox, **kw: float) -> Strike:
    return Strike(t(start), t(active), damage, hitbox, **kw)


SWIPE = Hitbox(Shape.SECTOR, reach=3.3, half_angle=deg(75))
WIDE_SWIPE = Hitbox(Shape.SECTOR, reach=3.6, half_angle=deg(95))

BOSS_MOVES: tuple[BossMove, ...] = (
    BossMove(
        "cane_swipe",
        3000,
        windup=t(0.60),
        strikes=(_strike(0.60, 0.15, 340, SWIPE),),
        recovery=t(1.00),
        min_range=0.0,
        max_range=3.6,
        weight=3.0,
    ),
    BossMove(
        "overhead_smash",
        3010,
        windup=t(0.90),
        strikes=(_strike(0.90, 0.15, 490, Hitbox(Shape.LINE, reach=4.4, half_width=0.9)),),
        recovery=t(1.25),
        min_range=0.0,
        max_range=4.8,
        weight=2.5,
        travel_start=t(0.35),
        travel_ticks=t(0.45),
        travel_max=1.5,
    ),
    BossMove(
        # The delayed attack: the cane is held high far longer than any other wind-up and the
        # boss keeps turning until just before it falls, so a roll made on the usual rhythm is
        # spent before the blow and the boss re-aims at where the player ended up.
        "delayed_slam",
        3020,
        windup=t(1.55),
        strikes=(_strike(1.55, 0.15, 560, Hitbox(Shape.CIRCLE, reach=2.1, offset=2.2)),),
        recovery=t(1.35),
        min_range=0.0,
        max_range=5.0,
        weight=2.0,
        track_rate=deg(300),
        track_stop=t(0.25),
        travel_start=t(0.80),
        travel_ticks=t(0.55),
        travel_max=1.8,
    ),
    BossMove(
        # A low sweep all around the boss: jump over it, or roll through it.
        "low_sweep",
        3030,
        windup=t(0.75),
        strikes=(_strike(0.75, 0.25, 310, Hitbox(Shape.CIRCLE, reach=3.6, low=True)),),
        recovery=t(1.00),
        min_range=0.0,
        max_range=3.4,
        weight=1.5,
    ),
    BossMove(
        # Ranged: golden daggers thrown in a fan; roll through them or step out of the fan.
        "dagger_volley",
        3040,
        windup=t(0.60),
        strikes=(Strike(t(0.60), 1, 200, None, projectiles=3, spread=deg(9)),),
        recovery=t(0.80),
        min_range=4.5,
        max_range=20.0,
        weight=2.0,
        track_rate=deg(360),
    ),
    BossMove(
        # A leap at where the player stands as it takes off, landing with a shockwave.
        "leaping_strike",
        3050,
        windup=t(1.20),
        strikes=(_strike(1.20, 0.20, 520, Hitbox(Shape.CIRCLE, reach=2.2, offset=0.6)),),
        recovery=t(1.30),
        min_range=4.0,
        max_range=12.0,
        weight=2.5,
        track_stop=t(0.55),
        travel_start=t(0.70),
        travel_ticks=t(0.50),
        travel_max=9.0,
        airborne=True,
    ),
    BossMove(
        "swipe_combo",
        3060,
        windup=t(0.55),
        strikes=(
            _strike(0.55, 0.12, 300, SWIPE),
            _strike(1.05, 0.12, 325, WIDE_SWIPE, step=0.8),
        ),
        recovery=t(1.10),
        min_range=0.0,
        max_range=3.6,
        weight=3.0,
        phases=(2,),
        track_stop=t(0.05),
    ),
    BossMove(
        # Phase two: a golden hammer conjured overhead and brought down in a wide blast.
        "holy_hammer",
        3070,
        windup=t(1.20),
        strikes=(_strike(1.20, 0.25, 620, Hitbox(Shape.CIRCLE, reach=2.6, offset=2.4)),),
        recovery=t(1.60),
        min_range=0.0,
        max_range=6.0,
        weight=2.0,
        phases=(2,),
        track_stop=t(0.25),
    ),
)
BOSS_MOVES_BY_NAME = {m.name: m for m in BOSS_MOVES}

PHASE_TWO_WINDUP_SCALE = 0.9
"""Below half HP the boss winds up 10 % faster (its telegraphs shrink in time, not in space)."""


class BossAnim(IntEnum):
    IDLE = 1000
    WALK = 7000
    RUN = 7010
    PHASE_SHIFT = 20000
    DEATH = 18000


PHASE_SHIFT_TICKS = t(2.0)
DAGGER_SPEED = 15.0  # m/s
DAGGER_RANGE = 22.0  # metres before a dagger vanishes
DAGGER_RADIUS = 0.25


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
