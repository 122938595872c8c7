"""The simulator's world: determinism and the mechanics policies depend on."""

from __future__ import annotations

import math
import random

import pytest

from env.sim.boss import load_boss
from env.sim.controls import Button
from env.sim.moves import PlayerAnim
from env.sim.world import World

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

MARGIT = load_boss("margit")
BOSS_MOVES_BY_NAME = {m.name: m for m in MARGIT.moves}
MOVES_BY_PHASE = MARGIT.moves_by_phase


def snapshot(world: World) -> tuple:
    p, b = world.player, world.boss
    return (
        world.tick_count,
        p.x,
        p.y,
        p.z,
        p.angle,
        p.hp,
        p.sp,
        p.fp,
        p.flasks,
        int(p.anim),
        p.anim_t,
        b.x,
        b.y,
        b.angle,
        b.hp,
        b.phase,
        int(b.anim),
        b.move_t,
        tuple((d.x, d.y) for d in world.daggers),
        world.camera_yaw,
    )


def play_random(world: World, seed: int, ticks: int) -> list[tuple]:
    rng = random.Random(seed)
    held = 0
    trace = []
    for i in range(ticks):
        new = rng.getrandbits(13) if i % 7 == 0 else held
        world.tick(new, new & ~held, held & ~new, rng.uniform(-5, 5))
        held = new
        trace.append(snapshot(world))
    return trace


def test_same_seed_same_inputs_give_the_same_fight_bit_for_bit():
    a, b = World(seed=7), World(seed=7)
    assert play_random(a, 1, 3000) == play_random(b, 1, 3000)


def test_restart_reproduces_a_fresh_world():
    fresh = World(seed=3)
    used = World(seed=99)
    play_random(used, 5, 500)
    used.restart(seed=3)
    used.tick_count = 0
    assert play_random(used, 2, 1500) == play_random(fresh, 2, 1500)


def test_different_seeds_give_different_boss_choices():
    a, b = World(seed=1), World(seed=2)
    assert play_random(a, 1, 3000) != play_random(b, 1, 3000)


def advance(world: World, ticks: int, held: int = 0) -> None:
    for _ in range(ticks):
        world.tick(held)


def test_a_dodge_tap_between_two_ticks_is_a_roll():
    world = World()
    world.tick(Button.MOVE_FORWARD, Button.MOVE_FORWARD)
    # pressed and released before the next tick: never held at a tick boundary, still a roll
    world.tick(Button.MOVE_FORWARD, Button.DODGE, Button.DODGE)
    assert world.player.anim == PlayerAnim.ROLL


def test_holding_dodge_sprints_and_releasing_it_late_does_not_roll():
    world = World()
    y0 = world.player.y
    world.tick(Button.MOVE_FORWARD | Button.DODGE, Button.MOVE_FORWARD | Button.DODGE)
    advance(world, 40, Button.MOVE_FORWARD | Button.DODGE)
    assert world.player.anim == PlayerAnim.SPRINT
    sprint_distance = world.player.y - y0
    assert sprint_distance > 40 / 60 * 3.2  # faster than walking
    world.tick(Button.MOVE_FORWARD, 0, Button.DODGE)
    assert world.player.anim != PlayerAnim.ROLL


def test_dodge_iframes_make_the_player_untouchable_and_an_early_dodge_is_hit():
    swipe = BOSS_MOVES_BY_NAME["cane_swipe"]
    strike = swipe.strikes[0]

    def fight(roll_before_strike: int | None) -> int:
        world = World()
        p, b = world.player, world.boss
        p.x, p.y, b.x, b.y, b.angle = 0.0, 0.0, 0.0, 2.5, -math.pi / 2
        b.move, b.move_t, b.anim = swipe, 0, swipe.anim_id
        for t in range(swipe.length):
            if roll_before_strike is not None and t == strike.start - roll_before_strike:
                world.tick(0, Button.DODGE, Button.DODGE)  # a backstep: no direction held
            else:
                world.tick()
            b.x, b.y = 0.0, 2.5  # keep the geometry fixed: only the i-frames can save the player
            p.x, p.y = 0.0, 0.0
        return p.hp

    assert fight(None) < 1100  # standing still gets hit
    assert fight(roll_before_strike=1) == 1100  # i-frames (a backstep's: ticks 1..13) cover the blow
    assert fight(roll_before_strike=40) < 1100  # rolled far too early: hit after the i-frames


def test_a_jump_clears_the_low_sweep_but_standing_still_does_not():
    sweep = BOSS_MOVES_BY_NAME["low_sweep"]
    strike = sweep.strikes[0]

    def fight(jump: bool) -> int:
        world = World()
        p, b = world.player, world.boss
        p.x, p.y, b.x, b.y = 0.0, 0.0, 0.0, 2.0
        b.move, b.move_t, b.anim = sweep, 0, sweep.anim_id
        for t in range(sweep.length):
            jumping = jump and t == strike.start - 8
            world.tick(0, Button.JUMP if jumping else 0)
        return p.hp

    assert fight(jump=False) < 1100
    assert fight(jump=True) == 1100


def test_the_boss_enters_its_second_phase_below_half_hp():
    world = World()
    world.boss.hp = world.boss.max_hp // 2 - 1
    world.player.x, world.player.y = 0.0, -9.0  # far away, so the boss is between moves soon
    advance(world, 400)
    assert world.boss.phase == 2
    assert {m.name for m in MOVES_BY_PHASE[2]} >= {"swipe_combo", "holy_hammer"}
    assert MOVES_BY_PHASE[2][0].windup < MOVES_BY_PHASE[1][0].windup


def test_healing_uses_a_flask_and_restores_hp():
    world = World()
    world.player.hp = 300
    world.player.x, world.player.y = 0.0, -9.0
    world.boss.x, world.boss.y = 0.0, 9.0
    world.tick(0, Button.USE_ITEM)
    advance(world, 60)
    assert world.player.flasks == 2
    assert world.player.hp == 700


def test_without_stamina_the_player_cannot_roll():
    world = World()
    world.player.sp = 0.0
    world.player.regen_wait = 100
    world.tick(Button.MOVE_FORWARD, Button.MOVE_FORWARD | Button.DODGE, Button.DODGE)
    assert world.player.anim != PlayerAnim.ROLL


def test_fighters_stay_inside_the_arena_and_outside_each_other():
    world = World()
    world.player.locked_on = False
    advance(world, 600, Button.MOVE_BACK)
    assert math.hypot(world.player.x, world.player.y) <= 10.0
    world = World()
    advance(world, 300, Button.MOVE_FORWARD)
    assert world.distance() >= 1.3 - 1e-9


@pytest.mark.parametrize("seed", [0, 1])
def test_an_idle_player_is_killed(seed: int):
    world = World(seed)
    for _ in range(60 * 60):  # a minute at most; after a death the game moves on (test_lifecycle)
        world.tick()
        if world.player.dead:
            break
    assert world.player.dead and not world.boss.dead
