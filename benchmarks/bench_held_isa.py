"""What holding torch to one instruction set costs the training stages: the price of "the same
bytes on every machine".

BC's and fine-tuning's floats differ between CPUs because torch picks its kernels by the CPU it
runs on: ATen's vectorised loops (``ATEN_CPU_CAPABILITY``), oneDNN's convolutions
(``ONEDNN_MAX_CPU_ISA``) and MKL's BLAS (``MKL_CBWR``). Held to what every x86-64 CPU has, the
kernels are the same everywhere. This runs the ``bc`` and ``finetune`` stages on the committed
dataset (``datasets/minari``, ``dvc pull`` or ``dvc repro dataset`` first) with params.yaml cut
short, in a project folder of its own, once as torch chooses and once held, in turns, and reports
each stage's seconds, the ratio, and each policy's digest (the two settings write other bytes).

    .venv/bin/python -m benchmarks.bench_held_isa [--bc-epochs 3] [--finetune-steps 1500] [--json out.json]
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from env.common.cli import JsonOut, parse_settings, run_command
from env.common.errors import DataError
from env.common.fields import check_fields, checked, whole
from env.common.machine import describe

ROOT = Path(__file__).resolve().parents[1]

HELD = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "COMPATIBLE"}
"""Every kernel family at what any x86-64 CPU runs (SSE4.1 for oneDNN, MKL's compatible path)."""
SETTINGS = {"as torch chooses": {}, "held to one instruction set": HELD}


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_held_isa", __doc__, HeldIsaArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


@dataclass(frozen=True)
class HeldIsaArgs:
    """How long ``python -m benchmarks.bench_held_isa`` trains each time: each field its flag."""

    bc_epochs: int = checked(3, whole(1, 1000), "BC's epochs")
    finetune_steps: int = checked(1500, whole(64, 1_000_000), "fine-tuning's env steps")

    def __post_init__(self) -> None:
        check_fields(self)


def stage_seconds(project: Path, stage: str, settings: dict[str, str]) -> float:
    """``python -m elden_il.pipeline STAGE`` in ``project`` with ``settings`` in its environment."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **settings}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "elden_il.pipeline", stage], cwd=project, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise DataError(f"the {stage} stage failed: {last}")
    return time.perf_counter() - started


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def measure(args: HeldIsaArgs) -> dict:
    if not any((ROOT / "datasets/minari").glob("*/*")):
        raise DataError("no dataset in datasets/minari: run `dvc pull` or `dvc repro dataset` first")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["bc"].update(epochs=args.bc_epochs, patience=args.bc_epochs)
    params["finetune"].update(total_steps=args.finetune_steps)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "datasets").mkdir()
        (project / "datasets/minari").symlink_to(ROOT / "datasets/minari")
        (project / "params.yaml").write_text(yaml.safe_dump(params))
        for name, settings in SETTINGS.items():
            seconds = {stage: stage_seconds(project, stage, settings) for stage in ("bc", "finetune")}
            models = project / "datasets/models"
            results[name] = {
                "settings": settings,
                "seconds": seconds,
                "policies": {p: digest(models / p / "policy.safetensors") for p in ("bc", "finetuned")},
            }
    return {"machine": describe(), "bc_epochs": args.bc_epochs, "finetune_steps": args.finetune_steps, **results}


def benchmark(args: HeldIsaArgs, out: JsonOut) -> None:
    results = measure(args)
    chosen, held = (results[name] for name in SETTINGS)
    print(f"{results['machine']}; BC {args.bc_epochs} epochs, fine-tuning {args.finetune_steps} steps")
    print(f"{'stage':<10} {'as torch chooses s':>19} {'held s':>8} {'held/chosen':>12}")
    for stage in ("bc", "finetune"):
        a, b = chosen["seconds"][stage], held["seconds"][stage]
        print(f"{stage:<10} {a:>19.1f} {b:>8.1f} {b / a:>11.2f}x")
    for name in SETTINGS:
        print(f"{name}: policies {results[name]['policies']}")
    if out.json:
        out.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
