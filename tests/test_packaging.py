"""Installing beside other tools: console scripts that resolve, typed packages, and a clear
error instead of a confusing one when a user's own ``env`` module shadows ours."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("name", sorted(PROJECT["scripts"]))
def test_every_console_script_names_a_main_that_prints_its_help(name: str, capsys: pytest.CaptureFixture):
    module, function = PROJECT["scripts"][name].split(":")
    main = getattr(importlib.import_module(module), function)
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0 and "usage:" in capsys.readouterr().out


def test_packages_are_typed_and_dvc_is_an_extra():
    for package in ("env", "capture", "elden_il"):
        assert (ROOT / package / "py.typed").exists()
    assert not any(d.startswith("dvc") for d in PROJECT["dependencies"])
    assert any(d.startswith("dvc") for d in PROJECT["optional-dependencies"]["pipeline"])
    assert any(d.startswith("moviepy") for d in PROJECT["optional-dependencies"]["video"])


@pytest.mark.parametrize(
    "command",
    [
        ["-c", "import elden_il.policies.policy"],
        ["-m", "capture.record", "--help"],
        ["-m", "elden_il.pipeline", "summary"],
    ],
)
def test_a_users_env_module_in_the_working_directory_is_named_not_obscure(tmp_path: Path, command: list[str]):
    (tmp_path / "env.py").write_text("SEED = 1\n")
    paths = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": paths},
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("capture.shadowing.ShadowedPackageError: ")
    assert f"{tmp_path / 'env.py'} shadows elden-il's 'env' package ({ROOT / 'env'})" in last
    assert "rename your env module or run from another directory" in last


def test_without_a_shadow_the_gymnasium_id_is_registered_by_importing_elden_il(tmp_path: Path):
    script = "import gymnasium, elden_il; print(gymnasium.make('EldenIL/Margit-v0').spec.max_episode_steps)"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "900"


def test_the_packages_an_episode_records_are_pinned_so_the_committed_demos_stay_the_same_bytes():
    """A fresh clone installs what pyproject.toml allows; an episode records those versions, and
    the demos stage's recordings are committed (dvc.lock). A PyAV patch release changed them on
    CI with the code unchanged: each recorded package is pinned."""
    from capture.episode_writer import RECORDED_PACKAGES

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    requirements = {re.split(r"[\[=<>~! ]", r, maxsplit=1)[0]: r for r in pyproject["project"]["dependencies"]}
    for package in set(RECORDED_PACKAGES) - {"elden-il"}:
        assert re.fullmatch(rf"{package}==[\d.]+", requirements[package]), requirements[package]


def test_the_setup_installs_with_the_uv_the_test_extra_pins():
    """setup.sh installs uv with pip before the rest, and the rest (the test extra) pins uv too:
    one version, or the install would swap the tool that is running it for another."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (pinned,) = [
        r.split("#")[0].strip() for r in pyproject["project"]["optional-dependencies"]["test"] if r.startswith("uv")
    ]
    assert re.search(rf"pip install -q torch==[\d.]+ {re.escape(pinned)}\n", (ROOT / "scripts/setup.sh").read_text())


def test_the_quick_lane_hands_pytest_its_marker_and_the_arguments_given():
    """`scripts/test.sh --quick ARGS` runs pytest on the `quick` tests with ARGS, never with the
    lane's own flag (which pytest refuses)."""
    listed = subprocess.run(
        ["bash", "scripts/test.sh", "--quick", "-n", "0", "-p", "no:cacheprovider", "--collect-only", "-q"]
        + ["tests/test_reproduced.py", "tests/test_packaging.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    collected = {line.split("::")[0] for line in listed.stdout.splitlines() if "::" in line}
    assert collected == {"tests/test_reproduced.py"}, listed.stdout[-2000:]  # test_packaging is not quick
