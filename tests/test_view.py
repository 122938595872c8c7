"""The Rerun viewer of fights (``python -m elden_il.view``), headless: a fight recorded with the
simulator in-process, its ``.rrd`` saved and read back through Rerun's own dataframe query, a
policy's disagreements against ones counted directly, the evaluation's recordings, and every
bad input answered in one line."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

rerun = pytest.importorskip("rerun", reason="the view extra (rerun-sdk) is not installed")

from conftest import untrained_policy

from env.config import EnvConfig
from env.profile import load_profile

from capture.build_dataset import build_dataset
from capture.episode import read_episode
from capture.record import RecordSettings, record

from elden_il.data import load_demonstrations
from elden_il.policies.policy import load_policy, save_policy
from elden_il.view.__main__ import main, show_dataset, show_episode

MASTER = (160, 90)
DATASET = "test/view-v0"


def indices_with(path: Path, index: str, column: str) -> list[int]:
    """The points of the timeline ``index`` at which ``column`` (``/entity:Archetype:component``)
    holds a value, by Rerun's own query (``rerun.chunk`` and DataFusion)."""
    from rerun.chunk import RrdReader

    store = RrdReader(path).stream().collect()
    found = store.reader(index=index, contents=column.split(":")[0]).to_arrow_table()
    valid = found.column(column).is_valid().to_pylist()
    return [at for at, ok in zip(found.column(index).to_pylist(), valid, strict=True) if ok]


def static_values(path: Path, column: str) -> list:
    """The static value of ``column`` (``/entity:Archetype:component``), as plain Python."""
    from rerun.chunk import RrdReader

    store = RrdReader(path).stream().collect()
    return store.reader(index=None, contents=column.split(":")[0]).to_arrow_table().column(column).to_pylist()[0]


def entities(path: Path, index: str) -> set[str]:
    from rerun.chunk import RrdReader

    names = RrdReader(path).stream().collect().reader(index=index).schema().names
    return {name.split(":")[0] for name in names if name.startswith("/")}


@pytest.fixture(scope="module")
def fight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One autopilot fight recorded lock-step by the simulator in-process, at a 160x90 picture."""
    out = tmp_path_factory.mktemp("raw")
    settings = RecordSettings(
        env=EnvConfig(profile="sim_margit"),
        backend="sim",
        autopilot=True,
        max_episodes=1,
        max_episode_seconds=20.0,
        out=out,
        master_size=MASTER,
        reproducible=True,
    )
    (path,) = record(settings)
    return path


@pytest.fixture(scope="module")
def dataset(fight: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fight as a dataset whose env keeps the last 4 actions in its observation."""
    root = tmp_path_factory.mktemp("minari")
    build_dataset(fight.parent, DATASET, EnvConfig(action_history=4), root=root)
    return root


def leaning_policy(folder: Path, config: EnvConfig) -> Path:
    """An untrained policy for ``config`` saved as behaviour cloning saves one, leaning towards
    idling and attacking (the autopilot's commonest actions) so that it agrees at some steps and
    not at others: fixed choices, which is all a count of disagreements needs."""
    policy = untrained_policy(config)
    if config.action_mode == "discrete":
        names = config.actions(load_profile(config.profile)).names
        with torch.no_grad():
            policy.action_net.bias[names.index("idle")] += 3.0
            policy.action_net.bias[names.index("attack")] += 3.0
    save_policy(policy, config, folder)
    return folder


@pytest.fixture(scope="module")
def policy(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return leaning_policy(tmp_path_factory.mktemp("bc"), load_demonstrations(DATASET, dataset).config)


def test_a_raw_episode_shows_every_sample_its_keys_and_its_steps(fight: Path, tmp_path: Path):
    saved = tmp_path / "fight.rrd"
    assert main([str(fight), "--save", str(saved)]) == 0
    episode = read_episode(fight)
    n = len(episode)
    found = entities(saved, "sample")
    for entity in (
        "/video",
        "/fighters/player/hp",
        "/fighters/player/fp",
        "/fighters/player/stamina",
        "/fighters/boss/hp",
        "/fighters/distance",
        "/animation/player",
        "/animation/boss",
        "/keys/held/W",
        "/input/mouse/dx",
        "/input/intervention",
        "/recorder/gap_ms",
        "/recorder/outcome",
        "/observation/frame",
        "/action/taken",
        "/action/reward",
        "/episode",
    ):
        assert entity in found, entity

    # one timeline point per sample; the picture is the episode's own video, frame i at sample i
    assert indices_with(saved, "sample", "/fighters/player/hp:Scalars:scalars") == list(range(n))
    assert indices_with(saved, "sample", "/video:VideoFrameReference:timestamp") == list(range(n))
    assert static_values(saved, "/video:AssetVideo:media_type") == ["video/mp4"]

    # every key pressed shows at the very samples the recorder saw it pressed
    pressed_any = 0
    for j, key in enumerate(episode.key_names):
        expected = np.flatnonzero(episode.keys_pressed[:, j]).tolist()
        if expected:
            assert indices_with(saved, "sample", f"/keys/pressed/{key}:Scalars:scalars") == expected, key
        else:
            assert f"/keys/pressed/{key}" not in found
        pressed_any += len(expected)
    assert pressed_any and episode.keys_pressed[:, episode.key_names.index("P")].any(), "the autopilot attacked"

    # the env steps a dataset would hold (200 ms) sit beside the samples, with their observation frame
    steps = indices_with(saved, "step", "/observation/frame:Image:buffer")
    assert len(steps) == int((episode.t[-1] - episode.t[0]) / 0.2 + 1e-9) + (
        episode.attrs["outcome"] in ("win", "death")
    )


def test_a_policy_is_shown_against_the_dataset_and_its_disagreements_counted(
    dataset: Path, policy: Path, fight: Path, tmp_path: Path
):
    saved = tmp_path / "policy.rrd"
    found = show_dataset(DATASET, 0, dataset, save=saved, policy_path=policy)

    # counted directly: SB3's own deterministic choice against the labels of the dataset
    demos = load_demonstrations(DATASET, dataset)
    loaded = load_policy(policy)
    rows = np.arange(len(demos))
    chosen, _ = loaded.policy.predict(demos.batch(rows), deterministic=True)
    direct = int((chosen != demos.actions).sum())
    assert found.count == direct and 0 < direct < len(demos)

    marks = indices_with(saved, "step", "/policy/disagreement:TextLog:text")
    assert marks == np.flatnonzero(chosen != demos.actions).tolist() and len(marks) == direct
    (per_action,) = static_values(saved, "/policy/per_action:BarChart:values")
    names = demos.config.actions(load_profile("sim_margit")).names
    differ = chosen != demos.actions
    assert per_action["buffer"] == [int(differ[demos.actions == i].sum()) for i in range(len(names))]
    assert indices_with(saved, "step", "/policy/probabilities:BarChart:values") == rows.tolist()
    assert {"/observation/frame", "/observation/action_history", "/action/taken"} <= entities(saved, "step")

    # the raw episode behind the dataset, on the policy's step grid, gives the same steps: the same count
    assert show_episode(fight, tmp_path / "raw.rrd", policy).count == direct


def test_the_evaluation_saves_a_recording_of_each_policys_first_fight(policy: Path, tmp_path: Path):
    from env.factory import make_env

    from elden_il.evaluation.evaluate import PolicyActor, evaluate
    from elden_il.evaluation.fight_loop import RandomActor

    config = load_policy(policy).config.replace(max_steps=30)
    evaluate(
        {"random": RandomActor(), "bc": PolicyActor(policy, True)},
        lambda: make_env(config, render_mode="rgb_array"),
        [7],
        gif_dir=tmp_path,
        recording_dir=tmp_path,
        parallel=1,
    )
    for name in ("random", "bc"):
        assert (tmp_path / f"{name}.gif").is_file()
        for column in (
            "/render:Image:buffer",
            "/observation/frame:Image:buffer",
            "/action/taken:TextLog:text",
        ):
            assert indices_with(tmp_path / f"{name}.rrd", "step", column) == list(range(30)), (
                name,
                column,
            )
    assert "/policy/probabilities" in entities(tmp_path / "bc.rrd", "step")
    assert "/policy/probabilities" not in entities(tmp_path / "random.rrd", "step")


def test_bad_input_is_one_line_naming_what_to_do(
    fight: Path,
    dataset: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
):
    partial = tmp_path / "cut_human.h5.partial"
    shutil.copy(fight, partial)
    other_env = leaning_policy(
        tmp_path / "other",
        load_demonstrations(DATASET, dataset).config.replace(frame_size=(64, 64)),
    )
    other_picture = leaning_policy(tmp_path / "720p", EnvConfig(profile="sim_margit", capture_size=(1280, 720)))
    save = ["--save", str(tmp_path / "x.rrd")]
    cases = [
        (
            [str(tmp_path / "nope.h5"), *save],
            "no episode at .*nope.h5: give a finished episode's .h5",
        ),
        ([str(partial), *save], "is unfinished .*run `python -m capture.recover"),
        (
            ["--dataset", "test/absent-v0", "--root", str(dataset), *save],
            "cannot load dataset 'test/absent-v0'.*Build it",
        ),
        (
            ["--dataset", DATASET, "--episode", "5", "--root", str(dataset), *save],
            "has 1 episode: pick --episode from 0 to 0",
        ),
        (
            ["--dataset", DATASET, "--root", str(dataset), "--policy", str(other_env), *save],
            "was made for another env \\(frame_size: \\(64, 64\\) vs \\(84, 84\\).*show a policy trained on",
        ),
        (
            [str(fight), "--policy", str(other_picture), *save],
            "was made for another env \\(capture_size: \\(1280, 720\\) vs \\(160, 90\\).*recorded with its profile and picture",
        ),
        ([str(fight)], "no display here .*--save FILE.rrd"),
        (["--listen"], "no display here .*on your own machine .*ssh -R"),
    ]
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("error: "), err
        assert re.search(message, err), (message, err)
    assert not (tmp_path / "x.rrd").exists()


def test_a_viewer_listens_on_loopback_for_a_run_and_a_watch_address_that_is_none_is_one_line(
    xvfb: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, caplog
):
    """``--listen`` on a display opens Rerun's viewer bound to 127.0.0.1 and prints the line a
    fine-tuning run needs; the run accepts that address, and refuses, in one line, one that is no
    viewer's or that nothing listens at."""
    import logging
    import os
    import signal

    from env.common.errors import ConfigError

    from elden_il.view.live_run import WATCH_VARIABLE, watched_address

    monkeypatch.setenv("DISPLAY", xvfb)
    with caplog.at_level(logging.INFO, logger="elden_il.view.viewer"):
        assert main(["--listen"]) == 0
    (pid,) = {int(m) for r in caplog.records for m in re.findall(r"Rerun viewer started \(pid (\d+)", r.getMessage())}
    try:
        (address,) = re.findall(rf"export {WATCH_VARIABLE}=(\S+)", capsys.readouterr().out)
        assert address.startswith("rerun+http://127.0.0.1:")
        monkeypatch.setenv(WATCH_VARIABLE, address)
        assert watched_address() == address
    finally:
        os.killpg(pid, signal.SIGTERM)
    for wrong, message in (
        ("127.0.0.1:9876", "is not a Rerun viewer's address: give the one `python -m elden_il.view --listen` prints"),
        (address, "no viewer listens there .*open one with `python -m elden_il.view --listen`"),
    ):
        monkeypatch.setenv(WATCH_VARIABLE, wrong)
        for _ in range(50):  # the viewer's port closes as it ends
            try:
                watched_address()
            except ConfigError as error:
                assert re.search(message, str(error)) and "\n" not in str(error), error
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"{wrong} was taken for a listening viewer")
    monkeypatch.delenv(WATCH_VARIABLE)
    assert watched_address() is None
