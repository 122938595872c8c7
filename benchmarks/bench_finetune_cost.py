"""What PPO fine-tuning costs on this machine, its envs in subprocesses or in the main process
(``finetune.subprocesses``): env steps/s of ``finetune()`` (PPO's updates included) with
params.yaml's ``finetune`` section as ``method: ppo`` over two envs (one leaves nothing to spread
over processes), over the critic's warm-up and two rollouts after it, side by side (as a ratio).
The pipeline's own AWAC, from one env, is timed by ``bench_live_learning``.

For a before/after of the code, copy this file into an older checkout's benchmarks/ and run it
there too (it needs ``finetune`` and ``FinetuneConfig`` from ``elden_il.training.finetune``, and
``env.common``'s ``machine`` and ``cli``: a checkout from c94c4c9 on; its flags are its own, not
``benchmarks.flags``'s, so that this file alone is enough):

  python -m benchmarks.bench_finetune_cost --label after
  git worktree add /tmp/before REV && cp benchmarks/bench_finetune_cost.py /tmp/before/benchmarks/
  here=$PWD; (cd /tmp/before && python -m benchmarks.bench_finetune_cost --label before --policy $here/datasets/models/bc)
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path

import yaml

from env.common.cli import flag, parse_settings, run_command
from env.common.fields import TEXT, check_fields, checked, whole
from env.common.machine import describe


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m benchmarks.bench_finetune_cost", __doc__, FinetuneCostArgs, argv=argv)
    return run_command(lambda: benchmark(args))


ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class FinetuneCostArgs:
    """Which policy ``python -m benchmarks.bench_finetune_cost`` fine-tunes, how long, under which name:
    each field its flag."""

    policy: Path = dataclasses.field(
        default=ROOT / "datasets" / "models" / "bc",
        metadata=flag("folder of the BC policy to fine-tune (default: the pipeline's, after dvc repro)", type=Path),
    )
    rollouts: int = checked(2, whole(1, 1000), "rollouts after the warm-up")
    label: str = checked("this code", TEXT, "the name of this code in the table")
    json: Path | None = dataclasses.field(default=None, metadata=flag("also write the results here", type=Path))

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: FinetuneCostArgs) -> None:
    from env.config import EnvConfig

    import elden_il.training.finetune as ft

    params = yaml.safe_load((ROOT / "params.yaml").read_text())["finetune"]
    known = {f.name for f in dataclasses.fields(ft.FinetuneConfig)}
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if k in known}
    settings.update(method="ppo", num_envs=2, runs=1)
    rollout = settings["n_steps"] * settings["num_envs"]
    steps = settings.get("value_warmup_steps", 0) + args.rollouts * rollout
    env_config = EnvConfig.load(args.policy)
    results = {"machine": describe(), "code": ft.__file__, "label": args.label, "total_steps": steps, "runs": {}}
    for subprocesses in (True, False):
        config = ft.FinetuneConfig(**{**settings, "total_steps": steps, "subprocesses": subprocesses})
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            metrics = ft.finetune(args.policy, config, env_config, Path(tmp))
            seconds = time.perf_counter() - started
        where = "subprocesses" if subprocesses else "main process"
        results["runs"][where] = {"seconds": seconds, "env_steps_per_s": metrics["env_steps_per_second"]}
    print(
        f"Machine: {results['machine']}\n{steps:,} steps ({settings.get('value_warmup_steps', 0):,} warm-up, "
        f"then {args.rollouts} rollouts of {rollout:,}), code: {results['code']}\n"
    )
    print("| code | envs in | seconds | env steps/s |\n|---|---|---:|---:|")
    for where, run in results["runs"].items():
        print(f"| {args.label} | {where} | {run['seconds']:.1f} | {run['env_steps_per_s']:.1f} |")
    sub, main_ = (results["runs"][k]["env_steps_per_s"] for k in ("subprocesses", "main process"))
    print(f"\nmain process / subprocesses: {main_ / sub:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
