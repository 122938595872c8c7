"""The learning pipeline: every stage through real DVC with tiny params, DVC's caching, the
evaluation over gRPC, and clear errors for bad params and bad datasets."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import REAL_SERVER_TEST_ARGS, TINY_NETWORK, main_here, save_untrained

from env.sim.launcher import ARGS_VARIABLE

ROOT = Path(__file__).parents[1]
TINY = {
    "demos": {"source": "sim", "raw_dir": "datasets/raw", "record": {"max_episodes": 2, "seed": 0, "rate": 30}},
    "dataset": {"id": "eldenil/margit-test-v0"},
    "env": {
        "action_mode": "discrete",
        "timestep_ms": 200,
        "frame_size": [84, 84],
        "frame_stack": None,
        "action_history": 4,
        "max_steps": 25,
        "tap_ms": 50,
    },
    "network": {field: list(v) if isinstance(v, tuple) else v for field, v in vars(TINY_NETWORK).items()},
    "bc": {
        "epochs": 1,
        "batch_size": 64,
        "learning_rate": 0.0003,
        "weight_decay": 0.0,
        "validation_fraction": 0.5,
        "patience": 1,
        "seed": 0,
        "runs": 2,  # two networks acting as one, each continued by one of fine-tuning's runs
    },
    "finetune": {
        "method": "awac",  # the pipeline's: from one env, the demonstrations in every batch
        "total_steps": 64,  # fine-tuning's plumbing, not its learning
        "runs": 2,  # an ensemble of runs (each a process that imports torch)
        "num_envs": 1,
        "learning_rate": 0.0001,
        "seed": 0,
        "critic_warmup_updates": 5,
        "replay_batch": 16,
        "critic_hidden": 16,
    },
    "evaluate": {
        "fights": 3,
        "first_seed": 1000,
        "backend": "sim",
        "host": "127.0.0.1:50051",
        "deterministic": True,
        "parallel": 3,
        "workers": 1,  # 12 short fights: a worker process would cost more than it plays (test_fanout spreads them)
    },
}


def run(cwd: Path, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``args`` in ``cwd``, importing this checkout's code (a copy in ``cwd`` comes first), not
    whichever checkout the virtualenv's editable install points at."""
    env = {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        **(extra_env or {}),
    }
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the project's pipeline in a fresh git + DVC repo, with tiny params."""
    root = tmp_path_factory.mktemp("project")
    for name in ("env", "capture", "elden_il"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "dvc.yaml", root / "dvc.yaml")
    for ignore in (".gitignore", ".dvcignore", *(p.relative_to(ROOT) for p in (ROOT / "datasets").rglob(".gitignore"))):
        (root / ignore).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / ignore, root / ignore)
    (root / "datasets" / "raw").mkdir(parents=True, exist_ok=True)
    (root / "datasets" / "raw" / ".gitkeep").touch()
    (root / "params.yaml").write_text(yaml.safe_dump(TINY))
    for command in (["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "config", "core.analytics", "false"]):
        assert run(root, *command).returncode == 0
    commit(root)  # as a clone has it: the datasets' permalinks pin the code's commit
    return root


REPRODUCED = "reproduced"
"""The git tag of the tiny pipeline's first ``dvc repro``, committed (``reproduced``)."""


@pytest.fixture(scope="module")
def reproduced(project: Path) -> subprocess.CompletedProcess:
    """The first ``dvc repro`` of ``project``, its results committed and tagged ``REPRODUCED``."""
    first = run(project, "dvc", "repro")
    assert first.returncode == 0, first.stdout + first.stderr
    commit(project)
    assert run(project, "git", "tag", REPRODUCED).returncode == 0
    return first


def warnings_in(result: subprocess.CompletedProcess) -> list[str]:
    """The lines of a command's output that warn: Python's warnings (``file:line: UserWarning:
    ...``), the pipeline's ``WARNING`` log records, DVC's ``WARNING:`` lines; but the one that BC
    is far below its teacher, which the tiny pipeline's BC always is, and says (the expert's two
    recorded fights were won; BC's 25-step fights end before anyone wins)."""
    lines = (result.stdout + result.stderr).splitlines()
    return [line for line in lines if re.search(r"Warning:|\bWARNING\b", line) and "its teacher (" not in line]


@pytest.mark.slow
def test_dvc_repro_runs_every_stage_then_caches_then_reruns_only_what_changed(project: Path, reproduced):
    assert warnings_in(reproduced) == []  # nothing a user cannot act on
    assert "behaviour cloning wins 0 % of the held-out fights, its teacher (the scripted expert)" in (
        reproduced.stdout + reproduced.stderr
    )
    metrics = json.loads((project / "datasets/reports/eval.json").read_text())
    assert set(metrics["policies"]) == {"random", "bc", "finetuned", "expert"}
    assert metrics["teacher"]["who"] == "the scripted expert" and metrics["teacher"]["fights"] == 2
    networks = json.loads((project / "datasets/reports/bc.json").read_text())["networks"]
    assert [network["seed"] for network in networks] == [0, 1]
    for result in metrics["policies"].values():
        assert result["fights"] == 3 and 0 <= result["win_rate"] <= 1 and len(result["win_rate_ci95"]) == 2
    for picture in ("plots/comparison.png", "plots/learning_curves.png", "gifs/bc.gif"):
        assert (project / "datasets/reports" / picture).stat().st_size > 1000
    shown = run(project, "dvc", "metrics", "show")
    assert "win_rate" in shown.stdout
    check_metrics_and_plots(project)
    summary = run(project, sys.executable, "-m", "elden_il.pipeline", "summary", extra_env={"COLUMNS": "160"})
    assert (
        summary.returncode == 0
        and "win rate" in summary.stdout
        and "fine-tuned (AWAC, 128 steps of 2 envs)" in summary.stdout
    )

    again = run(project, "dvc", "repro")
    assert again.returncode == 0 and "Running stage" not in again.stdout

    # (every stage run again from a fresh state changes nothing git or DVC track: the fresh clone's test)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["finetune"]["learning_rate"] = 0.0002
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    changed = run(project, "dvc", "repro")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    ran = {line.split("'")[1] for line in changed.stdout.splitlines() if line.startswith("Running stage")}
    assert ran == {"finetune", "evaluate"}

    # another frame size is made from the recordings' video: the dataset is rebuilt, nothing recorded again
    params["env"]["frame_size"] = [64, 48]
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    resized = run(project, "dvc", "repro", "dataset")  # the stages after it follow as above
    assert resized.returncode == 0, resized.stdout + resized.stderr
    ran = {line.split("'")[1] for line in resized.stdout.splitlines() if line.startswith("Running stage")}
    assert ran == {"dataset"}
    built = json.loads(next((project / "datasets/minari").rglob("build.json")).read_text())
    # the picture is the recordings': demos.record.master_size, whose pipeline default TINY leaves in place
    assert built["env_config"]["frame_size"] == [64, 48] and built["env_config"]["capture_size"] == [128, 128]


@pytest.mark.slow
def test_a_fresh_clone_elsewhere_reproduces_the_same_dvc_lock(project: Path, reproduced, tmp_path: Path):
    """CI clones the project into another folder and runs ``dvc repro`` there: every stage runs
    again (the clone has no DVC cache) and must write what DVC and git track byte for byte as
    the first run did, or ``dvc.lock`` and the metrics come out modified."""
    clone = tmp_path / "another" / "checkout"
    assert run(tmp_path, "git", "clone", "-q", "--branch", REPRODUCED, str(project), str(clone)).returncode == 0
    again = run(clone, "dvc", "repro")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Running stage 'evaluate'" in again.stdout and warnings_in(again) == []
    assert run(clone, "git", "status", "--porcelain").stdout == ""
    assert sorted(p.name for p in (clone / "datasets/reports/recordings").iterdir()) == [
        f"{name}.rrd" for name in ("bc", "expert", "finetuned", "random")
    ]


@pytest.mark.slow
def test_a_commit_to_the_datasets_code_leaves_a_dvc_lock_that_a_fresh_clone_reproduces(
    project: Path, reproduced, tmp_path: Path
):
    """A change to the code that builds datasets, run (``dvc repro``) and committed with the
    dvc.lock it wrote, is what a fresh clone writes again. The dataset used to carry the commit
    its code was at, which git decides and no dependency DVC hashes: run before the commit, it
    said "the previous commit, plus uncommitted changes"; the clone wrote the new commit, another
    dataset. Python writes bytecode here as a user's Python does, beside the code the stages depend
    on (the project's .dvcignore leaves it out of DVC's hashes)."""
    bytecode = {"PYTHONDONTWRITEBYTECODE": ""}  # empty: Python writes it
    changed, clone = tmp_path / "changed", tmp_path / "clone"
    assert run(tmp_path, "git", "clone", "-q", "--branch", REPRODUCED, str(project), str(changed)).returncode == 0
    with (changed / "elden_il/pipeline.py").open("a") as f:
        f.write("\n# a comment: the code changed, what it builds did not\n")
    rebuilt = run(changed, "dvc", "repro", "dataset", extra_env=bytecode)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert list((changed / "env/sim").glob("__pycache__/*.pyc")), "no bytecode written: the .dvcignore goes untested"
    commit(changed)
    assert run(tmp_path, "git", "clone", "-q", str(changed), str(clone)).returncode == 0
    again = run(clone, "dvc", "repro", "dataset", extra_env=bytecode)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Running stage 'dataset'" in again.stdout
    assert run(clone, "git", "status", "--porcelain").stdout == ""


def commit(project: Path) -> None:
    for command in (["git", "add", "-A"], ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "run"]):
        result = run(project, *command)
        assert result.returncode == 0, result.stdout + result.stderr


def check_metrics_and_plots(project: Path) -> None:
    """Metrics hold results only (timings and config copies are in the git-ignored run files),
    and every plot dvc.yaml declares has its data."""
    from elden_il.pipeline import RUN_ONLY

    def keys(tree: dict) -> set[str]:
        return set(tree) | {k for v in tree.values() if isinstance(v, dict) for k in keys(v)}

    metrics = json.loads(run(project, "dvc", "metrics", "show", "--json").stdout)
    files = next(iter(metrics.values()))["data"]  # the workspace's
    assert set(files) == {f"datasets/reports/{stage}.json" for stage in ("dataset", "bc", "finetune", "eval")}
    for data in files.values():
        assert not keys(data["data"]) & RUN_ONLY
    run_info = json.loads((project / "datasets/reports/bc.run.json").read_text())
    assert run_info["train_samples_per_second"] > 0 and run_info["config"]["epochs"] == 1
    assert "fights_per_minute" in json.loads((project / "datasets/reports/eval.run.json").read_text())["policies"]["bc"]

    shown = run(project, "dvc", "plots", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    plots = json.loads(shown.stdout)["data"]
    declared = [
        next(iter(p)) if isinstance(p, dict) else p for p in yaml.safe_load((project / "dvc.yaml").read_text())["plots"]
    ]
    assert set(plots) == set(declared)
    for name, [plot] in plots.items():
        assert plot["type"] == "image" or plot["content"]["data"]["values"], name
    losses = {row["filename::field"] for row in plots["bc_loss"][0]["content"]["data"]["values"]}
    assert losses == {"train_loss.tsv::train_loss", "val_loss.tsv::val_loss"}
    policies = [row["policy"] for row in plots["eval_win_rate"][0]["content"]["data"]["values"]]
    assert policies == ["random", "bc", "finetuned", "expert"]


@pytest.mark.slow
def test_evaluation_over_the_simulator_server_through_a_param(project: Path):
    """On the policies the pipeline test trained (on its own this test would have to train them
    again), against servers in the real-server mode: the world at the Site of Grace, Siphon's hook
    and scans, the harder of the two (every test taking the sim_server fixture runs both). A fight
    lasts as long as the trained policy's env allows (TINY's max_steps, 25 steps of 200 ms: 5 s in
    real time), so each policy plays one fight, on a server of its own."""
    if not (project / "datasets/models/finetuned/policy.safetensors").exists():
        assert run(project, "dvc", "repro").returncode == 0
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["evaluate"].update(backend="sim_server", fights=1)
    (project / "server.yaml").write_text(yaml.safe_dump(params))
    result = run(
        project,
        sys.executable,
        "-m",
        "elden_il.pipeline",
        "evaluate",
        "--params",
        "server.yaml",
        extra_env={ARGS_VARIABLE: " ".join(REAL_SERVER_TEST_ARGS)},
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((project / "datasets/reports/eval.json").read_text())
    assert metrics["backend"] == "sim_server" and metrics["policies"]["expert"]["fights"] == 1


@pytest.mark.slow
def test_the_policies_are_judged_over_the_live_path_and_shown_beside_their_own(project: Path):
    """``evaluate_live`` plays the evaluate stage's policies again over simulator servers of its
    own (here one worker, one fight each, a server in the real-server mode: the world at the
    Site of Grace, Siphon's hook and scans), at 3x, paused between steps, into the live path's
    report; ``summary --live`` shows each policy's live win rate beside its in-process one."""
    if not (project / "datasets/models/finetuned/policy.safetensors").exists():
        assert run(project, "dvc", "repro").returncode == 0
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["evaluate_live"] = {"fights": 1, "game_speed": 3, "server": "real", "workers": 1}
    (project / "live.yaml").write_text(yaml.safe_dump(params))
    fast = {ARGS_VARIABLE: " ".join(REAL_SERVER_TEST_ARGS[1:])}  # the mode itself comes from evaluate_live.server
    result = run(
        project, sys.executable, "-m", "elden_il.pipeline", "evaluate_live", "--params", "live.yaml", extra_env=fast
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((project / "datasets/studies/live_path/eval.json").read_text())
    assert (report["backend"], report["server"], report["game_speed"], report["fights"]) == ("sim_server", "real", 3, 1)
    assert list(report["policies"]) == ["random", "bc", "finetuned", "expert"]
    table = run(
        project,
        sys.executable,
        "-m",
        "elden_il.pipeline",
        "summary",
        "--markdown",
        "--live",
        "datasets/studies/live_path/eval.json",
    )
    assert table.returncode == 0, table.stderr
    header, _, *rows = table.stdout.strip().splitlines()
    assert "| win rate | 95 % interval | live: win rate | live: 95 % interval |" in header
    assert len(rows) == 5 and all(row.count("|") == 9 for row in rows)  # four policies and the teacher, eight columns


def outputs_digest(project: Path, *outputs: str) -> dict[str, str]:
    """Every file under ``outputs`` (files or folders of ``project``), by path, with its bytes' hash."""
    found = {}
    for output in outputs:
        path = project / output
        for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            found[str(file.relative_to(project))] = hashlib.sha256(file.read_bytes()).hexdigest()
    return found


def interrupted_after(project: Path, marker: str, *command: str) -> subprocess.CompletedProcess:
    """``command`` in ``project``, Ctrl-C'd (SIGINT to its whole process group, as a terminal
    sends it) once a line of its output holds ``marker``."""
    env = {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    process = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines = []
    for line in process.stdout:
        lines.append(line)
        if marker in line:
            os.killpg(process.pid, signal.SIGINT)
            break
    rest, _ = process.communicate(timeout=120)
    return subprocess.CompletedProcess(command, process.returncode, "".join(lines) + rest, "")


@pytest.mark.slow
@pytest.mark.parametrize(
    "stage, marker, outputs",
    [
        ("demos", "episode saved", ("datasets/demos",)),
        (
            "evaluate",
            "bc:",
            (
                "datasets/reports/eval.json",
                "datasets/reports/eval_policies.csv",
                "datasets/reports/gifs",
                "datasets/reports/plots",
            ),
        ),
    ],
    ids=["demos", "evaluate"],
)
def test_a_stage_interrupted_under_dvc_repro_leaves_its_outputs_as_they_were(
    project: Path, stage: str, marker: str, outputs: tuple[str, ...]
):
    """DVC deletes a stage's outputs before it runs it unless they persist (dvc.yaml): Ctrl-C in
    ``dvc repro -s -f STAGE`` then left ``eval.json``, the GIFs and the plots gone, and the demos
    folder empty under the stage's line that it was as before. Each stage builds aside and
    swaps in whole; with persist, what it said it kept is there."""
    if not (project / "datasets/reports/eval.json").exists():
        assert run(project, "dvc", "repro").returncode == 0
    before = outputs_digest(project, *outputs)
    assert before
    kept = (project / "params.yaml").read_text()
    params = yaml.safe_load(kept)
    params["demos"]["record"]["max_episodes"] = 6  # long enough to be stopped after its first fight
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    try:
        result = interrupted_after(project, marker, "dvc", "repro", "-s", "-f", stage)
    finally:
        (project / "params.yaml").write_text(kept)
    assert result.returncode != 0, result.stdout
    assert outputs_digest(project, *outputs) == before, result.stdout


def write_params(project: Path, name: str, **changes) -> str:
    params = yaml.safe_load(yaml.safe_dump(TINY))
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        params[section][key] = value
    (project / name).write_text(yaml.safe_dump(params))
    return name


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"bc.epochz": 3}, "params.yaml bc: unknown keys ['epochz']"),
        ({"bc.learning_rate": "fast"}, "params.yaml bc.learning_rate = 'fast': must be a number above 0"),
        ({"bc.runs": 0}, "params.yaml bc.runs = 0: must be a whole number from 1 to 16"),
        (
            {"env.action_mode": "continuous"},
            "params.yaml env.action_mode = 'continuous': must be one of discrete, multi_binary",
        ),
        ({"env.max_steps": True}, "params.yaml env.max_steps = True: must be a whole number of steps"),
        (
            {"env.frame_size": [99999, 99999]},
            "params.yaml env.frame_size = (99999, 99999): must be [width, height] in pixels, each side from 8 to 4096",
        ),
        (
            {"dataset.frame_size": [84, 84]},
            "params.yaml dataset.frame_size: the env's settings are all in the env section now: write env.frame_size",
        ),
        ({"env.profile": "sim_margit"}, "params.yaml env.profile cannot be set here: it is the recordings' own"),
        ({"evaluate.backend": "xbox"}, "params.yaml evaluate.backend = 'xbox': must be one of sim, sim_server, siphon"),
    ],
)
def test_bad_params_are_refused_with_what_to_fix(tmp_path: Path, changes: dict, message: str):
    name = write_params(tmp_path, "params.yaml", **{k.replace("__", "."): v for k, v in changes.items()})
    stage = "bc" if "bc." in next(iter(changes)) else "evaluate" if "evaluate" in next(iter(changes)) else "dataset"
    if stage == "evaluate":  # the evaluation reads the env it is for from the trained policies
        from env.config import EnvConfig

        for policy in ("bc", "finetuned"):
            EnvConfig().save(tmp_path / "datasets/models" / policy)
    result = run(tmp_path, sys.executable, "-m", "elden_il.pipeline", stage, "--params", name)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_malformed_params_yaml_is_refused(tmp_path: Path):
    (tmp_path / "params.yaml").write_text("bc: [epochs: 3\n")
    result = run(tmp_path, sys.executable, "-m", "elden_il.pipeline", "bc")
    assert result.returncode == 2 and "params.yaml is not valid YAML" in result.stderr


def test_missing_empty_and_incompatible_datasets_are_refused(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path, "params.yaml")
    code, _, err = main_here("elden_il.pipeline", "bc", capsys=capsys)
    assert code == 2 and "cannot load dataset 'eldenil/margit-test-v0'" in err

    (tmp_path / "datasets/raw").mkdir(parents=True)
    write_params(tmp_path, "raw.yaml", **{"demos.source": "raw"})
    code, _, err = main_here("elden_il.pipeline", "dataset", "--params", "raw.yaml", capsys=capsys)
    assert code == 2 and "no finished episodes in datasets/raw" in err

    for name in ("demos", "dataset"):
        assert main_here("elden_il.pipeline", name, capsys=capsys)[0] == 0
    write_params(tmp_path, "small.yaml", **{"env.frame_size": [64, 64]})
    code, _, err = main_here("elden_il.pipeline", "bc", "--params", "small.yaml", capsys=capsys)
    assert code == 2, err
    assert "dataset 'eldenil/margit-test-v0' was made for another env (frame_size: (84, 84) vs (64, 64)" in err
    assert "dvc repro dataset" in err


@pytest.mark.slow
def test_your_recordings_picture_goes_from_the_dataset_to_the_policy_and_its_env(tmp_path: Path, monkeypatch, capsys):
    """Recordings of a 1280x720 window (here lock-step, the simulator drawing at that size): the
    dataset stage writes their window into the dataset, bc accepts it (params.yaml leaves the
    picture to the recordings, as it does the profile) and saves it beside the policy, and the
    env the fine-tuning and evaluation stages build from that policy draws the same picture."""
    from env.config import EnvConfig
    from env.factory import make_env

    from capture.record import RecordSettings, record

    monkeypatch.chdir(tmp_path)
    record(
        RecordSettings(
            env=EnvConfig(profile="sim_margit", capture_size=(1280, 720)),
            backend="sim",
            autopilot=True,
            max_episodes=2,
            max_episode_seconds=5,
            out=tmp_path / "datasets/raw",
        )
    )
    write_params(tmp_path, "params.yaml", **{"demos.source": "raw"})
    for name in ("dataset", "bc"):
        code, _, err = main_here("elden_il.pipeline", name, capsys=capsys)
        assert code == 0, err
    config = EnvConfig.load(tmp_path / "datasets/models/bc")
    assert config.capture_size == (1280, 720)
    with make_env(config) as env:
        env.reset(seed=0)
        assert env.game.capture_frame().rgb.shape == (720, 1280, 3)


def test_finetuning_runs_in_a_live_env_over_siphon_hosts(tmp_path: Path):
    """finetune.backend: siphon, against a simulator server over gRPC (as against gaming PCs), at
    3x (paused between steps): once it ends, the game runs at the speed it was found at."""
    from env.common.errors import ConfigError
    from env.config import EnvConfig
    from env.profile import load_profile
    from env.sim.launcher import SimServer
    from env.siphon.client import SiphonClient

    from elden_il.params import FinetuneConfig
    from elden_il.training.finetune import finetune

    config = EnvConfig(profile="sim_margit", action_history=4, timestep_ms=50, max_steps=20)
    save_untrained(tmp_path / "bc", config)
    with SimServer(size=(84, 84)) as server, server.player():
        settings = FinetuneConfig(
            total_steps=64,
            backend="siphon",
            hosts=(server.host,),
            n_steps=32,
            batch_size=32,
            n_epochs=1,
            value_warmup_steps=0,
            game_speed=3,
        )
        metrics = finetune(tmp_path / "bc", settings, config, tmp_path / "finetuned")
        client = SiphonClient(server.host)
        client.configure(load_profile("sim_margit").siphon)
        speed = client.read(["gameSpeedFlag", "gameSpeedVal"])
        client.close()
    assert not speed["gameSpeedFlag"] or speed["gameSpeedVal"] == 1.0, speed
    assert metrics["timesteps"] == 64 and metrics["episodes"] >= 2
    assert (tmp_path / "finetuned" / "policy.safetensors").stat().st_size > 0
    assert EnvConfig.load(tmp_path / "finetuned") == config

    with pytest.raises(ConfigError, match="backend 'siphon' needs hosts"):
        finetune(tmp_path / "bc", FinetuneConfig(backend="siphon"), config, tmp_path / "x")


@pytest.mark.slow
def test_a_host_that_drops_off_the_network_mid_rollout_is_one_line_and_keeps_what_was_trained(tmp_path: Path):
    """A gaming PC's cable pulled mid-run: nothing refuses, nothing answers (the server sits in a
    network namespace of its own, and the link to it goes down after the second fight). Fine-
    tuning stops within the client's deadline with one line naming the host, and what it trained
    until then (an update, from the first 32 steps) is saved where ``load_policy`` reads it."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("the link is a network namespace and a veth pair: root and iproute2 (`ip`)")
    from env.common.errors import GameError
    from env.config import EnvConfig
    from env.sim.launcher import SimServer

    from elden_il.params import FinetuneConfig
    from elden_il.policies.policy import load_policy
    from elden_il.training.finetune import PARTIAL_RUN, finetune

    from benchmarks.bench_link import HERE_IF, NAMESPACE, THERE_IP, emulated_link

    config = EnvConfig(profile="sim_margit", action_history=4, timestep_ms=50, max_steps=20)
    save_untrained(tmp_path / "bc", config)

    fights = []

    def pull_the_cable_after_the_second_fight(row: dict) -> None:  # fights of 20 steps: past the first update
        fights.append(row)
        if len(fights) == 2:
            subprocess.run(["ip", "link", "set", HERE_IF, "down"], check=True)

    with (
        emulated_link(),
        SimServer(size=(84, 84), bind=THERE_IP, prefix=("ip", "netns", "exec", NAMESPACE)) as server,
        server.player(),
    ):
        settings = FinetuneConfig(
            total_steps=256, backend="siphon", hosts=(server.host,), n_steps=32, batch_size=32, n_epochs=1
        )
        with pytest.raises(GameError) as lost:
            finetune(
                tmp_path / "bc",
                settings,
                config,
                tmp_path / "finetuned",
                on_episode=pull_the_cable_after_the_second_fight,
            )
    message = str(lost.value)
    assert "\n" not in message and server.host in message and "saved in" in message, message
    kept = tmp_path / "finetuned" / PARTIAL_RUN
    assert load_policy(kept) is not None and EnvConfig.load(kept) == config
    assert len(json.loads((kept / "learning_curve.json").read_text())) == 2
    assert "after 1 update;" in message and len(json.loads((kept / "updates.json").read_text())) == 1


def test_the_expert_plays_multi_binary_actions_as_presses():
    """Held bits press once: the expert's repeated attacks must release a step in between, or
    in multi_binary mode it would swing once and never again (it dealt no damage at all)."""
    from env.factory import make_env
    from env.sim.expert import ScriptedExpert

    from elden_il.evaluation.fight_loop import PlayerActor, run_fights
    from elden_il.params import FIRST_HELD_OUT_SEED

    def make():
        return make_env(action_mode="multi_binary", state_attributes=ScriptedExpert.ATTRIBUTES)

    records, _ = run_fights(make, PlayerActor("expert"), [FIRST_HELD_OUT_SEED, FIRST_HELD_OUT_SEED + 1], parallel=2)
    assert all(r.boss_damage_dealt > 0.1 for r in records), records


def test_the_demos_and_evaluate_stages_count_their_fights_as_they_end(tmp_path: Path):
    """What their progress bars count: each recorded fight as it is saved, each evaluation fight
    as it ends (in the order they end, each once)."""
    from env.config import EnvConfig
    from env.factory import make_env

    from capture.record import RecordSettings, record

    from elden_il.evaluation.fight_loop import RandomActor, run_fights

    config = EnvConfig(profile="sim_margit", max_steps=20)
    saved: list[Path] = []
    settings = RecordSettings(env=config, backend="sim", autopilot=True, max_episodes=2, max_episode_seconds=2)
    assert record(replace(settings, out=tmp_path / "raw"), on_saved=saved.append) == saved and len(saved) == 2
    ended = []
    records, _ = run_fights(lambda: make_env(config), RandomActor(), [5, 6, 7], parallel=2, on_fight=ended.append)
    assert sorted(ended, key=lambda r: r.seed) == records
