"""The default pipeline's cost, stage by stage, for two commits side by side in one run.

A change to what the pipeline records or how it builds its data (the episode's video, say)
should say what it costs the default ``dvc repro``. This checks each commit out into a
worktree of its own, then runs the commands of that commit's ``dvc.yaml`` stages in order with
that commit's ``params.yaml`` (what ``dvc repro -f`` runs, without DVC's hashing around them),
one commit after the other, and reports each stage's wall time and CPU time (user + system of
the stage's processes). Both commits share this checkout's virtualenv.

    .venv/bin/python -m benchmarks.bench_pipeline --baseline 2bc0826 --json /tmp/pipeline.json
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from env.common.cli import JsonOut, flag, parse_settings, ruled, run_command
from env.common.fields import TEXT, check_fields, checked
from env.common.machine import describe


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_pipeline", __doc__, PipelineCostArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


ROOT = Path(__file__).parents[1]


def checkout(revision: str, into: Path) -> Path:
    """A detached worktree of ``revision`` at ``into``."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(into), revision], check=True)
    return into


def stage_commands(tree: Path) -> dict[str, str]:
    """``dvc.yaml``'s stages of ``tree``, in the order the file lists them (a valid run order)."""
    return {name: stage["cmd"] for name, stage in yaml.safe_load((tree / "dvc.yaml").read_text())["stages"].items()}


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_stages(tree: Path) -> dict[str, dict[str, float]]:
    """Every stage of ``tree`` in order, importing ``tree``'s code; each stage's wall and CPU seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    costs = {}
    for name, command in stage_commands(tree).items():
        cpu, started = children_cpu_s(), time.perf_counter()
        result = subprocess.run(command, shell=True, cwd=tree, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"stage {name} of {tree} failed:\n{result.stdout[-2000:]}{result.stderr[-4000:]}")
        costs[name] = {"wall_s": time.perf_counter() - started, "cpu_s": children_cpu_s() - cpu}
        print(f"  {name}: {costs[name]['wall_s']:.0f} s wall, {costs[name]['cpu_s']:.0f} s CPU", flush=True)
    return costs


@dataclass(frozen=True)
class PipelineCostArgs:
    """The two commits ``python -m benchmarks.bench_pipeline`` sets side by side: each field its flag."""

    baseline: str = field(
        metadata=flag("the commit to compare against (run first)", type=ruled(str, TEXT), required=True)
    )
    revision: str = checked("HEAD", TEXT, "the commit measured against it")

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: PipelineCostArgs, out: JsonOut) -> None:
    results = {"machine": describe(), "commits": {}}
    with tempfile.TemporaryDirectory(prefix="bench_pipeline_") as work:
        for label, revision in (("baseline", args.baseline), ("revision", args.revision)):
            commit = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", revision], capture_output=True, text=True, check=True
            ).stdout.strip()
            tree = checkout(revision, Path(work) / label)
            print(f"{label} {commit}:", flush=True)
            try:
                results["commits"][label] = {"commit": commit, "stages": run_stages(tree)}
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)

    base, new = (results["commits"][k]["stages"] for k in ("baseline", "revision"))
    print(f"\n{results['machine']}\n")
    print(f"| stage | {args.baseline} wall s | {args.revision} wall s | CPU s, before / after |")
    print("|---|---:|---:|---:|")
    for name in dict.fromkeys([*base, *new]):
        b, n = base.get(name, {}), new.get(name, {})
        print(
            f"| {name} | {b.get('wall_s', float('nan')):.0f} | {n.get('wall_s', float('nan')):.0f} | "
            f"{b.get('cpu_s', float('nan')):.0f} / {n.get('cpu_s', float('nan')):.0f} |"
        )
    total = {k: sum(s["wall_s"] for s in v.values()) for k, v in (("baseline", base), ("revision", new))}
    print(f"| **whole pipeline** | {total['baseline'] / 60:.1f} min | {total['revision'] / 60:.1f} min | |")
    if out.json:
        out.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
