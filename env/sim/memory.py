"""The simulator's "process memory": every Elden Ring attribute name, read from and written to
the world with the meaning and type it has in the game.

A Siphon config (TOML) names attributes and their types; against the real game each is a pointer
chain, here each is a field of the world. Values are stored as the game stores them: 32-bit
ints, 32-bit floats (so a value read back is exactly what a gRPC ``float`` carries), 1-byte bools.
Coordinates: X and Y are horizontal, Z is up. ``Local`` positions are in the arena's map block,
``Global`` ones add the block's origin, as in the game.

Beyond the game's names, the simulator has a few of its own (``Sim*`` and ``HeroFlaskCharges``):
its profile declares them, the Elden Ring profile does not. The ``Sim*`` ones are its control
surface (restart a fight, restore the save, read the tick and the life-cycle phase): they are
not game memory, so they always answer.

As in the game, memory is only there when the game has it: the player's and the NPC's
attributes sit at the end of pointer chains, which lead nowhere on the loading screen, and a
boss killed for good has no attributes left. NPC attributes read one NPC: the boss, or, through
Siphon's hook (``via_hook``), whichever NPC the game last reported as targeted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from env.observations import MAX_FLASKS, MAX_FRAME_SIDE
from env.sim import TICK_HZ
from env.sim.geometry import GATE
from env.sim.moves import PlayerAnim
from env.sim.world import Npc, World

GAME_FOG_WALL = (19.958229064941406, -11.990748405456543, -7.051832675933838)
"""Where EldenGym stands the player to walk through Margit's fog wall, in the game's global
coordinates (the Elden Ring profile's reset.fog_wall)."""
MAP_ORIGIN = (GAME_FOG_WALL[0] - GATE[0], GAME_FOG_WALL[1] - (GATE[1] - 1.0), GAME_FOG_WALL[2])
"""Where the arena's map block sits in global coordinates: placed so that the game's fog-wall
spot is one metre outside the simulator's fog wall, within reach of its event action, so the Elden
Ring profile's teleports land where they would in the game."""
MAP_ID = 10000000

AttributeType = str  # "int" | "float" | "bool"
Value = int | float | bool
Kind = str
"""Where an attribute lives: "hero" and "npc" at the end of a pointer chain (the player's, the
targeted NPC's), "game" in a static object (game speed), "sim" the simulator's control surface."""
CHAINED = ("hero", "npc")


class MemoryAccessError(ValueError):
    """A read or write the simulator's memory cannot do; the message says why."""


MAX_GAME_SPEED = 100.0
"""The fastest game speed the simulator accepts. Its clock runs at most a burst of ticks per
wake-up and lets time slip beyond that, so any speed keeps it serving; above this one the
clock only slips, which no client can mean."""
MIN_GAME_SPEED = 0.001
"""The slowest running game speed (0 pauses): a tick every few seconds of real time. Slower
speeds are no slow motion anyone can watch, only a pause that does not say so."""
MAX_DISTANCE_M = 100_000.0
"""How far from the map origin a position write may place anyone: beyond any map of the game,
and the renderer's pixel arithmetic overflows long before 1e30."""
MAX_POINTS = 999_999
"""The most HP, FP or stamina a fighter may be given: beyond any fighter of the game, and the
HUD draws bars as fractions, so any count below it draws as fast as the real ones."""
MAX_SEED = 2**31 - 1
"""The largest seed: ``SimSeed`` reads back as a non-negative 32-bit int."""
MIN_WINDOW_SIDE = 16
"""The smallest window side the renderer draws (the HUD needs it)."""


@dataclass(frozen=True, slots=True)
class Range:
    """The values a writable attribute takes, both ends included, and 0 besides where
    ``or_zero``. Every write is held to its attribute's range before it reaches the world, so
    no value the world cannot hold gets in (a flask count the HUD would draw for minutes, a
    speed whose next tick lies beyond the clock's arithmetic, a position off every map)."""

    low: float
    high: float
    unit: str
    or_zero: bool = False

    def holds(self, value: Value) -> bool:
        """``value`` is in the range (NaN never is)."""
        return self.low <= value <= self.high or (self.or_zero and value == 0)

    def __str__(self) -> str:
        span = f"from {self.low:g} to {self.high:g} {self.unit}"
        return f"0 or {span}" if self.or_zero else span


def f32(x: float) -> float:
    """Round to the nearest 32-bit float, as a float field in game memory would hold it."""
    return float(np.float32(x))


@dataclass(frozen=True, slots=True)
class Attribute:
    """One attribute. ``read`` and ``write`` take the world, except for kind "npc", where they
    take the NPC read (and ``write`` also the world)."""

    type: AttributeType
    read: Callable[..., Value]
    write: Callable[..., None] | None = None
    kind: Kind = "hero"
    range: Range | None = None  # every writable int or float attribute has one (bools hold any)


def _set_player(field: str, cast: Callable[[Value], Value]) -> Callable[[World, Value], None]:
    def write(world: World, value: Value) -> None:
        setattr(world.player, field, cast(value))

    return write


def _write_player_hp(world: World, value: Value) -> None:
    p = world.player
    was_dead = p.dead
    p.hp = min(int(value), p.max_hp)
    if was_dead and p.hp > 0:
        p.start(PlayerAnim.IDLE, TICK_HZ)  # revived in place, as a memory write does
    elif not was_dead and p.hp == 0:
        world._hurt_player(0, p.x, p.y)


def _write_npc_hp(world: World, npc: Npc, value: Value) -> None:
    if npc is not world.boss:
        npc.hp = min(int(value), npc.max_hp)
        return
    b = world.boss
    was_dead = b.dead
    b.hp = min(int(value), b.max_hp)
    if b.hp * 2 > b.max_hp:
        b.phase = 1  # healed above half: the fight is back in its first phase
    if b.hp == 0 and not was_dead:
        world._damage_boss(0)
    elif was_dead and b.hp > 0:
        b.cancel_move()  # revived in place


def _local(value: Value, off: float) -> float:
    """A written coordinate in the arena's own frame."""
    return f32(float(value)) - off


def _position_range(off: float) -> Range:
    """Where a coordinate may be written: within ``MAX_DISTANCE_M`` of the map's origin."""
    return Range(
        off - MAX_DISTANCE_M, off + MAX_DISTANCE_M, "metres (no place in the game lies farther from the map's origin)"
    )


def _write_game_speed(world: World, value: Value) -> None:
    world.game_speed_val = f32(float(value))


def _hero_pos_attrs(prefix: str, origin: bool) -> dict[str, Attribute]:
    attrs = {}
    for axis, name in enumerate("XYZ"):
        off = MAP_ORIGIN[axis] if origin else 0.0

        def read(w: World, axis=axis, off=off) -> float:
            p = w.player
            return f32((p.x, p.y, p.z)[axis] + off)

        def write(w: World, value: Value, axis=axis, off=off) -> None:
            local = _local(value, off)
            if axis == 2:
                w.player.z = max(0.0, local)
            else:
                setattr(w.player, "xy"[axis], local)

        attrs[f"{prefix}{name}"] = Attribute("float", read, write, range=_position_range(off))
    return attrs


def _npc_pos_attrs(prefix: str, origin: bool) -> dict[str, Attribute]:
    attrs = {}
    for axis, name in enumerate("XYZ"):
        off = MAP_ORIGIN[axis] if origin else 0.0

        def read(npc: Npc, axis=axis, off=off) -> float:
            return f32((npc.x, npc.y, 0.0)[axis] + off)

        def write(w: World, npc: Npc, value: Value, axis=axis, off=off) -> None:
            local = _local(value, off)
            if axis < 2:  # NPCs stand on the floor: a height written is ignored
                setattr(npc, "xy"[axis], local)
                npc.cancel_move()

        attrs[f"{prefix}{name}"] = Attribute("float", read, write, "npc", _position_range(off))
    return attrs


def _angle(value: Value) -> float:
    return math.remainder(f32(float(value)), math.tau)


def _write_hero_angle(w: World, value: Value) -> None:
    w.player.angle = _angle(value)


def _write_npc_angle(w: World, npc: Npc, value: Value) -> None:
    npc.angle = _angle(value)
    npc.cancel_move()


def _npc_angle() -> Attribute:
    return Attribute("float", lambda n: f32(n.angle), _write_npc_angle, "npc", ANGLE)


def _set_npc_max_hp(w: World, npc: Npc, value: Value) -> None:
    npc.max_hp = int(value)


def _restore_save(w: World, value: Value) -> None:
    w.restore_save()


GAME_SPEED = Range(MIN_GAME_SPEED, MAX_GAME_SPEED, "times real time (0 pauses)", or_zero=True)
ANGLE = Range(-math.tau, math.tau, "radians (a turn either way)")
HP, MAX_HP = Range(0, MAX_POINTS, "HP"), Range(1, MAX_POINTS, "HP")
FP, SP = Range(0, MAX_POINTS, "FP"), Range(0, MAX_POINTS, "stamina")
MAX_SP = Range(1, MAX_POINTS, "stamina")


def _tick_or_never(tick: int) -> int:
    """A tick as the game's int32 holds it, or -1 for one that has not happened."""
    return tick & 0x7FFFFFFF if tick >= 0 else -1


ATTRIBUTES: dict[str, Attribute] = {
    "HeroHp": Attribute("int", lambda w: w.player.hp, _write_player_hp, range=HP),
    "HeroMaxHp": Attribute("int", lambda w: w.player.max_hp, _set_player("max_hp", int), range=MAX_HP),
    "HeroFp": Attribute("int", lambda w: w.player.fp, _set_player("fp", int), range=FP),
    "HeroMaxFp": Attribute("int", lambda w: w.player.max_fp, _set_player("max_fp", int), range=FP),
    "HeroSp": Attribute("int", lambda w: int(w.player.sp), _set_player("sp", lambda v: float(int(v))), range=SP),
    "HeroMaxSp": Attribute("int", lambda w: w.player.max_sp, _set_player("max_sp", int), range=MAX_SP),
    "HeroAnimId": Attribute("int", lambda w: int(w.player.anim)),
    "HeroAnimLength": Attribute("float", lambda w: f32(w.player.anim_len / TICK_HZ)),
    "HeroAnimSpeed": Attribute("float", lambda w: 1.0),
    **_hero_pos_attrs("HeroLocalPos", origin=False),
    **_hero_pos_attrs("HeroGlobalPos", origin=True),
    "HeroAngle": Attribute("float", lambda w: f32(w.player.angle), _write_hero_angle, range=ANGLE),
    "HeroMapId": Attribute("int", lambda w: MAP_ID),
    "NoGravity": Attribute("bool", lambda w: w.player.no_gravity, _set_player("no_gravity", bool)),
    "gameSpeedFlag": Attribute(
        "bool", lambda w: w.game_speed_flag, lambda w, v: setattr(w, "game_speed_flag", bool(v)), "game"
    ),
    "gameSpeedVal": Attribute("float", lambda w: f32(w.game_speed_val), _write_game_speed, "game", GAME_SPEED),
    "NpcId": Attribute("int", lambda n: n.npc_id, kind="npc"),
    "NpcParamId": Attribute("int", lambda n: n.npc_param_id, kind="npc"),
    "NpcHp": Attribute("int", lambda n: n.hp, _write_npc_hp, "npc", HP),
    "NpcMaxHp": Attribute("int", lambda n: n.max_hp, _set_npc_max_hp, "npc", MAX_HP),
    **_npc_pos_attrs("NpcGlobalPos", origin=True),
    "NpcGlobalPosAngle": _npc_angle(),
    **_npc_pos_attrs("NpcLocalPos", origin=False),
    "NpcLocalPosAngle": _npc_angle(),
    "NpcAnimId": Attribute("int", lambda n: int(n.anim), kind="npc"),
    "NpcAnimLength": Attribute("float", lambda n: f32(n.anim_len / TICK_HZ), kind="npc"),
    # The simulator's own: flasks (restored at a grace in the game), and its control surface: a
    # debug-menu style "restart the fight with this seed" (the simulator's equivalent of the
    # game's reset writes, from any state), "restore the backup save" (on the game a manual file
    # copy at the title screen), the tick count, the last ticks that saw a button pressed and
    # released (when a client's input really reached the game), the life-cycle phase
    # (``world.Phase``), and how many game-memory writes it was sent (a client that must write
    # nothing, the recorder, is checked by it).
    "HeroFlaskCharges": Attribute(
        "int",
        lambda w: w.player.flasks,
        _set_player("flasks", int),
        range=Range(0, MAX_FLASKS, "flask charges (the game's most)"),
    ),
    "SimSeed": Attribute(
        "int", lambda w: w.seed & 0x7FFFFFFF, lambda w, v: w.restart(int(v)), "sim", Range(0, MAX_SEED, "(a seed)")
    ),
    "SimTick": Attribute("int", lambda w: w.tick_count & 0x7FFFFFFF, kind="sim"),
    "SimPressTick": Attribute("int", lambda w: _tick_or_never(w.press_tick), kind="sim"),
    "SimReleaseTick": Attribute("int", lambda w: _tick_or_never(w.release_tick), kind="sim"),
    "SimRestoreSave": Attribute("int", lambda w: 0, _restore_save, "sim", Range(0, 1, "(either restores the save)")),
    "SimPhase": Attribute("int", lambda w: int(w.phase), kind="sim"),
    "SimWrites": Attribute("int", lambda w: w.memory_writes & 0x7FFFFFFF, kind="sim"),
}
"""Every attribute the simulator has, by name."""

ELDEN_RING_ATTRIBUTES = frozenset(n for n in ATTRIBUTES if not n.startswith("Sim") and n != "HeroFlaskCharges")
CONTROLS = frozenset(n for n, a in ATTRIBUTES.items() if a.kind == "sim")
"""The control surface: answered whatever the config says, never a pointer chain."""

LOADING_MESSAGE = "null pointer in the chain: the game is on a loading screen"
GONE_MESSAGE = "null pointer in the chain: the boss is dead in this save (restore the backup save)"
NO_TARGET_MESSAGE = "null NPC pointer: the game reports no targeted NPC (lock on to one)"


def _attribute(name: str) -> Attribute:
    try:
        return ATTRIBUTES[name]
    except KeyError:
        raise MemoryAccessError(unknown_attribute_message(name)) from None


def _npc(world: World, via_hook: bool) -> Npc:
    npc = world.last_targeted if via_hook else world.boss
    if npc is None:
        raise MemoryAccessError(NO_TARGET_MESSAGE)
    if world.gone(npc):
        raise MemoryAccessError(GONE_MESSAGE)
    return npc


def _resolve(world: World, attr: Attribute, via_hook: bool) -> Npc | World:
    """What an attribute is read from or written to, or ``MemoryAccessError`` where the game's
    pointer chain would lead nowhere."""
    if attr.kind in CHAINED and world.loading:
        raise MemoryAccessError(LOADING_MESSAGE)
    return _npc(world, via_hook) if attr.kind == "npc" else world


def read(world: World, name: str, via_hook: bool = False) -> Value:
    """``name``'s value now. NPC attributes read the boss, or with ``via_hook`` the NPC the game
    last reported as targeted, as Siphon's hook does."""
    attr = _attribute(name)
    return attr.read(_resolve(world, attr, via_hook))


WINDOW_SIDE = Range(MIN_WINDOW_SIDE, MAX_FRAME_SIDE, "pixels")
WINDOW_RANGES = {"SimWindowWidth": WINDOW_SIDE, "SimWindowHeight": WINDOW_SIDE}
"""What the server's window controls (``env.sim.frame_capture.WINDOW_CONTROLS``) may be written: a
window the renderer can draw, no larger than any frame the project takes."""


def check_range(name: str, value: Value, allowed: Range | None) -> None:
    """``MemoryAccessError`` saying what ``name`` accepts, where ``value`` is outside ``allowed``."""
    if allowed is not None and not allowed.holds(value):
        raise MemoryAccessError(f"{name} = {value!r} is refused, nothing was written: it must be {allowed}")


def write(world: World, name: str, value: Value, via_hook: bool = False) -> None:
    """Write ``name``, or ``MemoryAccessError`` (and the world unchanged) for a read-only attribute, a
    value outside its ``Range`` or memory the game does not have now."""
    attr = _attribute(name)
    if attr.write is None:
        raise MemoryAccessError(f"attribute {name!r} is read-only in the simulator")
    check_range(name, value, attr.range)
    target = _resolve(world, attr, via_hook)
    if attr.kind == "npc":
        attr.write(world, target, value)
    else:
        attr.write(world, value)
    world.revision += 1
    if attr.kind != "sim":
        world.memory_writes += 1


def unknown_attribute_message(name: str) -> str:
    return f"the simulator has no attribute {name!r}; it has: {', '.join(sorted(ATTRIBUTES))}"
