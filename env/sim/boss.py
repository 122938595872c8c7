"""A boss is data: one TOML file per boss in ``env/sim/bosses/``, read into a ``BossSpec``.

Everything the simulator knows of one boss lives in its file: the ids and HP it shows through
Siphon's ``Npc*`` attributes, its body, its arena (behind a fog wall, or an open field), how it
walks and paces itself, when its second phase comes and how much faster it is, its projectiles,
its picture, and its move table, each move a wind-up, strikes and a recovery, as ``env.sim.moves``
describes. The world, the renderer, the memory map and the scripted players read a ``BossSpec``
and nothing boss-specific of their own, so a fourth boss is a fourth file (docs/guide.md, "Add a
boss"). A profile names its boss by the file's stem (``boss = "godrick"``); a player recognises
the boss it faces by its ``NpcId``, as a person recognises a boss by sight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from env.attribute_config import read_toml
from env.common.errors import ConfigError
from env.sim import seconds_to_ticks as ticks
from env.sim.geometry import ARENA_RADIUS, GRACE, Hitbox, Shape
from env.sim.moves import BossAnim, BossMove, Strike

BOSSES_DIR = Path(__file__).parent / "bosses"

Colour = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Arena:
    """Where the boss is fought: a disc behind a fog wall with the way in to its south (the
    life cycle of ``env.sim.world``: a grace, a fog wall to walk through), or an open field of
    ``radius`` metres with neither, where a dead player comes back at ``grace``, in sight of the
    boss (within lock-on range) and not yet noticed by it."""

    walled: bool = True
    radius: float = ARENA_RADIUS
    grace: tuple[float, float] = GRACE


@dataclass(frozen=True, slots=True)
class Projectiles:
    speed: float  # m/s
    range: float  # metres before one vanishes
    radius: float


@dataclass(frozen=True)
class BossSpec:
    key: str  # the file's stem: what a profile's ``boss`` names
    name: str  # as the game writes it over the boss's HP bar
    npc_id: int  # what Siphon's NpcId reads with it targeted (its model x 100)
    npc_param_id: int  # its NpcParam id (NpcParamId): tells apart bosses sharing a model
    max_hp: int
    radius: float
    start: tuple[float, float]
    arena: Arena
    walk: float
    run: float
    run_beyond: float
    turn: float  # rad/s between moves
    keep_distance: float
    decide_ticks: dict[int, tuple[int, int]]  # the pause between moves, per phase
    phase_two_below: float  # a fraction of max HP
    projectiles: Projectiles
    colour: Colour
    bar_colour: Colour
    moves: tuple[BossMove, ...]
    phase_shift: BossMove  # the roar between the phases
    moves_by_phase: dict[int, tuple[BossMove, ...]]  # phase two's with their shorter wind-ups

    @property
    def animation_ids(self) -> tuple[int, ...]:
        """Every ``NpcAnimId`` it shows: the common ones (idle, walking, running, the phase
        shift, death), then one per move in table order: a profile's boss vocabulary."""
        return (
            BossAnim.IDLE,
            BossAnim.WALK,
            BossAnim.RUN,
            BossAnim.PHASE_SHIFT,
            BossAnim.DEATH,
            *(m.anim_id for m in self.moves),
        )

    def move_by_anim(self, anim: int, phase: int) -> BossMove | None:
        """The move whose animation is ``anim`` as phase ``phase`` plays it (phase one's still
        running as the HP crossed into phase two), or None."""
        for candidates in (self.moves_by_phase[phase], self.moves_by_phase[1]):
            move = next((m for m in candidates if m.anim_id == anim), None)
            if move is not None:
                return move
        return None


def available_bosses() -> list[str]:
    return sorted(p.stem for p in BOSSES_DIR.glob("*.toml"))


@cache
def load_boss(key: str) -> BossSpec:
    """The boss ``key`` (``"margit"``, ``"godrick"``, ``"tree_sentinel"``): its file in
    ``env/sim/bosses/``, read once."""
    path = BOSSES_DIR / f"{key}.toml"
    if not path.is_file():
        raise ConfigError(
            f"the simulator has no boss {key!r}: it fights {', '.join(available_bosses())} "
            f"(a boss is a file in {BOSSES_DIR}; docs/guide.md, 'Add a boss')"
        )
    return read_boss(path)


def read_boss(path: Path) -> BossSpec:
    """The boss in the file at ``path``, every key checked: a ``ConfigError`` names the file,
    the table and the key that is wrong (a misspelt key included), and what it must be."""
    return _parse(path.stem, path, _Table(read_toml(path), str(path)))


@cache
def boss_by_npc_id(npc_id: int) -> BossSpec | None:
    """The simulator's boss that shows ``npc_id`` as its ``NpcId``, if any."""
    return next((b for b in map(load_boss, available_bosses()) if b.npc_id == npc_id), None)


class _Table:
    """One TOML table being read: every read names the key's place in the file when it fails,
    and ``done`` refuses keys nobody read (a misspelt key is an error, not a default)."""

    def __init__(self, data: dict, where: str) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be a table, not {data!r}")
        self.data, self.where, self.read = data, where, set()

    def get(self, key: str, kind: type | tuple[type, ...], default: object = ..., what: str = "") -> object:
        self.read.add(key)
        if key not in self.data:
            if default is ...:
                raise ConfigError(f"{self.where}: {key} is missing ({what or kind})")
            return default
        value = self.data[key]
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            raise ConfigError(f"{self.where}: {key} = {value!r} must be {what or kind}")
        return value

    def number(self, key: str, default: object = ..., low: float = 0.0) -> float:
        value = float(self.get(key, (int, float), default, f"a number of at least {low}"))
        if value < low:
            raise ConfigError(f"{self.where}: {key} = {value} must be at least {low}")
        return value

    def pair(self, key: str, default: object = ...) -> tuple[float, float]:
        value = self.get(key, list, default, "a pair of numbers [a, b]")
        if len(value) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise ConfigError(f"{self.where}: {key} = {value!r} must be a pair of numbers [a, b]")
        return float(value[0]), float(value[1])

    def colour(self, key: str) -> Colour:
        value = self.get(key, list, what="a colour [B, G, R], each 0 to 255")
        if len(value) != 3 or not all(isinstance(v, int) and 0 <= v <= 255 for v in value):
            raise ConfigError(f"{self.where}: {key} = {value!r} must be a colour [B, G, R], each 0 to 255")
        return value[0], value[1], value[2]

    def table(self, key: str, default: object = ...) -> _Table:
        return _Table(self.get(key, dict, default if default is ... else {}, "a table"), f"{self.where} [{key}]")

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.read)
        if unknown:
            raise ConfigError(f"{self.where}: unknown key(s) {', '.join(unknown)}")


def _parse(key: str, path: Path, top: _Table) -> BossSpec:
    arena_t, move_t, phase_t, projectile_t = (top.table(k) for k in ("arena", "movement", "phase_two", "projectiles"))
    walled = bool(arena_t.get("walled", bool, True, "true or false"))
    if walled and {"radius", "grace"} & set(arena_t.data):
        raise ConfigError(
            f"{arena_t.where}: a walled arena is the simulator's own ({ARENA_RADIUS} m, its grace in the way in): "
            "drop radius and grace"
        )
    arena = (
        Arena() if walled else Arena(False, arena_t.number("radius", low=ARENA_RADIUS), arena_t.pair("grace", GRACE))
    )
    arena_t.done()
    windup_scale = phase_t.number("windup_scale", 1.0)
    moves = tuple(_move(_Table(m, f"{path} moves[{i}]")) for i, m in enumerate(top.get("moves", list, what="moves")))
    if not moves or len({m.anim_id for m in moves}) != len(moves) or len({m.name for m in moves}) != len(moves):
        raise ConfigError(f"{path}: moves must be one or more, each with its own name and anim id")
    if not any(1 in m.phases for m in moves) or not any(2 in m.phases for m in moves):
        raise ConfigError(f"{path}: each phase (1 and 2) needs at least one move")
    shift = ticks(phase_t.number("shift", 2.0))
    spec = BossSpec(
        key=key,
        name=str(top.get("name", str, what="the boss's name")),
        npc_id=int(top.get("npc_id", int, what="an integer")),
        npc_param_id=int(top.get("npc_param_id", int, what="an integer")),
        max_hp=int(top.get("max_hp", int, what="an integer")),
        radius=top.number("radius", low=0.1),
        start=top.pair("start"),
        arena=arena,
        walk=move_t.number("walk"),
        run=move_t.number("run"),
        run_beyond=move_t.number("run_beyond"),
        turn=math.radians(move_t.number("turn")),
        keep_distance=move_t.number("keep_distance"),
        decide_ticks={
            1: tuple(map(ticks, move_t.pair("pause_phase_one"))),
            2: tuple(map(ticks, move_t.pair("pause_phase_two"))),
        },
        phase_two_below=phase_t.number("below", 0.5),
        projectiles=Projectiles(
            projectile_t.number("speed", 15.0, low=1.0),
            projectile_t.number("range", 22.0),
            projectile_t.number("radius", 0.25),
        ),
        colour=top.colour("colour"),
        bar_colour=top.colour("bar_colour"),
        moves=moves,
        phase_shift=BossMove(
            "phase_shift",
            BossAnim.PHASE_SHIFT,
            windup=shift,
            strikes=(Strike(shift, 1, 0, None),),
            recovery=0,
            min_range=0.0,
            max_range=0.0,
            weight=0.0,
            track_rate=0.0,
        ),
        moves_by_phase={
            1: tuple(m for m in moves if 1 in m.phases),
            2: tuple(_faster(m, windup_scale) for m in moves if 2 in m.phases),
        },
    )
    for table in (move_t, phase_t, projectile_t, top):
        table.done()
    return spec


def _faster(move: BossMove, scale: float) -> BossMove:
    """The same move with its wind-up shortened to ``scale``: everything after it moves earlier."""
    cut = move.windup - round(move.windup * scale)
    return replace(
        move,
        windup=move.windup - cut,
        strikes=tuple(replace(s, start=s.start - cut) for s in move.strikes),
        travel_start=max(0, move.travel_start - cut),
    )


def _move(t: _Table) -> BossMove:
    windup = ticks(t.number("windup"))
    low, high = t.pair("range")
    travel = t.table("travel", {})
    move = BossMove(
        name=str(t.get("name", str, what="the move's name")),
        anim_id=int(t.get("anim", int, what="its NpcAnimId, an integer")),
        windup=windup,
        strikes=tuple(_strike(_Table(s, f"{t.where} strikes[{i}]")) for i, s in enumerate(t.get("strikes", list))),
        recovery=ticks(t.number("recovery")),
        min_range=low,
        max_range=high,
        weight=t.number("weight"),
        phases=tuple(t.get("phases", list, [1, 2], "a list of phases, 1 and/or 2")),
        track_rate=math.radians(t.number("track", 240.0)),
        track_stop=ticks(t.number("track_stop", 0.1)),
        travel_start=ticks(travel.number("start", 0.0)),
        travel_ticks=ticks(travel.number("time", 0.0)),
        travel_max=travel.number("max", 0.0),
        overshoot=travel.number("overshoot", 0.0),
        airborne=bool(t.get("airborne", bool, False, "true or false")),
        pull=t.number("pull", 0.0),
    )
    travel.done()
    t.done()
    if not move.strikes or move.strikes[0].start != windup or not set(move.phases) <= {1, 2}:
        raise ConfigError(
            f"{t.where}: needs strikes, the first at its windup ({windup / 60:.2f} s), and phases within [1, 2]"
        )
    return move


def _strike(t: _Table) -> Strike:
    hitbox_t = t.table("hitbox", None) if "hitbox" in t.data else None
    projectiles = int(t.get("projectiles", int, 0, "a count"))
    if (hitbox_t is None) == (projectiles == 0):
        raise ConfigError(f"{t.where}: a strike has a hitbox or throws projectiles (one of the two)")
    strike = Strike(
        ticks(t.number("at")),
        max(1, ticks(t.number("active"))),
        int(t.get("damage", int, what="HP, an integer")),
        None if hitbox_t is None else _hitbox(hitbox_t),
        projectiles=projectiles,
        spread=math.radians(t.number("spread", 0.0)),
        step=t.number("step", 0.0),
    )
    t.done()
    return strike


def _hitbox(t: _Table) -> Hitbox:
    shape_name = t.get("shape", str, what=f"one of {', '.join(s.value for s in Shape)}")
    try:
        shape = Shape(shape_name)
    except ValueError:
        raise ConfigError(
            f"{t.where}: shape {shape_name!r} is not one of {', '.join(s.value for s in Shape)}"
        ) from None
    hitbox = Hitbox(
        shape,
        reach=t.number("reach"),
        half_angle=math.radians(t.number("half_angle", 0.0)),
        half_width=t.number("half_width", 0.0),
        offset=t.number("offset", 0.0),
        low=bool(t.get("low", bool, False, "true or false")),
        speed=t.number("speed", 0.0),
        sweep=math.radians(t.number("sweep", 0.0)),
    )
    t.done()
    if shape is Shape.RING and not (hitbox.speed and hitbox.half_width):
        raise ConfigError(f"{t.where}: a ring needs speed (m/s its circle grows) and half_width (its band)")
    return hitbox
