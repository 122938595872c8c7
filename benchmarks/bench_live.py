"""The live path against ``python -m env.sim`` over loopback gRPC, side by side in one run.

* GetAttribute round trip; a snapshot of every attribute, concurrent (gRPC futures) vs one after
  another; CaptureFrame round trips with decoding at 84x84, 1280x720 and 1920x1080.
* Env step overhead at timestep 0 with all PRD keys (state + frame in one concurrent round),
  against the naive path: pysiphon's SiphonClient, one get_attribute after another and
  capture_frame(as_image=True), as EldenGym does it. Reported as a ratio.
* Step-period accuracy at timestep_ms=200 over 200 steps (error of each step's period).
* In-process env steps/s with 84x84 frames (no server), for scale.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from pysiphon import SiphonClient as PysiphonClient
from pysiphon.generated import siphon_service_pb2 as pb2

from benchmarks.machine import describe
from env.elden_env import EldenRingEnv
from env.observations import ObservationBuilder
from env.profile import load_profile
from env.siphon import SiphonClient
from env.sim.launcher import SimServer


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    a = np.array(samples_ms)
    return {"median": float(np.median(a)), "p90": float(np.percentile(a, 90)), "p99": float(np.percentile(a, 99))}


def timed(fn, n: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def rpc_numbers(host: str, profile) -> dict:
    client = SiphonClient(host)
    client.configure(profile.siphon)
    names = profile.attribute_names
    get = lambda: client._stub.GetAttribute(pb2.GetSiphonRequest(attributeName="HeroHp"), timeout=2)  # noqa: E731
    one = percentiles(timed(get, 2000))
    concurrent = percentiles(timed(lambda: client.read(names), 300))
    sequential = percentiles(timed(lambda: [client.read([n]) for n in names], 100))
    client.close()
    return {"get_attribute_ms": one, "snapshot_concurrent_ms": concurrent, "snapshot_sequential_ms": sequential,
            "attributes": len(names), "snapshot_speedup": sequential["median"] / concurrent["median"]}


def capture_numbers(profile, sizes: list[tuple[int, int]]) -> dict:
    out = {}
    for size in sizes:
        with SimServer(size=size) as server:
            client = SiphonClient(server.host, timeout=5)
            client.configure(profile.siphon)
            n = 500 if size[0] < 200 else 60
            out[f"{size[0]}x{size[1]}"] = percentiles(timed(client.capture_rgb, n, warmup=5))
            client.close()
    return out


def env_overhead(host: str, profile_name: str, steps: int = 600) -> dict:
    """Steps/s at timestep 0 (pure overhead), ours vs the naive pysiphon path."""
    env = EldenRingEnv(backend="siphon", host=host, profile=profile_name, timestep_ms=0, max_steps=10**9)
    env.reset(seed=0)
    ours = timed(lambda: env.step(0), steps)
    env.close()

    profile = load_profile(profile_name)
    builder = ObservationBuilder(profile)
    names = builder.attributes
    naive = PysiphonClient(host)

    def naive_step() -> None:  # EldenGym's way: one RPC after another, per-pixel frame conversion
        state = {n: naive.get_attribute(n)["value"] for n in names}
        image = np.asarray(naive.capture_frame(as_image=True))[..., :3]
        builder.step(state, image, 0)

    theirs = timed(naive_step, max(20, steps // 20), warmup=3)
    naive.close()
    return {"ours_steps_per_s": 1000 / statistics.median(ours), "naive_steps_per_s": 1000 / statistics.median(theirs),
            "ours_ms": percentiles(ours), "naive_ms": percentiles(theirs),
            "speedup": statistics.median(theirs) / statistics.median(ours)}


def step_period_accuracy(host: str, profile_name: str, steps: int = 200) -> dict:
    """Error of each step's period at timestep_ms=200. Measured where the schedule acts: the
    instant each step's wait ends and its observation begins (the end of its game-time window);
    also at the instant ``step()`` returns, which adds the observation round trip's jitter."""
    env = EldenRingEnv(backend="siphon", host=host, profile=profile_name, timestep_ms=200, max_steps=10**9)
    env.reset(seed=0)
    game, wakes = env.unwrapped.game, []
    wait_until = game.wait_until

    def timed_wait(deadline: float) -> None:
        wait_until(deadline)
        wakes.append(time.monotonic())

    game.wait_until = timed_wait
    env.step(0)
    returns = []
    for _ in range(steps):
        env.step(0)
        returns.append(time.monotonic())
    env.close()

    def errors(stamps: list[float]) -> dict:
        e = np.abs(np.diff(stamps) - 0.2) * 1000
        return {"median": float(np.median(e)), "p99": float(np.percentile(e, 99)), "max": float(e.max())}

    return {"steps": steps, "period_error_ms": errors(wakes), "return_period_error_ms": errors(returns)}


def in_process_steps(steps: int = 3000) -> float:
    env = EldenRingEnv(max_steps=10**9)
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 13, steps)
    t = time.perf_counter()
    for a in actions:
        env.step(int(a))
    return steps / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    args = parser.parse_args()
    profile = load_profile("sim_margit")
    results: dict = {"machine": describe()}
    with SimServer(size=(84, 84)) as server:
        results["rpc"] = rpc_numbers(server.host, profile)
        results["env_overhead_84"] = env_overhead(server.host, "sim_margit", 200 if args.quick else 600)
        results["step_period"] = step_period_accuracy(server.host, "sim_margit", 50 if args.quick else 200)
    with SimServer(size=(1280, 720)) as server:
        results["env_overhead_720p"] = env_overhead(server.host, "sim_margit", 100 if args.quick else 300)
    results["capture"] = capture_numbers(profile, [(84, 84), (1280, 720), (1920, 1080)])
    results["in_process_steps_per_s"] = in_process_steps(1000 if args.quick else 3000)

    r = results
    print(f"Machine: {r['machine']}\n")
    print("| measurement | median | p90 | p99 |\n|---|---:|---:|---:|")
    print("| GetAttribute round trip (ms) | {median:.3f} | {p90:.3f} | {p99:.3f} |".format(**r["rpc"]["get_attribute_ms"]))
    print(f"| snapshot of {r['rpc']['attributes']} attributes, concurrent (ms) | " + " | ".join(f"{v:.2f}" for v in r["rpc"]["snapshot_concurrent_ms"].values()) + " |")
    print(f"| snapshot of {r['rpc']['attributes']} attributes, one after another (ms) | " + " | ".join(f"{v:.2f}" for v in r["rpc"]["snapshot_sequential_ms"].values()) + " |")
    for size, p in r["capture"].items():
        print(f"| CaptureFrame + decode {size} (ms) | {p['median']:.2f} | {p['p90']:.2f} | {p['p99']:.2f} |")
    print(f"\nconcurrent snapshot is {r['rpc']['snapshot_speedup']:.1f}x faster than one RPC after another\n")
    print("| env step overhead (timestep 0) | ours steps/s | naive pysiphon steps/s | ratio |\n|---|---:|---:|---:|")
    for key, label in (("env_overhead_84", "84x84 window"), ("env_overhead_720p", "1280x720 window")):
        o = r[key]
        print(f"| {label} | {o['ours_steps_per_s']:.0f} | {o['naive_steps_per_s']:.1f} | {o['speedup']:.0f}x |")
    e = r["step_period"]["period_error_ms"]
    print(f"\nstep period at 200 ms over {r['step_period']['steps']} steps: error median {e['median']:.2f} ms, p99 {e['p99']:.2f} ms, max {e['max']:.2f} ms")
    e = r["step_period"]["return_period_error_ms"]
    print(f"the same, timed when step() returns (observation jitter included): median {e['median']:.2f} ms, p99 {e['p99']:.2f} ms, max {e['max']:.2f} ms")
    print(f"in-process env steps/s (84x84 frames, no server): {r['in_process_steps_per_s']:.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
