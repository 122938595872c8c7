"""The live path against the real-server mode, side by side with the ideal server in one run.

For the ideal server and for real-server mode at scan costs of 2, 10 and 30 ms a call:

* env step rate at timestep 0 (state and frame of the env's observation, packed reads) from a
  1280x720 and a 1920x1080 window;
* the highest recording rate sustained without a dropped sample from the same windows (the
  recorder's sampler and episode writer, ``bench_recorder.sustained``), trying 1 Hz up to 30 Hz.

First, the clients as shipped against the mode's default timings (3 s hook, the world at the
Site of Grace): with a person who locks on when the hook asks, how long from connecting to the
first observation; with nobody at the game, what the env says (``--defaults-only`` runs just
this). The measured rows then shorten the NPC hook's injection delay to 0.5 s and start the
world in a fight with the boss targeted, so they measure the steady cost model (the mutex and the
per-call scans), not the one-off warm-up.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from dataclasses import dataclass, field
from functools import partial

from env.common.cli import JsonOut, flag, parse_settings, run_command
from env.common.errors import GameError
from env.common.fields import check_fields, checked, number, whole
from env.common.machine import describe
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.sim.launcher import SimServer
from env.siphon.game import SiphonGame

from benchmarks.bench_live import timed
from benchmarks.bench_recorder import highest_sustainable, rate_search


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_real_server", __doc__, RealServerArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


SIZES = ((1280, 720), (1920, 1080))
SCANS_MS = (2.0, 10.0, 30.0)
RATES = (1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0)
MEASURED = ("--hook-delay-s", "0.5", "--start", "fight")


def real_args(scan_ms: float) -> tuple[str, ...]:
    return ("--real-server", "--scan-ms", f"{scan_ms:g}", *MEASURED)


def first_observation(client: str, host: str) -> None:
    """Connect as ``client`` does and get its first observation: the env's reset and one step,
    or the recorder's first sample."""
    game = SiphonGame(host, "sim_margit")
    try:
        if client == "env":
            env = EldenRingEnv(game, EnvConfig(timestep_ms=0))
            env.reset(seed=0)
            env.step(0)
        else:
            game.observe()
    finally:
        game.close()


def at_the_defaults() -> dict[str, str]:
    """The env and the recorder's game, as shipped, against the mode's defaults (sim profile):
    with a person who locks on when asked, and the env with nobody at the game."""
    out = {}
    for client, person in (("env", True), ("recorder", True), ("env", False)):
        with SimServer(size=(320, 180), extra_args=("--real-server",)) as server:
            started = time.monotonic()
            try:
                with server.player() if person else contextlib.nullcontext():
                    first_observation(client, server.host)
                outcome = "works"
            except GameError as e:
                outcome = f"fails: {e}"
            who = "a person locks on when asked" if person else "nobody at the game"
            out[f"{client}, {who}"] = f"{outcome} ({time.monotonic() - started:.1f} s from connecting)"
    return out


def env_steps_per_s(size: tuple[int, int], server_args: tuple[str, ...], steps: int) -> float:
    with SimServer(size=size, extra_args=server_args) as server:
        env = EldenRingEnv(SiphonGame(server.host, "sim_margit"), EnvConfig(timestep_ms=0, max_steps=10**9))
        env.reset(seed=0)
        per_step = timed(partial(env.step, 0), steps, warmup=5)
        env.close()
    return 1000 / statistics.median(per_step)


@dataclass(frozen=True)
class RealServerArgs:
    """What ``python -m benchmarks.bench_real_server`` measures, and for how long: each field its flag."""

    seconds: float = checked(8.0, number(0, 3600, above=True), "length of each recording trial")
    steps: int = checked(60, whole(1, 100_000), "env steps timed per configuration")
    defaults_only: bool = field(default=False, metadata=flag("only the clients against the mode's defaults"))

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: RealServerArgs, out: JsonOut) -> None:
    servers = {} if args.defaults_only else {"ideal": ()} | {f"real, scan {s:g} ms": real_args(s) for s in SCANS_MS}
    results: dict = {"machine": describe(), "defaults": at_the_defaults(), "rows": {}}
    for name, server_args in servers.items():
        row = results["rows"][name] = {}
        for size in SIZES:
            label = f"{size[0]}x{size[1]}"
            row[f"env_steps_per_s_{label}"] = env_steps_per_s(size, server_args, args.steps)
            runs = rate_search(size, RATES, args.seconds, server_args)
            row[f"recording_{label}"] = runs
            row[f"highest_recording_hz_{label}"] = highest_sustainable(runs)
            failed = [f"{r['target_hz']:g} Hz: {r['error']}" for r in runs if "error" in r]
            row[f"recording_failure_{label}"] = failed[0] if failed else None
            print(
                f"{name} {label}: {row[f'env_steps_per_s_{label}']:.1f} steps/s, "
                f"records {row[f'highest_recording_hz_{label}']} Hz",
                *failed,
                flush=True,
            )

    if out.json:
        out.json.write_text(json.dumps(results, indent=2))
    print(f"\nMachine: {results['machine']}\n")
    print("Against the real-server mode's default timings (hook 3 s, world at the Site of Grace):")
    for client, outcome in results["defaults"].items():
        print(f"- {client}: {outcome}")
    if not results["rows"]:
        return
    print("\n| server | env steps/s 720p | env steps/s 1080p | recording Hz 720p | recording Hz 1080p |")
    print("|---|---:|---:|---:|---:|")
    for name, row in results["rows"].items():
        cells = [f"{row[f'env_steps_per_s_{s[0]}x{s[1]}']:.1f}" for s in SIZES]
        cells += [f"{row[f'highest_recording_hz_{s[0]}x{s[1]}'] or 'below 1'}" for s in SIZES]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name, row in results["rows"].items():
        for size in SIZES:
            if (failure := row[f"recording_failure_{size[0]}x{size[1]}"]) is not None:
                print(f"- recording, {name}, {size[0]}x{size[1]}, failed at {failure}")


if __name__ == "__main__":
    raise SystemExit(main())
