"""Fan-out over Ray (``elden_il.fanout``): the same fights, fight for fight, on a real two-node
cluster as in one process; a worker killed mid-evaluation has its fights rerun, or named when
they are lost for good; an unreachable ``RAY_ADDRESS`` is one line.

One cluster for the module (two nodes of one CPU each, on loopback only): starting one costs
tens of seconds on two shared cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
import yaml
from conftest import save_untrained

from env.common.errors import EldenILError
from env.config import EnvConfig
from env.factory import make_env
from env.sim.expert import ScriptedExpert

from elden_il.duel import duel
from elden_il.evaluation.fight_loop import PlayerActor, RandomActor, play_fights
from elden_il.fanout import FanoutError, fan_out, keep_to_loopback

ROOT = Path(__file__).parents[1]
CONFIG = EnvConfig(profile="sim_margit", action_history=4, max_steps=120)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head and one worker node, one CPU each, bound to 127.0.0.1; its address."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    keep_to_loopback()
    from ray.cluster_utils import Cluster

    local = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1"})
    local.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    yield local.address
    import ray

    ray.shutdown()
    local.shutdown()


@pytest.fixture
def on_cluster(cluster: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The one switch: Ray's own RAY_ADDRESS, set for this test."""
    monkeypatch.setenv("RAY_ADDRESS", cluster)
    return cluster


make = partial(make_env, CONFIG, state_attributes=ScriptedExpert.ATTRIBUTES)
"""The env factory, by reference to importable code: Ray workers import what they unpickle, and
this test module is not on their path."""


@pytest.mark.slow
def test_duel_plays_the_same_fights_on_a_two_node_cluster(monkeypatch: pytest.MonkeyPatch, cluster: str):
    seeds = list(range(10, 16))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    here = duel("expert", seeds, CONFIG)
    monkeypatch.setenv("RAY_ADDRESS", cluster)
    import ray

    there = duel("expert", seeds, CONFIG)
    assert there == here  # every field of every fight, floats included
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    assert any(r.win for r in here) or any(r.boss_damage_dealt > 0 for r in here)  # fights, not no-ops


@pytest.mark.slow
def test_evaluate_ships_a_saved_policy_and_plays_it_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: str
):
    import torch

    from elden_il.evaluation.evaluate import PolicyActor, evaluate

    torch.manual_seed(0)
    save_untrained(tmp_path, CONFIG)
    actors = {"random": RandomActor(), "policy": PolicyActor(tmp_path, True)}
    seeds = list(range(100, 106))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    here = evaluate(actors, make, seeds, parallel=3)
    monkeypatch.setenv("RAY_ADDRESS", cluster)
    there = evaluate(actors, make, seeds, parallel=3)
    for name in actors:
        assert {k: v for k, v in there[name].items() if k != "fights_per_minute"} == {
            k: v for k, v in here[name].items() if k != "fights_per_minute"
        }


@pytest.mark.slow
def test_evaluate_over_processes_of_this_machine_plays_the_same_fights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Without Ray, ``workers`` processes of this machine play every actor's fights, the env
    factory a closure as the pipeline's is: the same records, fight for fight, and the same first
    fight for its GIF, as in this process."""
    import torch

    from elden_il.evaluation.evaluate import PolicyActor, evaluate

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    torch.manual_seed(0)
    save_untrained(tmp_path / "policy", CONFIG)
    actors = {
        "random": RandomActor(),
        "policy": PolicyActor(tmp_path / "policy", True),
        "expert": PlayerActor("expert", CONFIG),
    }
    config = CONFIG  # captured: the closure travels by value

    def closure():
        return make_env(config, state_attributes=ScriptedExpert.ATTRIBUTES, render_mode="rgb_array")

    seeds = list(range(100, 107))
    gifs = {n: tmp_path / n for n in ("here", "there")}
    here = evaluate(actors, closure, seeds, gif_dir=gifs["here"], parallel=2)
    there = evaluate(actors, closure, seeds, gif_dir=gifs["there"], parallel=2, workers=2)
    for name in actors:
        assert {k: v for k, v in there[name].items() if k != "fights_per_minute"} == {
            k: v for k, v in here[name].items() if k != "fights_per_minute"
        }
        assert (gifs["there"] / f"{name}.gif").read_bytes() == (gifs["here"] / f"{name}.gif").read_bytes()


def test_a_workers_progress_reaches_the_caller_while_its_job_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """What a job in one of this machine's worker processes reports (a fight as it ends) reaches
    the caller at once, not with the job's result: each job here waits for the caller to have
    heard it before it returns (an hour's live evaluation in six jobs counted six times)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def job(flag: str) -> str:  # nested: it travels to the workers by value
        from elden_il.fanout import report_progress

        report_progress(flag)
        deadline = time.monotonic() + 30
        while not Path(flag).exists():
            if time.monotonic() > deadline:
                return "not heard"
            time.sleep(0.05)
        return "heard"

    heard: list[str] = []

    def on_progress(flag: str) -> None:
        heard.append(flag)
        Path(flag).touch()

    flags = [str(tmp_path / name) for name in ("a", "b")]
    assert fan_out(job, flags, workers=2, on_progress=on_progress) == ["heard", "heard"]
    assert sorted(heard) == flags


def test_fights_played_by_worker_processes_are_counted_as_each_ends(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    counted: list[int] = []
    seeds = [3, 4, 5, 6, 7]
    records, _ = play_fights(
        make, RandomActor(), seeds, parallel=1, on_fight=lambda r: counted.append(r.seed), workers=2
    )
    assert sorted(counted) == seeds == [r.seed for r in records]


CTRL_C_DURING_STARTUP = """
import sys, time
from env.common.cli import run_command
from elden_il.fanout import in_processes
print("starting", flush=True)
sys.exit(run_command(lambda: in_processes(time.sleep, [(30,), (30,)], 2, lambda _: None)))
"""


def in_a_terminal(program: str) -> subprocess.Popen:
    """``python -c program`` as a command typed in a terminal: a process group of its own, which a
    Ctrl-C reaches whole (``os.killpg``); this machine's worker processes, not Ray's."""
    return subprocess.Popen(
        [sys.executable, "-c", program],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
    )


@pytest.mark.parametrize("after_s", [0.05, 0.4, 1.0])
def test_ctrl_c_while_worker_processes_start_is_one_line_from_the_command_not_theirs(after_s: float):
    """Ctrl-C reaches every process of the terminal's group, the workers starting up too: a
    worker that heard it before it had set itself deaf printed its own KeyboardInterrupt
    traceback beside the command's one line. They start deaf to it; the command says it once."""
    process = in_a_terminal(CTRL_C_DURING_STARTUP)
    assert process.stdout.readline() == "starting\n"  # the workers are being started (they take seconds)
    time.sleep(after_s)
    os.killpg(process.pid, signal.SIGINT)
    err = process.communicate(timeout=60)[1]
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().startswith("error: interrupted by SIGINT"), err


CTRL_C_IN_THE_SPAWNS = """
import os, signal, time
import multiprocessing as mp
from env.common import interrupts
from elden_il.fanout import _born_deaf_to_ctrl_c

# each line one write(2): the two processes share the pipe, and print() with PYTHONUNBUFFERED (as CI
# runs) writes a line's words and its newline apart, so that they interleave ("bornheard")
SAYS_ITS_MASK = "import os, signal; os.write(1, b'born deaf\\\\n' if signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set()) else b'born hearing\\\\n')"
with interrupts.watched():
    try:
        with _born_deaf_to_ctrl_c():
            worker = mp.get_context("spawn").Process(target=exec, args=(SAYS_ITS_MASK,))
            worker.start()
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the workers are being spawned
            time.sleep(0.2)
        os.write(1, b"ran on\\n")
    except KeyboardInterrupt:
        os.write(1, b"heard\\n")
worker.join()
"""


CTRL_C_WHILE_WORKERS_REPORT = """
import sys, time
from env.common.cli import run_command
from elden_il.fanout import in_processes

def job(n):
    from elden_il.fanout import report_progress
    while True:
        report_progress("a fight ended")

def on_progress(message):
    if message == "a fight ended":
        print("reporting", flush=True)
    time.sleep(0.01)  # slower than the workers: they wait on a full pipe, holding its lock

sys.exit(run_command(lambda: in_processes(job, [(1,), (2,)], 2, lambda _: None, on_progress)))
"""


def test_a_ctrl_c_while_workers_report_progress_stops_the_command_at_once():
    """Ctrl-C stops the workers where they are: one stopped in the middle of reporting progress
    dies holding the progress queue's lock, and the command's end, waiting for that lock to say
    "no more progress", waited for ever (the evaluate stage's hang after Ctrl-C in CI). The
    workers here report without pause, so the Ctrl-C all but always lands in one's report."""
    process = in_a_terminal(CTRL_C_WHILE_WORKERS_REPORT)
    try:
        assert process.stdout.readline() == "reporting\n"
        time.sleep(1.0)  # the pipe full, both workers waiting in a report
        os.killpg(process.pid, signal.SIGINT)
        err = process.communicate(timeout=30)[1]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err
    assert err.strip().startswith("error: interrupted by SIGINT"), err


def test_a_ctrl_c_while_the_workers_are_spawned_is_heard_once_they_are():
    """Under load the spawns take long enough for a Ctrl-C to land in them: it was ignored there
    (the workers were born ignoring it, as their parent did), so the command ran on to its end.
    Blocked instead, it waits: the workers are born with it blocked (deaf until they ignore it),
    and the command hears it as the spawns end."""
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_IN_THE_SPAWNS], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert sorted(done.stdout.split()) == ["born", "deaf", "heard"], done.stdout + done.stderr


def started_by_this_process(pid: int) -> bool:
    """Whether ``pid`` descends from this process: a worker of the cluster this test started, not
    of another test's Ray running beside it (pytest-xdist's other worker)."""
    while pid > 1:
        if pid == os.getpid():
            return True
        # /proc/PID/stat: "pid (command) state ppid ...", the command possibly holding spaces
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return False


def kill_a_running_fight_chunk(timeout: float = 60.0) -> int:
    """SIGKILL one of this cluster's Ray workers while it plays fights (its process title names the
    task); its pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                pid = int(cmdline.parent.name)
                playing = cmdline.read_bytes().startswith(b"ray::_call") and started_by_this_process(pid)
            except OSError:  # the process ended while we looked
                continue
            if playing:
                os.kill(pid, signal.SIGKILL)
                return pid
        time.sleep(0.05)
    raise AssertionError("no Ray worker of this test's cluster was seen playing fights")


def play_while_killing(seeds: list[int], retries: int) -> tuple[object, int]:
    """Play ``seeds`` on the cluster while one worker is killed mid-chunk: (result or error, pid)."""
    outcome: dict = {}

    def play() -> None:
        try:
            outcome["result"] = play_fights(make, PlayerActor("expert", CONFIG), seeds, parallel=2, retries=retries)[0]
        except EldenILError as e:
            outcome["result"] = e

    thread = threading.Thread(target=play)
    thread.start()
    pid = kill_a_running_fight_chunk()
    thread.join(timeout=300)
    return outcome["result"], pid


@pytest.mark.slow
def test_a_worker_killed_mid_evaluation_has_its_fights_rerun(on_cluster: str, monkeypatch: pytest.MonkeyPatch):
    seeds = list(range(200, 212))
    result, _ = play_while_killing(seeds, retries=3)
    monkeypatch.delenv("RAY_ADDRESS")
    assert result == play_fights(make, PlayerActor("expert", CONFIG), seeds, parallel=2)[0]


@pytest.mark.slow
def test_fights_lost_for_good_are_named_never_a_short_count(on_cluster: str):
    seeds = list(range(300, 312))
    result, _ = play_while_killing(seeds, retries=0)
    assert isinstance(result, FanoutError), result
    assert "jobs lost with their Ray workers" in str(result)
    assert "fights of seeds 3" in str(result) and "\n" not in str(result)


def test_an_unreachable_ray_address_is_one_line():
    """A head that is not there: one line at once (Ray alone would retry for minutes)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens on it once closed
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "elden_il.duel", "--fights", "2", "--quiet"],
        cwd=ROOT,
        env={**os.environ, "RAY_ADDRESS": f"127.0.0.1:{port}", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"RAY_ADDRESS=127.0.0.1:{port}: no Ray head answers there" in lines[0]
    assert "ray start --head" in lines[0] and "unset RAY_ADDRESS" in lines[0]
    assert time.monotonic() - started < 60


class Silent:
    """A loopback port that accepts connections and never says a word (a port forward to
    nothing, a stuck proxy)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.server.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.server.close()
        for connection in self.held:
            connection.close()


@pytest.mark.parametrize("listener", ["silent", "simulator"])
def test_a_port_that_accepts_but_is_no_ray_head_is_one_line_within_30_s(tmp_path: Path, listener: str):
    """RAY_ADDRESS at a loopback port that accepts TCP but is not Ray: ``ray.init`` waited 300 s
    and more with no line. Ray's own first call, made with a deadline, tells a head from
    anything else."""
    from env.sim.launcher import SimServer

    if listener == "silent":
        silent = Silent()
        address, stop = f"127.0.0.1:{silent.port}", silent.close
    else:
        server = SimServer(size=(84, 84), log_path=tmp_path / "server.log")
        server.__enter__()
        address, stop = server.host, lambda: server.__exit__(None, None, None)
    try:
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "elden_il.duel", "--fights", "2", "--quiet"],
            cwd=ROOT,
            env={**os.environ, "RAY_ADDRESS": address, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - started
    finally:
        stop()
    assert result.returncode == 2 and took < 30, (took, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: RAY_ADDRESS={address}: something listens there, but no Ray head"
    ), result.stderr
    assert ("Siphon or simulator server" in lines[0]) == (listener == "simulator"), lines[0]


@pytest.mark.slow
def test_the_scaling_study_gives_the_same_rows_on_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: str
):
    """Each (fights, training seed) policy is a Ray task: trained and evaluated there, the same
    policy and the same fights as in one process."""

    from elden_il.params import load_params
    from elden_il.studies.scaling import study

    params = load_params(ROOT / "params.yaml")
    # fights cut at 60 steps and one epoch: the same rows both ways is the question, not how well BC learns
    params = replace(params, bc=replace(params.bc, epochs=1), env=replace(params.env, max_steps=60))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    here = study([1], [0, 1], 2, params, tmp_path / "here")  # two policies (Ray tasks) on one recorded fight
    monkeypatch.setenv("RAY_ADDRESS", cluster)
    there = study([1], [0, 1], 2, params, tmp_path / "there")
    timings = ("train_seconds",)
    assert [{k: v for k, v in row.items() if k not in timings} for row in there["rows"]] == [
        {k: v for k, v in row.items() if k not in timings} for row in here["rows"]
    ]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["here", "on the cluster"])
def test_the_stability_bench_judges_a_saved_run_exactly_as_one_it_trains_itself(
    tmp_path: Path, request: pytest.FixtureRequest, where: str
):
    """``--run`` (a fine-tuning already done, e.g. the pipeline's) and ``--variant`` (trained by
    the bench, here or as a job on the cluster) go through one judgement: the same settings give
    the same curve, the same held-out results, and one chart with both."""
    from elden_il.params import FinetuneConfig, read_section
    from elden_il.training.finetune import finetune

    config = replace(CONFIG, max_steps=20)  # short fights: a few dozen steps hold several
    bc = save_untrained(tmp_path / "bc", config)
    tiny = {
        "method": "ppo",  # the stability study's
        "total_steps": 64,
        "num_envs": 1,
        "subprocesses": False,
        "n_steps": 32,
        "batch_size": 32,
        "n_epochs": 1,
        "value_warmup_steps": 32,
        "runs": 1,  # the policy one run ends with, as the bench judges a variant's
    }
    pipeline = yaml.safe_load((ROOT / "params.yaml").read_text())["finetune"]  # what a variant starts from
    finetune(bc, read_section({**pipeline, **tiny}, "finetune", FinetuneConfig), config, tmp_path / "saved")

    results, chart = tmp_path / "results.json", tmp_path / "curves.png"
    ray = {"RAY_ADDRESS": request.getfixturevalue("cluster")} if where == "on the cluster" else {}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "elden_il.studies.finetune_stability",
            "--policy",
            str(bc),
            "--run",
            "saved",
            str(tmp_path / "saved"),
            "--variant",
            "trained",
            *(f"{k}={str(v).lower()}" for k, v in tiny.items()),
            "--window",
            "32",
            "--fights",
            "3",
            "--json",
            str(results),
            "--plot",
            str(chart),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | ray,
    )
    variants = json.loads(results.read_text())["variants"]
    saved, trained = variants["saved"], variants["trained"]
    assert [w["until"] for w in saved["curve"]] == [32, 64]
    assert saved["curve"] == trained["curve"] and saved["fights"] == trained["fights"]
    for mode in ("deterministic", "sampled"):
        assert saved["held_out"][mode]["fights"] == 3
        assert {k: v for k, v in saved["held_out"][mode].items() if k != "fights_per_minute"} == {
            k: v for k, v in trained["held_out"][mode].items() if k != "fights_per_minute"
        }
    assert chart.stat().st_size > 10_000


@pytest.mark.slow
def test_rllib_ppo_trains_on_the_registered_env_on_the_cluster(on_cluster: str):
    """RLlib above the Gymnasium API, as EldenGym's architecture promises: the registered id
    (``env:`` makes each env runner import the package that registers it), its Dict observation
    flattened by RLlib's own connector, the in-process simulator, an env runner on the cluster."""
    import math

    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.connectors.env_to_module import FlattenObservations

    from elden_il.fanout import connect

    connect()
    config = (
        PPOConfig()
        .environment("env:EldenIL/Margit-v0", env_config={"frame_size": (16, 16), "max_steps": 40})
        .env_runners(
            num_env_runners=1,
            rollout_fragment_length=64,
            env_to_module_connector=lambda env, spaces=None, device=None: FlattenObservations(),
        )
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
    )
    algo = config.build_algo()
    try:
        results = [algo.train() for _ in range(2)]
    finally:
        algo.stop()
    assert [r["training_iteration"] for r in results] == [1, 2]
    assert results[-1]["env_runners"]["num_env_steps_sampled_lifetime"] == 256
    assert math.isfinite(results[-1]["learners"]["default_policy"]["total_loss"])


VEC_CONFIG = EnvConfig(profile="sim_margit", action_history=4, max_steps=20, frame_size=(36, 36))


@pytest.mark.slow
def test_the_ray_vector_env_gives_the_local_vector_envs_rollouts(on_cluster: str):
    """Sub-envs in Ray actors on the two nodes: the same observations, rewards, ends of episode
    and terminal observations as SB3's DummyVecEnv for the same seeds, through auto-resets."""
    import numpy as np
    from stable_baselines3.common.vec_env import DummyVecEnv

    from env.factory import env_fns

    from elden_il.training.ray_vec_env import RayVecEnv

    def rollout(vec) -> list:
        vec.seed(7)
        steps = [vec.reset()]
        rng = np.random.default_rng(0)
        for _ in range(45):  # two episodes and a bit, each env
            steps.append(vec.step(rng.integers(vec.action_space.n, size=vec.num_envs)))
        vec.close()
        return steps

    here = rollout(DummyVecEnv(env_fns(VEC_CONFIG, "sim", 2)))
    there = rollout(RayVecEnv(env_fns(VEC_CONFIG, "sim", 2)))
    for mine, theirs in zip(here, there):
        obs_here, obs_there = (mine, theirs) if isinstance(mine, dict) else (mine[0], theirs[0])
        for key in obs_here:
            np.testing.assert_array_equal(obs_there[key], obs_here[key])
        if not isinstance(mine, dict):
            # rewards: DummyVecEnv keeps float32, SubprocVecEnv (and so this) the env's own floats
            np.testing.assert_array_equal(theirs[1].astype(np.float32), mine[1])
            np.testing.assert_array_equal(theirs[2], mine[2])  # dones
            for info_here, info_there in zip(mine[3], theirs[3]):
                assert info_there.keys() == info_here.keys()
                if "terminal_observation" in info_here:
                    for key in info_here["terminal_observation"]:
                        np.testing.assert_array_equal(
                            info_there["terminal_observation"][key], info_here["terminal_observation"][key]
                        )
    assert sum(int(step[2].sum()) for step in here[1:]) >= 4  # episodes ended and auto-reset


@pytest.mark.slow
def test_ppo_trains_on_the_ray_vector_env_with_the_local_rollouts(on_cluster: str):
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv

    from env.factory import env_fns

    from elden_il.training.ray_vec_env import RayVecEnv

    def buffer(vec) -> tuple:
        model = PPO("MultiInputPolicy", vec, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")
        model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default leaves a folder in the temp dir
        model.learn(32)
        vec.close()
        return model.rollout_buffer.actions.copy(), model.rollout_buffer.rewards.copy()

    actions, rewards = buffer(DummyVecEnv(env_fns(VEC_CONFIG, "sim", 2)))
    ray_actions, ray_rewards = buffer(RayVecEnv(env_fns(VEC_CONFIG, "sim", 2)))
    np.testing.assert_array_equal(ray_actions, actions)
    np.testing.assert_array_equal(ray_rewards, rewards)


@pytest.mark.slow
def test_awac_plays_each_of_its_envs_in_a_ray_actor_on_the_cluster(
    on_cluster: str, awac_start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """With ``RAY_ADDRESS`` set, each env AWAC plays is made and stepped in a Ray actor (next to
    its game, wherever that is), the scripted human reading the game's state from there; the
    learner and the replay stay here, and the envs' steps add up to the budget."""
    from conftest import SHORT_FIGHTS

    from env.common.errors import GameError
    from env.sim.launcher import free_port

    from elden_il.params import FinetuneConfig
    from elden_il.training import finetune as finetuning
    from elden_il.training.ray_vec_env import RayEnv

    made: list[RayEnv] = []

    class Counted(RayEnv):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(finetuning, "RayEnv", Counted)
    bc_path, dataset = awac_start
    run = FinetuneConfig(
        method="awac",
        total_steps=40,
        num_envs=2,
        critic_warmup_updates=5,
        replay_batch=16,
        critic_hidden=16,
        interventions="scripted",
    )
    rows: list[dict] = []
    metrics = finetuning.finetune_once(bc_path, run, SHORT_FIGHTS, tmp_path / "out", rows.append, dataset=dataset)
    assert len(made) == 2 and sum(env["env_steps"] for env in metrics["by_env"]) == 40 == metrics["env_steps"]
    assert rows and all("taken_over" in row for row in rows)
    nobody = f"127.0.0.1:{free_port()}"  # a PC whose game is down: Siphon's own line, through the actor
    with pytest.raises(GameError, match=f"no Siphon server at {nobody}"):
        RayEnv(partial(make_env, SHORT_FIGHTS, backend="siphon", host=nobody))
