"""Corrections (HG-DAgger style): a policy plays, the person (or the simulator's scripted human)
takes over; the samples under their control are marked, the dataset keeps the mark, and BC
weighs the corrections. Real recordings, real Minari datasets, real BC training throughout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_NETWORK

from env.config import EnvConfig
from env.profile import load_profile
from env.sim.display import focus_window
from env.sim.launcher import SimServer
from env.sim.moves import PlayerAnim

from capture.build_dataset import build_dataset
from capture.drivers import RecordError
from capture.episode import list_episodes, read_episode
from capture.inputs import KEY_DOWN, InputLog
from capture.record import RecordSettings, record
from capture.record import main as record_main
from capture.takeover import Takeover

from elden_il.data import DatasetError, demonstrations, sample_weights
from elden_il.params import BCConfig
from elden_il.pilot import PilotSettings, pilot
from elden_il.pilot import main as pilot_main
from elden_il.training.bc import train_bc

CONFIG = EnvConfig(profile="sim_margit", action_history=4)
STEP = CONFIG.timestep_ms / 1000.0


# ---------------------------------------------------------------------------------- Takeover
def test_control_is_the_persons_from_a_bound_key_press_until_the_quiet_time_after_letting_go():
    now = [0.0]
    inputs = InputLog(("W", "SPACE"), clock=lambda: now[0])
    takeover = Takeover(inputs, quiet_s=0.5, clock=lambda: now[0])
    assert not takeover.in_control(0.5)
    takeover.key("F9", True, t=0.6)  # not a bound key: no takeover
    assert not takeover.in_control(0.7)
    takeover.key("W", True, t=1.0)
    assert not takeover.in_control(0.99) and takeover.in_control(1.0)
    takeover.key("SPACE", True, t=1.2)
    takeover.key("W", False, t=1.4)
    assert takeover.in_control(2.0)  # SPACE still held
    takeover.key("SPACE", False, t=2.1)
    assert takeover.in_control(2.59)
    takeover.tap(("W",), t=2.5)  # a tap inside the quiet time: the quiet time starts again
    assert takeover.in_control(2.99)
    assert not takeover.in_control(3.0)
    assert not takeover.in_control(3.2)  # handed back: stays the policy's
    assert [tuple(e)[1:3] for e in inputs.drain().events] == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 0), (1, 0)]


# --------------------------------------------------------------------------- shared recordings
@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short expert fights, a BC policy trained on them (one epoch: it plays badly, so the
    scripted human has plenty to correct), and two fights that policy played, corrected."""
    root = tmp_path_factory.mktemp("corrections")
    record(
        RecordSettings(
            env=CONFIG, backend="sim", autopilot=True, max_episodes=2, max_episode_seconds=12, out=root / "demos"
        )
    )
    dataset = build_dataset(root / "demos", "test/demos-v0", CONFIG, root=root / "minari")
    train_bc(demonstrations(dataset), BCConfig(epochs=1), root / "bc", size=TINY_NETWORK)
    pilot(
        PilotSettings(
            root / "bc",
            RecordSettings(
                env=CONFIG, backend="sim", max_episodes=2, max_episode_seconds=12, seed=100, out=root / "corrected"
            ),
            takeover_quiet=0.4,
            scripted_human=True,
        )
    )
    (root / "all").mkdir()
    for folder in ("demos", "corrected"):  # names are start times: the demonstrations come first
        for path in list_episodes(root / folder):
            for file in (path, path.with_suffix(".mkv")):
                os.link(file, root / "all" / file.name)
    return root


def runs(marks: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], marks.astype(int), [0]])))
    return list(zip(edges[::2], edges[1::2]))


def test_the_scripted_human_takes_over_and_its_samples_are_marked(work: Path):
    episodes = [read_episode(p) for p in list_episodes(work / "corrected")]
    assert all(e.attrs["source"] == "policy" for e in episodes)
    marked = np.concatenate([e.intervention for e in episodes])
    assert 0 < marked.sum() < len(marked)
    for ep in episodes:
        dodge = ep.keys_pressed[:, ep.key_names.index("LEFT_SHIFT")]
        for start, end in runs(ep.intervention):
            # control began with the person's key (logged in the sample after the press) ...
            assert ep.keys_pressed[start].any() or ep.keys_held[start].any()
            # ... and ended once no key had been held for the quiet time (0.4 s)
            if end < len(ep):
                last_key = max(i for i in range(start, end) if ep.keys_held[i].any() or ep.keys_pressed[i].any())
                assert 0.4 - 1 / 30 <= ep.t[end] - ep.t[last_key] <= 0.4 + 2 / 30
        assert dodge[ep.intervention].any()  # the corrections the human made were the expert's rolls
    assert not np.concatenate([read_episode(p).intervention for p in list_episodes(work / "demos")]).any()


def test_the_dataset_keeps_the_mark_per_step(work: Path):
    dataset = build_dataset(work / "all", "test/all-v0", CONFIG, root=work / "minari")
    demos = demonstrations(dataset)
    episodes = list(dataset.iterate_episodes())
    assert [set(e.infos) for e in episodes] == [{"intervention", "policy"}] * 4
    for ep in episodes:
        assert len(ep.infos["intervention"]) == len(ep.actions) + 1 and not ep.infos["intervention"][0]
    # the expert's fights are demonstrations; the policy's are its own play, but for the corrections
    first_two = demos.episode < 2
    assert not demos.intervention[first_two].any() and not demos.policy_played[first_two].any()
    assert demos.intervention[~first_two].any()
    assert (demos.policy_played[~first_two] == ~demos.intervention[~first_two]).all()
    # a step is a correction when every one of its samples was marked
    source = read_episode(list_episodes(work / "corrected")[0], frames=False)
    marked_samples = source.intervention.sum()
    steps = demos.intervention[demos.episode == 2].sum()
    assert steps * 6 <= marked_samples < (steps + 2 * len(runs(source.intervention))) * 6 + 1


def _trained(demos, intervention_weight: float, out: Path) -> dict[str, torch.Tensor]:
    config = BCConfig(epochs=1, batch_size=64, intervention_weight=intervention_weight)
    train_bc(demos, config, out, size=TINY_NETWORK)
    from elden_il.policies.policy import load_policy

    return load_policy(out, device="cpu").policy.state_dict()


def test_bc_with_corrections_weighted_zero_trains_exactly_as_without_them(work: Path, tmp_path: Path):
    only_demos = demonstrations(build_dataset(work / "demos", "test/d-v0", CONFIG, root=tmp_path / "m"))
    both = demonstrations(build_dataset(work / "all", "test/b-v0", CONFIG, root=tmp_path / "m"))
    alone = _trained(only_demos, 1.0, tmp_path / "alone")
    zero = _trained(both, 0.0, tmp_path / "zero")
    one = _trained(both, 1.0, tmp_path / "one")
    assert all(torch.equal(alone[k], zero[k]) for k in alone)
    assert not all(torch.equal(alone[k], one[k]) for k in alone)
    weights = sample_weights(both, 2.5)
    assert set(weights[both.intervention]) == {2.5} and not weights[both.policy_played].any()
    with pytest.raises(DatasetError, match="intervention weight"):
        sample_weights(both, -1.0)


def test_a_policy_plays_through_the_pilot_and_the_recorder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture):
    with pytest.raises(SystemExit):
        record_main(["--policy", str(tmp_path)])
    assert "python -m elden_il.pilot --policy PATH" in capsys.readouterr().err
    with pytest.raises(RecordError, match="nobody can take over: add --scripted-human"):
        PilotSettings(tmp_path, RecordSettings(env=CONFIG, backend="sim", out=tmp_path))
    with pytest.raises(SystemExit):
        pilot_main(["--backend", "sim", "--autopilot", "--policy", str(tmp_path)])
    assert "unrecognized arguments: --autopilot" in capsys.readouterr().err


# ------------------------------------------------------------------- on a real X server (Xvfb)
PRESS_EVERY_KEY = """
import sys, time
from capture.takeover import PynputKeyboard
from env.actions import KeyCommand
keyboard = PynputKeyboard()
for name in sys.argv[1:]:
    keyboard.play(KeyCommand(frozenset({name})))
    time.sleep(0.01)
    keyboard.release()
"""


def test_every_key_the_scripted_keyboard_presses_is_heard_by_a_listener_in_another_process(xvfb: str):
    """Real key events, as a keyboard makes them: the recorder's listener, in its own process,
    hears every bound key the scripted human presses and releases, letters included (a key
    pynput sends as a character goes to the focused window alone, where no listener hears it)."""
    from capture.listener import PynputListener

    names = sorted(load_profile("sim_margit").bound_keys)
    heard = InputLog(names)
    listener = PynputListener(heard)
    listener.start()
    try:
        subprocess.run([sys.executable, "-c", PRESS_EVERY_KEY, *names], check=True, timeout=60)
        events = []
        deadline = time.monotonic() + 5
        while sum(len(e) for e in events) < 2 * len(names) and time.monotonic() < deadline:
            time.sleep(0.05)
            events.append(heard.drain().events)
    finally:
        listener.stop()
    keys = np.concatenate(events)
    keys = keys[keys["key"] >= 0]
    downs = [heard.key_names[i] for i in keys["key"][keys["kind"] == KEY_DOWN]]
    ups = [heard.key_names[i] for i in keys["key"][keys["kind"] != KEY_DOWN]]
    assert sorted(downs) == names and sorted(ups) == names


@pytest.mark.slow
def test_the_scripted_human_on_xvfb_is_heard_by_the_real_listener(xvfb: str, work: Path, tmp_path: Path):
    """The scripted human presses real keys (XTest): the recorder's pynput listener hears them as
    a person's, the simulator's window receives them, and the samples are marked."""
    out = tmp_path / "raw"
    with (
        SimServer(size=(320, 180), extra_args=("--window",), log_path=tmp_path / "server.log") as server,
        server.player(),
    ):
        focus_window(server.process.pid)
        log = tmp_path / "recorder.log"
        rec = subprocess.run(
            [
                sys.executable,
                "-m",
                "elden_il.pilot",
                "--host",
                server.host,
                "--out",
                str(out),
                "--no-status",
                "--policy",
                str(work / "bc"),
                "--scripted-human",
                "--max-episodes",
                "1",
                "--max-episode-seconds",
                "15",
                "--log-level",
                "DEBUG",
            ],
            stdout=open(log, "wb"),
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        assert rec.returncode == 0, log.read_text()
    (path,) = list_episodes(out)
    ep = read_episode(path)
    assert ep.attrs["source"] == "policy" and ep.intervention.any(), log.read_text()
    downs = ep.events[ep.events["kind"] == KEY_DOWN]
    for start, _ in runs(ep.intervention):  # each takeover began with a key the listener heard
        assert ((downs["t"] <= ep.t[start]) & (downs["t"] > ep.t[start] - 2 / 30)).any()
    # every key the scripted person pressed was heard, letters as well as Shift and Space
    pressed = set(re.findall(r"scripted keyboard: press (\w+)", log.read_text()))
    heard = {ep.key_names[i] for i in downs["key"]}
    assert len(pressed) > 2 and pressed <= heard, (pressed, heard)
    # the window got the keys: the player rolled while the person had control
    anims = ep.column("HeroAnimId")
    assert (anims[ep.intervention] == PlayerAnim.ROLL).any() or (anims[ep.intervention] == PlayerAnim.BACKSTEP).any()


@pytest.mark.slow
def test_the_comparison_runs_and_reports_every_number(tmp_path: Path):
    from elden_il.studies.corrections import CorrectionsConfig, compare

    config = CorrectionsConfig(
        demo_fights=1, correction_fights=1, eval_fights=2, bc=BCConfig(epochs=1), env=CONFIG.replace(max_steps=60)
    )
    report = compare(config, tmp_path / "work")
    policies = report["policies"]
    assert list(policies) == ["bc", "bc+corrections", "bc+more demos"]
    budget = policies["bc+corrections"]["added_labelled_steps"]
    assert budget > 0 and policies["bc+more demos"]["added_labelled_steps"] >= budget
    for r in policies.values():
        assert r["fights"] == 2 and len(r["win_rate_ci95"]) == 2
        assert {"boss_damage_dealt", "player_damage_taken", "seconds", "added_samples"} <= set(r)
