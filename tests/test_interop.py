"""Datasets for the tools researchers already use: they describe themselves, store frames
compressed but bit-exact, and convert to d3rlpy and TorchRL with real values.

A small dataset is built from autopilot fights recorded lock-step on the in-process simulator
(as ``tests/test_replay.py`` does), for an env with a frame stack and an action history so the
converters must present what the env shows, not only the stored keys.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from env.config import EnvConfig
from env.factory import make_env

from capture.build_dataset import build_dataset
from capture.compression import NONE
from capture.provenance import REPOSITORY, Provenance, code_digest, provenance, stage_code
from capture.record import RecordSettings, record

from elden_il.data import demonstrations, load_demonstrations, open_dataset

ROOT = Path(__file__).resolve().parents[1]
CONFIG = EnvConfig(profile="sim_margit", frame_stack=2, action_history=3)
FIGHT_SEED = 7


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short recorded fights built twice: frames compressed (the default) and raw. Recorded
    losslessly at the env's own picture, so the dataset's frames are the live env's bit for bit."""
    tmp = tmp_path_factory.mktemp("interop")
    record(
        RecordSettings(
            env=CONFIG,
            backend="sim",
            autopilot=True,
            max_episodes=2,
            max_episode_seconds=12,
            seed=FIGHT_SEED,
            out=tmp / "raw",
            master_size=CONFIG.picture_size,
            video_codec="lossless",
        )
    )
    build_dataset(tmp / "raw", "test/raw-v0", CONFIG, root=tmp / "minari", compression=NONE)
    build_dataset(tmp / "raw", "test/interop-v0", CONFIG, root=tmp / "minari")
    return tmp / "minari"


def test_compressed_frames_read_back_bit_identical_and_smaller(built: Path):
    size = {i: (built / f"test/{i}-v0/data/main_data.hdf5").stat().st_size for i in ("raw", "interop")}
    assert size["interop"] * 5 < size["raw"], size
    raw = load_demonstrations("test/raw-v0", built)
    packed = load_demonstrations("test/interop-v0", built)
    assert set(raw.obs) == set(packed.obs)
    for key in raw.obs:
        assert raw.obs[key].dtype == packed.obs[key].dtype and np.array_equal(raw.obs[key], packed.obs[key]), key
    assert np.array_equal(raw.actions, packed.actions) and np.array_equal(raw.rewards, packed.rewards)
    assert open_dataset("test/interop-v0", built).storage.metadata["dataset_size"] < 1 + size["interop"] / 1e6


def test_the_dataset_describes_itself_and_the_code_that_built_it(built: Path):
    metadata = open_dataset("test/interop-v0", built).storage.metadata
    description = metadata["description"]
    assert description.startswith("2 recorded boss fights") and "{" not in description
    for words in (
        "200 ms",
        "84x84",
        "the last 2 frames",
        "the last 3 actions",
        "minari.load_dataset('test/interop-v0')",
        "recover_environment()",
        "gzip 6",
    ):
        assert words in description, words
    assert metadata["code_permalink"] == REPOSITORY
    assert json.loads(metadata["elden_il"])["code"] == {"digest": code_digest()}
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", code_digest())


def test_the_code_digest_follows_the_code_that_builds_datasets_and_nothing_else(tmp_path: Path):
    """A dataset carries the digest of the code the dataset stage depends on: the same code gives
    the same digest at any commit and in any checkout (committing dvc.lock or other code changes
    nothing), and any change to that code changes it. The commit a checkout is at is git's, for
    the run report only."""
    here = tmp_path / "checkout"
    assert provenance(here).permalink == REPOSITORY  # not a git checkout: no commit
    for name in (*stage_code(), "dvc.yaml"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, here / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (here / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, here / name)
    copied = code_digest(here)
    assert copied == code_digest()  # another folder, not a git checkout: the same code, the same digest

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(here), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    git("add", "."), git("commit", "-qm", "code")
    assert code_digest(here) == copied and provenance(here) == Provenance(git("rev-parse", "HEAD"), dirty=False)
    (here / "dvc.lock").write_text("results\n")
    (here / "capture" / "other.py").write_text("y = 1\n")  # code that does not build datasets
    git("add", "."), git("commit", "-qm", "results and other code")
    assert code_digest(here) == copied and not provenance(here).dirty
    (here / "env" / "profiles" / "__pycache__").mkdir()
    (here / "env" / "profiles" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")  # Python's, not code
    assert code_digest(here) == copied
    for changed in ("capture/build_dataset.py", "env/profiles/sim_margit/profile.toml"):
        original = (here / changed).read_bytes()
        (here / changed).write_bytes(original + b"\n")
        assert code_digest(here) != copied and provenance(here).dirty, changed
        (here / changed).write_bytes(original)
    (here / "env" / "profiles" / "sim_margit" / "new.toml").write_text("")  # a new file in a folder it reads
    assert code_digest(here) != copied


def test_torchrl_buffer_holds_the_real_steps(built: Path):
    pytest.importorskip("torchrl", reason="the torchrl extra is not installed: pip install -e '.[torchrl]'")

    from elden_il.interop import to_torchrl

    dataset = open_dataset("test/interop-v0", built)
    buffer = to_torchrl(dataset)
    demos = load_demonstrations("test/interop-v0", built)
    assert len(buffer) == len(demos) == dataset.total_steps
    data = buffer[np.arange(len(buffer))]
    assert data["observation", "frame"].float().mean() > 10, "frames are not all zeros (TorchRL's own loader bug)"
    for key, value in demos.batch(np.arange(len(demos))).items():
        assert np.array_equal(data["observation", key].numpy(), value), key
    assert np.array_equal(data["action"].numpy(), demos.actions)
    assert np.array_equal(data["next", "reward"].numpy()[:, 0], demos.rewards.astype(np.float32))
    # the next observation of an episode's last step is the observation it ended on
    start = 0
    for episode in dataset.iterate_episodes():
        end = start + len(episode.actions)
        assert np.array_equal(
            data["next", "observation", "frame"][start:end].numpy(), episode.observations["frame"][1:]
        )
        assert data["next", "done"][end - 1].item() and not data["next", "done"][start : end - 1].any()
        assert data["next", "terminated"][end - 1].item() == episode.terminations[-1]
        start = end


@pytest.mark.slow
def test_d3rlpy_trains_on_the_dataset_and_plays_a_fight_through_the_wrapper(built: Path, tmp_path: Path):
    d3rlpy = pytest.importorskip("d3rlpy", reason="the d3rlpy extra is not installed: pip install -e '.[d3rlpy]'")

    from elden_il.evaluation.fight_loop import run_fights
    from elden_il.interop import D3rlpyActor, D3rlpyObservation, to_d3rlpy
    from elden_il.policies.d3rlpy_encoder import FrameAndStateEncoderFactory

    dataset = open_dataset("test/interop-v0", built)
    mdp = to_d3rlpy(dataset)
    demos = demonstrations(dataset)
    assert sum(len(e.rewards) for e in mdp.episodes) == len(demos) and len(mdp.episodes) == 2
    frames, state = mdp.episodes[0].observations
    assert frames.shape[1:] == (6, 84, 84) and frames.dtype == np.uint8 and state.dtype == np.float32

    # the wrapper shows the live env exactly as the dataset shows d3rlpy the recorded fight
    env = D3rlpyObservation(dataset.recover_environment())
    try:
        (live_frames, live_state), _ = env.reset(options={"fight_seed": FIGHT_SEED})
        assert env.observation_space.contains((live_frames, live_state))
        assert np.array_equal(live_frames, frames[0]) and np.array_equal(live_state, state[0])
    finally:
        env.close()

    algo = d3rlpy.algos.DiscreteBCConfig(encoder_factory=FrameAndStateEncoderFactory(), batch_size=16).create(
        device="cpu:0"
    )
    # a few updates: that it trains on the converted data, not how well
    algo.fit(
        mdp,
        n_steps=32,
        n_steps_per_epoch=32,
        show_progress=False,
        save_interval=10**9,
        logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
    )
    records, _ = run_fights(lambda: D3rlpyObservation(make_env(CONFIG)), D3rlpyActor(algo), [0], parallel=1)
    assert len(records) == 1 and records[0].length > 0
