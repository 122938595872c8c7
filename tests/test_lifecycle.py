"""The game's life cycle around a fight, in-process: a real death, a kill for good, the fog wall,
teleporting, and all of it deterministic. Every test here fails on a simulator whose
world only knows the fight."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from env.common.errors import GameError
from env.sim import memory
from env.sim.boss import load_boss
from env.sim.controls import Button
from env.sim.game import SimGame
from env.sim.geometry import ARENA_RADIUS, GATE, GRACE
from env.sim.moves import PlayerAnim
from env.sim.renderer import Renderer
from env.sim.world import SENTRY_NPC_ID, Lifecycle, Phase, World

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

BOSS_NPC_ID = load_boss("margit").npc_id

LIFE = Lifecycle()
HERO = ("HeroHp", "HeroMaxHp", "HeroLocalPosX", "HeroLocalPosY", "HeroAnimId", "HeroFlaskCharges")
NPC = ("NpcHp", "NpcMaxHp", "NpcId", "NpcLocalPosX", "NpcLocalPosY")


def ticks(world: World, n: int, held: int = 0, pressed: int = 0) -> None:
    for i in range(n):
        world.tick(held, pressed if i == 0 else 0)


def kill_player(world: World) -> None:
    memory.write(world, "HeroHp", 0)
    world.tick()


def kill_boss(world: World) -> None:
    memory.write(world, "NpcHp", 0)
    world.tick()


def readable(world: World, name: str, via_hook: bool = False) -> bool:
    try:
        memory.read(world, name, via_hook)
    except memory.MemoryAccessError:
        return False
    return True


def walk_to_the_fog_and_enter(world: World) -> None:
    """From the Site of Grace: walk north to the fog wall, press the event action, go through."""
    assert world.phase is Phase.OUTSIDE
    while math.hypot(world.player.x - GATE[0], world.player.y - GATE[1]) > 1.0:
        world.tick(Button.MOVE_FORWARD)
    world.tick(0, Button.EVENT_ACTION)
    assert world.phase is Phase.ENTERING and world.player.anim == PlayerAnim.FOG_ENTRY
    ticks(world, LIFE.ticks("entry"))
    assert world.phase is Phase.FIGHT


def frame_hash(renderer: Renderer, world: World) -> str:
    return hashlib.sha256(renderer.render_bgr(world).tobytes()).hexdigest()


def test_a_death_plays_out_loads_and_respawns_at_the_grace_outside_the_fog():
    world = World(seed=3)
    renderer = Renderer(160, 90)
    ticks(world, 200)
    memory.write(world, "HeroFlaskCharges", 0)
    boss_at = (world.boss.x, world.boss.y)
    kill_player(world)
    assert world.phase is Phase.DYING and world.player.anim == PlayerAnim.DEATH
    before_banner = renderer.render_bgr(world)
    ticks(world, LIFE.ticks("you_died"))
    banner = renderer.render_bgr(world)
    rows = slice(40, 50)  # the middle of the screen: darkened, with red letters
    assert banner[rows].mean() < before_banner[rows].mean()
    assert (banner[rows][..., 2].astype(int) - banner[rows][..., 1] > 80).any()
    assert all(readable(world, n) for n in HERO + NPC)  # still the same map: all readable

    ticks(world, LIFE.ticks("death_screen") - LIFE.ticks("you_died"))
    assert world.phase is Phase.LOADING
    loading = {frame_hash(renderer, world)}
    for _ in range(LIFE.ticks("loading") - 1):
        assert not any(readable(world, n) for n in HERO + NPC)  # every pointer chain is null
        assert readable(world, "gameSpeedVal") and readable(world, "SimTick")
        world.tick(Button.MOVE_FORWARD | Button.ATTACK, Button.ATTACK)  # nobody is there to act
        if world.phase is Phase.LOADING:
            loading.add(frame_hash(renderer, world))
    assert len(loading) == 1  # one still loading screen, whatever the keys
    world.tick()
    assert world.phase is Phase.OUTSIDE
    state = {n: memory.read(world, n) for n in HERO + NPC}
    assert state["HeroHp"] == state["HeroMaxHp"] and state["HeroFlaskCharges"] == 3
    assert state["NpcHp"] == state["NpcMaxHp"] and (state["NpcLocalPosX"], state["NpcLocalPosY"]) != boss_at
    assert (world.player.x, world.player.y) == GRACE and math.hypot(*GRACE) > ARENA_RADIUS
    boss_now = (world.boss.x, world.boss.y)
    ticks(world, 600)  # ten seconds at the grace: the boss waits behind the fog, out of reach
    assert (world.boss.x, world.boss.y) == boss_now and world.player.hp == world.player.max_hp


def test_the_fight_starts_only_through_the_fog_wall_with_the_event_action():
    world = World(seed=1)
    world.respawn()
    world.tick(0, Button.EVENT_ACTION)  # at the grace, far from the wall: nothing happens
    assert world.phase is Phase.OUTSIDE
    ticks(world, 900, Button.MOVE_FORWARD)  # walking into the wall does not pass it either
    assert world.phase is Phase.OUTSIDE and world.player.y < GATE[1]
    world.tick(0, Button.LOCK_ON)  # the boss is behind the fog: lock-on finds the sentry
    assert world.player.locked_on and world.focus is world.sentry
    world.tick(0, Button.LOCK_ON)
    world.camera_yaw = math.pi / 2
    world.tick(0, Button.EVENT_ACTION)
    ticks(world, LIFE.ticks("entry"))
    assert world.phase is Phase.FIGHT and math.hypot(world.player.x, world.player.y) < ARENA_RADIUS
    assert not world.player.locked_on  # the game does not lock on for you
    boss_at = (world.boss.x, world.boss.y)
    ticks(world, 120)
    assert (world.boss.x, world.boss.y) != boss_at  # the boss has woken up
    world.tick(0, Button.LOCK_ON)
    assert world.player.locked_on and world.focus is world.boss and world.last_targeted is world.boss


def test_a_kill_is_for_good_until_the_save_is_restored():
    world = World(seed=2)
    kill_boss(world)
    assert world.phase is Phase.FELLED and memory.read(world, "NpcHp") == 0  # the blow is seen
    ticks(world, LIFE.ticks("boss_fade"))
    assert world.phase is Phase.CLEARED
    for name in NPC:
        with pytest.raises(memory.MemoryAccessError, match="dead in this save"):
            memory.read(world, name)
    with pytest.raises(memory.MemoryAccessError, match="dead in this save"):
        memory.write(world, "NpcHp", 4174)  # no memory write brings it back
    assert readable(world, "HeroHp")
    world.player.locked_on = False
    ticks(world, 600, Button.MOVE_BACK)  # the fog wall is gone: out of the arena, into the way in
    assert world.player.y < GATE[1] - 5
    ticks(world, 600)
    assert world.phase is Phase.CLEARED  # nothing brings it back by itself

    memory.write(world, "SimRestoreSave", 1)
    assert world.phase is Phase.LOADING
    ticks(world, LIFE.ticks("loading"))
    assert world.phase is Phase.OUTSIDE and memory.read(world, "NpcHp") == memory.read(world, "NpcMaxHp")
    walk_to_the_fog_and_enter(world)


def test_npc_reads_through_the_hook_follow_the_last_target():
    world = World(seed=0)
    assert memory.read(world, "NpcId", via_hook=True) == BOSS_NPC_ID  # a fight starts locked on
    world.tick(0, Button.LOCK_ON)  # unlocked: the game still reports the boss as last targeted
    assert not world.player.locked_on and memory.read(world, "NpcId", via_hook=True) == BOSS_NPC_ID
    kill_player(world)
    ticks(world, LIFE.ticks("death_screen") + LIFE.ticks("loading"))
    assert world.phase is Phase.OUTSIDE
    with pytest.raises(memory.MemoryAccessError, match="no targeted NPC"):
        memory.read(world, "NpcHp", via_hook=True)
    assert memory.read(world, "NpcId") == BOSS_NPC_ID  # an ideal server reads the boss anyway
    world.tick(0, Button.LOCK_ON)
    assert memory.read(world, "NpcId", via_hook=True) == SENTRY_NPC_ID  # "the boss" is a soldier
    assert memory.read(world, "NpcHp", via_hook=True) != memory.read(world, "NpcHp")
    world.tick(0, Button.LOCK_ON)
    world.camera_yaw = math.pi / 2
    walk_to_the_fog_and_enter(world)
    assert memory.read(world, "NpcId", via_hook=True) == SENTRY_NPC_ID  # until the boss is targeted
    world.tick(0, Button.LOCK_ON)
    assert memory.read(world, "NpcId", via_hook=True) == BOSS_NPC_ID


def test_teleporting_by_writing_the_local_position_works_as_in_the_game():
    """EldenGym's way: shift the local position by how far the global one is from the goal."""
    world = World(seed=0)
    world.respawn()
    goal = (GATE[0] + memory.MAP_ORIGIN[0], GATE[1] - 0.8 + memory.MAP_ORIGIN[1])
    for axis, target in zip("XY", goal):
        local, glob = memory.read(world, f"HeroLocalPos{axis}"), memory.read(world, f"HeroGlobalPos{axis}")
        memory.write(world, f"HeroLocalPos{axis}", local + (target - glob))
    assert memory.read(world, "HeroGlobalPosX") == pytest.approx(goal[0], abs=1e-3)
    assert memory.read(world, "HeroGlobalPosY") == pytest.approx(goal[1], abs=1e-3)
    world.tick(0, Button.EVENT_ACTION)  # next to the fog wall now: the event action enters
    assert world.phase is Phase.ENTERING


def script(seed: int) -> list[tuple]:
    """Death, respawn, re-entry, a kill and a restored save, with every read and every frame."""
    world = World(seed)
    renderer = Renderer(84, 84)
    names = sorted(memory.ATTRIBUTES)
    trace = []

    def record() -> None:
        values = tuple(memory.read(world, n) if readable(world, n) else None for n in names)
        trace.append((world.tick_count, int(world.phase), values, frame_hash(renderer, world)))

    def run(n: int, held: int = 0, pressed: int = 0) -> None:
        for i in range(n):
            world.tick(held, pressed if i == 0 else 0)
            record()

    run(300, Button.MOVE_FORWARD)
    while world.phase is not Phase.OUTSIDE:  # an idle player dies, then the game reloads
        run(1)
    while world.phase is Phase.OUTSIDE:
        run(1, Button.MOVE_FORWARD, Button.EVENT_ACTION if world.player.y > GATE[1] - 1.0 else 0)
    run(LIFE.ticks("entry") + 30, 0, Button.LOCK_ON)
    memory.write(world, "NpcHp", 1)
    run(60, Button.ATTACK, Button.ATTACK)
    while world.phase is not Phase.CLEARED:
        run(1, Button.ATTACK, Button.ATTACK)
    memory.write(world, "SimRestoreSave", 1)
    run(LIFE.ticks("loading") + 5)
    return trace


def test_a_scripted_death_kill_and_reentry_is_the_same_on_every_frame_and_read():
    a, b = script(5), script(5)
    assert a == b
    phases = {t[1] for t in a}
    assert phases == set(Phase)  # the script went through every phase
    assert script(6) != a


@pytest.mark.parametrize("phase", list(Phase))
def test_restart_gives_a_fresh_fight_from_every_phase(phase: Phase):
    fresh = World(seed=4)
    world = World(seed=9)
    if phase is Phase.FELLED or phase is Phase.CLEARED:
        kill_boss(world)
    elif phase is not Phase.FIGHT:
        kill_player(world)
    while world.phase is not phase:
        world.tick(Button.MOVE_FORWARD, 0)
        if world.phase is Phase.OUTSIDE and phase is Phase.ENTERING and world.player.y > GATE[1] - 1.0:
            world.tick(0, Button.EVENT_ACTION)
    world.restart(seed=4)
    world.tick_count = 0
    renderer = Renderer(84, 84)
    for _ in range(900):
        world.tick(Button.MOVE_FORWARD)
        fresh.tick(Button.MOVE_FORWARD)
    assert world.phase is fresh.phase and world.player.hp == fresh.player.hp
    assert (world.boss.x, world.boss.y, world.boss.hp) == (fresh.boss.x, fresh.boss.y, fresh.boss.hp)
    assert np.array_equal(renderer.render_bgr(world), renderer.render_bgr(fresh))


def test_sim_game_reads_fail_while_loading_and_reset_fight_recovers():
    game = SimGame(seed=0)
    game.write("HeroHp", 0)
    game.wait_until(game.now() + LIFE.death_screen + 0.5)
    with pytest.raises(GameError, match="loading screen"):
        game.read_state()
    frame = game.capture_frame().rgb
    assert frame.max() < 130  # the loading screen: dark
    state = game.reset_fight(seed=0)
    assert state["HeroHp"] == state["HeroMaxHp"] and game.world.phase is Phase.FIGHT
