"""One picture from recording to evaluation: a dataset knows the window its frames were captured
from (``EnvConfig.capture_size``), and every env trained or evaluated on it shows that picture.

A 1280x720 window scaled down to 84x84 frames the arena otherwise than the simulator drawing
straight at 84x84; a policy trained on one and judged on the other fails without a word. So the
live env over a 1280x720 server, the in-process env rendering at 1280x720, and a dataset recorded
from that server must give the same frame bit for bit, and a live game of another window size
must be refused in one line naming both sizes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import save_untrained

from env.common.errors import ConfigError
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.factory import make_env
from env.game import Game
from env.profile import load_profile
from env.sim.launcher import SimServer
from env.siphon.game import SiphonGame

from capture.build_dataset import BuildError, build_dataset
from capture.drivers import Driver, Hotkeys
from capture.inputs import InputLog
from capture.record import RecordSettings, driver_maker, record

from elden_il.data import load_demonstrations
from elden_il.policies.policy import load_policy

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

WINDOW = (1280, 720)
SEED = 7


def recorded_while_paused(server: SimServer, out: Path) -> None:
    """The recorder, with the autopilot, against ``server`` with its game paused: the fight it
    restarts (fight ``SEED``) stays at its first tick, a game state the in-process env reaches
    exactly by restarting the same fight. Paused as a person pauses it (pysiphon set gameSpeedVal
    float 0) once the recorder has connected: connecting takes a paused game back to real time."""
    settings = RecordSettings(
        env=EnvConfig(profile="sim_margit"),
        backend="siphon",
        host=server.host,
        autopilot=True,
        max_episodes=1,
        max_episode_seconds=0.5,
        seed=SEED,
        out=out,
        video_codec="lossless",
    )
    autopilot = driver_maker(settings)

    def paused_first(game: Game, inputs: InputLog, hotkeys: Hotkeys) -> Driver:
        game.set_speed(0.0)
        return autopilot(game, inputs, hotkeys)

    record(settings, make_driver=paused_first)  # the window's pixels, bit for bit


CLOCKS = ("SimTick", "gameSpeedVal", "gameSpeedFlag")
"""Attributes that say when, not what: the live server's clock has run since it started."""


def trajectory(env: EldenRingEnv, actions: list[int]) -> list[tuple[dict, np.ndarray]]:
    """(game state, observation frame) of fight 11 at its reset and after each of ``actions``;
    the env is closed afterwards. The state holds the ticks run since the reset (``elapsed``)
    where the env reads the clock: two steps can end in the same state a tick apart, and an
    animation's phase, which no attribute shows, then differs in the picture."""
    try:
        obs, _ = env.reset(options={"fight_seed": 11})
        started = env.state.get("SimTick")
        seen = []
        for action in (None, *actions):
            if action is not None:
                obs, *_ = env.step(action)
            state = {k: v for k, v in env.state.items() if k not in CLOCKS}
            if started is not None:
                state["elapsed"] = env.state["SimTick"] - started
            seen.append((state, obs["frame"]))
        return seen
    finally:
        env.close()


@pytest.mark.slow
def test_the_live_env_the_in_process_env_and_a_recording_of_a_1280x720_window_show_the_same_frames(tmp_path: Path):
    actions = [1, 1, 9, 9, 7, 0, 5, 10]
    everything = load_profile("sim_margit").attribute_names
    with SimServer(seed=0, size=WINDOW, log_path=tmp_path / "server.log") as server:
        recorded_while_paused(server, tmp_path / "raw")
        dataset = build_dataset(tmp_path / "raw", "test/picture-v0", EnvConfig(), root=tmp_path / "minari")
        demos = load_demonstrations(dataset.id, tmp_path / "minari")
        config = demos.config
        assert config.capture_size == WINDOW and config.frame_size == (84, 84)
        live = trajectory(
            EldenRingEnv(
                SiphonGame(server.host, "sim_margit"), config, pause_between_steps=True, state_attributes=everything
            ),
            actions,
        )

    # the same fight both sides, each step its timestep (in-process exactly; live to a tick, which a
    # loaded machine can miss: the fights then part, so frames are compared while the game states
    # agree, and the reset, paused throughout, always does)
    exact = config.replace(step_timing="exact")
    in_process = trajectory(make_env(exact, state_attributes=everything), actions)
    straight = trajectory(make_env(exact.replace(capture_size=None)), actions)
    for step, ((live_state, a), (state, b)) in enumerate(zip(live, in_process, strict=True)):
        if live_state != state:
            assert step > 0, "the reset's game state differs: not the same fight"
            break
        assert np.array_equal(a, b), f"step {step}: the in-process frame differs from the live one"
    assert not np.array_equal(live[0][1], straight[0][1])  # the premise: the 84x84 render is another picture

    env = make_env(config)
    try:
        obs, _ = env.reset(options={"fight_seed": SEED})  # the fight the recorder restarted, at its first tick
        for key, value in demos.batch(np.array([0])).items():
            assert np.array_equal(value[0], obs[key]), f"the dataset's {key} differs from the in-process env's"
    finally:
        env.close()


@pytest.mark.slow
def test_a_policy_for_a_1280x720_window_refuses_a_live_window_of_another_size(tmp_path: Path):
    config = EnvConfig(profile="sim_margit", capture_size=WINDOW)
    policy = load_policy(save_untrained(tmp_path, config))
    with SimServer(seed=0, size=(320, 180), log_path=tmp_path / "server.log") as server:
        env = policy.make_env(backend="siphon", host=server.host)
        try:
            with pytest.raises(ConfigError) as refused:
                env.reset(seed=0)
        finally:
            env.close()
    message = str(refused.value)
    assert "\n" not in message, message
    assert "the game's window is 320x180" in message and "captured at 1280x720" in message, message
    assert "set the game window to 1280x720, or record again at 320x180" in message, message
    # a simulator server the env starts itself opens its window at the policy's size
    with policy.make_env(backend="sim_server") as env:
        obs, _ = env.reset(seed=0)
        assert env.game.capture_frame().rgb.shape == (720, 1280, 3) and obs["frame"].shape == (84, 84, 3)


def test_a_dataset_is_built_for_the_window_its_episodes_were_captured_from(tmp_path: Path):
    def recorded(
        out: Path, capture_size: tuple[int, int] | None, seed: int, master: tuple[int, int] | None = None
    ) -> None:
        env = EnvConfig(profile="sim_margit", capture_size=capture_size)
        record(
            RecordSettings(
                env=env,
                backend="sim",
                autopilot=True,
                max_episodes=1,
                max_episode_seconds=1,
                seed=seed,
                out=out,
                reproducible=True,
                master_size=master,
            )
        )

    recorded(tmp_path / "small", None, seed=0, master=(84, 84))
    recorded(tmp_path / "wide", WINDOW, seed=5)
    root = tmp_path / "minari"
    # lock-step at the frame size: no picture of its own, as the default pipeline built before it kept one
    assert build_dataset(tmp_path / "small", "test/small-v0", root=root) is not None
    assert load_demonstrations("test/small-v0", root).config.capture_size is None
    assert (
        load_demonstrations(build_dataset(tmp_path / "wide", "test/wide-v0", root=root).id, root).config.capture_size
        == WINDOW
    )

    with pytest.raises(BuildError) as refused:
        build_dataset(tmp_path / "wide", "test/x-v0", EnvConfig(capture_size=(1920, 1080)), root=root)
    assert "captured from a 1280x720 window, not the 1920x1080 this dataset is for" in str(refused.value)

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for folder in ("small", "wide"):
        (episode,) = (tmp_path / folder).glob("*.h5")
        for file in (episode, episode.with_suffix(".mkv")):
            file.rename(mixed / file.name)
    with pytest.raises(BuildError) as refused:
        build_dataset(mixed, "test/y-v0", root=root)
    message = str(refused.value)
    assert "\n" not in message and "different window sizes" in message, message
    assert "84x84 (00000-seed0_autopilot.h5)" in message and "1280x720 (00000-seed5_autopilot.h5)" in message, message


def test_capture_size_is_checked_and_written_only_when_set():
    assert EnvConfig(capture_size=[1280, 720]).capture_size == WINDOW  # YAML and JSON give lists
    assert "capture_size" not in EnvConfig().to_dict()  # descriptions without one read as before it existed
    assert EnvConfig.from_dict(EnvConfig(capture_size=WINDOW).to_dict()) == EnvConfig(capture_size=WINDOW)
    for bad in ([1280], [0, 720], [1280.5, 720], "1280x720", [99999, 720], True):
        with pytest.raises(ConfigError, match=r"^capture_size = .*: must be null .* or \[width, height\]"):
            EnvConfig(capture_size=bad)
