"""Evaluation fanned out over Ray against one process: the pipeline's four policies (random, BC,
fine-tuned, the scripted expert) on the same held-out fights, side by side in one run: one
process (decisions batched over 8 fights, as ``dvc repro`` evaluates), then a local Ray cluster
with one node of 2 CPUs, then the two-node cluster the tests start (one CPU each), then one process again. Every run
must give the same results, fight for fight; the speed-ups are ratios to the mean of the two
one-process runs (a machine shared with other work drifts).

    python -m benchmarks.bench_fanout                 # 100 fights per policy (the pipeline's)
    python -m benchmarks.bench_fanout --fights 20     # a quick look

Clusters bind 127.0.0.1 only. Starting one is timed apart from the evaluation it serves.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from env.common.cli import JsonOut, flag, parse_settings, ruled, run_command
from env.common.fields import check_fields, checked, optional, whole
from env.common.machine import describe

from elden_il.evaluation.fight_loop import HeldOutFights


def main(argv: list[str] | None = None) -> int:
    held, args, out = parse_settings(
        "python -m benchmarks.bench_fanout", __doc__, (HeldOutFights, ("fights",)), FanoutArgs, JsonOut, argv=argv
    )
    return run_command(lambda: benchmark(args, held, out))


ROOT = Path(__file__).resolve().parents[1]


def evaluate_all(models: Path, fights: int) -> tuple[dict, float]:
    """The evaluate stage's policies (saved in ``models``) and env on ``fights`` held-out seeds:
    results and seconds."""
    import yaml

    from env.config import EnvConfig
    from env.factory import make_env
    from env.sim.expert import ScriptedExpert

    from elden_il.evaluation.evaluate import PolicyActor, evaluate
    from elden_il.evaluation.fight_loop import PlayerActor, RandomActor

    ev = yaml.safe_load((ROOT / "params.yaml").read_text())["evaluate"]
    config = EnvConfig.load(models / "bc")
    actors = {
        "random": RandomActor(),
        "bc": PolicyActor(models / "bc", True),
        "finetuned": PolicyActor(models / "finetuned", True),
        "expert": PlayerActor("expert", config),
    }
    seeds = list(range(ev["first_seed"], ev["first_seed"] + fights))
    started = time.perf_counter()
    results = evaluate(
        actors, lambda: make_env(config, state_attributes=ScriptedExpert.ATTRIBUTES), seeds, parallel=ev["parallel"]
    )
    return results, time.perf_counter() - started


def on_cluster(nodes: list[int], models: Path, fights: int) -> tuple[dict, float, float]:
    """``evaluate_all`` on a fresh loopback cluster with a node of each CPU count in ``nodes``:
    results, evaluation seconds, cluster start seconds."""
    import ray
    from ray.cluster_utils import Cluster

    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": nodes[0], "node_ip_address": "127.0.0.1"})
    for cpus in nodes[1:]:
        cluster.add_node(num_cpus=cpus, node_ip_address="127.0.0.1")
    start_seconds = time.perf_counter() - started
    os.environ["RAY_ADDRESS"] = cluster.address
    try:
        results, seconds = evaluate_all(models, fights)
    finally:
        del os.environ["RAY_ADDRESS"]
        ray.shutdown()
        cluster.shutdown()
    return results, seconds, start_seconds


def outcomes(results: dict) -> dict:
    """The results without the timing, to compare runs."""
    return {name: {k: v for k, v in r.items() if k != "fights_per_minute"} for name, r in results.items()}


THREADS = whole(1, 1024)
"""The torch threads the one process may be given (unset: torch's own)."""


@dataclass(frozen=True)
class FanoutArgs:
    """Which policies ``python -m benchmarks.bench_fanout`` evaluates, and with how many torch threads
    in the one process: each field its flag (the fights are ``HeldOutFights.fights``)."""

    models: Path = field(
        default=ROOT / "datasets/models", metadata=flag("where the pipeline saved bc/ and finetuned/", type=Path)
    )
    torch_threads: int | None = checked(
        None,
        optional(THREADS),
        "torch threads of the one process (default: torch's own, one per core; Ray's workers run one each). On a "
        "machine shared with other work, one thread is far faster than two",
        type=ruled(int, THREADS),
    )

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: FanoutArgs, held: HeldOutFights, out: JsonOut) -> None:
    os.environ.pop("RAY_ADDRESS", None)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from elden_il.fanout import keep_to_loopback

    keep_to_loopback()
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    here, before = evaluate_all(args.models, held.fights)
    print(f"one process: {before:.1f} s ({4 * held.fights / before * 60:.0f} fights a minute)")
    runs: dict = {}
    for name, nodes in (("Ray, one node of 2 CPUs", [2]), ("Ray, two nodes of 1 CPU", [1, 1])):
        results, seconds, start = on_cluster(nodes, args.models, held.fights)
        runs[name] = {
            "seconds": seconds,
            "cluster_start_seconds": start,
            "same_results": outcomes(results) == outcomes(here),
        }
    again, after = evaluate_all(args.models, held.fights)
    one_process = (before + after) / 2  # before and after the clusters: a machine shared with other work drifts
    print(f"one process again: {after:.1f} s; the ratios are to their mean, {one_process:.1f} s")
    runs["one process"] = {"seconds": [before, after], "same_results": outcomes(again) == outcomes(here)}
    for name, run in runs.items():
        if name != "one process":
            run["speedup"] = one_process / run["seconds"]
            print(
                f"{name}: {run['seconds']:.1f} s, {run['speedup']:.2f}x one process (cluster start "
                f"{run['cluster_start_seconds']:.1f} s); same results fight for fight: {run['same_results']}"
            )
    if out.json:
        out.json.write_text(
            json.dumps(
                {
                    "machine": describe(),
                    "fights_per_policy": held.fights,
                    "torch_threads": args.torch_threads,
                    "runs": runs,
                    "results": outcomes(here),
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    raise SystemExit(main())
