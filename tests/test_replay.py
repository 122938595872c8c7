"""The history rule holds end to end: recorded fights, replayed through the live env, give every
training batch bit for bit.

The autopilot's fights are recorded lock-step, built into a dataset for an env with a frame
stack and an action history, and loaded as BC loads them. Each episode is then replayed in a
fresh env from its own fight seed with the dataset's actions: at every step, the env's
observation must equal ``Demonstrations.batch`` at that step, key by key, byte for byte. A
padding, stacking or preprocessing rule that differs between the env and the dataset path (the
idle action, the first frame, a crop, a resize) fails here.

Each episode keeps its picture at a master size, losslessly (``--video-codec lossless``), and the
dataset's frames are cropped and resized from the decoded video by the env's ``FrameSpec``; the
env, built for the dataset, draws that master picture and crops and resizes it the same way. One
case crops and scales a 12x10 frame down from it, as from a game's 1920x1080 capture; another
builds a dataset of another size and crop from recordings made for the first, without recording
again: a frame cropped or resized otherwise on the way to the dataset differs from the live one.

The discrete case observes the flask charges too (``observe_flasks``), read from the same states.

The profile is the simulator's with its idle action moved to the end of the table, so a rule that
pads with action 0 instead of the table's idle action cannot pass by luck.

In ``multi_binary`` a set bit holds its key for the whole step, so a recorded tap (a roll) is
replayed as a hold and the fights part at the first roll: that mode is checked over the first
steps, where every observation still carries padding (the stack's first frame, idle actions).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from env.config import EnvConfig
from env.factory import make_env
from env.profile import PROFILES_DIR, load_profile

from capture.build_dataset import build_dataset
from capture.record import RecordSettings, record

from elden_il.data import load_demonstrations

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

IDLE = '[[discrete_actions]]\nname = "idle"\n'


def idle_last_profile(folder: Path) -> str:
    """The simulator's profile with the idle action last in its discrete table."""
    shutil.copytree(PROFILES_DIR / "sim_margit", folder)
    toml = folder / "profile.toml"
    text = toml.read_text()
    assert IDLE in text
    toml.write_text(text.replace(IDLE, "") + "\n" + IDLE)
    return str(folder)


CASES = {
    "discrete": dict(action_mode="discrete", observe_flasks=True),
    "multi_binary": dict(action_mode="multi_binary"),
    "cropped-and-downscaled": dict(action_mode="discrete", frame_size=(12, 10), frame_crop=(0.0, 0.25, 1.0, 1.0)),
}
REBUILT = dict(frame_size=(48, 32), frame_crop=(0.1, 0.0, 0.9, 0.8))
"""The frame the last case's dataset is built at, from recordings made for the default frame."""
MASTER = (96, 96)
"""The picture the fights are recorded at: small, for a quick test, larger than every frame."""


@pytest.mark.slow
@pytest.mark.parametrize("case", [*CASES, "rebuilt-at-another-size"])
def test_every_training_batch_is_what_the_env_shows_when_the_recording_is_replayed(tmp_path: Path, case: str):
    profile = idle_last_profile(tmp_path / "profile")
    recorded_for = EnvConfig(profile=profile, frame_stack=3, action_history=4, **CASES.get(case, {}))
    config = recorded_for.replace(**REBUILT) if case == "rebuilt-at-another-size" else recorded_for
    action_mode = config.action_mode
    assert action_mode != "discrete" or config.actions(load_profile(profile)).idle == 12
    record(
        RecordSettings(
            env=recorded_for,
            backend="sim",
            autopilot=True,
            max_episodes=2,
            max_episode_seconds=20,
            seed=5,
            out=tmp_path / "raw",
            master_size=MASTER,
            video_codec="lossless",
        )
    )
    build_dataset(tmp_path / "raw", "test/replay-v0", config, root=tmp_path / "minari")
    demos = load_demonstrations("test/replay-v0", tmp_path / "minari")
    assert demos.config == config.replace(capture_size=MASTER) and demos.source_episodes == 2

    padded_steps = max(config.frame_stack, config.action_history) + 1
    for episode in range(demos.source_episodes):
        rows = np.flatnonzero(demos.episode == episode)
        if action_mode == "multi_binary":
            rows = rows[:padded_steps]
        assert len(rows) >= padded_steps
        env = make_env(demos.config.replace(step_timing="exact"))  # each step as the lock-step recording's
        try:
            obs, _ = env.reset(options={"fight_seed": 5 + episode})
            captured = env.game.capture_frame().rgb.shape  # the premise: the master picture, cut and scaled down
            assert captured[:2] == MASTER[::-1] and captured[0] > config.frame_size[1], captured
            for step, row in enumerate(rows):
                expected = demos.batch(np.array([row]))
                assert set(expected) == set(obs)
                for key, value in expected.items():
                    got = np.asarray(obs[key])
                    assert got.dtype == value.dtype or key.endswith("animation"), (key, got.dtype, value.dtype)
                    assert np.array_equal(got, value[0]), f"episode {episode} step {step}: {key} differs"
                obs, *_ = env.step(demos.actions[row])
        finally:
            env.close()


def test_the_history_rule_pads_with_the_first_frame_and_the_idle_action(tmp_path: Path):
    """The rule itself, written out as lists (the replay above holds the env and the dataset to
    one function, so it cannot see that function being wrong): the stack is the last 3 frames,
    padded with the first; the history the last 3 actions, padded with idle (index 12 here)."""
    config = EnvConfig(profile=idle_last_profile(tmp_path / "profile"), frame_stack=3, action_history=3)
    env = make_env(config)
    try:
        obs, _ = env.reset(seed=0)
        frames, taken = [obs["frame"]], []
        for action in (None, 1, 9, 4, 0):
            if action is not None:
                obs, *_ = env.step(action)
                frames.append(obs["frame"])
                taken.append(action)
            assert list(obs["action_history"]) == ([12] * 3 + taken)[-3:]
            assert np.array_equal(obs["frame_stack"], np.stack(([frames[0]] * 2 + frames)[-3:]))
    finally:
        env.close()
