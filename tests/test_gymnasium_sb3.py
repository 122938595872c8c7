"""The env and the policies as Gymnasium and Stable-Baselines3 users expect them: the spec's
episode limit, rendering apart from the observation, ``play()`` from the keyboard,
``RecordVideo``, ``PPO.load`` on the fine-tuned model exported as SB3's zip, and ``load_policy`` refusing the wrong env."""

from __future__ import annotations

from pathlib import Path

import cv2
import gymnasium
import numpy as np
import pytest
from conftest import save_untrained

import env  # noqa: F401 - registers EldenIL/Margit-v0
from env.config import EnvConfig
from env.factory import make_env

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

ENV_ID = "EldenIL/Margit-v0"


def wrappers(e: gymnasium.Env) -> list[str]:
    names = []
    while isinstance(e, gymnasium.Wrapper):
        names.append(type(e).__name__)
        e = e.env
    return names


def test_the_spec_says_where_episodes_truncate_and_the_env_truncates_there_once():
    e = gymnasium.make(ENV_ID, max_steps=5)
    assert e.spec.max_episode_steps == 5 and "TimeLimit" not in wrappers(e)  # one limit: the env's
    assert gymnasium.make(ENV_ID).spec.max_episode_steps == 900
    e.reset(seed=0)
    ends = [e.step(0)[2:4] for _ in range(5)]
    assert ends == [(False, False)] * 4 + [(False, True)]
    # Gymnasium's own override still works the standard way
    short = gymnasium.make(ENV_ID, max_episode_steps=3)
    short.reset(seed=0)
    assert [short.step(0)[3] for _ in range(3)] == [False, False, True] and short.spec.max_episode_steps == 3


def test_render_is_off_by_default_and_its_size_does_not_follow_the_observation():
    e = gymnasium.make(ENV_ID)
    e.reset(seed=0)
    assert e.render_mode is None and e.render() is None
    e = gymnasium.make(ENV_ID, render_mode="rgb_array")
    obs, _ = e.reset(seed=0)
    assert obs["frame"].shape == (84, 84, 3) and e.render().shape == (360, 640, 3)
    e = gymnasium.make(ENV_ID, render_mode="rgb_array", render_size=[320, 200], frame_size=(64, 48))
    obs, _ = e.reset(seed=0)
    picture = e.render()
    assert obs["frame"].shape == (48, 64, 3) and picture.shape == (200, 320, 3) and picture.dtype == np.uint8
    assert picture.std() > 10  # a drawn arena, not a blank
    with pytest.raises(env.common.errors.ConfigError, match="render_size"):
        make_env(render_size=(8, 8))


def test_gymnasium_play_drives_the_env_from_the_profiles_keys(monkeypatch: pytest.MonkeyPatch):
    """``gymnasium.utils.play.play`` with no keys_to_action of ours, headless (SDL's dummy
    video driver): W + left shift is roll_forward, W alone move_forward, nothing the idle noop."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    import pygame
    from gymnasium.utils.play import play

    e = gymnasium.make(ENV_ID, render_mode="rgb_array")
    table = e.unwrapped.actions
    taken: list[int] = []
    script = [
        [pygame.event.Event(pygame.KEYDOWN, key=pygame.K_w), pygame.event.Event(pygame.KEYDOWN, key=pygame.K_LSHIFT)],
        [pygame.event.Event(pygame.KEYUP, key=pygame.K_LSHIFT)],
        [pygame.event.Event(pygame.QUIT)],
    ]

    def callback(obs_before, obs, action, reward, terminated, truncated, info):
        taken.append(int(action))
        for event in script[len(taken) - 1]:
            pygame.event.post(event)

    play(e, fps=1000, callback=callback, noop=table.idle)
    assert taken == [table.idle, table.index("roll_forward"), table.index("move_forward")]
    keys = e.unwrapped.get_keys_to_action()
    assert keys[(ord("p"),)] == table.index("attack")  # every key is a pygame code


def test_multi_binary_keys_map_to_one_bit_each():
    e = make_env(action_mode="multi_binary")
    keys = e.get_keys_to_action()
    assert all(isinstance(a, np.ndarray) and a.sum() == 1 for a in keys.values())
    assert len(keys) == len(e.actions.bindings)


def test_record_video_writes_an_mp4_at_the_render_size(tmp_path: Path):
    e = gymnasium.wrappers.RecordVideo(
        gymnasium.make(ENV_ID, render_mode="rgb_array", max_steps=10),
        str(tmp_path / "videos"),
        episode_trigger=lambda _: True,
    )
    e.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, _ = e.step(1)
        done = terminated or truncated
    e.close()
    (video,) = (tmp_path / "videos").glob("*.mp4")
    capture = cv2.VideoCapture(str(video))
    size = (capture.get(cv2.CAP_PROP_FRAME_WIDTH), capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    frames = capture.get(cv2.CAP_PROP_FRAME_COUNT)
    capture.release()
    assert size == (640, 360) and frames >= 10  # a picture per step (a container's count is approximate)


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory) -> Path:
    """A tiny real fine-tuning run from an untrained policy: its output folder."""
    from elden_il.params import FinetuneConfig
    from elden_il.training.finetune import finetune

    tmp = tmp_path_factory.mktemp("models")
    config = EnvConfig(profile="sim_margit", action_history=4, max_steps=20)
    save_untrained(tmp / "bc", config)
    settings = FinetuneConfig(
        total_steps=64, num_envs=1, subprocesses=False, n_steps=32, batch_size=32, n_epochs=1, value_warmup_steps=0
    )
    finetune(tmp / "bc", settings, config, tmp / "finetuned")
    return tmp / "finetuned"


def test_ppo_load_reads_the_finetuned_model_exported_as_sb3s_zip(finetuned: Path, tmp_path: Path):
    """SB3 users keep their path: the fine-tuned policy, exported, is the zip ``PPO.load`` reads."""
    import torch
    from stable_baselines3 import PPO

    from elden_il.policies.policy import load_policy
    from elden_il.policies.sb3_zip import export_sb3

    export_sb3(finetuned, tmp_path / "ppo.zip")
    model = PPO.load(tmp_path / "ppo.zip")
    loaded = load_policy(finetuned)
    assert loaded.config == EnvConfig(profile="sim_margit", action_history=4, max_steps=20)
    for a, b in zip(model.policy.state_dict().values(), loaded.policy.state_dict().values()):
        assert torch.equal(a, b)
    with loaded.make_env() as e:  # the matching env, from the policy itself
        loaded.check_env(e)
        obs, _ = e.reset(seed=3)
        assert model.predict(obs, deterministic=True)[0] == loaded.policy.predict(obs, deterministic=True)[0]


def test_load_policy_refuses_another_env_naming_both_configs(finetuned: Path):
    from elden_il.data import DatasetError
    from elden_il.policies.policy import load_policy

    with pytest.raises(DatasetError) as refused:
        load_policy(finetuned / "policy.safetensors", env=gymnasium.make(ENV_ID, action_history=None))
    message = str(refused.value)
    assert "action_history: 4 vs None" in message and "max_steps: 20 vs 900" in message
    assert str(finetuned) in message and "frame_size" not in message


def test_load_policy_reads_a_policy_folder_and_says_what_is_missing(tmp_path: Path):
    from env.common.errors import EldenILError

    from elden_il.policies.policy import load_policy

    config = EnvConfig(profile="sim_margit")
    save_untrained(tmp_path, config)
    (tmp_path / "env_config.json").unlink()
    with pytest.raises(EldenILError, match="env_config.json is missing"):
        load_policy(tmp_path / "policy.safetensors")
    config.save(tmp_path)
    assert load_policy(tmp_path / "policy.json", env=make_env(config)).config == config
    with pytest.raises(EldenILError, match="no policy at"):
        load_policy(tmp_path / "nothing")
