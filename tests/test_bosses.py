"""Every boss is data: the simulator fights Margit, Godrick and the Tree Sentinel from their files,
each through the env in-process and over a real-server-mode simulator server, the scripted
expert plays each from its move table, and a fourth boss needs only a fourth file."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from env.common.errors import ConfigError
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.factory import make_env
from env.profile import load_profile
from env.sim import boss as boss_data
from env.sim.boss import BOSSES_DIR, available_bosses, boss_by_npc_id, load_boss, read_boss
from env.sim.controls import Button
from env.sim.game import SimGame
from env.sim.renderer import Renderer
from env.sim.world import NOTICE_RANGE, Phase, World

from tests.conftest import REAL_SERVER_TEST_ARGS

BOSSES = ("margit", "godrick", "tree_sentinel")


def test_the_simulator_fights_three_bosses_each_with_its_own_ids_and_a_profile():
    assert tuple(sorted(BOSSES)) == tuple(available_bosses())
    specs = [load_boss(key) for key in BOSSES]
    assert len({b.npc_id for b in specs}) == len({b.npc_param_id for b in specs}) == len({b.name for b in specs}) == 3
    assert [b.max_hp for b in specs] == [4174, 6080, 2900]
    for spec in specs:
        profile = load_profile(f"sim_{spec.key}")
        assert profile.boss == spec.key and profile.boss_name == spec.name
        # one observation for every boss: each profile's vocabulary is its boss's ids, and all are alike
        assert profile.boss_animations == tuple(spec.animation_ids) == tuple(specs[0].animation_ids)
        assert boss_by_npc_id(spec.npc_id) is spec


@pytest.mark.parametrize("key", BOSSES)
def test_the_env_takes_each_boss_by_name_in_process_and_passes_the_checker(key: str):
    game = SimGame(f"sim_{key}", seed=3)
    env = EldenRingEnv(game_interface=game, boss_name=key)
    check_env(env, skip_render_check=True)
    _, info = env.reset(seed=5)
    state = game.read_state(["NpcId", "NpcParamId", "NpcMaxHp"])
    spec = load_boss(key)
    assert (state["NpcId"], state["NpcParamId"], state["NpcMaxHp"]) == (spec.npc_id, spec.npc_param_id, spec.max_hp)
    env.close()


def test_a_boss_name_that_is_not_the_profiles_boss_is_refused():
    with pytest.raises(ConfigError, match="godrick"):
        EldenRingEnv(game_interface=SimGame("sim_margit"), boss_name="godrick")


@pytest.mark.parametrize("key", ["godrick", "tree_sentinel"])
def test_each_new_boss_over_a_real_server_mode_simulator_server(key: str):
    env = make_env(
        EnvConfig(frame_size=(64, 64)),  # no profile: boss_name chooses it
        backend="sim_server",
        server_args=REAL_SERVER_TEST_ARGS,  # the server started plays the client's profile, and so its boss
        boss_name=key,
    )
    try:
        sb3_check_env(env, warn=True)  # gymnasium's own checker asks two runs of a step to match: a live game's do not
        obs, _ = env.reset(seed=1)
        assert obs["boss_hp"].item() == pytest.approx(1.0)
        spec = load_boss(key)
        state = env.unwrapped.game.read_state(["NpcId", "NpcParamId"])
        assert (state["NpcId"], state["NpcParamId"]) == (spec.npc_id, spec.npc_param_id)
    finally:
        env.close()


def test_a_ring_hits_a_player_as_it_passes_and_a_jump_clears_it():
    godrick = load_boss("godrick")
    stomp = next(m for m in godrick.moves if m.name == "stomp")
    ring = stomp.strikes[0].hitbox

    def hit_tick(distance: float, jump_at: int | None = None) -> int | None:
        world = World(boss=godrick)
        p, b = world.player, world.boss
        b.x, b.y, p.x, p.y = 0.0, 0.0, 0.0, -distance
        b.move, b.move_t, b.anim = stomp, 0, stomp.anim_id
        for t in range(stomp.strikes[0].end):
            jump = jump_at is not None and t == jump_at
            world.tick(Button.JUMP if jump else 0, Button.JUMP if jump else 0, 0)
            p.x, p.y = 0.0, -distance  # the ring travels; the player stands
            if p.hp < p.max_hp:
                return t
        return None

    near, far = hit_tick(2.0), hit_tick(5.0)
    assert near is not None and far is not None and far > near  # the wave reaches the far player later
    arrives = stomp.strikes[0].start + round(60 * ring.travel_seconds(5.0 - ring.half_width - 0.4))
    assert abs(far - arrives) <= 2
    assert hit_tick(5.0, jump_at=far - 10) is None  # in the air as it passes


def test_a_sweep_reaches_the_players_side_later_than_the_middle():
    breath = next(m for m in load_boss("godrick").moves if m.name == "fire_breath")
    strike = breath.strikes[0]
    sweep = strike.hitbox
    ahead = [sweep.hits(0, 0, 0.0, 5.0, 0.0, 0.0, 0.4, 0.0, s / 10) for s in range(11)]
    left = [sweep.hits(0, 0, 0.0, 5.0 * math.cos(0.7), 5.0 * math.sin(0.7), 0.0, 0.4, 0.0, s / 10) for s in range(11)]
    assert ahead.index(True) < left.index(True) and not ahead[0] and not left[0]


def test_a_whirlwind_draws_a_standing_player_in_and_a_charge_runs_on_past_the_player():
    godrick, sentinel = load_boss("godrick"), load_boss("tree_sentinel")
    world = World(boss=godrick)
    whirlwind = next(m for m in godrick.moves if m.name == "whirlwind")
    b, p = world.boss, world.player
    b.x, b.y, p.x, p.y = 0.0, 0.0, 0.0, -6.0
    b.move, b.move_t = whirlwind, 0
    for _ in range(whirlwind.windup - 1):
        world.tick()
    assert world.distance() < 6.0 - 0.9 * whirlwind.pull * (whirlwind.windup - 1) / 60

    world = World(boss=sentinel)
    charge = next(m for m in sentinel.moves if m.name == "charge")
    b, p = world.boss, world.player
    b.x, b.y, p.x, p.y = 0.0, 10.0, 0.0, -2.0
    b.move, b.move_t, b.angle = charge, charge.travel_start - 1, -math.pi / 2
    p.iframes_until = 10**6  # untouchable: only where the charge ends is measured
    for _ in range(charge.travel_ticks + 1):
        world.tick()
    assert b.y < p.y  # it ran on through where the player stood


def test_the_open_field_has_no_fog_wall_and_a_dead_player_walks_back_into_the_bosss_sight():
    world = World(boss=load_boss("tree_sentinel"))
    p = world.player
    p.x, p.y = 0.0, -25.0  # beyond a walled arena's edge, within the field
    world.tick(Button.MOVE_BACK)
    assert world.distance() > 20.0 and world.phase is Phase.FIGHT
    world.respawn()
    assert world.phase is Phase.OUTSIDE and (p.x, p.y) == world.spec.arena.grace and world.distance() > NOTICE_RANGE
    world.tick(0, Button.LOCK_ON)  # in lock-on range
    assert world.phase is Phase.OUTSIDE and world.player.locked_on and world.focus is world.boss  # no sentry first
    while world.phase is Phase.OUTSIDE:
        world.tick(Button.MOVE_FORWARD)
    assert world.phase is Phase.FIGHT and world.distance() <= NOTICE_RANGE + 0.1
    margit = World()
    margit.respawn()
    margit.tick(Button.LOCK_ON, Button.LOCK_ON)
    assert margit.focus is margit.sentry  # the fog wall hides Margit


def test_each_boss_is_drawn_as_itself():
    frames = {}
    for key in BOSSES:
        world = World(boss=load_boss(key))
        world.player.x, world.player.y = 0.0, 2.0
        frames[key] = Renderer(84, 84).render_bgr(world)
    colours = {key: {tuple(c) for c in frame.reshape(-1, 3)} for key, frame in frames.items()}
    for key in BOSSES:
        assert tuple(load_boss(key).colour) in colours[key]
    assert not np.array_equal(frames["margit"], frames["godrick"])
    wall = (125, 170, 190)  # the fog wall's colour: drawn around an arena, never on the open field
    assert wall in colours["margit"] and wall not in colours["tree_sentinel"]


@pytest.mark.parametrize("key", BOSSES)
def test_the_scripted_expert_fights_each_boss_from_its_data_and_beats_random_play(key: str):
    from elden_il.duel import duel

    config = EnvConfig(profile=f"sim_{key}", frame_size=(32, 32))
    seeds = list(range(1_000_000, 1_000_004))
    expert, random = duel("expert", seeds, config), duel("random", seeds, config)
    assert sum(f.win for f in expert) >= 2 and sum(f.win for f in random) == 0
    assert min(f.boss_damage_dealt for f in expert) > max(f.boss_damage_dealt for f in random)


def test_a_fourth_boss_is_a_file_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A boss written as data only (Margit's file with another name, ids, HP, body and one move
    more) is fought by the world, drawn, and recognised by the expert, with no code changed."""
    for path in BOSSES_DIR.glob("*.toml"):
        shutil.copy(path, tmp_path)
    text = (BOSSES_DIR / "margit.toml").read_text()
    text = text.replace('name = "Margit, the Fell Omen"', 'name = "Morgott, the Omen King"')
    text = text.replace("npc_id = 213000", "npc_id = 213001").replace(
        "npc_param_id = 21300014", "npc_param_id = 21300534"
    )
    text = text.replace("max_hp = 4174", "max_hp = 10399").replace("radius = 0.9 ", "radius = 1.0 ")
    text += (
        '\n[[moves]]\nname = "holy_spear"\nanim = 3080\nwindup = 0.8\nrecovery = 1.0\nrange = [5.0, 15.0]\n'
        'weight = 1.0\nstrikes = [{ at = 0.8, active = 0.6, damage = 300, hitbox = { shape = "ring", reach = 6.0, '
        "speed = 10.0, half_width = 0.5 } }]\n"
    )
    (tmp_path / "morgott.toml").write_text(text)
    monkeypatch.setattr(boss_data, "BOSSES_DIR", tmp_path)
    load_boss.cache_clear()
    boss_by_npc_id.cache_clear()
    try:
        morgott = load_boss("morgott")
        assert "morgott" in available_bosses() and boss_by_npc_id(213001) is morgott
        world = World(seed=1, boss=morgott)
        for _ in range(600):
            world.tick(Button.ATTACK if world.tick_count % 30 == 0 else 0)
        assert world.boss.max_hp == 10399 and Renderer(84, 84).render_bgr(world).any()
    finally:
        load_boss.cache_clear()
        boss_by_npc_id.cache_clear()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("max_hp = 4174", "max_hp = 4174\nmax_pH = 3"), "unknown key.*max_pH"),
        (('shape = "circle", reach = 2.1', 'shape = "blob", reach = 2.1'), "shape 'blob' is not one of"),
        (("windup = 0.60\n", "windup = 0.50\n"), r"moves\[0\].*first at its windup"),
        (("npc_id = 213000", 'npc_id = "213000"'), "npc_id = '213000' must be an integer"),
        (("colour = [40, 40, 155]", "colour = [40, 40]"), "colour.*must be a colour"),
    ],
)
def test_a_malformed_boss_file_names_the_file_the_key_and_the_fix(tmp_path: Path, change, message):
    path = tmp_path / "broken.toml"
    path.write_text((BOSSES_DIR / "margit.toml").read_text().replace(*change, 1))
    with pytest.raises(ConfigError, match=message) as raised:
        read_boss(path)
    assert str(path) in str(raised.value)


def test_an_unknown_boss_names_the_bosses_there_are():
    with pytest.raises(ConfigError, match="no boss 'malenia': it fights godrick, margit, tree_sentinel"):
        load_boss("malenia")
