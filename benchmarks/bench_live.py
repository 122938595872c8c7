"""The live path against ``python -m env.sim`` over loopback gRPC, side by side in one run.

* GetAttribute round trip; a snapshot of every attribute, concurrent (gRPC futures) vs one after
  another; CaptureFrame round trips with decoding at 84x84, 1280x720 and 1920x1080.
* Env step overhead at timestep 0 with the default observation (state + frame in one concurrent round),
  with and without packed reads, against the naive path: pysiphon's SiphonClient, one
  get_attribute after another and capture_frame(as_image=True), as EldenGym does it. Reported as
  ratios, from interleaved rounds.
* Step-period accuracy at timestep_ms=200 over 200 steps (error of each step's period).
* In-process env steps/s with 84x84 frames (no server), for scale.

With ``ELDEN_IL_SIM_ARGS="--real-server ..."`` every server runs in real-server mode, started at
the Site of Grace; the person at each (``SimServer.player``) locks on when a client's hook asks.
"""

from __future__ import annotations

import io
import json
import statistics
import time
from contextlib import ExitStack, redirect_stdout
from dataclasses import dataclass, field, replace

import numpy as np
from pysiphon import SiphonClient as PysiphonClient
from pysiphon.generated import siphon_service_pb2 as pb2

from env.actions import ActionTable
from env.common.cli import JsonOut, flag, parse_settings, run_command
from env.common.machine import describe
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.factory import make_env
from env.profile import load_profile
from env.sim.launcher import SimServer
from env.siphon.client import SiphonClient
from env.siphon.game import SiphonGame


def main(argv: list[str] | None = None) -> int:
    out, args = parse_settings("python -m benchmarks.bench_live", __doc__, JsonOut, LiveArgs, argv=argv)
    return run_command(lambda: benchmark(args, out))


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    a = np.array(samples_ms)
    return {"median": float(np.median(a)), "p90": float(np.percentile(a, 90)), "p99": float(np.percentile(a, 99))}


WARMUP = 20  # calls before timing starts


def timed(fn, n: int, warmup: int = WARMUP) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def stepping(env, action: int = 0):
    """One step of ``action`` per call, and a new episode whenever one ends, as any training loop
    does: since the game's life cycle, a dead player's world goes to a loading screen where
    nothing can be read. Returns the step function and a list that gets True for each reset."""
    resets: list[bool] = []

    def step() -> None:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
            resets.append(True)

    return step, resets


def rpc_numbers(host: str, profile) -> dict:
    client = SiphonClient(host)
    client.configure(profile.siphon)
    names = profile.attribute_names
    get = lambda: client._stub.GetAttribute(pb2.GetSiphonRequest(attributeName="HeroHp"), timeout=2)  # noqa: E731
    one = percentiles(timed(get, 2000))
    concurrent = percentiles(timed(lambda: client.read(names), 300))
    sequential = percentiles(timed(lambda: [client.read([n]) for n in names], 100))
    client.close()
    return {
        "get_attribute_ms": one,
        "snapshot_concurrent_ms": concurrent,
        "snapshot_sequential_ms": sequential,
        "attributes": len(names),
        "snapshot_speedup": sequential["median"] / concurrent["median"],
    }


def capture_numbers(profile, sizes: list[tuple[int, int]]) -> dict:
    out = {}
    for size in sizes:
        with SimServer(size=size) as server, server.player():
            client = SiphonClient(server.host, timeout=5)
            client.configure(profile.siphon)
            client.wait_for_first_frame()  # on the real server the first frame comes a little after
            n = 500 if size[0] < 200 else 60
            out[f"{size[0]}x{size[1]}"] = percentiles(timed(client.capture_rgb, n, warmup=5))
            client.close()
    return out


def env_overhead(
    size: tuple[int, int], profile_name: str, steps: int = 600, rounds: int = 5, variants: bool = True
) -> dict:
    """Steps/s at timestep 0 (pure overhead) with the default observation: our env as shipped, our env with
    packed reads off, and the naive pysiphon path. Each has its own server (a config is per
    server); they run interleaved in ``rounds`` so drift in this VM's speed hits all alike, and
    each reports the median over rounds of its median step."""
    profile = load_profile(profile_name)
    configs = {"ours": profile}
    if variants:
        configs["unpacked"] = replace(profile, packed_reads=False)
    per_round: dict[str, list[float]] = {name: [] for name in [*configs, "naive"]}
    client_cpu = dict.fromkeys(configs, 0.0)  # this process's CPU seconds: the env's own cost
    with ExitStack() as stack:
        servers = {name: stack.enter_context(SimServer(size=size)) for name in per_round}
        for server in servers.values():
            stack.enter_context(server.player())
        envs = {}
        for name, config in configs.items():
            envs[name] = EldenRingEnv(SiphonGame(servers[name].host, config), EnvConfig(timestep_ms=0, max_steps=10**9))
            stack.callback(envs[name].close)
            envs[name].reset(seed=0)
        builder = EnvConfig().observation_builder(ActionTable(profile, "discrete"))
        naive = PysiphonClient(servers["naive"].host)
        stack.callback(naive.close)
        with redirect_stdout(io.StringIO()):  # pysiphon prints its progress
            assert naive.init_all(str(profile.siphon.path), wait_time=0)

        def naive_step() -> None:  # EldenGym's way: one RPC after another, per-pixel frame conversion
            state = {n: naive.get_attribute(n)["value"] for n in builder.attributes}
            image = np.asarray(naive.capture_frame(as_image=True))[..., :3]
            if None in state.values() or state["HeroHp"] <= 0:  # a death: restart the fight, as its reset would
                naive.set_attribute("SimSeed", 0, "int")
                return
            builder.step(state, image, 0)

        naive_steps = max(10, steps // 20) if size[0] > 200 else steps // 5
        for _ in range(rounds):
            for name, env in envs.items():
                cpu = time.process_time()
                per_round[name].append(statistics.median(timed(stepping(env)[0], steps // rounds)))
                client_cpu[name] += time.process_time() - cpu
            per_round["naive"].append(statistics.median(timed(naive_step, max(2, naive_steps // rounds), warmup=2)))
    ms = {name: statistics.median(v) for name, v in per_round.items()}
    out = {f"{name}_steps_per_s": 1000 / m for name, m in ms.items()}
    out |= {
        "rounds": rounds,
        "steps_per_s_by_round": {n: [1000 / m for m in v] for n, v in per_round.items()},
        "speedup": ms["naive"] / ms["ours"],
        "client_cpu_ms_per_step": {n: 1000 * c / (rounds * (WARMUP + steps // rounds)) for n, c in client_cpu.items()},
    }
    if variants:
        out["packing_gain"] = ms["unpacked"] / ms["ours"]
    return out


def step_period_accuracy(host: str, profile_name: str, steps: int = 200) -> dict:
    """Error of each step's period at timestep_ms=200. Measured where the schedule acts: the
    instant each step's wait ends and its observation begins (the end of its game-time window);
    also at the instant ``step()`` returns, which adds the observation round trip's jitter."""
    env = make_env(EnvConfig(profile=profile_name, max_steps=10**9), backend="siphon", host=host)
    env.reset(seed=0)
    game, wakes = env.unwrapped.game, []
    wait_until = game.wait_until

    def timed_wait(deadline: float) -> None:
        wait_until(deadline)
        wakes.append(time.monotonic())

    game.wait_until = timed_wait
    step, resets = stepping(env)
    step()
    woke, returns, resets_so_far = [], [], []
    for _ in range(steps):
        step()
        woke.append(wakes[-1])
        returns.append(time.monotonic())
        resets_so_far.append(len(resets))
    env.close()
    # A reset (after a death) starts a new schedule: only periods with no reset in their step or
    # the one before count.
    counts = np.array(resets_so_far)
    within = counts[2:] == counts[:-2]

    def errors(stamps: list[float]) -> dict:
        e = np.abs(np.diff(stamps)[1:][within] - 0.2) * 1000
        return {"median": float(np.median(e)), "p99": float(np.percentile(e, 99)), "max": float(e.max())}

    return {
        "steps": steps,
        "resets": len(resets),
        "period_error_ms": errors(woke),
        "return_period_error_ms": errors(returns),
    }


def in_process_steps(steps: int = 3000) -> float:
    env = make_env(max_steps=10**9)
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 13, steps)
    t = time.perf_counter()
    for a in actions:
        stepping(env, int(a))[0]()
    return steps / (time.perf_counter() - t)


@dataclass(frozen=True)
class LiveArgs:
    """How long ``python -m benchmarks.bench_live`` measures: each field its flag."""

    quick: bool = field(default=False, metadata=flag("fewer repetitions (a smoke run)"))


def benchmark(args: LiveArgs, out: JsonOut) -> None:
    profile = load_profile("sim_margit")
    results: dict = {"machine": describe()}
    with SimServer(size=(84, 84)) as server, server.player():
        results["rpc"] = rpc_numbers(server.host, profile)
        results["step_period"] = step_period_accuracy(server.host, "sim_margit", 50 if args.quick else 200)
    results["env_overhead_84"] = env_overhead((84, 84), "sim_margit", 500 if args.quick else 1500)
    results["env_overhead_720p"] = env_overhead((1280, 720), "sim_margit", 100 if args.quick else 300, variants=False)
    results["capture"] = capture_numbers(profile, [(84, 84), (1280, 720), (1920, 1080)])
    results["in_process_steps_per_s"] = in_process_steps(1000 if args.quick else 3000)

    r = results
    print(f"Machine: {r['machine']}\n")
    print("| measurement | median | p90 | p99 |\n|---|---:|---:|---:|")
    print(
        "| GetAttribute round trip (ms) | {median:.3f} | {p90:.3f} | {p99:.3f} |".format(**r["rpc"]["get_attribute_ms"])
    )
    print(
        f"| snapshot of {r['rpc']['attributes']} attributes, concurrent (ms) | "
        + " | ".join(f"{v:.2f}" for v in r["rpc"]["snapshot_concurrent_ms"].values())
        + " |"
    )
    print(
        f"| snapshot of {r['rpc']['attributes']} attributes, one after another (ms) | "
        + " | ".join(f"{v:.2f}" for v in r["rpc"]["snapshot_sequential_ms"].values())
        + " |"
    )
    for size, p in r["capture"].items():
        print(f"| CaptureFrame + decode {size} (ms) | {p['median']:.2f} | {p['p90']:.2f} | {p['p99']:.2f} |")
    print(f"\nconcurrent snapshot is {r['rpc']['snapshot_speedup']:.1f}x faster than one RPC after another\n")
    o = r["env_overhead_84"]
    print(f"env step overhead at timestep 0, 84x84 window (median of {o['rounds']} interleaved rounds):\n")
    print("| read path | steps/s | ours is faster by |\n|---|---:|---:|")
    print(f"| ours (packed reads: 6 attribute calls + 1 frame) | {o['ours_steps_per_s']:.0f} | |")
    print(
        f"| without packed reads (10 attribute calls, not 6) | {o['unpacked_steps_per_s']:.0f} | {o['packing_gain']:.2f}x |"
    )
    print(f"| naive pysiphon | {o['naive_steps_per_s']:.1f} | {o['speedup']:.1f}x |")
    cpu = o["client_cpu_ms_per_step"]["ours"]
    print(
        f"\nthe env's own CPU per step (client process, ours): {cpu:.2f} ms, so {1000 / cpu:.0f} steps/s where the server does not share its cores"
    )
    o = r["env_overhead_720p"]
    print(
        f"\n1280x720 window: ours {o['ours_steps_per_s']:.0f} steps/s, naive pysiphon {o['naive_steps_per_s']:.1f}: {o['speedup']:.1f}x"
    )
    e = r["step_period"]["period_error_ms"]
    print(
        f"\nstep period at 200 ms over {r['step_period']['steps']} steps: error median {e['median']:.2f} ms, p99 {e['p99']:.2f} ms, max {e['max']:.2f} ms"
    )
    e = r["step_period"]["return_period_error_ms"]
    print(
        f"the same, timed when step() returns (observation jitter included): median {e['median']:.2f} ms, p99 {e['p99']:.2f} ms, max {e['max']:.2f} ms"
    )
    print(f"in-process env steps/s (84x84 frames, no server): {r['in_process_steps_per_s']:.0f}")
    if out.json:
        with open(out.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    raise SystemExit(main())
