"""World ticks per second without rendering, on one core (target: at least 20,000).

Two workloads side by side, against each boss the simulator has (``env/sim/bosses/``): an idle
player (the boss walks in and kills them: the boss's AI and hit tests run every tick) and a busy
fight (random buttons every 7 ticks: rolls, attacks, heals, daggers, shockwaves and sweeps in
flight), so a boss whose hitboxes travel or sweep is seen not to slow the world. Also the
lock-step ``SimGame`` stepping overhead on top of Margit's world.
"""

from __future__ import annotations

import functools
import json
import random
import statistics
import time
from dataclasses import dataclass

from env.common.cli import JsonOut, parse_settings, run_command
from env.common.fields import check_fields, checked, whole
from env.common.machine import describe
from env.sim.boss import BossSpec, available_bosses, load_boss
from env.sim.game import SimGame
from env.sim.world import World


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_world", __doc__, WorldArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


TICKS = 60_000


def idle_ticks(boss: BossSpec) -> float:
    world = World(0, boss=boss)
    start = time.perf_counter()
    for i in range(TICKS):
        if world.over:
            world.restart(i)
        world.tick()
    return TICKS / (time.perf_counter() - start)


def busy_ticks(boss: BossSpec) -> float:
    world = World(0, boss=boss)
    rng = random.Random(0)
    inputs = [rng.getrandbits(13) for _ in range(TICKS // 7 + 1)]
    held = 0
    start = time.perf_counter()
    for i in range(TICKS):
        if world.over:
            world.restart(i)
        new = inputs[i // 7]
        world.tick(new, new & ~held, held & ~new, 0.0)
        held = new
    return TICKS / (time.perf_counter() - start)


def simgame_ticks() -> float:
    game = SimGame(seed=0)
    keys = ["W", "P", "LEFT_SHIFT", "A"]
    start = time.perf_counter()
    for i in range(TICKS // 12):
        if game.world.over:
            game.reset_fight(i)
        game.hold_keys({keys[i % 4]})
        game.tap_keys(["P"])
        game.wait_until(game.now() + 0.2)
    return (TICKS // 12) * 12 / (time.perf_counter() - start)


@dataclass(frozen=True)
class WorldArgs:
    """How often ``python -m benchmarks.bench_world`` runs each workload: each field its flag."""

    repeats: int = checked(3, whole(1, 1000), "runs of each workload; the median is reported")

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: WorldArgs, out: JsonOut) -> None:
    workloads = {
        f"{name}, {key}": functools.partial(fn, load_boss(key))
        for name, fn in [("idle world", idle_ticks), ("busy world", busy_ticks)]
        for key in available_bosses()
    }
    workloads["SimGame 200 ms steps, margit"] = simgame_ticks
    runs: dict[str, list[float]] = {name: [] for name in workloads}
    for _ in range(args.repeats):  # round by round, so a slow spell of the machine falls on every workload
        for name, fn in workloads.items():
            runs[name].append(fn())
    results = {name: statistics.median(rates) for name, rates in runs.items()}
    print(f"Machine: {describe()}\n")
    print(f"| workload | ticks/s (median of {args.repeats}) | vs. 20,000 target |")
    print("|---|---:|---:|")
    for name, rate in results.items():
        print(f"| {name} | {rate:,.0f} | {rate / 20_000:.1f}x |")
    if out.json:
        with open(out.json, "w") as f:
            json.dump({"machine": describe(), "ticks_per_second": results}, f, indent=2)


if __name__ == "__main__":
    raise SystemExit(main())
