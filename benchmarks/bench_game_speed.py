"""A live game run faster than real time: the game time each env step gets, and the env steps one
gaming PC gives an hour, at each game speed; and the scripted expert's win rate at two speeds.

The env asks the game for ``game_speed`` times real time during each step and pauses it between
steps (``EnvConfig.game_speed``), so a step should stay ``timestep_ms`` of game time at every
speed. This measures that on the game's own clock (the simulator's tick counter, ``SimTick``,
read with every observation) over ``python -m env.sim`` in its real-server mode, as unkind as
Siphon is (one lock, a module scan per attribute call, the speed written through
``gameSpeedVal``), with the scripted expert playing. Then the expert plays the same held-out
fights at 1x and at ``--compare`` (3x, as SoulsGym trains): a faster game must not play another
fight.

    python -m benchmarks.bench_game_speed                          # 1x-4x, 600 steps each; 30 fights at 1x and 3x
    python -m benchmarks.bench_game_speed --steps 100 --fights 0   # a quick look
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from dataclasses import dataclass, field

import numpy as np

from env.common.cli import JsonOut, flag, parse_settings, ruled, run_command
from env.common.fields import MAX_FIGHTS, check_fields, checked, whole
from env.common.machine import describe
from env.config import EnvConfig
from env.factory import make_env
from env.sim.expert import ScriptedExpert
from env.sim.launcher import SimServer
from env.sim.world import TICK_HZ

from elden_il.evaluation.fight_loop import PlayerActor
from elden_il.evaluation.win_rate import wilson_interval
from elden_il.params import FIRST_HELD_OUT_SEED

from benchmarks.flags import GAME_SPEED


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_game_speed", __doc__, GameSpeedArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


log = logging.getLogger("bench_game_speed")

REAL_SERVER = "--real-server"
"""The real-server mode with its own default timings (a 10 ms scan per attribute call)."""


def play(
    host: str, speed: float, seeds: list[int], max_steps: int | None = None, step_limit: int | None = None
) -> dict:
    """The expert over the server at ``host`` at ``speed``: one fight per seed (``max_steps``
    each), or until ``step_limit`` steps in all; each step's game time (from ``SimTick``) and
    wall time, and each fight's outcome."""
    config = EnvConfig(profile="sim_margit", game_speed=speed, **({"max_steps": max_steps} if max_steps else {}))
    env = make_env(
        config,
        backend="siphon",
        host=host,
        state_attributes=(*ScriptedExpert.ATTRIBUTES, "SimTick"),
        pause_between_steps=True,
    )
    actor = PlayerActor("expert", config)
    game_ms, wall_ms, wins, lengths = [], [], [], []
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            actor.start(0, seed)
            tick = env.unwrapped.state["SimTick"]
            done = False
            while not done:
                started = time.perf_counter()
                obs, _, terminated, truncated, info = env.step(actor.act([obs], [env], [0])[0])
                wall_ms.append((time.perf_counter() - started) * 1000)
                now = env.unwrapped.state["SimTick"]
                game_ms.append((now - tick) * 1000 / TICK_HZ)
                tick = now
                done = terminated or truncated or (step_limit is not None and len(game_ms) >= step_limit)
            wins.append(bool(info["win"]))
            lengths.append(info["episode_length"])
            if step_limit is not None and len(game_ms) >= step_limit:
                break
    finally:
        env.close()
    game, wall = np.array(game_ms), np.array(wall_ms)
    return {
        "speed": speed,
        "steps": len(game),
        "step_game_ms": {
            "mean": float(game.mean()),
            "std": float(game.std()),
            "p1": float(np.percentile(game, 1)),
            "p99": float(np.percentile(game, 99)),
        },
        "step_wall_ms_mean": float(wall.mean()),
        "steps_per_hour": 3_600_000 / float(wall.mean()),
        "fights": len(wins),
        "wins": int(sum(wins)),
        "win_rate_ci95": list(wilson_interval(int(sum(wins)), len(wins))) if wins else None,
        "mean_length": float(np.mean(lengths)) if lengths else None,
    }


def run(speeds: tuple[float, ...], steps: int, fights: int, compare: float, server_args: tuple[str, ...]) -> dict:
    results: dict = {"machine": describe(), "server_args": list(server_args), "timing": [], "expert": []}
    with SimServer(size=(320, 180), extra_args=server_args) as server, server.player():
        for speed in speeds:
            log.info("%gx: %d steps", speed, steps)
            results["timing"].append(
                play(server.host, speed, list(range(FIRST_HELD_OUT_SEED, FIRST_HELD_OUT_SEED + 1000)), step_limit=steps)
            )
        seeds = list(range(FIRST_HELD_OUT_SEED, FIRST_HELD_OUT_SEED + fights))
        for speed in (1.0, compare) if fights else ():
            log.info("the expert at %gx: %d fights", speed, fights)
            results["expert"].append(play(server.host, speed, seeds))
    return results


@dataclass(frozen=True)
class GameSpeedArgs:
    """The speeds ``python -m benchmarks.bench_game_speed`` times, and the fights it plays: each field its flag."""

    speeds: tuple[float, ...] = field(
        default=(1.0, 2.0, 3.0, 4.0), metadata=flag("game speeds to time", type=ruled(float, GAME_SPEED), nargs="+")
    )
    steps: int = checked(600, whole(1, 1_000_000), "env steps timed at each speed")
    fights: int = checked(
        30, whole(0, MAX_FIGHTS), "held-out fights the expert plays at each of two speeds (0: none, timing only)"
    )
    compare: float = checked(3.0, GAME_SPEED, "the speed whose fights are set against 1x")
    server_args: str = field(
        default=REAL_SERVER,
        metadata=flag(f"the simulator server's flags (default: {REAL_SERVER!r}, the real-server mode's own timings)"),
    )

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: GameSpeedArgs, out: JsonOut) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    results = run(args.speeds, args.steps, args.fights, args.compare, tuple(shlex.split(args.server_args)))
    print(f"Machine: {results['machine']}; server {' '.join(results['server_args'])}\n")
    print(
        "| game speed | steps | game time per step, ms: mean (sd) [p1-p99] | wall per step, ms | env steps per hour |"
    )
    print("|---:|---:|---|---:|---:|")
    for r in results["timing"]:
        g = r["step_game_ms"]
        print(
            f"| {r['speed']:g}x | {r['steps']} | {g['mean']:.1f} ({g['std']:.1f}) [{g['p1']:.0f}-{g['p99']:.0f}] | "
            f"{r['step_wall_ms_mean']:.1f} | {r['steps_per_hour']:,.0f} |"
        )
    for r in results["expert"]:
        low, high = r["win_rate_ci95"]
        print(
            f"expert at {r['speed']:g}x: {r['wins']} of {r['fights']} won ({low:.0%}-{high:.0%}), {r['mean_length']:.0f} steps"
        )
    if out.json:
        out.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
