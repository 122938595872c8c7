"""Why fine-tuning's learning curve collapses, and what keeps it up: fine-tuning variants run
side by side from the same behaviour-cloned policy, same seeds, same steps.

For each variant it reports the sampled-action win rate of the training fights in windows of
steps (with Wilson 95 % intervals), and PPO's own diagnostics after each update: the critic's
explained variance of the returns (near 0 or below: its advantages are noise), the value loss,
and how far each update moved the policy (approx. KL, clip fraction). The BC policy's own
sampled-action win rate, measured on fresh fights, is the level the curve starts from.

    python -m benchmarks.bench_finetune_stability                       # the pipeline's BC policy
    python -m benchmarks.bench_finetune_stability --warmups 0 6000 --steps 30000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import yaml

from benchmarks.machine import describe

ROOT = Path(__file__).resolve().parents[1]


def windows(rows: list[dict], steps: int, width: int) -> list[dict]:
    """Win rate of the fights that ended in each ``width``-step window, with its interval."""
    from env.play import wilson_interval

    out = []
    for start in range(0, steps, width):
        wins = [r["win"] for r in rows if start < r["timesteps"] <= start + width]
        low, high = wilson_interval(sum(wins), len(wins)) if wins else (0.0, 1.0)
        out.append({"until": start + width, "fights": len(wins), "win_rate": float(np.mean(wins)) if wins else None,
                    "low": low, "high": high})
    return out


def bc_sampled_win_rate(policy_dir: Path, fights: int) -> dict:
    """The BC policy acting by sampling, as PPO's rollouts do, on fights of its own."""
    from elden_il.evaluate import PolicyActor
    from elden_il.policy import load_env_config
    from env.factory import make_env
    from env.play import run_fights, summarize, wilson_interval

    config = load_env_config(policy_dir)
    torch.manual_seed(0)  # the sampling
    actor = PolicyActor(policy_dir / "policy.zip", deterministic=False)
    started = time.perf_counter()
    records, _ = run_fights(lambda: make_env(config), actor, list(range(5000, 5000 + fights)), parallel=8)
    summary = summarize(records, time.perf_counter() - started)
    wins = sum(r.win for r in records)
    return {"fights": fights, "win_rate": wins / fights, "interval": wilson_interval(wins, fights), **summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--policy", type=Path, default=ROOT / "datasets/models/bc", help="the BC policy folder (default: the pipeline's)")
    parser.add_argument("--steps", type=int, default=None, help="steps per variant (default: params.yaml's finetune.total_steps)")
    parser.add_argument("--warmups", type=int, nargs="+", default=[0, 6000], help="critic warm-up steps of each variant")
    parser.add_argument("--window", type=int, default=6000, help="steps per point of the win-rate curve")
    parser.add_argument("--bc-fights", type=int, default=100, help="fights for the BC policy's own sampled win rate (0: skip)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    from elden_il.finetune import FinetuneConfig, finetune
    from elden_il.pipeline import dataclass_params
    from elden_il.policy import load_env_config

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    base = dataclass_params(params["finetune"], "finetune", FinetuneConfig)
    steps = args.steps or base.total_steps
    env_config = load_env_config(args.policy)
    results: dict = {"machine": describe(), "steps": steps, "base": {k: v for k, v in vars(base).items() if k != "hosts"},
                     "bc_sampled": bc_sampled_win_rate(args.policy, args.bc_fights) if args.bc_fights else None,
                     "variants": {}}
    if results["bc_sampled"]:
        print(f"BC, sampled actions: {results['bc_sampled']['win_rate']:.0%} of {args.bc_fights} fights")
    for warmup in args.warmups:
        config = replace(base, total_steps=steps, value_warmup_steps=warmup)
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            finetune(args.policy / "policy.zip", config, env_config, Path(tmp))
            seconds = time.perf_counter() - started
            rows = json.loads((Path(tmp) / "learning_curve.json").read_text())
            updates = json.loads((Path(tmp) / "updates.json").read_text())
        curve = windows(rows, steps, args.window)
        results["variants"][f"warmup_{warmup}"] = {"seconds": seconds, "curve": curve, "updates": updates, "fights": rows}
        print(f"warm-up {warmup:>6} steps ({seconds:.0f} s): win rate by {args.window}-step window: "
              + "  ".join("-" if w["win_rate"] is None else f"{w['win_rate']:.0%}" for w in curve))
        print("   explained variance after each update: "
              + " ".join(f"{u['explained_variance']:.2f}" for u in updates[:12]) + (" ..." if len(updates) > 12 else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
