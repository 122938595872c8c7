"""Every command line reports an error the user can fix the same way: one ``error:`` line that
says what to do, exit status 2, no traceback (``env.common.cli.run_command``)."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

from env.common.cli import ERROR_EXIT, run_command
from env.common.errors import DataError, Interrupted

ROOT = Path(__file__).parents[1]

MISTAKES = {
    "env.sim": (["--port", "0", "--profile", "no_such_profile"], "no_such_profile"),
    "env.doctor": (["--profile", "no_such_profile"], "no_such_profile"),
    "capture.record": (["--backend", "sim", "--profile", "no_such_profile", "--max-episodes", "1"], "no_such_profile"),
    "capture.recover": (["{tmp}/garbage_human.h5.partial"], "cannot be read"),
    "capture.build_dataset": (
        ["--raw", "{tmp}", "--id", "test/empty-v0", "--root", "{tmp}/minari"],
        "no finished episodes",
    ),
    "capture.vocab": (["{tmp}"], "no finished episodes"),
    "capture.floors": (["{tmp}"], "no finished episodes"),
    "capture.scout": (["Godrick the Grafted", "--out", "{tmp}/godrick"], "profile name 'Godrick the Grafted'"),
    "elden_il.view": (["{tmp}/missing_human.h5", "--save", "{tmp}/x.rrd"], "no episode at"),
    "elden_il.pilot": (["--backend", "sim", "--scripted-human", "--policy", "{tmp}/missing"], "no policy at"),
    "elden_il.pipeline": (["bc", "--params", "{tmp}/missing.yaml"], "missing.yaml"),
    "elden_il.studies.scaling": (["--params", "{tmp}/missing.yaml", "--out", "{tmp}/out"], "missing.yaml"),
    "elden_il.studies.corrections": (["--out", "{tmp}"], "exists: give a new folder"),
}
"""Each command with a mistake a user makes, and what its one line must name."""


@pytest.mark.parametrize("module", MISTAKES)
def test_every_command_says_a_users_mistake_in_one_line_and_exits_2(module: str, tmp_path: Path):
    (tmp_path / "garbage_human.h5.partial").write_bytes(b"not an episode")
    args, named = MISTAKES[module]
    result = subprocess.run(
        [sys.executable, "-m", module, *(a.format(tmp=tmp_path) for a in args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == ERROR_EXIT and "Traceback" not in result.stderr, result.stderr
    assert len(errors) == 1 and named in errors[0], result.stderr


def test_the_runner_passes_a_commands_own_status_and_a_signals_on(capsys: pytest.CaptureFixture):
    assert run_command(lambda: None) == 0 and run_command(lambda: 1) == 1

    def interrupted() -> None:
        raise Interrupted("interrupted by SIGINT: 3 episode(s) saved", 2)

    def unreadable() -> None:
        raise DataError("x.h5 is not a readable episode: record it again")

    assert run_command(interrupted) == 130
    assert run_command(unreadable) == ERROR_EXIT
    assert capsys.readouterr().err.splitlines() == [
        "error: interrupted by SIGINT: 3 episode(s) saved",
        "error: x.h5 is not a readable episode: record it again",
    ]


def test_the_recorders_flags_are_its_settings_fields_with_their_defaults():
    """One declaration: each flag of ``python -m capture.record`` is a field of ``RecordSettings``,
    and a command line that names none builds the settings' own defaults."""
    from capture.record import RecordSettings, build_parser

    from_no_flags = RecordSettings.from_args(build_parser().parse_args([]))
    assert from_no_flags == RecordSettings()
    changed = RecordSettings.from_args(
        build_parser().parse_args(
            ["--rate", "60", "--no-restart", "--autopilot", "--hotkeys", "F1,F2,F3", "--master-size", "64x48"]
        )
    )
    assert (changed.rate, changed.restart, changed.autopilot, changed.hotkeys, changed.master_size) == (
        60.0,
        False,
        True,
        ("F1", "F2", "F3"),
        (64, 48),
    )


@pytest.mark.parametrize(
    ("module", "args", "named"),
    [
        ("elden_il.studies.human_path", ["--first-seed", "-1"], "argument --first-seed: '-1'"),
        ("elden_il.studies.finetune_stability", ["--checkpoints", "-3"], "argument --checkpoints: '-3'"),
    ],
)
def test_a_studys_out_of_range_flag_is_refused_before_it_runs(module: str, args: list[str], named: str):
    result = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"error: {named}" in result.stderr, result.stderr


def every_module() -> list[str]:
    """Every module of the product's three packages, imported."""
    names = []
    for package in ("env", "capture", "elden_il"):
        root = importlib.import_module(package)
        names += [info.name for info in pkgutil.walk_packages(root.__path__, f"{package}.")]
    for name in names:
        importlib.import_module(name)
    return names


def test_the_error_catalogue_names_every_error_class_and_no_other():
    from env.common import errors

    every_module()
    groups = {errors.EldenILError, errors.ConfigError, errors.GameError, errors.DataError, errors.SetupError}
    groups.add(errors.Interrupted)

    def below(kind: type) -> set[type]:
        return {sub for child in kind.__subclasses__() for sub in {child, *below(child)}}

    classes = {f"{kind.__module__}.{kind.__qualname__}" for kind in below(errors.EldenILError) - groups}
    named = set(re.findall(r"``((?:env|capture|elden_il)\.[\w.]+)``", errors.__doc__.split("The groups")[1]))
    assert classes - named == set(), "env/common/errors.py's docstring misses these errors"
    assert named - classes == set(), "env/common/errors.py's docstring names what is no error class"


def test_every_command_makes_its_flags_from_settings_fields():
    """One mechanism: a command's flags are fields of a settings dataclass (``env.common.cli.flag``,
    ``checked(..., flag=...)``), added by ``add_flags``; no module of the three packages, nor any
    benchmark, adds one by hand, where its default and rule would be a second declaration."""
    by_hand = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("env", "capture", "elden_il", "benchmarks")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "env/common/cli.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ".add_argument(" in line
    ]
    assert by_hand == [], by_hand


def test_every_command_builds_its_parser_and_is_run_one_way():
    """One way to build a command's parser and to run it, studies and benchmarks included: the
    parser from ``env.common.cli.command_parser`` (or ``parse_settings``), never
    ``argparse.ArgumentParser`` itself, so every command teaches from its docstring and takes its
    flags from settings; a ``main(argv=None)`` that hands its work to ``run_command`` (a user's
    mistake is one ``error:`` line, exit 2); and the module run as ``raise SystemExit(main())``, so
    that status is the process's. Read from the source, nothing imported."""
    wrong = [
        f"{path.relative_to(ROOT)}: {fault}"
        for package in ("env", "capture", "elden_il", "benchmarks")
        for path in sorted((ROOT / package).rglob("*.py"))
        for fault in command_faults(ast.parse(path.read_text()), own_parser=path == ROOT / "env/common/cli.py")
    ]
    assert wrong == [], "\n".join(wrong)


def command_faults(module: ast.Module, own_parser: bool = False) -> list[str]:
    """What in ``module`` is not the one way to build and run a command (``own_parser``: the
    module that builds every parser)."""
    faults = []
    if not own_parser and "ArgumentParser" in calls(module):
        faults.append("builds argparse.ArgumentParser itself; use env.common.cli.command_parser")
    guards = [
        node.body
        for node in module.body
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("__name__ == '__main__'", "'__main__' == __name__")
    ]
    if not guards:
        return faults
    if [ast.unparse(statement) for statement in guards[0]] != ["raise SystemExit(main())"]:
        faults.append('its `if __name__ == "__main__":` is not `raise SystemExit(main())`')
    main = next((node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == "main"), None)
    if main is None:
        return [*faults, "runs as a command but has no main()"]
    if [a.arg for a in main.args.args] != ["argv"] or [ast.unparse(d) for d in main.args.defaults] != ["None"]:
        faults.append("main() takes no `argv: list[str] | None = None` (a test's command line)")
    if "run_command" not in calls(main):
        faults.append("main() does not hand its work to env.common.cli.run_command")
    return faults


def calls(tree: ast.AST) -> set[str]:
    """The names ``tree`` calls, less any module or object before them (``argparse.ArgumentParser``
    is ``ArgumentParser``)."""
    return {
        node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
    }
