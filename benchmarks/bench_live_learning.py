"""Does the one-env learner keep pace with a live game? Wall time per 1,000 live env steps of
``finetune.method: awac`` against a simulator server (the real-server mode unless told
otherwise), at each game speed, with learning on (``updates_per_step`` as params.yaml says) and
off (0: the same run, playing only), side by side in one run.

A live step lasts its game time divided by the game speed (200 ms at 1x, 50 ms at 4x) plus what
the wire and the pause cost; the learner's update runs after it, while the game is paused. If
learning's per-step cost is under that, an hour of play is about an hour of wall time.

  python -m benchmarks.bench_live_learning --speeds 1 4 --steps 1000 --json /tmp/live_learning.json
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

from env.common.cli import command_parser
from env.common.machine import describe

from elden_il.params import FinetuneConfig, load_params

ROOT = Path(__file__).resolve().parents[1]
REAL_SERVER = "--real-server"


def timed_run(
    policy: Path, dataset: tuple[str, Path], settings: FinetuneConfig, speed: float, steps: int, updates: int
) -> dict:
    """One AWAC run of ``steps`` live steps; its env steps' wall time, from the first to the last
    (the critic's warm-up and the server's start left out) and this process's CPU over them."""
    from env.config import EnvConfig

    from elden_il.finetune import finetune_once

    config = dataclasses.replace(
        settings,
        method="awac",
        backend="sim_server",
        num_envs=1,
        runs=1,
        game_speed=speed,
        total_steps=steps,
        updates_per_step=updates,
    )
    marks: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        finetune_once(
            policy,
            config,
            EnvConfig.load(policy),
            Path(tmp) / "out",
            progress_bar=False,
            on_steps=lambda _: marks.append((time.perf_counter(), time.process_time())),
            dataset=dataset,
        )
    (wall0, cpu0), (wall1, cpu1) = marks[0], marks[-1]
    per_step = 1000 / (len(marks) - 1)
    return {
        "speed": speed,
        "updates_per_step": updates,
        "steps": len(marks),
        "wall_s_per_1000_steps": (wall1 - wall0) * per_step,
        "learner_cpu_s_per_1000_steps": (cpu1 - cpu0) * per_step,
        "nominal_wall_s_per_1000_steps": 1000 * 0.2 / speed,
    }


def main() -> None:
    parser = command_parser("python -m benchmarks.bench_live_learning", __doc__, __doc__.split("\n\n", 2)[2])
    parser.add_argument(
        "--policy",
        type=Path,
        default=ROOT / "datasets" / "models" / "bc",
        help="the BC policy to fine-tune (default: the pipeline's, after dvc repro)",
    )
    parser.add_argument(
        "--minari",
        type=Path,
        default=ROOT / "datasets" / "minari",
        help="the Minari root holding params.yaml's dataset.id (default: the pipeline's)",
    )
    parser.add_argument("--speeds", type=float, nargs="+", default=[1.0, 4.0], help="game speeds (default: 1 4)")
    parser.add_argument("--steps", type=int, default=1000, help="live env steps per run (default: %(default)s)")
    parser.add_argument(
        "--ideal", action="store_true", help="the simulator server's ideal mode, not its real-server mode"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if not args.ideal:
        os.environ["ELDEN_IL_SIM_ARGS"] = f"{os.environ.get('ELDEN_IL_SIM_ARGS', '')} {REAL_SERVER}".strip()
    params = load_params(ROOT / "params.yaml")
    learning = max(1, params.finetune.updates_per_step)
    dataset = (params.dataset.id, args.minari)
    results = {"machine": describe(), "server": "ideal" if args.ideal else "real-server", "runs": []}
    print(f"{'speed':>5} {'updates/step':>12} {'wall s/1000':>12} {'nominal':>8} {'learner CPU s/1000':>19}")
    for speed in args.speeds:
        for updates in (0, learning):
            row = timed_run(args.policy, dataset, params.finetune, speed, args.steps, updates)
            results["runs"].append(row)
            print(
                f"{speed:>5g} {updates:>12} {row['wall_s_per_1000_steps']:>12.1f} "
                f"{row['nominal_wall_s_per_1000_steps']:>8.0f} {row['learner_cpu_s_per_1000_steps']:>19.1f}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
