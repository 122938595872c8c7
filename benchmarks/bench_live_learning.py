"""Does the learner keep pace with live games? Wall time per 1,000 live env steps of
``finetune.method: awac`` against simulator servers (the real-server mode unless told
otherwise) standing in for gaming PCs, one or several at once (``--pcs``), at each game speed,
with learning on (``updates_per_step`` as params.yaml says) and off (0: the same run, playing
only), side by side in one run; the env steps an hour that gives, the CPU of the learner (this
process, every actor in it) and of the servers, and the learner's memory.

A live step lasts its game time divided by the game speed (200 ms at 1x, 50 ms at 4x) plus what
the wire and the pause cost; the learner's updates run on a thread of their own while the env
plays the next step. If they take less than a step, an hour of play is about an hour of wall
time. ``--in-process`` times the same runs against the in-process simulator instead (the
pipeline's fine-tuning: no game to wait on, so the step and the updates share the CPU).
``--watched`` adds, beside each learning run, the same run recording its live view
(``elden_il.view.live_run``: each PC's state and pace, the learner's, the win rate), to show
what watching a run costs it.

  python -m benchmarks.bench_live_learning --speeds 1 4 --steps 1000 --json /tmp/live_learning.json
  python -m benchmarks.bench_live_learning --speeds 4 --pcs 1 2 3 --steps 1500 --json /tmp/pcs.json
  python -m benchmarks.bench_live_learning --in-process --steps 2000 --watched
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from env.common.cli import JsonOut, flag, parse_settings, ruled, run_command
from env.common.fields import check_fields, checked, whole
from env.common.machine import describe

from elden_il.params import FinetuneConfig, load_params

from benchmarks.flags import GAME_SPEED


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings(
        "python -m benchmarks.bench_live_learning",
        __doc__,
        LiveLearningArgs,
        JsonOut,
        argv=argv,
        epilog=__doc__.split("\n\n", 2)[2],
    )
    return run_command(lambda: benchmark(args, out))


ROOT = Path(__file__).resolve().parents[1]
REAL_SERVER = "--real-server"


def timed_run(
    policy: Path,
    dataset: tuple[str, Path],
    settings: FinetuneConfig,
    speed: float | None,
    steps: int,
    updates: int,
    pcs: int = 1,
    watched: bool = False,
) -> dict:
    """One AWAC run of ``steps`` env steps, all ``pcs`` servers' together, at game ``speed``
    (None: in-process); its env steps' wall time, from the first to the last (the critic's
    warm-up and the servers' start left out) and this process's CPU over them; the servers' CPU
    over their whole lives, and the most memory this process has held so far. ``watched``: the
    run records its live view to a file as it goes."""
    from contextlib import nullcontext

    from env.config import EnvConfig

    from elden_il.training.finetune import env_names, finetune_once
    from elden_il.view.live_run import watched_run

    config = dataclasses.replace(
        settings,
        method="awac",
        backend="sim" if speed is None else "sim_server",
        num_envs=pcs,
        runs=1,
        game_speed=speed or 1,
        total_steps=steps,
        updates_per_step=updates,
    )
    marks: list[tuple[float, float]] = []
    servers_cpu = _children_cpu()
    with (
        tempfile.TemporaryDirectory() as tmp,
        watched_run(Path(tmp) / "run.rrd", env_names(config)) if watched else nullcontext() as watch,
    ):
        metrics = finetune_once(
            policy,
            config,
            EnvConfig.load(policy),
            Path(tmp) / "out",
            progress_bar=False,
            on_steps=lambda _: marks.append((time.perf_counter(), time.process_time())),
            dataset=dataset,
            watch=watch,
        )
    (wall0, cpu0), (wall1, cpu1) = marks[0], marks[-1]
    per_step = 1000 / (len(marks) - 1)
    return {
        "speed": speed,
        "pcs": pcs,
        "updates_per_step": updates,
        "watched": watched,
        "steps": len(marks),
        "steps_by_pc": [env["env_steps"] for env in metrics.get("by_env", [{"env_steps": len(marks)}])],
        "wall_s_per_1000_steps": (wall1 - wall0) * per_step,
        "env_steps_per_hour": 3600 / ((wall1 - wall0) * per_step / 1000),
        "learner_cpu_s_per_1000_steps": (cpu1 - cpu0) * per_step,
        "servers_cpu_s_per_1000_steps": (_children_cpu() - servers_cpu) * 1000 / len(marks),
        "learner_max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "nominal_wall_s_per_1000_steps": None if speed is None else 1000 * 0.2 / speed / pcs,
    }


def _children_cpu() -> float:
    """CPU seconds of this process's ended children (the servers, once stopped)."""
    times = os.times()
    return times.children_user + times.children_system


@dataclasses.dataclass(frozen=True)
class LiveLearningArgs:
    """Which policy ``python -m benchmarks.bench_live_learning`` fine-tunes live, at which speeds, for how
    long, against which server: each field its flag."""

    policy: Path = dataclasses.field(
        default=ROOT / "datasets" / "models" / "bc",
        metadata=flag("the BC policy to fine-tune (default: the pipeline's, after dvc repro)", type=Path),
    )
    minari: Path = dataclasses.field(
        default=ROOT / "datasets" / "minari",
        metadata=flag("the Minari root holding params.yaml's dataset.id (default: the pipeline's)", type=Path),
    )
    speeds: tuple[float, ...] = dataclasses.field(
        default=(1.0, 4.0), metadata=flag("game speeds (default: 1 4)", type=ruled(float, GAME_SPEED), nargs="+")
    )
    steps: int = checked(1000, whole(2, 1_000_000), "live env steps per run, all its PCs' together")
    pcs: tuple[int, ...] = dataclasses.field(
        default=(1,),
        metadata=flag("simulator servers playing at once, as a lab's gaming PCs (default: 1)", type=int, nargs="+"),
    )
    ideal: bool = dataclasses.field(
        default=False, metadata=flag("the simulator server's ideal mode, not its real-server mode")
    )
    in_process: bool = dataclasses.field(
        default=False, metadata=flag("the in-process simulator, as the pipeline fine-tunes (--speeds is unused)")
    )
    watched: bool = dataclasses.field(
        default=False, metadata=flag("beside each learning run, the same run recording its live view")
    )

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: LiveLearningArgs, out: JsonOut) -> None:
    if not args.ideal:
        os.environ["ELDEN_IL_SIM_ARGS"] = f"{os.environ.get('ELDEN_IL_SIM_ARGS', '')} {REAL_SERVER}".strip()
    params = load_params(ROOT / "params.yaml")
    learning = max(1, params.finetune.updates_per_step)
    dataset = (params.dataset.id, args.minari)
    server = "in-process" if args.in_process else "ideal" if args.ideal else "real-server"
    results = {"machine": describe(), "server": server, "runs": []}
    print(
        f"{'speed':>10} {'PCs':>4} {'updates/step':>12} {'watched':>8} {'wall s/1000':>12} {'nominal':>8} {'steps/hour':>11} "
        f"{'learner CPU s/1000':>19} {'servers CPU s/1000':>19}"
    )
    for speed in (None,) if args.in_process else args.speeds:
        for pcs in (1,) if args.in_process else args.pcs:
            plans = [(0, False), (learning, False)] + ([(learning, True)] if args.watched else [])
            for updates, watched in plans:
                row = timed_run(args.policy, dataset, params.finetune, speed, args.steps, updates, pcs, watched)
                results["runs"].append(row)
                nominal = row["nominal_wall_s_per_1000_steps"]
                print(
                    f"{'in-process' if speed is None else f'{speed:g}':>10} {pcs:>4} {updates:>12} "
                    f"{'yes' if watched else 'no':>8} "
                    f"{row['wall_s_per_1000_steps']:>12.1f} {'-' if nominal is None else f'{nominal:.0f}':>8} "
                    f"{row['env_steps_per_hour']:>11,.0f} {row['learner_cpu_s_per_1000_steps']:>19.1f} "
                    f"{row['servers_cpu_s_per_1000_steps']:>19.1f}",
                    flush=True,
                )
    if out.json:
        out.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
