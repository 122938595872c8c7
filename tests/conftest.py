"""Shared fixtures: real simulator servers over gRPC, and an X server for pynput and the window.

Every test that uses ``sim_server`` runs twice: against the ideal server and against the
real-server mode (Siphon's mutex, scan cost, sticky config, NPC hook, capture and input quirks,
and a world that starts at the Site of Grace), with short timings so the suite stays fast.
``ELDEN_IL_SIM_ARGS`` points every other server a test starts at a mode too
(``env/sim/launcher.py``).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import threading

# One thread per torch (here and in every process a test starts): on a machine of two cores
# running simulator servers beside the tests, torch's busy-waiting thread pool made a 64-step
# PPO run four to five times slower than one thread does. Set before anything imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc
from stable_baselines3.common.policies import ActorCriticPolicy

from env.attribute_config import load_siphon_config
from env.config import EnvConfig
from env.profile import load_profile
from env.sim import display
from env.sim.launcher import SimServer
from env.siphon.client import SiphonClient

from elden_il.policies.policy import NetworkSize, make_policy, save_policy

ROOT = Path(__file__).parents[1]


def committed(relative: str) -> str:
    """A project file's text as git's index holds it (committed, or staged to be): the project's
    own results and settings, which a user's ``dvc repro`` on their own recordings rewrites in
    the work tree; the tests check the project, not the user's results. Outside a git checkout,
    or for a file git does not track, the file as it is."""
    shown = subprocess.run(["git", "show", f":{relative}"], cwd=ROOT, capture_output=True, text=True, check=False)
    return shown.stdout if shown.returncode == 0 else (ROOT / relative).read_text()


def judged(win_rate: float, fights: int = 10) -> dict:
    """One policy's results as an evaluation's report holds them (``eval.json``'s ``policies``)."""
    return {
        "fights": fights,
        "win_rate": win_rate,
        "win_rate_ci95": [max(0.0, win_rate - 0.3), min(1.0, win_rate + 0.08)],
        "boss_damage_dealt": 0.5,
        "player_damage_taken": 0.9,
        "episode_length": 300.0,
    }


TINY_NETWORK = NetworkSize(cnn_channels=(4, 8, 8), cnn_dim=32, state_dim=32, hidden=(32,))
"""A narrow policy network, for tests of what is done with a policy (saving, loading, fine-tuning's
and evaluation's plumbing, recording with one) rather than of how well it learns: the same code
paths as the pipeline's network, at a fraction of its cost to build and train."""


def untrained_policy(config: EnvConfig) -> ActorCriticPolicy:
    """A fresh ``TINY_NETWORK`` policy for ``config``'s spaces."""
    return make_policy(*config.spaces(load_profile(config.profile)), TINY_NETWORK)


def save_untrained(folder: Path, config: EnvConfig, saved_for: EnvConfig | None = None) -> Path:
    """A policy folder holding an untrained policy for ``saved_for``'s spaces (``config``'s by
    default), with ``config`` as its env config: where a BC policy would be."""
    save_policy(untrained_policy(saved_for or config), config, folder)
    return folder


SHORT_FIGHTS = EnvConfig(profile="sim_margit", action_history=4, max_steps=20)
"""An env of short fights (20 steps), where a few dozen steps of fine-tuning hold several."""


@pytest.fixture(scope="module")
def awac_start(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, Path]]:
    """What AWAC starts from in ``SHORT_FIGHTS``: an untrained policy, and a dataset of one short
    expert fight (its id, its Minari root)."""
    from capture.build_dataset import build_dataset
    from capture.record import RecordSettings, record

    root = tmp_path_factory.mktemp("awac")
    record(
        RecordSettings(env=SHORT_FIGHTS, backend="sim", autopilot=True, max_episodes=1, max_episode_seconds=6, out=root)
    )
    build_dataset(root, "test/awac-v0", SHORT_FIGHTS, root=root / "minari")
    return save_untrained(root / "bc", SHORT_FIGHTS), ("test/awac-v0", root / "minari")


REAL_SERVER_TEST_ARGS = (
    "--real-server",
    "--scan-ms",
    "1",
    "--hook-delay-s",
    "0.2",
    "--hook-poll-s",
    "0.05",
    "--capture-init-ms",
    "10",
    "--first-frame-ms",
    "50",
)
"""Real-server mode with every behaviour on and every wait short."""
GAME_SERVER_ARGS = (
    "--profile",
    "eldenring_margit",
    *REAL_SERVER_TEST_ARGS,
    "--death-screen-s",
    "0.5",
    "--loading-s",
    "1.0",
)
"""The simulator as unkind as the game, for the game's own profile: Siphon's mutex, scans, hook and
capture, a world that starts at the Site of Grace with nothing targeted, real deaths and kills
(short screens)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """For pytest-xdist's workers (pyproject.toml's addopts: ``-n 3 --dist loadfile``, each file's
    tests on one worker, so a module's fixture (a reproduced pipeline, a Ray cluster) is built once):
    the files with the most slow tests are handed out first, so the run does not end waiting on a
    long file that started last. Without workers (``-n 0``) the order stays the files' own."""
    if not hasattr(config, "workerinput"):
        return
    slow: Counter[str] = Counter(item.module.__name__ for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.module.__name__])


def main_here(module: str, *argv: str, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """``python -m module argv`` as its ``main`` in this process, for tests of what a command does
    rather than of its process (tests/test_cli.py holds each command's process to its one line and
    exit status, and tests/test_pipeline.py the pipeline's through DVC): the exit status, stdout
    and stderr."""
    package = importlib.import_module(module)
    main = package.main if hasattr(package, "main") else importlib.import_module(f"{module}.__main__").main
    try:
        status = main(list(argv))
    except SystemExit as e:  # argparse's own refusals
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(params=["ideal", "real"])
def sim_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SimServer]:
    """A fresh ``python -m env.sim`` (seed 0, 160x90) on a free loopback port, ideal or real."""
    args = REAL_SERVER_TEST_ARGS if request.param == "real" else ()
    with SimServer(seed=0, size=(160, 90), extra_args=args, log_path=tmp_path / "server.log") as server:
        yield server


@pytest.fixture
def player(sim_server: SimServer) -> Iterator[None]:
    """The person at the game, doing what a client connecting to the real server asks of them:
    lock on (the profile's B) as soon as the game takes input, so Siphon's NPC hook, which holds
    the server's lock until something is targeted, can finish. Outside the fog wall that target
    is the sentry; a fight restart or a walk through the fog wall targets the boss. Nothing to do
    on the ideal server, where the boss is readable from the start (``SimServer.player``)."""
    with sim_server.player():
        yield


@pytest.fixture
def stub(sim_server: SimServer) -> Iterator[pb2_grpc.SiphonServiceStub]:
    """A raw gRPC stub to ``sim_server``, configured with the simulator's own Siphon config
    (memory, input and capture initialized), for tests of the protocol itself."""
    with grpc.insecure_channel(sim_server.host) as channel:
        client = SiphonClient(sim_server.host)
        client.configure(load_siphon_config(ROOT / "env/profiles/sim_margit/siphon.toml"))
        yield pb2_grpc.SiphonServiceStub(channel)
        client.close()


@pytest.fixture(scope="session")
def xvfb() -> Iterator[str]:
    """An X display (Xvfb without key auto-repeat); skips where Xvfb or xdotool are missing."""
    if not display.can_start():
        pytest.skip("Xvfb and xdotool are needed (scripts/setup.sh installs them)")
    with display.virtual_display() as name:
        yield name
        let_stopped_listeners_end(name)


@pytest.fixture
def repeating_xvfb() -> Iterator[str]:
    """An X display whose keys auto-repeat as a desktop's do, only sooner and faster: a key held
    for a second is pressed again some thirty times (pynput reports each as a press)."""
    if not display.can_start():
        pytest.skip("Xvfb and xdotool are needed (scripts/setup.sh installs them)")
    with display.virtual_display(auto_repeat=(100, 30)) as name:
        yield name
        let_stopped_listeners_end(name)


def let_stopped_listeners_end(name: str) -> None:
    """Before the display ``name`` closes: a pynput listener's thread on X goes on after ``stop()``
    until the X server delivers one more event, and then flushes its connection; a display closed
    first turns that flush into a traceback from a thread (``ConnectionClosedError``) in a
    passing run. A pointer nudge and a Shift tap give the mouse's and the keyboard's listeners
    their event (nothing listens any more), and each stopped listener ends."""
    util = sys.modules.get("pynput._util")
    stopped = [t for t in threading.enumerate() if util and isinstance(t, util.AbstractListener) and not t.running]
    if not stopped:
        return
    nudge = ["xdotool", "mousemove_relative", "--", "1", "0", "key", "Shift_L"]
    subprocess.run(nudge, env={**os.environ, "DISPLAY": name}, check=True)
    for listener in stopped:
        listener.join(timeout=5)
