"""Recording into episode files, crash safety, recovery, and the Minari dataset built from them.
Real HDF5 files, real Minari datasets, the real simulator (in-process and over gRPC)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import av
import gymnasium as gym
import h5py
import minari
import numpy as np
import pytest

from env.actions import ActionTable
from env.config import EnvConfig
from env.factory import make_env
from env.observations import FrameSpec, observation_space
from env.profile import load_profile

from capture.build_dataset import (
    ALGORITHM,
    AUTHOR,
    CONTACT,
    ENV_ID,
    BuildError,
    build_dataset,
    create_minari_dataset,
    episode_buffers,
    resolved_config,
    samples_at,
)
from capture.build_dataset import main as build_main
from capture.episode import list_episodes, read_episode
from capture.episode_format import EpisodeError
from capture.episode_writer import EpisodeMeta, EpisodeWriter, Sample
from capture.footage import decoded as decoded_frames
from capture.inputs import InputLog
from capture.labels import HeardActions, StepLabeler
from capture.provenance import REPOSITORY
from capture.record import MASTER_SIZE
from capture.recover import recover
from capture.video import codec

from elden_il.data import open_dataset

PROFILE = load_profile("sim_margit")
KEYS = PROFILE.bound_keys


def meta(**kw) -> EpisodeMeta:
    base = dict(
        profile="sim_margit",
        attribute_names=("HeroHp", "NpcHp"),
        key_names=KEYS,
        sample_rate_hz=30.0,
        codec=codec("lossless"),
        window_size=(16, 12),
        source="autopilot",
        sim_seed=3,
        host="in-process",
    )
    return EpisodeMeta(**{**base, **kw})


def sample(i: int) -> Sample:
    rng = np.random.default_rng(i)
    return Sample(
        t=i / 30,
        frame_t=i / 30 - 0.001,
        frame=rng.integers(0, 255, (12, 16, 3), dtype=np.uint8),
        state=np.array([1100.0 - i, 4174.0]),
        held=rng.random(len(KEYS)) < 0.3,
        pressed=rng.random(len(KEYS)) < 0.2,
        mouse_dx=float(i),
        mouse_dy=0.0,
        pad_held=rng.random(21) < 0.2,
        pad_pressed=rng.random(21) < 0.1,
        pad_axes=rng.uniform(-1, 1, 6).astype(np.float32),
    )


def test_an_episode_reads_back_exactly_and_is_published_atomically(tmp_path: Path):
    writer = EpisodeWriter(
        tmp_path, meta(), lock_step=True
    )  # appended faster than real time: the encoder is waited for
    samples = [sample(i) for i in range(50)]
    for s in samples:
        writer.append(s)
    log = InputLog(KEYS, clock=lambda: 1.0)
    log.key("W", True)
    log.tap(["LEFT_SHIFT"])
    writer.append_events(log.drain().events)
    assert writer.path.name.endswith(".h5.partial")
    path = writer.finish("win", {"achieved_rate_hz": 30.0})
    assert path.suffix == ".h5" and not list(tmp_path.glob("*.partial"))
    ep = read_episode(path)
    assert len(ep) == 50 and ep.attrs["outcome"] == "win" and ep.attrs["sim_seed"] == 3
    assert ep.attrs["format_version"] == 3 and ep.video == path.with_suffix(".mkv") and ep.video.exists()
    # the picture is the video's, losslessly: frame i is sample i, timed by it on the recorder's clock
    assert np.array_equal(ep.frames_at(np.arange(50), FrameSpec((16, 12))), np.stack([s.frame for s in samples]))
    with av.open(str(ep.video)) as video:
        assert [frame.pts for frame in video.decode(video=0)] == [round(s.t * 1000) for s in samples]
    assert not ep.frame_repeated.any() and json.loads(ep.attrs["stats"])["repeated_frames"] == 0
    assert np.array_equal(ep.keys_pressed, np.stack([s.pressed for s in samples]))
    for name in ("pad_held", "pad_pressed", "pad_axes"):  # a controller's columns, as sampled
        assert np.array_equal(getattr(ep, name), np.stack([getattr(s, name) for s in samples])), name
    assert np.array_equal(ep.state[:, 0], 1100.0 - np.arange(50))
    assert list(ep.events["kind"]) == [0, 0, 1] and ep.key_names == KEYS


def test_a_full_video_queue_repeats_the_frame_before_and_marks_it_without_delaying_samples(tmp_path: Path, caplog):
    """Live, a sample never waits for the encoder: a frame that finds the queue full is left out and
    the one before is encoded again in its place, so the video still holds one frame per sample,
    and the episode marks and counts each such sample."""
    size = (1280, 720)  # random pixels at 720p: each frame takes the encoder far longer than an append
    frames = [np.random.default_rng(i).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8) for i in range(3)]
    writer = EpisodeWriter(tmp_path, meta(window_size=size))
    started = time.perf_counter()
    for i in range(80):
        writer.append(replace(sample(i), frame=frames[i % 3]))
    appending = time.perf_counter() - started
    path = writer.finish("win", {})
    episode = read_episode(path)
    repeated = episode.frame_repeated
    assert 0 < repeated.sum() == json.loads(episode.attrs["stats"])["repeated_frames"] and not repeated[0]
    assert f"{repeated.sum()} of 80 frames repeat the one before" in caplog.text
    # the video holds one frame per sample; each marked one is the frame before it, the others their own
    decoded = np.stack([rgb[::90, ::160] for rgb in decoded_frames(episode.video)])
    assert len(decoded) == 80
    own = np.stack([frames[i % 3][::90, ::160] for i in range(80)])
    for i in range(1, 80):
        expected = decoded[i - 1] if repeated[i] else own[i]
        assert np.abs(decoded[i].astype(int) - expected).mean() < 8, i  # lossless codec aside, H.264 is close
    assert appending < 80 * 0.005, "appending waited for the encoder"


def test_a_live_episode_is_flushed_every_second_of_its_clock_and_a_lock_step_one_by_size(tmp_path: Path):
    """Live, a crash loses at most the last second; lock-step the game runs many times faster than
    real time and no one's play can be lost, so HDF5 is touched by size alone (and at the end)."""
    for lock_step, flushed in ((False, 10), (True, 0)):
        now = [0.0]
        writer = EpisodeWriter(tmp_path / str(lock_step), meta(), clock=lambda now=now: now[0], lock_step=lock_step)
        for i in range(10):
            now[0] += 1.0
            writer.append(sample(i))
        assert writer._flushed == flushed
        assert len(read_episode(writer.finish("win", {}))) == 10


def test_an_unfinished_or_corrupt_file_is_refused_clearly(tmp_path: Path):
    writer = EpisodeWriter(tmp_path, meta())
    writer.append(sample(0))
    with pytest.raises(EpisodeError, match="unfinished.*capture.recover"):
        read_episode(writer.path)
    writer.discard()
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5")
    with pytest.raises(EpisodeError, match="junk.h5 is not a readable episode"):
        read_episode(junk)


WRITER_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_recording import meta, sample
    from capture.episode_writer import EpisodeWriter
    out = Path({out!r})
    for n in range(2):                           # two finished episodes
        w = EpisodeWriter(out, meta(), flush_every_s=0.05, lock_step=True)
        for i in range(30):
            w.append(sample(i))
        w.finish("win", {{}})
    w = EpisodeWriter(out, meta(), flush_every_s=0.05)  # then a live one that never finishes
    for i in range(10_000):
        w.append(sample(i))
        time.sleep(0.002)
        if i == 100:
            print("flushed", flush=True)
""")


def test_a_killed_recorder_loses_no_finished_episode_and_the_partial_one_is_recovered(tmp_path: Path):
    script = WRITER_SCRIPT.format(tests=str(Path(__file__).parent), out=str(tmp_path))
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "flushed"
    time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = list_episodes(tmp_path)
    assert len(finished) == 2 and all(len(read_episode(p)) == 30 for p in finished)
    (partial,) = tmp_path.glob("*.h5.partial")
    recovered = recover(partial)
    ep = read_episode(recovered)
    assert ep.attrs["recovered"] and ep.attrs["outcome"] == "recovered"
    assert len(ep) >= 100  # everything flushed before the kill (flushes every 50 ms; a video cluster a second)
    # the video and the state are cut to the same samples: frame i is still sample i
    assert np.array_equal(
        ep.frames_at(np.array([17, len(ep) - 1]), FrameSpec((16, 12))),
        np.stack([sample(17).frame, sample(len(ep) - 1).frame]),
    )
    assert (tmp_path / (partial.name + ".bak")).exists()
    assert (tmp_path / partial.name.replace(".h5.partial", ".mkv.partial.bak")).exists()


def test_recover_leaves_an_unreadable_file_untouched(tmp_path: Path):
    bad = tmp_path / "x_human.h5.partial"
    bad.write_bytes(b"garbage")
    with pytest.raises(EpisodeError, match="cannot be read.*left untouched"):
        recover(bad)
    assert bad.read_bytes() == b"garbage"


def test_step_labels_follow_the_discrete_table():
    table = ActionTable(PROFILE, "discrete")
    heard = HeardActions(PROFILE, KEYS)
    labeler = StepLabeler(table)
    col = {k: i for i, k in enumerate(KEYS)}

    def step(held_keys=(), pressed_keys=(), samples=6, held_samples=6):
        held = np.zeros((samples, len(KEYS)), bool)
        pressed = np.zeros((samples, len(KEYS)), bool)
        for k in held_keys:
            held[:held_samples, col[k]] = True
        for k in pressed_keys:
            pressed[2, col[k]] = True
        return table.names[labeler.label(*heard.from_keys(held, pressed))]

    assert step() == "idle"
    assert step(["W"]) == "move_forward"
    assert step(["W"], held_samples=1) == "idle"  # a sliver of a hold is not a move
    assert step(["A"], ["LEFT_SHIFT"]) == "roll_left"
    assert step([], ["LEFT_SHIFT"]) == "roll_back"  # no direction: a backstep
    assert step([], ["P"]) == "attack"  # a tap inside one sample period still counts
    assert step(["W"], ["R"]) == "heal"
    multi = StepLabeler(ActionTable(PROFILE, "multi_binary"))
    bits = multi.label(*heard.from_keys(np.zeros((6, len(KEYS)), bool), np.eye(len(KEYS), dtype=bool)[[4] * 6]))
    assert bits.tolist() == [1 if k == "dodge" else 0 for k in PROFILE.keybinds]


def test_a_persons_keys_label_the_step_they_were_pressed_in_not_the_next_sampled_one():
    """A person presses keys at any moment, not on the sample grid: a dodge tapped 10 ms before a
    step ends is sampled only after the boundary, yet it is that step's roll; W held from 5 ms
    into the next step moves in that one. Labels come from the input log's times."""
    from capture.inputs import EVENT_DTYPE, KEY_DOWN, KEY_UP
    from capture.labels import step_inputs

    col = {k: i for i, k in enumerate(KEYS)}
    events = np.array(
        [
            (0.19, KEY_DOWN, col["LEFT_SHIFT"], 0, 0),
            (0.191, KEY_UP, col["LEFT_SHIFT"], 0, 0),
            (0.205, KEY_DOWN, col["W"], 0, 0),
            (0.5, KEY_UP, col["W"], 0, 0),
        ],
        EVENT_DTYPE,
    )
    held, pressed = HeardActions(PROFILE, KEYS).from_keys(
        *step_inputs(events, np.zeros(len(KEYS), bool), np.array([0.0, 0.2, 0.4]), slices=6)
    )
    labeler = StepLabeler(ActionTable(PROFILE, "discrete"))
    names = ActionTable(PROFILE, "discrete").names
    assert [names[labeler.label(held[k * 6 : (k + 1) * 6], pressed[k * 6 : (k + 1) * 6])] for k in (0, 1)] == [
        "roll_back",
        "move_forward",
    ]
    # the samples of a recorder 20 ms out of phase put the tap into the second step
    samples_t = 0.02 + np.arange(12) / 30
    assert samples_t[np.searchsorted(samples_t, 0.19)] > 0.2


def test_the_step_grid_is_laid_where_a_persons_presses_fall():
    """A person's presses are off any grid laid from the first sample: the grid moves so that each
    press follows the last picture before it (as a policy's action follows its observation). A
    lock-step recording's presses, on its own grid, leave it where it was; so does no press."""
    from capture.inputs import EVENT_DTYPE, KEY_DOWN, KEY_UP
    from capture.labels import press_phase

    col = {k: i for i, k in enumerate(KEYS)}
    start, dt, slice_s = 100.0, 0.2, 0.2 / 6
    # a person deciding every 200 ms, 70 ms after the grid from the first sample, with a few ms of
    # jitter, and one stray press elsewhere
    presses = start + 0.07 + dt * np.arange(40) + np.tile([0.0, 0.004, 0.011, 0.002], 10)
    presses = np.append(presses, start + 3.15)
    events = np.sort(
        np.array(
            [(t, KEY_DOWN, col["P"], 0, 0) for t in presses] + [(t + 0.05, KEY_UP, col["P"], 0, 0) for t in presses],
            EVENT_DTYPE,
        ),
        order="t",
    )
    phase = press_phase(events["t"][events["kind"] == KEY_DOWN], start, dt, slice_s)
    assert 0.07 - slice_s < phase <= 0.07  # every regular press in its step's first slice
    residues = np.mod(presses[:-1] - start - phase, dt)
    assert np.all(residues < slice_s)
    # presses early in the unshifted grid's steps: its first slices hold them all too, but the
    # grid starts at the first of them, not up to a slice before them
    early = presses[:-1] - 0.06
    assert press_phase(early, start, dt, slice_s) == pytest.approx(0.01)
    # lock-step: presses exactly on sample times, float sums like the boundaries
    on_grid = start + np.cumsum(np.full(50, dt))
    lock_step = np.array([(t, KEY_DOWN, col["P"], 0, 0) for t in on_grid], EVENT_DTYPE)
    assert press_phase(lock_step["t"], start, dt, slice_s) == 0.0
    assert press_phase(np.zeros(0), start, dt, slice_s) == 0.0


def record_in_process(out: Path, episodes: int, seed: int = 0, max_seconds: int = 20) -> list[tuple[float, str]]:
    """The recorder CLI, lock-step against the in-process simulator, with the autopilot; returns
    every decision the autopilot made (time, action name)."""
    from capture import record
    from capture.autopilot import Autopilot

    decisions = []
    original = Autopilot.act

    def spy(self, state):
        name = original(self, state)
        decisions.append((state.timestamp, name))
        return name

    Autopilot.act = spy
    try:
        code = record.main(
            [
                "--backend",
                "sim",
                "--autopilot",
                "--max-episodes",
                str(episodes),
                "--seed",
                str(seed),
                "--out",
                str(out),
                "--no-status",
                "--max-episode-seconds",
                str(max_seconds),
            ]
        )
    finally:
        Autopilot.act = original
    assert code == 0
    return decisions


def test_the_recorder_tells_its_one_driver_what_happens_and_records_what_it_plays(tmp_path: Path):
    """Whoever plays is one ``Driver``, told of every sample, each episode's start and end, each
    restart and the close, in that order; a driver the recorder has never heard of (here the
    autopilot behind a log of those calls) records as the built-in ones do."""
    from capture.autopilot import Autopilot
    from capture.drivers import Driver
    from capture.record import RecordSettings, record

    calls: list[str] = []

    class Logged(Driver):
        source = "policy"

        def __init__(self, game, inputs, hotkeys) -> None:
            self.autopilot = Autopilot(game, inputs, EnvConfig(profile="sim_margit"))

        def mark(self, sample: Sample) -> Sample:
            calls.append("mark")
            return replace(sample, intervention=len(calls) % 2 == 0)

        def on_sample(self, sample, state, frame, events, recording: bool) -> None:
            calls.append("sample" if recording else "idle")
            self.autopilot.on_sample(sample, state, frame, events, recording)

        def new_fight(self) -> None:
            calls.append("new_fight")
            self.autopilot.new_fight()

        def episode_over(self) -> None:
            calls.append("episode_over")

        def release(self) -> None:
            calls.append("release")
            self.autopilot.release()

        def close(self) -> None:
            calls.append("close")

    settings = RecordSettings(backend="sim", restart=True, max_episodes=2, max_episode_seconds=3, out=tmp_path)
    saved = record(settings, make_driver=Logged)
    runs = [name for name, _ in itertools.groupby(c for c in calls if c != "mark")]
    assert runs == ["new_fight", "sample", "episode_over", "release", "new_fight", "sample", "episode_over", "close"]
    assert calls.count("mark") == calls.count("sample")  # restarted at once: every sample is in an episode
    episodes = [read_episode(path, frames=False) for path in saved]
    assert [e.attrs["source"] for e in episodes] == ["policy", "policy"]
    assert all(e.keys_pressed.any() and e.intervention.any() and not e.intervention.all() for e in episodes)


@pytest.mark.slow
def test_the_dataset_matches_the_env_and_the_actions_taken(tmp_path: Path):
    raw = tmp_path / "raw"
    decisions = record_in_process(raw, episodes=2, max_seconds=300)  # whole fights: a win or a death
    paths = list_episodes(raw)
    assert len(paths) == 2 and all(read_episode(p).attrs["source"] == "autopilot" for p in paths)

    # no action history: a dataset stores each action once, and training makes the history from them
    dataset = build_dataset(raw, "test/margit-v0", EnvConfig(action_history=None), root=tmp_path / "minari")
    loaded = open_dataset("test/margit-v0", tmp_path / "minari")
    env = make_env(frame_size=(84, 84), action_history=None)
    assert loaded.observation_space == env.observation_space and loaded.action_space == env.action_space
    assert dataset.total_episodes == 2
    about = loaded.storage.metadata["elden_il"]
    assert all(p.name in about for p in paths)

    # the dataset names the env it was built for: Minari rebuilds it, as training reads it back
    recovered = loaded.recover_environment()
    assert recovered.unwrapped.config == EnvConfig(profile="sim_margit", capture_size=MASTER_SIZE, action_history=None)
    assert recovered.observation_space == loaded.observation_space
    recovered.reset(seed=0)
    recovered.step(recovered.action_space.sample())
    recovered.close()

    # every step's label is what the autopilot decided at that step's start
    names = ActionTable(PROFILE, "discrete").names
    first = next(loaded.iterate_episodes())
    episode = read_episode(paths[0])
    t0 = episode.t[0]
    decided = {round(t - t0, 4): name for t, name in decisions if t0 - 1e-6 <= t <= episode.t[-1]}
    labels = [names[a] for a in first.actions]
    expected = [decided[round(0.2 * k, 4)] for k in range(len(labels))]
    assert labels == expected

    # frames are the recorded picture's, cropped and resized by the env's FrameSpec (tests/test_replay.py
    # holds them equal to the live env's)
    at = np.searchsorted(episode.t, t0 + 0.2 * 5, side="right") - 1
    assert np.array_equal(first.observations["frame"][5], episode.frames_at(np.array([at]), FrameSpec((84, 84)))[0])

    # a fight decided by a death or a kill ends terminated on its final sample, as the env ends it
    outcomes = [read_episode(p, frames=False).attrs["outcome"] for p in paths]
    assert {"win", "death"} & set(outcomes), outcomes
    for outcome, built in zip(outcomes, loaded.iterate_episodes(), strict=True):
        decided = outcome in ("win", "death")
        assert built.terminations[-1] == decided and built.truncations[-1] != decided
        if decided:
            hp = "boss_hp" if outcome == "win" else "player_hp"
            assert built.observations[hp][-1] == 0
            assert abs(built.rewards[-1]) >= 1, "the win or death term is in the last reward"


def test_the_builder_writes_what_minari_would_in_the_root_it_is_given(tmp_path: Path, monkeypatch):
    """``build_dataset`` writes in the root it is given and leaves the process's environment
    alone; its Minari files are those ``minari.create_dataset_from_buffers`` writes (which finds
    its root only in ``$MINARI_DATASETS_PATH``), byte for byte: a Minari that writes otherwise
    fails here before a dataset differs."""
    raw = tmp_path / "raw"
    record_in_process(raw, episodes=1, max_seconds=4)
    monkeypatch.delenv("MINARI_DATASETS_PATH", raising=False)
    dataset = build_dataset(raw, "test/root-v0", root=tmp_path / "given")
    assert "MINARI_DATASETS_PATH" not in os.environ
    assert Path(dataset.storage.data_path) == (tmp_path / "given" / "test/root-v0" / "data").resolve()
    assert dataset.total_episodes == 1
    assert json.loads((tmp_path / "given/test/namespace_metadata.json").read_text()) == {}

    config, actions = resolved_config(EnvConfig(), list_episodes(raw))
    buffers, _ = episode_buffers(list_episodes(raw), config, actions, align_to_presses=True)
    spec = replace(gym.spec(ENV_ID), kwargs=config.to_dict())
    spaces = {
        "observation_space": observation_space(config.frame_spec, action_space=actions.space),
        "action_space": actions.space,
    }
    create_minari_dataset(tmp_path / "ours", "test/same-v0", buffers, env_spec=spec, description="d", **spaces)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    about = {"algorithm_name": ALGORITHM, "author": AUTHOR, "author_email": CONTACT, "code_permalink": REPOSITORY}
    minari.create_dataset_from_buffers(
        "test/same-v0", buffers, env=spec, eval_env=spec, description="d", jpeg_encoding=False, **about, **spaces
    )

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    ours, minaris = files(tmp_path / "ours"), files(tmp_path / "minari")
    written = {"test/namespace_metadata.json", "test/same-v0/data/metadata.json", "test/same-v0/data/main_data.hdf5"}
    assert set(ours) == written and ours == minaris


def test_the_builder_says_what_is_wrong(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BuildError, match="no finished episodes in .*capture.record"):
        build_dataset(empty, "test/x-v0", root=tmp_path / "minari")
    (empty / "a_human.h5.partial").write_bytes(b"")
    with pytest.raises(BuildError, match="1 unfinished: run `python -m capture.recover"):
        build_dataset(empty, "test/x-v0", root=tmp_path / "minari")
    raw = tmp_path / "raw"
    record_in_process(raw, episodes=1)
    build_dataset(raw, "test/y-v0", root=tmp_path / "minari")
    with pytest.raises(BuildError, match="already exists.*--force"):
        build_dataset(raw, "test/y-v0", root=tmp_path / "minari")
    with pytest.raises(BuildError, match="recorded with profile 'sim_margit', not 'eldenring_margit'"):
        build_dataset(raw, "test/z-v0", EnvConfig(profile="eldenring_margit"), root=tmp_path / "minari")

    # the recording keeps its picture: any frame size and crop up to it builds; a larger one is one
    # line naming the file, both sizes and the ways out
    assert (
        build_main(
            [
                "--raw",
                str(raw),
                "--id",
                "test/t-v0",
                "--root",
                str(tmp_path / "minari"),
                "--frame-size",
                "64x48",
                "--frame-crop",
                "0,0.1,1,1",
            ]
        )
        == 0
    )
    with pytest.raises(BuildError) as refused:
        build_dataset(
            raw, "test/u-v0", EnvConfig(frame_size=(200, 200), frame_crop=(0, 0, 0.5, 1)), root=tmp_path / "minari"
        )
    assert (
        "keeps its picture at 256x256 (128x256 after the crop), smaller than the 200x200 cropped to 0,0,0.5,1 "
        "frames asked for: build at most 128x256, or record with a larger master size" in str(refused.value)
    )

    # a salvaged episode with no samples (a crash before the first flush) is skipped, not fatal
    recorded_as = dict(attribute_names=PROFILE.attribute_names, window_size=MASTER_SIZE)
    writer = EpisodeWriter(raw, meta(**recorded_as))
    writer.finish("recovered", {})
    assert len(list_episodes(raw)) == 2
    assert build_dataset(raw, "test/w-v0", root=tmp_path / "minari").total_episodes == 1
    only_empty = tmp_path / "only_empty"
    EpisodeWriter(only_empty, meta(**recorded_as)).finish("recovered", {})
    with pytest.raises(BuildError, match="shorter than one 200 ms step"):
        build_dataset(only_empty, "test/v-v0", root=tmp_path / "minari")


def test_vocab_lists_the_animation_ids_recorded_as_a_profile_table(tmp_path: Path, capsys):
    import tomllib

    from capture import vocab

    record_in_process(tmp_path / "raw", episodes=1, max_seconds=30)
    assert vocab.main([str(tmp_path / "raw")]) == 0
    printed = capsys.readouterr().out
    table = tomllib.loads(printed[printed.index("[animations]") :])["animations"]
    # everything the simulator's fighters did is one of its known ids, the idle ones among them
    assert set(table["boss"]) <= set(PROFILE.boss_animations) and len(table["boss"]) >= 3
    assert set(table["player"]) <= set(PROFILE.player_animations) and 0 in table["player"]
    assert vocab.main([str(tmp_path / "nothing")]) == 2
    assert "no finished episodes" in capsys.readouterr().err


def test_the_sampler_keeps_its_deadlines_and_counts_each_episode_on_its_own():
    from env.sim.game import SimGame

    from capture.sampler import Sampler

    game = SimGame("sim_margit", seed=0)
    sampler = Sampler(game, InputLog(KEYS), rate_hz=30)
    times = [sampler.next_sample()[0].t for _ in range(10)]
    assert np.allclose(np.diff(times), 1 / 30, atol=1 / 60)  # lock-step: on the 60 Hz tick grid
    game.wait_until(game.now() + 0.5)  # a pause between episodes: about 15 deadlines missed
    first, *_ = sampler.next_sample()
    assert sampler.stats.dropped >= 14  # every missed deadline counted, none squeezed in
    sampler.count_from(first)  # a new episode starts with this sample
    for _ in range(5):
        sampler.next_sample()
    stats = sampler.stats
    assert (stats.samples, stats.dropped, stats.late) == (6, 0, 0)
    assert stats.achieved_rate_hz == pytest.approx(30, rel=0.05)


@pytest.mark.realtime
def test_a_live_sampler_rides_out_slow_rounds_without_dropping(sim_server, player):
    """Against a live game the next sample starts on its deadline even while a slow one is still
    in flight; samples come back in time order with their input windows in order."""
    from env.siphon.game import SiphonGame

    from capture.sampler import Sampler

    game = SiphonGame(sim_server.host, "sim_margit")
    observe, rounds = game.observe, itertools.count()

    def stalling(names):  # one round in ten stalls for 2.5 periods, as a busy server does now and then
        if next(rounds) % 10 == 5:
            time.sleep(2.5 / 30)
        return observe(names)

    game.observe = stalling
    inputs = InputLog(KEYS)
    sampler = Sampler(game, inputs, rate_hz=30)
    samples, events = [], []
    for _ in range(60):
        inputs.mouse_move(1.0, 0.0)  # input, but no press: every sample is on its deadline
        sample, _, _, window_events = sampler.next_sample()
        samples.append(sample)
        events.append(window_events)
    sampler.close()
    game.close()
    gaps = np.diff([s.t for s in samples])
    # a sampler that waited out each stall would leave gaps of 2.5 periods and count drops
    assert sampler.stats.dropped == 0 and gaps.min() > 0 and gaps.max() < 2 / 30
    events = np.concatenate([*events, inputs.drain().events])
    assert np.all(np.diff(events["t"]) >= 0) and len(events) == 60  # windows in order, no event lost
    assert sampler.stats.at_presses == 0


@pytest.mark.realtime
def test_a_live_sampler_samples_a_press_as_it_lands_and_keeps_its_rhythm_from_there(sim_server, player):
    """A person presses off the recorder's schedule; the sample before a press can be a period
    older than the game the press was made on, and BC on that pairing dodges early. Against a
    live game a press is sampled at once, and the schedule runs on from that sample."""
    from env.siphon.game import SiphonGame

    from capture.sampler import Sampler

    game = SiphonGame(sim_server.host, "sim_margit")
    inputs = InputLog(KEYS)
    sampler = Sampler(game, inputs, rate_hz=30)
    try:
        scheduled = sampler.next_sample()[0]
        time.sleep(max(0.0, scheduled.t + 0.4 / 30 - time.monotonic()))  # the next deadline 20 ms away
        pressed_at = time.monotonic()
        inputs.key(KEYS[0], True)
        at_press = sampler.next_sample()[0]
        after = sampler.next_sample()[0]
        inputs.key(KEYS[0], False)  # a release is no press: the schedule holds
        on_schedule = sampler.next_sample()[0]
    finally:
        sampler.close()
        game.close()
    # within a loaded machine's thread wake-up, not at the deadline 20 ms on
    assert at_press.pressed[0] and 0 <= at_press.t - pressed_at < 0.010
    assert after.t - at_press.t == pytest.approx(1 / 30, abs=0.010)  # the rhythm starts again at the press
    assert on_schedule.t - after.t == pytest.approx(1 / 30, abs=0.010)
    assert sampler.stats.at_presses == 1


def test_a_discarded_episodes_video_is_closed_and_deleted(tmp_path: Path):
    kept, dropped = EpisodeWriter(tmp_path, meta(), name="kept"), EpisodeWriter(tmp_path, meta(), name="dropped")
    for writer in (kept, dropped):
        for i in range(10):
            writer.append(sample(i))
    kept.finish("win", {})
    dropped.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept_autopilot.h5", "kept_autopilot.mkv"]
    assert not dropped._video._thread.is_alive()


def test_an_episode_starts_when_both_fighters_are_at_full_hp():
    """env.fight_rules.fresh, the one rule for "a fight has (re)started" (the recorder's cutter, both
    games' restarts): after a fight ends, a boss back at full HP is not enough while the player
    is still hurt."""
    from capture.episode_cuts import FightTracker

    tracker = FightTracker()
    fresh = {"HeroHp": 500, "HeroMaxHp": 500, "NpcHp": 4174, "NpcMaxHp": 4174}
    assert tracker.update({**fresh, "HeroHp": 300, "NpcHp": 1000}) == "start"  # recording began mid-fight
    assert tracker.update({**fresh, "NpcHp": 0}) == "win"
    assert tracker.update({**fresh, "HeroHp": 300}) is None
    assert tracker.update(fresh) == "start"


@pytest.mark.parametrize("first_tick", [0, 12_906, 24_368, 5_184_000])
def test_every_step_of_a_lock_step_recording_holds_the_same_number_of_samples(first_tick: int):
    """Samples taken exactly on the step grid (lock-step, 30 Hz, 200 ms steps) make steps of six
    samples each, however late in a session the episode starts: the float sums behind the
    boundaries must not push a boundary sample into the next step."""
    t = (first_tick + 2 * np.arange(3000)) / 60  # the simulator's clock: ticks / 60 Hz
    boundaries = t[0] + 0.2 * np.arange(int((t[-1] - t[0]) / 0.2 + 1e-9) + 1)
    assert set(np.diff(samples_at(t, boundaries))) == {6}


def test_a_step_observes_the_game_as_its_press_landed_never_with_the_press_under_way():
    """A person's step grid is laid at their presses, off the recorder's samples. A press shows in
    the game's state at its next tick (a pushed stick walks the hero at once), so a step paired
    with a sample taken well after its press observes the action already under way: BC on a
    controller player's fights paired that way learned to roll only when already walking, and won
    0 of 300 held-out fights. The last sample before the grid's boundary is no better the other
    way: up to a period older than the game the press was made on, and BC on it dodges early. A
    step observes the sample taken as its first press landed (the live recorder takes one), else
    the last one before that press."""
    from capture.build_dataset import PRESS_SAMPLE_S, step_starts
    from capture.labels import press_phase

    dt, slice_s = 0.2, 0.2 / 6
    t = 10.0 + np.arange(1200) / 30  # a recorder's 30 Hz samples
    # a person deciding every 200 ms, 21 ms after a sample, each press a few ms late
    presses = t[0] + 0.021 + dt * np.arange(150) + np.tile([0.0, 0.003, 0.009, 0.001], 150 // 4 + 1)[:150]
    boundaries = t[0] + press_phase(presses, t[0], dt, slice_s) + dt * np.arange(150)
    starts = step_starts(boundaries, presses, slice_s)
    assert np.array_equal(starts, presses)
    # on the schedule alone: the last sample before each press, or one taken as it landed
    paired = t[samples_at(t, starts)]
    assert np.all(paired <= presses + PRESS_SAMPLE_S) and np.all(presses - paired < 1 / 30)
    # the live recorder's own sample at each press, a millisecond after it: that one
    live = np.sort(np.concatenate([t, presses + 0.001]))
    assert np.allclose(live[samples_at(live, starts)], presses + 0.001)
    # a press later in its step (a move noticed mid-step) does not move the step's start
    late = step_starts(boundaries, boundaries + 0.07, slice_s)
    assert np.array_equal(late, boundaries)
    # a lock-step recording's steps begin at its sample times (float sums alike): those samples
    lock_step = t[0] + dt * np.arange(150)
    assert np.array_equal(samples_at(t, step_starts(lock_step, lock_step, slice_s)), 6 * np.arange(150))


def test_recording_in_process_gives_the_callers_signal_handlers_back(tmp_path: Path):
    """``record()`` quits on SIGINT and SIGTERM while it records, then restores the handlers it
    found: a program that records in-process (the human-path benchmark) still stops on SIGTERM."""
    import signal

    from capture.record import RecordSettings, record

    def mine(*_: object) -> None: ...

    before, interrupt = signal.signal(signal.SIGTERM, mine), signal.getsignal(signal.SIGINT)
    try:
        record(
            RecordSettings(
                env=EnvConfig(profile="sim_margit"),
                backend="sim",
                autopilot=True,
                max_episodes=1,
                max_episode_seconds=2,
                out=tmp_path,
            )
        )
        assert signal.getsignal(signal.SIGTERM) is mine and signal.getsignal(signal.SIGINT) is interrupt
    finally:
        signal.signal(signal.SIGTERM, before)


def as_format_1(episode: Path, frame: FrameSpec) -> np.ndarray:
    """Rewrite a format 2 episode as format 1 wrote it (docs/formats.md 1.8): its frames, cropped
    and resized when sampled, inside the file, and no video; returns those frames."""
    recorded = read_episode(episode)
    frames = recorded.frames_at(np.arange(len(recorded)), frame)
    with h5py.File(episode, "r+") as f:
        f.create_dataset("frames", data=frames, chunks=(1, *frame.shape), compression="gzip", compression_opts=1)
        for name in ("video", "video_codec", "video_lossless"):
            del f.attrs[name]
        f.attrs.update({"format_version": 1, "frame_size": list(frame.size), "frame_crop": list(frame.crop)})
    recorded.video.unlink()
    return frames


def test_a_format_1_episode_builds_at_its_own_frame_size_and_says_what_it_gives_for_another(tmp_path: Path):
    raw = tmp_path / "raw"
    record_in_process(raw, episodes=1, max_seconds=4)
    (path,) = list_episodes(raw)
    stored = as_format_1(path, FrameSpec((84, 84), (0.0, 0.1, 1.0, 1.0)))
    episode = read_episode(path)
    assert (
        episode.format == 1 and episode.video is None and episode.stored_frames == FrameSpec((84, 84), (0, 0.1, 1, 1))
    )

    # built at its own size and crop (the command line's default for it), with the frames it stored
    assert build_main(["--raw", str(raw), "--id", "test/old-v0", "--root", str(tmp_path / "minari")]) == 0
    built = next(open_dataset("test/old-v0", tmp_path / "minari").iterate_episodes())
    t = episode.t
    at = samples_at(t, t[0] + 0.2 * np.arange(len(built.actions) + 1))
    assert np.array_equal(built.observations["frame"], stored[at])

    # asked for another, one line saying what it can give and how to get more
    with pytest.raises(BuildError) as refused:
        build_dataset(raw, "test/new-v0", EnvConfig(frame_size=(128, 128)), root=tmp_path / "minari")
    message = str(refused.value)
    assert (
        "\n" not in message
        and f"{path.name} is a format 1 episode: its frames were stored at 84x84 cropped to "
        "0,0.1,1,1 when recorded, and that is all it can give, not 128x128"
        in message
    ), message
    assert "--frame-size 84x84 --frame-crop 0,0.1,1,1" in message and "record again" in message


WINDOWS_LIKE_LOCK = """
import fcntl, sys, time
from pathlib import Path
from env.common.lock import FileLock, LockScheme
# Windows' scheme with a stand-in for msvcrt.locking(fd, LK_NBLCK, 1): a lock on byte 0 of the
# lock file, held by this process, refused to another
scheme = LockScheme(True, lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0),
                    lambda fd: fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0))
lock = FileLock(Path(sys.argv[1]), scheme)
print(lock.acquire(create=True), flush=True)
time.sleep(60)
"""


def test_the_windows_lock_scheme_marks_a_live_recording_with_a_file_beside_it(tmp_path: Path):
    """On Windows a lock on the partial itself would stop HDF5 writing it (its locks are
    mandatory), so the recorder locks ``<partial>.lock`` beside it. The same scheme, with a
    stand-in for ``msvcrt.locking``, on this OS: a live recorder's file is being written; once
    the recorder is killed it is not, and the stale lock file it left is cleaned up."""
    import fcntl

    from env.common.lock import FileLock, LockScheme, is_being_written, lock_path

    scheme = LockScheme(
        True,
        lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0),
        lambda fd: fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0),
    )
    partial = tmp_path / "x_human.h5.partial"
    partial.write_bytes(b"samples")
    assert lock_path(partial, scheme) == tmp_path / "x_human.h5.partial.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", WINDOWS_LIKE_LOCK, str(partial)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "True"
        assert lock_path(partial, scheme).exists() and is_being_written(partial, scheme)
        assert not FileLock(partial, scheme).acquire()
    finally:
        holder.kill()
        holder.wait()
    assert lock_path(partial, scheme).exists()  # a crash leaves the lock file ...
    assert not is_being_written(partial, scheme)  # ... whose lock nobody holds
    assert not lock_path(partial, scheme).exists() and partial.read_bytes() == b"samples"  # cleaned up, data kept


def test_on_windows_ctrl_break_stops_a_recording_as_ctrl_c_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A Windows console has two interrupts, Ctrl+C and Ctrl+Break (SIGBREAK); the recorder keeps
    what it recorded on either. Windows' set of signals, on this OS: its SIGBREAK number (21, a
    job-control signal here, sent to this process alone) quits the recording as F8 does and says
    the run was interrupted."""
    import os
    import signal
    import threading

    from env.common import interrupts
    from env.common.errors import Interrupted

    from capture import record as recorder

    windows = interrupts.interrupt_signals("win32")
    assert windows[:2] == (signal.SIGINT, signal.SIGTERM) and windows[2] == getattr(signal, "SIGBREAK", 21)
    assert interrupts.interrupt_signals("linux") == (signal.SIGINT, signal.SIGTERM)
    monkeypatch.setattr(recorder, "SIGNALS", windows)
    settings = recorder.RecordSettings(
        env=EnvConfig(profile="sim_margit"), backend="sim", autopilot=True, max_episode_seconds=600, out=tmp_path
    )
    threading.Timer(3.0, os.kill, (os.getpid(), windows[2])).start()  # Ctrl+Break, three seconds in
    with pytest.raises(Interrupted) as stopped:
        recorder.record(settings)
    assert stopped.value.exit_code == 128 + windows[2] and "episode(s) saved" in str(stopped.value)
    assert list_episodes(tmp_path), "the fights recorded before the interrupt are kept"
