"""EldenRingEnv on the in-process simulator: its spaces and episode rules, action semantics, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import env  # noqa: F401 - registers EldenIL/Margit-v0
from env.common.errors import ConfigError, GameError
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.factory import make_env
from env.profile import load_profile
from env.sim.controls import Button
from env.sim.game import SimGame
from env.sim.moves import PlayerAnim
from env.wrappers import BossHpCurriculum, RewardBonus, RewardOverride

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds


# What the checkers say of a design they do not judge: no gymnasium spec here (the env is made
# directly, as the factory makes it), and a multi-binary action history of one row a step
@pytest.mark.filterwarnings("ignore:.*Not able to test alternative render modes:UserWarning")
@pytest.mark.filterwarnings("ignore:Your observation action_history has an unconventional shape:UserWarning")
@pytest.mark.parametrize("mode", ["discrete", "multi_binary"])
def test_gymnasium_and_sb3_env_checkers_pass(mode: str):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    check_env(
        make_env(action_mode=mode, frame_stack=4, action_history=4, observe_flasks=True, render_mode="rgb_array"),
        skip_render_check=False,
    )
    sb3_check_env(make_env(action_mode=mode), warn=True)


def test_spaces_are_exactly_the_prds_and_exist_before_reset():
    e = make_env(frame_stack=4, action_history=4)
    space = e.observation_space
    assert space["frame"] == gym.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    for key in ("player_hp", "boss_hp"):
        assert space[key] == gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    assert space["distance"] == gym.spaces.Box(0.0, 20.0, (1,), np.float32)
    assert space["player_animation"] == gym.spaces.Discrete(100)
    assert space["boss_animation"] == gym.spaces.Discrete(200)
    assert space["frame_stack"] == gym.spaces.Box(0, 255, (4, 84, 84, 3), np.uint8)
    assert space["action_history"] == gym.spaces.Box(0, 12, (4,), np.int32)
    assert e.action_space == gym.spaces.Discrete(13)
    obs, info = e.reset(seed=0)
    assert space.contains(obs)
    assert set(info) >= {"episode_length", "episode_reward", "win", "boss_damage_dealt", "player_damage_taken"}


def test_registered_with_gymnasium():
    e = gym.make("EldenIL/Margit-v0", frame_size=(64, 48))
    obs, _ = e.reset(seed=1)
    assert obs["frame"].shape == (48, 64, 3)
    e.close()


def test_a_fight_terminates_with_prd_info_and_a_real_reward():
    e = make_env()
    e.reset(seed=3)
    total, steps, terminated, truncated = 0.0, 0, False, False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = e.step(0)  # idle: the boss wins
        total += reward
        steps += 1
    assert terminated and not info["win"] and obs["player_hp"][0] == 0.0
    assert info["episode_length"] == steps and info["episode_reward"] == pytest.approx(total)
    assert info["player_damage_taken"] == pytest.approx(1.0) and total < -5.0


def test_truncation_at_max_steps():
    e = make_env(max_steps=5)
    e.reset(seed=0)
    for _ in range(5):
        *_, terminated, truncated, _ = e.step(0)
    assert truncated and not terminated


class TickSpy:
    """Records the button events the world receives, tick by tick."""

    def __init__(self, game: SimGame) -> None:
        self.events: list[tuple[int, int, int]] = []
        tick = game.world.tick

        def spy(held=0, pressed=0, released=0, mouse_dx=0.0):
            self.events.append((held, pressed, released))
            tick(held, pressed, released, mouse_dx)

        game.world.tick = spy

    def count(self, which: int, button: Button) -> int:
        return sum(bool(e[which] & button) for e in self.events)


@pytest.mark.parametrize("persistence, presses", [(True, 1), (False, 5)])
def test_action_persistence_holds_keys_across_equal_actions(persistence: bool, presses: int):
    game = SimGame()
    e = EldenRingEnv(game, EnvConfig(action_persistence=persistence))
    e.reset(seed=0)
    spy = TickSpy(game)
    forward = e.actions.index("move_forward")
    for _ in range(5):
        e.step(forward)
    e.step(0)
    assert spy.count(1, Button.MOVE_FORWARD) == presses
    assert spy.count(2, Button.MOVE_FORWARD) == presses


def test_a_discrete_roll_is_a_dodge_tap_not_a_sprint():
    game = SimGame()
    e = EldenRingEnv(game)
    e.reset(seed=0)
    seen = []
    spy = TickSpy(game)
    original = game.world.tick

    def watch(*args):
        original(*args)
        seen.append(game.world.player.anim)

    game.world.tick = watch
    e.step(e.actions.index("roll_forward"))
    assert PlayerAnim.ROLL in seen and PlayerAnim.SPRINT not in seen
    assert spy.count(1, Button.DODGE) == 1 and spy.count(2, Button.DODGE) == 1


def test_a_lock_step_game_runs_only_within_steps_paused_or_not():
    """Pausing between steps is for a game on its own clock; a lock-step one runs only while a
    step waits, so the env leaves its speed alone and each exact step is its timestep."""
    game = SimGame()
    e = EldenRingEnv(game, EnvConfig(timestep_ms=200, step_timing="exact"), pause_between_steps=True)
    e.reset(seed=0)
    start = game.world.tick_count
    for _ in range(3):
        e.step(0)
    assert game.world.tick_count - start == 36 and game.world.speed == 1.0 and not e.pause_between_steps


def test_invalid_actions_are_refused_clearly():
    e = make_env()
    e.reset(seed=0)
    with pytest.raises(ValueError, match="invalid action 13"):
        e.step(13)
    e2 = make_env(action_mode="multi_binary")
    e2.reset(seed=0)
    with pytest.raises(ValueError, match="invalid action"):
        e2.step([1, 0])


def test_bad_constructor_arguments_are_refused_clearly():
    with pytest.raises(ConfigError, match="action_mode = 'continuous': must be one of discrete, multi_binary"):
        make_env(action_mode="continuous")
    with pytest.raises(ConfigError, match="backend 'sim' has no profile for boss 'malenia'"):
        make_env(boss_name="malenia")
    with pytest.raises(ConfigError, match="boss_name 'malenia' does not match"):
        make_env(profile="sim_margit", boss_name="malenia")
    with pytest.raises(ConfigError, match="unknown backend 'xbox'"):
        make_env(backend="xbox")
    with pytest.raises(ConfigError, match="max_steps = True"):
        make_env(max_steps=True)
    with pytest.raises(ConfigError, match="the config is for profile 'eldenring_margit', the game plays 'sim_margit'"):
        EldenRingEnv(SimGame(), EnvConfig(profile="eldenring_margit"))
    with pytest.raises(TypeError):  # the config is one value, not fields one by one
        EldenRingEnv(SimGame(), max_steps=10)


def test_a_profile_asking_for_attributes_the_game_lacks_fails_at_construction(tmp_path):
    import shutil
    from pathlib import Path

    target = tmp_path / "p"
    shutil.copytree(Path(env.__file__).parent / "profiles/sim_margit", target)
    (target / "siphon.toml").write_text(
        (target / "siphon.toml").read_text() + '\n[attributes.HeroLuck]\ntype = "int"\n'
    )
    with pytest.raises(GameError, match="HeroLuck"):
        SimGame(str(target))


def test_keys_are_released_when_the_env_closes_or_a_step_fails():
    game = SimGame()
    e = EldenRingEnv(game)
    e.reset(seed=0)
    e.step(e.actions.index("move_forward"))
    assert game._latch.held_keys() == {"W"}
    e.close()
    assert game._latch.held_keys() == set()

    e = EldenRingEnv(game)
    e.reset(seed=0)
    e.step(e.actions.index("move_forward"))

    def broken(*a, **k):
        raise GameError("the game went away")

    game.observe = broken
    with pytest.raises(GameError):
        e.step(e.actions.index("move_forward"))
    assert game._latch.held_keys() == set()


def test_flask_charges_are_observed_only_when_asked_and_count_down_as_the_player_drinks():
    assert "flasks" not in make_env().observation_space.spaces  # the PRD's spaces by default
    e = make_env(observe_flasks=True)
    assert e.observation_space["flasks"] == gym.spaces.Box(0.0, 14.0, (1,), np.float32)
    heal = [a.name for a in e.unwrapped.profile.discrete_actions].index("heal")
    obs, _ = e.reset(seed=0)
    assert list(obs["flasks"]) == [3.0]
    seen = []
    for action in (heal, 0, 0, 0, 0, 0, heal, 0, 0, 0, 0, 0):
        obs, *_ = e.step(action)
        assert e.observation_space.contains(obs)
        seen.append(float(obs["flasks"][0]))
    assert seen[0] == 2.0 and seen[-1] == 1.0, seen  # a flask is spent as the drink starts
    assert EnvConfig.from_dict(EnvConfig(observe_flasks=True).to_dict()).observe_flasks
    assert "observe_flasks" not in EnvConfig().to_dict()  # descriptions without it read as before it existed


def test_observing_flasks_where_the_profile_cannot_read_them_is_refused_with_the_fix():
    config = EnvConfig(profile="eldenring_margit", observe_flasks=True)
    with pytest.raises(
        ConfigError, match="observe_flasks needs the profile to read HeroFlaskCharges.*set observe_flasks to false"
    ):
        config.spaces(load_profile("eldenring_margit"))


def test_frame_stack_and_action_history_follow_the_episode():
    e = make_env(frame_stack=3, action_history=3)
    obs, _ = e.reset(seed=0)
    assert (obs["frame_stack"] == obs["frame"]).all() and list(obs["action_history"]) == [0, 0, 0]
    for a in (1, 9):
        obs, *_ = e.step(a)
    assert list(obs["action_history"]) == [0, 1, 9]
    assert (obs["frame_stack"][-1] == obs["frame"]).all()


def test_reward_override_bonus_and_boss_hp_curriculum():
    e = RewardOverride(make_env(), lambda before, after: 1.0)
    e.reset(seed=0)
    assert e.step(0)[1] == 1.0
    plain, bonus = make_env(), RewardBonus(make_env(), lambda before, after: 1.0)
    plain.reset(seed=0), bonus.reset(seed=0)
    assert [bonus.step(9)[1] for _ in range(30)] == [plain.step(9)[1] + 1.0 for _ in range(30)]
    c = BossHpCurriculum(make_env(), levels=(0.25, 1.0), window=1, promote_at=0.0)
    obs, info = c.reset(seed=0)
    assert info["curriculum_level"] == 0 and obs["boss_hp"][0] == pytest.approx(0.25, abs=1e-3)
    terminated = truncated = False
    while not (terminated or truncated):
        *_, terminated, truncated, info = c.step(0)
    obs, info = c.reset(seed=1)
    assert info["curriculum_level"] == 1 and obs["boss_hp"][0] == 1.0


def test_vector_env_over_four_in_process_sims():
    from env.factory import make_vector_env

    envs = make_vector_env(num_envs=4, backend="sim")
    obs, _ = envs.reset(seed=0)
    assert obs["frame"].shape == (4, 84, 84, 3)
    for _ in range(3):
        obs, rewards, *_ = envs.step(np.zeros(4, dtype=np.int64))
    assert rewards.shape == (4,)
    envs.close()


@pytest.mark.slow
def test_sb3_ppo_trains_across_fights():
    """SB3's own PPO and policy on the env as it is: two rollouts and updates, through fights
    that end and reset in between."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger

    model = PPO("MultiInputPolicy", make_env(), n_steps=256, batch_size=64, n_epochs=1, seed=0)
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default leaves a folder in the temp dir
    model.learn(512)
    assert model.num_timesteps >= 512 and model._n_updates == 2
    assert len(model.ep_info_buffer) >= 2  # fights ended (SB3's Monitor counts them) and the env reset


def floored_profile(tmp_path, player: float, boss: float) -> str:
    import shutil
    from pathlib import Path

    target = tmp_path / "floored"
    shutil.copytree(Path(env.__file__).parent / "profiles/sim_margit", target)
    toml = target / "profile.toml"
    toml.write_text(toml.read_text() + f"\n[fight]\nplayer_hp_floor = {player}\nboss_hp_floor = {boss}\n")
    return str(target)


def test_hp_floors_end_the_fight_early_and_nobody_dies_for_real(tmp_path):
    """The real game's rule: an episode ends at a fighter's HP floor, and the env gives the HP
    back at once, so the game never registers a death (or a kill) that no write can undo."""
    e = make_env(profile=floored_profile(tmp_path, player=0.5, boss=0.0))
    e.reset(seed=3)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = e.step(0)  # idle: the boss hits
    world = e.game.world
    assert terminated and not info["win"] and 0 < obs["player_hp"][0] <= 0.5
    assert reward < -5.0 + 0.1  # the death term, at the floor
    assert world.player.hp == world.player.max_hp and not world.player.dead

    e = make_env(profile=floored_profile(tmp_path / "b", player=0.0, boss=0.999))
    e.reset(seed=3)
    terminated = truncated = False
    while not (terminated or truncated):
        *_, terminated, truncated, info = e.step(e.actions.index("attack"))
    assert terminated and info["win"] and info["boss_damage_dealt"] > 0
    assert e.game.world.boss.hp == e.game.world.boss.max_hp

    with pytest.raises(ConfigError, match="fight.player_hp_floor = 1.5 must be a fraction"):
        make_env(profile=floored_profile(tmp_path / "c", player=1.5, boss=0.0))
