"""The simulator's "process memory": every Elden Ring attribute name, read from and written to
the world with the meaning and type it has in the game.

A Siphon config (TOML) names attributes and their types; against the real game each is a pointer
chain, here each is a field of the world. Values are stored as the game stores them: 32-bit
ints, 32-bit floats (so a value read back is exactly what a gRPC ``float`` carries), 1-byte bools.
Coordinates: X and Y are horizontal, Z is up. ``Local`` positions are in the arena's map block,
``Global`` ones add the block's origin, as in the game.

Beyond the game's names, the simulator has a few of its own (``Sim*`` and ``HeroFlaskCharges``):
its profile declares them, the Elden Ring profile does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from env.sim import TICK_HZ
from env.sim.moves import PlayerAnim
from env.sim.world import World

MAP_ORIGIN = (-172.5, 393.2, -7.05)
"""Where the arena's map block sits in global coordinates (Stormveil's gate, roughly)."""
MAP_ID = 10000000
BOSS_NPC_ID = 10000850

AttributeType = str  # "int" | "float" | "bool"
Value = int | float | bool


class MemoryError_(ValueError):
    """A read or write the simulator's memory cannot do; the message says why."""


def f32(x: float) -> float:
    """Round to the nearest 32-bit float, as a float field in game memory would hold it."""
    return float(np.float32(x))


@dataclass(frozen=True, slots=True)
class Attribute:
    type: AttributeType
    read: Callable[[World], Value]
    write: Callable[[World, Value], None] | None = None


def _set(obj_getter: Callable[[World], object], field: str, cast: Callable[[Value], Value]):
    def write(world: World, value: Value) -> None:
        setattr(obj_getter(world), field, cast(value))

    return write


def _player(w: World):
    return w.player


def _boss(w: World):
    return w.boss


def _write_player_hp(world: World, value: Value) -> None:
    p = world.player
    was_dead = p.dead
    p.hp = max(0, min(int(value), p.max_hp))
    if was_dead and p.hp > 0:
        p.start(PlayerAnim.IDLE, TICK_HZ)  # revived in place, as a memory write does
    elif not was_dead and p.hp == 0:
        world._hurt_player(0, p.x, p.y)


def _write_boss_hp(world: World, value: Value) -> None:
    b = world.boss
    was_dead = b.dead
    b.hp = max(0, min(int(value), b.max_hp))
    if b.hp * 2 > b.max_hp:
        b.phase = 1  # healed above half: the fight is back in its first phase
    if b.hp == 0 and not was_dead:
        world._damage_boss(0)
    elif was_dead and b.hp > 0:
        b.cancel_move()  # revived in place


def _pos_attrs(prefix: str, getter, origin: bool, boss: bool) -> dict[str, Attribute]:
    attrs = {}
    for axis, name in enumerate("XYZ"):
        off = MAP_ORIGIN[axis] if origin else 0.0

        def read(w: World, axis=axis, off=off) -> float:
            obj = getter(w)
            v = (obj.x, obj.y, getattr(obj, "z", 0.0))[axis]
            return f32(v + off)

        def write(w: World, value: Value, axis=axis, off=off) -> None:
            obj = getter(w)
            local = f32(float(value)) - off
            if axis == 2:
                if not boss:
                    obj.z = max(0.0, local)
                return
            setattr(obj, "xy"[axis], local)
            if boss:
                obj.cancel_move()

        attrs[f"{prefix}{name}"] = Attribute("float", read, write)
    return attrs


def _write_angle(getter):
    def write(w: World, value: Value) -> None:
        obj = getter(w)
        obj.angle = math.remainder(f32(float(value)), 2 * math.pi)
        if obj is w.boss:
            obj.cancel_move()

    return write


ATTRIBUTES: dict[str, Attribute] = {
    "HeroHp": Attribute("int", lambda w: w.player.hp, _write_player_hp),
    "HeroMaxHp": Attribute("int", lambda w: w.player.max_hp, _set(_player, "max_hp", lambda v: max(1, int(v)))),
    "HeroFp": Attribute("int", lambda w: w.player.fp, _set(_player, "fp", lambda v: max(0, int(v)))),
    "HeroMaxFp": Attribute("int", lambda w: w.player.max_fp, _set(_player, "max_fp", lambda v: max(0, int(v)))),
    "HeroSp": Attribute("int", lambda w: int(w.player.sp), _set(_player, "sp", lambda v: float(max(0, int(v))))),
    "HeroMaxSp": Attribute("int", lambda w: w.player.max_sp, _set(_player, "max_sp", lambda v: max(1, int(v)))),
    "HeroAnimId": Attribute("int", lambda w: int(w.player.anim)),
    "HeroAnimLength": Attribute("float", lambda w: f32(w.player.anim_len / TICK_HZ)),
    "HeroAnimSpeed": Attribute("float", lambda w: 1.0),
    **_pos_attrs("HeroLocalPos", _player, origin=False, boss=False),
    **_pos_attrs("HeroGlobalPos", _player, origin=True, boss=False),
    "HeroAngle": Attribute("float", lambda w: f32(w.player.angle), _write_angle(_player)),
    "HeroMapId": Attribute("int", lambda w: MAP_ID),
    "NoGravity": Attribute("bool", lambda w: w.player.no_gravity, _set(_player, "no_gravity", bool)),
    "gameSpeedFlag": Attribute("bool", lambda w: w.game_speed_flag, lambda w, v: setattr(w, "game_speed_flag", bool(v))),
    "gameSpeedVal": Attribute("float", lambda w: f32(w.game_speed_val), lambda w, v: setattr(w, "game_speed_val", max(0.0, f32(float(v))))),
    "NpcId": Attribute("int", lambda w: BOSS_NPC_ID),
    "NpcHp": Attribute("int", lambda w: w.boss.hp, _write_boss_hp),
    "NpcMaxHp": Attribute("int", lambda w: w.boss.max_hp, _set(_boss, "max_hp", lambda v: max(1, int(v)))),
    **_pos_attrs("NpcGlobalPos", _boss, origin=True, boss=True),
    "NpcGlobalPosAngle": Attribute("float", lambda w: f32(w.boss.angle), _write_angle(_boss)),
    **_pos_attrs("NpcLocalPos", _boss, origin=False, boss=True),
    "NpcLocalPosAngle": Attribute("float", lambda w: f32(w.boss.angle), _write_angle(_boss)),
    "NpcAnimId": Attribute("int", lambda w: int(w.boss.anim)),
    "NpcAnimLength": Attribute("float", lambda w: f32(w.boss.anim_len / TICK_HZ)),
    # The simulator's own: flasks (restored at a grace in the game), and a debug-menu style
    # "restart the fight with this seed", the simulator's equivalent of the game's reset writes.
    "HeroFlaskCharges": Attribute("int", lambda w: w.player.flasks, _set(_player, "flasks", lambda v: max(0, int(v)))),
    "SimSeed": Attribute("int", lambda w: w.seed & 0x7FFFFFFF, lambda w, v: w.restart(int(v))),
    "SimTick": Attribute("int", lambda w: w.tick_count & 0x7FFFFFFF),
}
"""Every attribute the simulator has, by name."""

ELDEN_RING_ATTRIBUTES = frozenset(n for n in ATTRIBUTES if not n.startswith("Sim") and n != "HeroFlaskCharges")


def read(world: World, name: str) -> Value:
    try:
        return ATTRIBUTES[name].read(world)
    except KeyError:
        raise MemoryError_(unknown_attribute_message(name)) from None


def write(world: World, name: str, value: Value) -> None:
    try:
        attr = ATTRIBUTES[name]
    except KeyError:
        raise MemoryError_(unknown_attribute_message(name)) from None
    if attr.write is None:
        raise MemoryError_(f"attribute {name!r} is read-only in the simulator")
    attr.write(world, value)


def unknown_attribute_message(name: str) -> str:
    return f"the simulator has no attribute {name!r}; it has: {', '.join(sorted(ATTRIBUTES))}"
