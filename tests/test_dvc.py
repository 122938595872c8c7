"""What DVC users rely on, for real: the demos stage records the same bytes every time (so a
rerun leaves ``dvc.lock`` and git clean), and a trained pipeline's outputs travel through a
remote with ``dvc push`` / ``dvc pull``. Plots, metrics and the clean rerun of the whole
pipeline are checked on the tiny pipeline in ``test_pipeline.py``."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import h5py
import pytest
import yaml
from conftest import main_here
from test_pipeline import TINY, run

ROOT = Path(__file__).parents[1]


def md5s(root: Path) -> dict[str, str]:
    """Every file under ``root`` by its relative path, with its MD5 (what DVC hashes outputs by)."""
    return {
        p.relative_to(root).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_the_demos_stage_records_the_same_files_byte_for_byte(tmp_path: Path, monkeypatch, capsys):
    """Twice in this process (the fresh clone's ``dvc repro`` in test_pipeline.py records them
    again in other processes, in another folder, and must leave ``dvc.lock`` as it was)."""
    params = {**TINY, "demos": {**TINY["demos"], "record": {**TINY["demos"]["record"], "max_episodes": 2, "seed": 5}}}
    recorded = []
    for name in ("first", "second"):
        root = tmp_path / name
        root.mkdir()
        monkeypatch.chdir(root)
        (root / "params.yaml").write_text(yaml.safe_dump(params))
        for step in ("demos", "dataset"):
            code, _, err = main_here("elden_il.pipeline", step, capsys=capsys)
            assert code == 0, err
        recorded.append((md5s(root / "datasets/demos"), md5s(root / "datasets/minari")))

    demos, minari = recorded[0]
    # named by order and seed: sorted, they are in the order they were recorded
    assert list(demos) == [f"sim/0000{i}-seed{5 + i}_autopilot.{kind}" for i in range(2) for kind in ("h5", "mkv")]
    assert recorded[1] == recorded[0]
    with h5py.File(tmp_path / "first/datasets/demos" / next(iter(demos))) as f:
        assert "started_at_unix" not in f.attrs and f.attrs["sim_seed"] == 5


def test_a_trained_output_travels_through_a_local_remote(tmp_path: Path):
    """``dvc push`` to a folder remote, then a fresh clone gets the output with ``dvc pull``."""
    origin, remote, clone = tmp_path / "origin", tmp_path / "remote", tmp_path / "clone"
    origin.mkdir()
    (origin / "dvc.yaml").write_text(
        yaml.safe_dump(
            {
                "stages": {
                    "train": {
                        "cmd": "python -c \"import pathlib; pathlib.Path('model').mkdir(); "
                        "pathlib.Path('model/policy.bin').write_bytes(bytes(range(256)) * 64)\"",
                        "outs": ["model"],
                    }
                }
            }
        )
    )
    for command in (
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["dvc", "repro", "-q"],
        ["dvc", "remote", "add", "-d", "shared", str(remote)],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "trained"],
        ["dvc", "push"],
    ):
        result = run(origin, *command)
        assert result.returncode == 0, (command, result.stdout + result.stderr)

    assert run(tmp_path, "git", "clone", "-q", str(origin), str(clone)).returncode == 0
    assert not (clone / "model").exists()
    pulled = run(clone, "dvc", "pull")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert md5s(clone / "model") == md5s(origin / "model")
    status = run(clone, "dvc", "status")
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout


def test_a_report_keeps_results_and_moves_timings_and_config_to_the_run_file():
    from elden_il.pipeline import split_report

    metrics, run_info = split_report(
        {
            "fights": 3,
            "backend": "sim",
            "config": {"seed": 0},
            "final": {"epoch": 2, "val_loss": 0.5},
            "policies": {"bc": {"win_rate": 0.5, "fights_per_minute": 99.0}, "expert": {"win_rate": 0.75}},
            "train_samples_per_second": 1e3,
        }
    )
    assert metrics == {
        "fights": 3,
        "backend": "sim",
        "final": {"epoch": 2, "val_loss": 0.5},
        "policies": {"bc": {"win_rate": 0.5}, "expert": {"win_rate": 0.75}},
    }
    assert run_info == {
        "config": {"seed": 0},
        "policies": {"bc": {"fights_per_minute": 99.0}},
        "train_samples_per_second": 1e3,
    }


PACKAGES = {"capture", "env", "elden_il"}
DECIDING_NOTHING = {
    "env/__init__.py",
    "env/common",  # errors, field rules, the command runner, signals, reading and publishing files
    "env/game.py",  # the Game protocol and its checks
    "capture/__init__.py",
    "elden_il/__init__.py",
    "elden_il/evaluation/__init__.py",  # a package's docstring: the teacher row's module lives below it
}
"""Modules (or folders) every stage loads that decide nothing in what any stage writes."""
NOT_DECIDING_WHAT_IS_RECORDED = DECIDING_NOTHING | {
    "env/elden_env.py",
    "env/step_timing.py",  # the env's steps: the stage records the game, not an env
    "env/hp_floors.py",
    "env/rewards.py",  # imported beside make_game and the expert, not run
    "env/siphon/__init__.py",
    "env/siphon/client.py",
    "env/siphon/packed_reads.py",  # the Siphon backend: the stage records in-process
    "capture/dataset_id.py",
    "capture/bounds.py",  # what a file read back may ask for
    "capture/labels.py",
    "capture/takeover.py",
    "capture/silence.py",  # a policy or a person at the keys
    "capture/listener.py",  # the person's key names, which the scripted person's keyboard reads backwards
    "capture/status.py",
    "capture/footage.py",  # the live display, reading videos back
    "env/observations.py",  # frames are cropped and resized when a dataset is built, not when recorded
    "capture/shadowing.py",
    "capture/pad_listener.py",
    "env/gamepad.py",  # a game controller's listener: the autopilot plays on keys, its pad stays at rest
}
"""Modules the demos stage imports that decide nothing in the files it records."""


NOT_DECIDING_WHAT_IS_BUILT = DECIDING_NOTHING | {
    "env/keys.py",  # key names, checked where a profile is read
    "env/profile.py",  # reads env/profiles, a dependency
    "env/attribute_config.py",  # the attribute list of a profile, a dependency
    "env/controller.py",  # a pad's names, which the labels read from the episode itself
    "env/elden_env.py",  # registered with Gymnasium beside the config; no env is made
    "env/step_timing.py",
    "capture/dataset_id.py",
    "capture/bounds.py",  # what a file read back may ask for
    # params.yaml's demos section is the recorder's own settings (capture.record.RecordSettings),
    # so every stage loads the recorder, its autopilot (and the simulator its players play) and
    # the env factory; only demos runs them
    "capture/record.py",
    "capture/sampler.py",
    "capture/episode_cuts.py",
    "capture/listener.py",
    "capture/status.py",
    "capture/takeover.py",
    "capture/autopilot.py",
    "capture/episode_writer.py",
    "capture/drivers.py",
    "capture/inputs.py",
    "capture/pad_listener.py",
    "capture/shadowing.py",
    "capture/silence.py",
    "env/factory.py",
    "env/hp_floors.py",
    "env/gamepad.py",
    "env/sim",
}
"""Modules (or folders) the dataset stage imports that decide nothing in the dataset it writes."""


def modules_a_stage_loads(stage: str, project: Path) -> set[str]:
    """This project's modules that ``python -m elden_il.pipeline <stage>`` loads in ``project``."""
    script = (
        f"import sys; from elden_il.pipeline import main; assert main([{stage!r}]) == 0; "
        "print('\\n'.join(m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)))"
    )
    result = run(project, sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    ours = [Path(f).resolve() for f in result.stdout.split()]
    return {
        f.relative_to(ROOT).as_posix()
        for f in ours  # the project's packages, not a venv inside the checkout
        if f.is_relative_to(ROOT) and f.relative_to(ROOT).parts[0] in PACKAGES
    }


def undeclared(stage: str, loaded: set[str], deciding_nothing: set[str]) -> list[str]:
    """The ``loaded`` modules neither among the stage's dvc.yaml deps nor ``deciding_nothing``
    (a file, or a folder: each names itself and everything under it)."""
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage]["deps"]

    def named(f: str, names) -> bool:
        return any(f == name or f.startswith(f"{name}/") for name in names)

    return sorted(f for f in loaded if not named(f, deps) and not named(f, deciding_nothing))


def test_the_demos_and_dataset_stages_depend_on_the_code_that_decides_what_they_write(tmp_path: Path):
    """Every module of this project that ``python -m elden_il.pipeline demos`` (then ``dataset``)
    loads is a dependency of the stage in dvc.yaml (itself or its folder), or is named above as
    deciding nothing it writes: a change to the frame processing, the fight rules or the labels
    reruns the stage. The dataset stage's list is also the code whose digest a dataset carries
    (``capture.provenance``), so it is declared once, and checked against what runs."""
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({**TINY, "demos": {**TINY["demos"], "record": {**TINY["demos"]["record"], "max_episodes": 1}}})
    )
    recorded = modules_a_stage_loads("demos", tmp_path)
    assert "capture/sampler.py" in recorded and "env/sim/world.py" in recorded
    missing = undeclared("demos", recorded, NOT_DECIDING_WHAT_IS_RECORDED)
    assert missing == [], (
        f"add these to the demos stage's deps in dvc.yaml, or to NOT_DECIDING_WHAT_IS_RECORDED: {missing}"
    )
    built = modules_a_stage_loads("dataset", tmp_path)
    assert "capture/build_dataset.py" in built and "capture/labels.py" in built
    missing = undeclared("dataset", built, NOT_DECIDING_WHAT_IS_BUILT)
    assert missing == [], (
        f"add these to the dataset stage's deps in dvc.yaml, or to NOT_DECIDING_WHAT_IS_BUILT: {missing}"
    )


def test_the_committed_dvc_lock_was_written_by_the_code_and_params_committed_with_it():
    """A stage's code or params changed without `dvc repro` (or, for a change that writes the
    same outputs, `dvc commit`) leaves a dvc.lock that a fresh clone's `dvc repro` rewrites.
    Whether the outputs it records are what the committed code writes, `.ci/run` checks by
    running the stages whose bytes every machine writes alike again."""
    status = run(ROOT, "dvc", "status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    stale = {
        stage: sorted(dep for dep in entry["changed deps"] if not dep.startswith("datasets/"))
        for stage, entries in json.loads(status.stdout).items()
        for entry in entries
        if isinstance(entry, dict) and "changed deps" in entry
    }
    assert not {stage: deps for stage, deps in stale.items() if deps}, (
        f"dvc.lock is stale for {stale}: run `dvc repro` (a changed result), or `python scripts/relock.py` "
        "(a change of code that writes the same outputs), and commit dvc.lock"
    )


def test_the_committed_dataset_was_built_by_the_committed_code():
    """A dataset carries the digest of the code that built it, and the dataset stage's committed
    report repeats it: a change to that code with dvc.lock's hashes brought up to date by hand
    but the dataset not built again leaves a lock whose dataset a fresh clone's `dvc repro
    dataset` does not write (which `.ci/run` finds only after the whole suite)."""
    from capture.provenance import code_digest

    report = json.loads((ROOT / "datasets/reports/dataset.json").read_text())
    assert report["code"]["digest"] == code_digest(ROOT), (
        "the dataset stage's code changed since the committed dataset was built: run `python scripts/relock.py` "
        "(or `dvc repro`) and commit dvc.lock and datasets/reports/dataset.json with the code"
    )
