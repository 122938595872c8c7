"""How long loading a policy takes: SB3's zips (what ``load_policy`` read before policies were
data) against the policy folder (safetensors and JSON, what it reads now), side by side.

The pipeline's network (``NetworkSize()``) for the pipeline's env, saved three ways from the same
weights: SB3's policy-only zip (behaviour cloning's old file, ``ActorCriticPolicy.load``), SB3's
PPO zip (fine-tuning's old file, ``PPO.load``) and the policy folder (``load_policy``). Each is
loaded ``--repeat`` times in this process, in turns, so the three share the machine's state;
the median and the fastest are reported, with each file's size. The commands load a policy once,
at their start: what this measures is a command's wait, not a hot loop. That wait is mostly the
first load's, imports included, so each file is also loaded ``--fresh`` times in a new process of
its own (the median of those whole processes, Python's start and the imports counted).

    .venv/bin/python -m benchmarks.bench_policy_load [--repeat 20] [--json out.json]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from stable_baselines3.common.policies import ActorCriticPolicy

from env.common.cli import JsonOut, parse_settings, run_command
from env.common.fields import check_fields, checked, whole
from env.common.machine import describe
from env.config import EnvConfig
from env.profile import load_profile

from elden_il.params import load_params
from elden_il.policies.policy import NetworkSize, load_policy, make_policy, policy_kwargs, save_policy
from elden_il.policies.sb3_zip import export_sb3, read_sb3_zip_trusting_its_code


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_policy_load", __doc__, PolicyLoadArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


ROOT = Path(__file__).resolve().parents[1]


FRESH = (
    "import torch; torch.set_num_threads(1); "
    "from elden_il.policies.policy import load_policy; from elden_il.policies.sb3_zip import read_sb3_zip_trusting_its_code; "
)
"""What every fresh process imports before its one load (the same for the three files)."""


def fresh_process(call: str) -> float:
    """Seconds of a new Python process that makes one ``call``, imports and start included."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", FRESH + call], check=True, cwd=ROOT)
    return time.perf_counter() - started


def measure(repeat: int, fresh: int) -> dict:
    config: EnvConfig = load_params(ROOT / "params.yaml").env.replace(profile="sim_margit")
    torch.manual_seed(0)
    policy = make_policy(*config.spaces(load_profile(config.profile)), NetworkSize())
    with tempfile.TemporaryDirectory() as tmp:
        folder, policy_only, ppo = Path(tmp) / "policy", Path(tmp) / "policy_only.zip", Path(tmp) / "ppo.zip"
        save_policy(policy, config, folder)
        # as SB3 makes a policy (with the optimizer it builds into every one), as BC's zip held it
        sb3_made = ActorCriticPolicy(
            policy.observation_space, policy.action_space, lambda _: 3e-4, **policy_kwargs(NetworkSize())
        )
        sb3_made.load_state_dict(policy.state_dict())
        sb3_made.save(str(policy_only))
        export_sb3(folder, ppo)
        loads = {
            "SB3 policy-only zip (ActorCriticPolicy.load, BC's old file)": lambda: read_sb3_zip_trusting_its_code(
                policy_only
            ),
            "SB3 PPO zip (PPO.load, fine-tuning's old file)": lambda: read_sb3_zip_trusting_its_code(ppo),
            "policy folder (load_policy: safetensors + JSON)": lambda: load_policy(folder, device="cpu"),
        }
        sizes = {
            list(loads)[0]: policy_only.stat().st_size,
            list(loads)[1]: ppo.stat().st_size,
            list(loads)[2]: sum(p.stat().st_size for p in folder.iterdir()),
        }
        times: dict[str, list[float]] = {name: [] for name in loads}
        for _ in range(repeat):
            for name, load in loads.items():
                started = time.perf_counter()
                load()
                times[name].append(time.perf_counter() - started)
        in_a_process = dict(
            zip(
                loads,
                (
                    f"read_sb3_zip_trusting_its_code({str(policy_only)!r})",
                    f"read_sb3_zip_trusting_its_code({str(ppo)!r})",
                    f"load_policy({str(folder)!r}, device='cpu')",
                ),
            )
        )
        first: dict[str, list[float]] = {name: [] for name in loads}
        for _ in range(fresh):
            for name, call in in_a_process.items():
                first[name].append(fresh_process(call))
    return {
        "machine": describe(),
        "repeat": repeat,
        "fresh": fresh,
        "parameters": sum(p.numel() for p in policy.parameters()),
        "loads": {
            name: {
                "median_ms": 1000 * statistics.median(times[name]),
                "fastest_ms": 1000 * min(times[name]),
                "fresh_process_median_ms": 1000 * statistics.median(first[name]) if fresh else None,
                "bytes": sizes[name],
            }
            for name in loads
        },
    }


@dataclass(frozen=True)
class PolicyLoadArgs:
    """How often ``python -m benchmarks.bench_policy_load`` loads each file: each field its flag."""

    repeat: int = checked(20, whole(1, 10_000), "loads of each file")
    fresh: int = checked(5, whole(0, 1000), "loads of each file in a new process of its own (0: none)")

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: PolicyLoadArgs, out: JsonOut) -> None:
    torch.set_num_threads(1)
    results = measure(args.repeat, args.fresh)
    print(
        f"{results['machine']}; {results['parameters']:,} parameters, {args.repeat} loads each, "
        f"{args.fresh} in fresh processes"
    )
    baseline = next(iter(results["loads"].values()))
    print(f"{'file':<62} {'median ms':>10} {'fastest ms':>11} {'size':>10} {'vs BC zip':>10} {'fresh ms':>9} {'vs':>6}")
    for name, r in results["loads"].items():
        fresh = (
            f"{r['fresh_process_median_ms']:>9.0f} {baseline['fresh_process_median_ms'] / r['fresh_process_median_ms']:>5.2f}x"
            if args.fresh
            else ""
        )
        print(
            f"{name:<62} {r['median_ms']:>10.1f} {r['fastest_ms']:>11.1f} {r['bytes'] / 1e6:>8.2f} MB "
            f"{baseline['median_ms'] / r['median_ms']:>9.2f}x {fresh}"
        )
    if out.json:
        out.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
