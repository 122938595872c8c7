"""The renderer: frames of any size, same world same pixels, and what a policy must read from
the pixels (wind-up telegraphs and their timing, fighters, HUD) actually being there."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from env.sim.boss import load_boss
from env.sim.moves import PLAYER_ATTACKS, ROLL, PlayerAnim
from env.sim.renderer import (
    BOSS_HURT,
    DEAD,
    FLASK,
    FLOOR,
    FP_BAR,
    GOLD,
    HP_BAR,
    PLAYER,
    PLAYER_HURT,
    PLAYER_IFRAMES,
    SHADOW,
    SLASH,
    SP_BAR,
    TELEGRAPH,
    Renderer,
)
from env.sim.world import Dagger, World

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

MARGIT = load_boss("margit")
BOSS_MOVES_BY_NAME = {m.name: m for m in MARGIT.moves}
BOSS, BOSS_BAR = MARGIT.colour, MARGIT.bar_colour

SMALL, LARGE = (84, 84), (1280, 720)


def world_in_windup(name: str = "cane_swipe", fraction: float = 0.5, seed: int = 0) -> World:
    """A real fight, left to the boss: stopped once it is ``fraction`` into the wind-up of the
    first ``name`` it chooses (World(0) swipes at the player about four seconds in)."""
    world = World(seed)
    for _ in range(3000):
        world.tick()
        move = world.boss.move
        if move is not None and move.name == name:
            if world.boss.move_t >= round(fraction * move.strikes[0].start):
                return world
    pytest.fail(f"the boss never chose {name} within 3000 ticks")


def edited(world: World, **changes: object) -> World:
    """A copy of ``world`` with dotted attributes changed, e.g. ``**{"boss.move": None}``."""
    world = copy.deepcopy(world)
    for path, value in changes.items():
        owner, _, attribute = path.rpartition(".")
        setattr(world if not owner else getattr(world, owner), attribute, value)
    return world


def render(world: World, size: tuple[int, int] = SMALL) -> np.ndarray:
    return Renderer(*size).render_bgr(world)


def to_screen(world: World, x: float, y: float, size: tuple[int, int]) -> tuple[int, int]:
    """The documented camera for landscape frames: the player at half width and 65 % down,
    the camera's heading up, 11 m from the player to the top edge."""
    w, h = size
    ppm = 0.65 * h / 11.0
    c, s = math.cos(world.camera_yaw), math.sin(world.camera_yaw)
    dx, dy = x - world.player.x, y - world.player.y
    return round(w / 2 + (dx * s - dy * c) * ppm), round(0.65 * h - (dx * c + dy * s) * ppm)


def count(img: np.ndarray, colour: tuple[int, int, int]) -> int:
    return int(np.all(img == colour, axis=-1).sum())


def window(img: np.ndarray, centre: tuple[int, int], radius: int) -> np.ndarray:
    x, y = centre
    return img[max(0, y - radius) : y + radius + 1, max(0, x - radius) : x + radius + 1]


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A mask of the pixels that differ."""
    return np.any(a != b, axis=-1)


# ------------------------------------------------------------------------------ frames as such
@pytest.mark.parametrize("size", [(64, 64), SMALL, LARGE, (1920, 1080), (300, 500), (64, 48)])
def test_any_size_gives_a_bgr_uint8_frame_with_everything_in_it(size: tuple[int, int]):
    img = render(world_in_windup(), size)
    assert img.shape == (size[1], size[0], 3) and img.dtype == np.uint8
    for colour in (FLOOR, PLAYER, BOSS, TELEGRAPH, HP_BAR, FP_BAR, SP_BAR, BOSS_BAR):
        assert count(img, colour) > 0, colour


def test_too_small_a_frame_is_refused():
    with pytest.raises(ValueError, match="16x16"):
        Renderer(15, 84)


def test_every_call_returns_a_new_frame():
    renderer, world = Renderer(*SMALL), world_in_windup()
    first = renderer.render_bgr(world)
    kept = first.copy()
    first[:] = 0
    second = renderer.render_bgr(world)
    assert not np.shares_memory(first, second) and np.array_equal(second, kept)


@pytest.mark.parametrize("size", [SMALL, LARGE])
def test_the_same_world_gives_the_same_pixels(size: tuple[int, int]):
    a, b = World(3), World(3)
    for _ in range(200):
        a.tick()
        b.tick()
    assert np.array_equal(Renderer(*size).render_bgr(a), Renderer(*size).render_bgr(b))
    c = edited(b, **{"boss.x": b.boss.x + 0.5})
    assert not np.array_equal(render(a, size), render(c, size))


# -------------------------------------------------------------------------------------- camera
@pytest.mark.parametrize("size", [SMALL, LARGE])
def test_the_chase_camera_keeps_the_player_put_and_moves_the_world(size: tuple[int, int]):
    world = world_in_windup(fraction=0.0)
    world = edited(world, **{"boss.move": None, "player.locked_on": False})
    img = render(world, size)
    assert tuple(img[round(0.65 * size[1]), size[0] // 2]) == PLAYER
    boss = to_screen(world, world.boss.x, world.boss.y, size)
    assert tuple(img[boss[1], boss[0]]) == BOSS

    def boss_centre(w: World) -> np.ndarray:
        ys, xs = np.nonzero(np.all(render(w, size) == BOSS, axis=-1))
        return np.array([xs.mean(), ys.mean()])

    ppm = 0.65 * size[1] / 11.0
    yaw = world.camera_yaw
    back = {"player.x": world.player.x - math.cos(yaw), "player.y": world.player.y - math.sin(yaw)}
    moved = boss_centre(edited(world, **back)) - boss_centre(world)
    assert moved[1] == pytest.approx(-ppm, abs=1.5) and abs(moved[0]) <= 1.5  # 1 m further: up
    turned = boss_centre(edited(world, camera_yaw=yaw + math.pi / 2))
    assert turned[0] > size[0] / 2 + ppm and abs(turned[1] - 0.65 * size[1]) < ppm  # to the right


# ---------------------------------------------------------------------------------- telegraphs
@pytest.mark.parametrize("size", [SMALL, LARGE])
def test_a_windup_is_drawn_ahead_of_the_boss_and_nowhere_behind(size: tuple[int, int]):
    world = world_in_windup("cane_swipe", 0.5)
    diff = changed(render(world, size), render(edited(world, **{"boss.move": None}), size))
    b = world.boss  # half-way, the fill has grown over 2 m of the 3.3 m swipe: look at 1.6 m
    aside = b.angle + math.pi / 4  # off the line to the player, who is drawn alike in both
    ahead = to_screen(world, b.x + 1.6 * math.cos(aside), b.y + 1.6 * math.sin(aside), size)
    behind = to_screen(world, b.x - 2.5 * math.cos(b.angle), b.y - 2.5 * math.sin(b.angle), size)
    r = max(2, size[1] // 40)
    assert window(diff, ahead, r).mean() > 0.9
    assert not window(diff, behind, r).any()
    assert diff.sum() > 0.005 * diff.size


@pytest.mark.parametrize("size", [SMALL, LARGE])
def test_the_telegraph_grows_with_the_windup_and_turns_red_when_the_blow_lands(size):
    world = world_in_windup("cane_swipe", 0.1)
    start = world.boss.move.strikes[0].start
    plain = render(edited(world, **{"boss.move": None}), size).astype(np.int32)

    def strength(move_t: int) -> int:
        img = render(edited(world, **{"boss.move_t": move_t}), size)
        return int(np.abs(img.astype(np.int32) - plain).sum())

    strengths = [strength(round(f * start)) for f in (0.0, 0.3, 0.6, 0.9)]
    assert strengths == sorted(strengths) and strengths[-1] > 2 * strengths[0]
    active = render(edited(world, **{"boss.move_t": start}), size)
    assert count(active, (0, 0, 255)) > 0.01 * size[0] * size[1]
    assert count(render(edited(world, **{"boss.move_t": start - 1}), size), (0, 0, 255)) == 0


@pytest.mark.parametrize("size", [SMALL, LARGE])
def test_a_low_sweep_is_told_apart_from_an_ordinary_blow_by_colour(size: tuple[int, int]):
    world = world_in_windup("cane_swipe", 0.6)
    plain = render(edited(world, **{"boss.move": None}), size)

    def blue_and_orange(name: str) -> tuple[int, int]:
        img = render(edited(world, **{"boss.move": BOSS_MOVES_BY_NAME[name]}), size)
        drawn = img[changed(img, plain)].astype(np.int32)
        blue, red = drawn[:, 0], drawn[:, 2]
        return int((blue > red + 60).sum()), int((red > blue + 60).sum())

    cyan, orange = blue_and_orange("low_sweep")
    assert cyan > 20 * max(1, orange)
    cyan, orange = blue_and_orange("cane_swipe")
    assert orange > 20 * max(1, cyan)


def test_a_dagger_volley_windup_and_the_daggers_in_flight_are_gold():
    world = world_in_windup("cane_swipe", 0.0)
    world = edited(world, **{"boss.move": None})

    def gold(img: np.ndarray) -> int:
        return int(((img[..., 2] > 200) & (img[..., 1] > 150) & (img[..., 0] < 120)).sum())

    assert gold(render(world)) == 0
    volley = BOSS_MOVES_BY_NAME["dagger_volley"]
    throwing = edited(world, **{"boss.move": volley, "boss.move_t": volley.strikes[0].start - 5})
    assert gold(render(throwing)) >= 6
    right = world.camera_yaw - math.pi / 2  # a dagger 2.5 m to the player's right, flying ahead
    x, y = world.player.x + 2.5 * math.cos(right), world.player.y + 2.5 * math.sin(right)
    dx, dy = 0.25 * math.cos(world.camera_yaw), 0.25 * math.sin(world.camera_yaw)
    flying = edited(world, daggers=[Dagger(x, y, dx, dy, 3.0, 200)])
    assert gold(window(render(flying), to_screen(world, x, y, SMALL), 3)) >= 3


# ------------------------------------------------------------------------------------ fighters
def test_the_fighters_states_show():
    world = edited(world_in_windup("cane_swipe", 0.0), **{"boss.move": None})
    player = to_screen(world, world.player.x, world.player.y, LARGE)
    boss = to_screen(world, world.boss.x, world.boss.y, LARGE)

    def at(w: World, where: tuple[int, int], radius: int = 4) -> np.ndarray:
        return window(render(w, LARGE), where, radius)

    assert count(at(world, player), PLAYER) > 0 and count(at(world, player), PLAYER_HURT) == 0
    assert count(at(edited(world, **{"player.hit_flash": 4}), player), PLAYER_HURT) > 0
    assert count(at(edited(world, **{"player.hp": 0}), player), DEAD) > 0
    rolling = copy.deepcopy(world)
    rolling.player.start(ROLL.anim, ROLL.length, ROLL)
    rolling.player.anim_t = ROLL.iframe_start
    assert count(at(rolling, player), PLAYER_IFRAMES) > 0
    assert count(at(edited(world, **{"boss.hit_flash": 4}), boss), BOSS_HURT) > 0
    aura = round(1.6 * 0.65 * LARGE[1] / 11.0)  # 1.6 m around the boss's centre
    assert count(at(world, boss, aura), GOLD) == 0
    assert count(at(edited(world, **{"boss.phase": 2}), boss, aura), GOLD) > 0


def test_the_lock_on_marker_sits_on_the_boss():
    world = edited(world_in_windup("cane_swipe", 0.0), **{"boss.move": None})
    unlocked = edited(world, **{"player.locked_on": False})
    diff = changed(render(world, LARGE), render(unlocked, LARGE))
    boss = to_screen(world, world.boss.x, world.boss.y, LARGE)
    assert diff.any() and window(diff, boss, 12).sum() == diff.sum()


def test_the_players_blade_shows_only_while_it_can_hit():
    world = world_in_windup("cane_swipe", 0.0)
    world = edited(world, **{"boss.move": None, "player.locked_on": False})  # no white marker
    attack = PLAYER_ATTACKS[PlayerAnim.LIGHT_ATTACK]
    world.player.start(attack.anim, attack.length, attack)
    slashes = []
    for t in (0, attack.hit_start, attack.hit_start + attack.hit_ticks):
        slashes.append(count(render(edited(world, **{"player.anim_t": t}), LARGE), SLASH))
    assert slashes[1] > 100 and slashes[0] == slashes[2] == 0


def test_a_jump_lifts_the_player_over_a_shadow_and_a_leap_lifts_the_boss():
    world = edited(world_in_windup("cane_swipe", 0.0), **{"boss.move": None})
    grounded = render(world, LARGE)
    jumping = render(edited(world, **{"player.z": 0.6}), LARGE)
    assert count(jumping, SHADOW) > count(grounded, SHADOW) + 50
    assert count(jumping, PLAYER) > count(grounded, PLAYER)  # nearer the camera: larger
    leap = BOSS_MOVES_BY_NAME["leaping_strike"]
    mid_air = edited(world, **{"boss.move": leap, "boss.move_t": leap.travel_start + 10})
    assert count(render(mid_air, LARGE), SHADOW) > count(grounded, SHADOW) + 200


# ----------------------------------------------------------------------------------------- HUD
@pytest.mark.parametrize("size", [SMALL, LARGE])
def test_the_hud_bars_follow_the_numbers(size: tuple[int, int]):
    w, h = size
    world = world_in_windup("cane_swipe", 0.5)
    top_left = (slice(0, h // 4), slice(0, w // 2))
    bottom = (slice(3 * h // 4, h), slice(0, w))
    for attribute, colour in (("hp", HP_BAR), ("fp", FP_BAR), ("sp", SP_BAR), ("flasks", FLASK)):
        full = count(render(world, size)[top_left], colour)
        lower = count(render(edited(world, **{f"player.{attribute}": 1}), size)[top_left], colour)
        assert full > 0 and lower < full / 2, attribute
    assert 2 <= np.all(render(world, size)[:, w // 20] == HP_BAR, axis=-1).sum()  # >= 2 px tall
    full = count(render(world, size)[bottom], BOSS_BAR)
    quarter = edited(world, **{"boss.hp": world.boss.max_hp // 4})
    hurt = count(render(quarter, size)[bottom], BOSS_BAR)
    assert full > 0 and hurt == pytest.approx(full / 4, rel=0.2)
