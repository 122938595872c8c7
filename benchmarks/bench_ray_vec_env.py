"""Fine-tuning's vector env, local against Ray: env steps per second of SB3's DummyVecEnv (one
process), SubprocVecEnv (the fine-tuning default) and ``RayVecEnv`` (each sub-env a Ray actor,
on a local loopback cluster with a CPU per env) with the same number of in-process simulators,
side by side in one run, random actions; and the Ray overhead per step against SubprocVecEnv, in
microseconds.

    python -m benchmarks.bench_ray_vec_env                 # 2 envs, 600 steps each
    python -m benchmarks.bench_ray_vec_env --envs 2 --steps 200
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import numpy as np

from env.common.cli import JsonOut, parse_settings, run_command
from env.common.fields import check_fields, checked, whole
from env.common.machine import describe


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_ray_vec_env", __doc__, RayVecArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


def steps_per_second(vec, steps: int) -> float:
    """Vector steps of random actions per second (each one step of every sub-env), after a reset."""
    vec.seed(0)
    vec.reset()
    rng = np.random.default_rng(0)
    actions = [rng.integers(vec.action_space.n, size=vec.num_envs) for _ in range(steps)]
    started = time.perf_counter()
    for action in actions:
        vec.step(action)
    seconds = time.perf_counter() - started
    vec.close()
    return steps / seconds


@dataclass(frozen=True)
class RayVecArgs:
    """How many sub-envs ``python -m benchmarks.bench_ray_vec_env`` steps, how long: each field its flag."""

    envs: int = checked(2, whole(1, 256), "sub-envs")
    steps: int = checked(600, whole(1, 1_000_000), "vector steps timed per env kind")

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: RayVecArgs, out: JsonOut) -> None:
    os.environ.pop("RAY_ADDRESS", None)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from elden_il.fanout import keep_to_loopback

    keep_to_loopback()
    import ray
    from ray.cluster_utils import Cluster
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from env.config import EnvConfig
    from env.factory import env_fns

    from elden_il.training.ray_vec_env import RayVecEnv

    config = EnvConfig(profile="sim_margit", action_history=4)  # the pipeline's picture: 84x84
    rates = {
        "DummyVecEnv": steps_per_second(DummyVecEnv(env_fns(config, "sim", args.envs)), args.steps),
        "SubprocVecEnv": steps_per_second(SubprocVecEnv(env_fns(config, "sim", args.envs)), args.steps),
    }
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.envs, "node_ip_address": "127.0.0.1"})
    os.environ["RAY_ADDRESS"] = cluster.address
    try:
        rates["RayVecEnv"] = steps_per_second(RayVecEnv(env_fns(config, "sim", args.envs)), args.steps)
    finally:
        ray.shutdown()
        cluster.shutdown()
    for name, rate in rates.items():
        print(
            f"{name}: {rate:.0f} vector steps/s ({rate * args.envs:.0f} env steps/s), "
            f"{rates['DummyVecEnv'] / rate:.2f}x DummyVecEnv's time per step"
        )
    overhead_us = (1 / rates["RayVecEnv"] - 1 / rates["SubprocVecEnv"]) * 1e6
    print(f"Ray's overhead per vector step against SubprocVecEnv: {overhead_us:.0f} us")
    if out.json:
        out.json.write_text(
            json.dumps(
                {
                    "machine": describe(),
                    "envs": args.envs,
                    "steps": args.steps,
                    "vector_steps_per_second": rates,
                    "ray_overhead_us": overhead_us,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    raise SystemExit(main())
