"""One fight, however it is reached: the same players on the same held-out seeds in-process and
over the live path, with each step's game time and input timing read off the game's own clock.

Every live use of a policy (evaluating against the game, fine-tuning on it, recording with a
policy at the keys) goes through a Siphon server in real time; the in-process simulator is
lock-step. A result that holds only in-process is not one a user can have, so this plays the
scripted expert and a saved policy (the pipeline's fine-tuned one by default) on the same seeds
along several paths:

* ``in-process``: the env as the evaluate stage makes it (its default step timing);
* ``in-process-exact``: the same with ``step_timing: exact`` (every step exactly its timestep);
* ``in-process-paused``: in-process, paused between steps as a live env is (before the live
  path's taps were sent while the game runs, this was the live path's tap without its lag);
* ``in-process-wall-clock``: in-process, the scripted expert shown each step's time as a paused
  env measures it where the profile names no game clock (``[clock]``): on the wall's clock, off by
  the error a step the live path measured that way (mean -0.67 ms, sd 5.6), adding up over the
  fight (a policy reads no time: it plays as ``in-process``);
* ``live-3x``, ``live-1x``: a simulator server in its real-server mode (Siphon's one lock, a
  module scan per attribute call) at 3x and 1x, paused between steps, as ``evaluate.backend:
  sim_server`` plays; ``live-3x-ideal``: the ideal server at 3x.

After every step it reads the simulator's tick counter and the ticks that last saw a key pressed
and released (``SimTick``, ``SimPressTick``, ``SimReleaseTick``: the game's clock, which a live
client cannot see from its side): how much game time the step really ran against what the env
reported (``info["step_game_ms"]``), and when a tapped key reached the game and how long it was
held. ``--load N`` keeps N busy processes running throughout (a gaming PC is never idle: the game
itself runs there); ``--processes`` plays that many fight processes at once. ``--draws K`` plays
each in-process fight under K independent draws of the live spread (``reset``'s ``timing_draw``):
a live game plays a fight once and its outcome is a coin of its own, so each seed's share of K
in-process wins is how likely the player is to win it, and the live wins on the same seeds are
set against the sum of those (a paired comparison: far tighter than two intervals side by side).
``--against FILE`` brings the live runs of an earlier ``--json`` into that comparison without
playing them again (for the same player: the fine-tuned policy only while it is the same policy).
``--baseline REV``
plays the live paths again with commit REV's code, from a worktree, side by side: this file's
fight processes run on REV's packages, so REV must have what they import (``PlayerActor``,
``env.common.cli.command_parser``): a commit from c94c4c9 on.

    python -m benchmarks.bench_live_path --fights 50 --load 2 --json /tmp/live.json
    python -m benchmarks.bench_live_path --fights 10 --path in-process --path live-3x --baseline c94c4c9
    python -m benchmarks.bench_live_path --fights 50 --path in-process --players expert --draws 8 --against /tmp/live.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from env.common.cli import command_parser, flag, from_flags, run_command
from env.common.errors import ConfigError
from env.common.fields import MAX_FIGHTS, SEED, FieldError, check_fields, checked, one_of, whole


def main(argv: list[str] | None = None) -> int:
    flags = command_parser("python -m benchmarks.bench_live_path", __doc__, LivePathArgs).parse_args(argv)
    # the settings made inside the runner: their checks of one flag against another are one error line
    return run_command(lambda: benchmark(from_flags(LivePathArgs, flags)))


ROOT = Path(__file__).parents[1]
FIRST_HELD_OUT_SEED = 1_000_000
PATHS = {
    "in-process": {"backend": "sim"},
    "in-process-exact": {"backend": "sim", "step_timing": "exact"},
    "in-process-paused": {"backend": "sim", "pause": True},
    "in-process-wall-clock": {"backend": "sim", "clock_error_ms": (-0.67, 5.6)},
    "live-3x": {"backend": "sim_server", "speed": 3.0, "server_args": "--real-server"},
    "live-1x": {"backend": "sim_server", "speed": 1.0, "server_args": "--real-server"},
    "live-3x-ideal": {"backend": "sim_server", "speed": 3.0, "server_args": ""},
}
CLOCKS = ("SimTick", "SimPressTick", "SimReleaseTick")
TICK_MS = 1000 / 60


# ---------------------------------------------------------------------------- one fight process
def probe(env) -> tuple[int, int | None, int | None]:
    """The game's tick and the last ticks that saw a press and a release (None where this code's
    simulator has no such counters), read while the game is paused or lock-step."""
    game = env.unwrapped.game
    if hasattr(game, "world"):
        world = game.world
        return world.tick_count, getattr(world, "press_tick", None), getattr(world, "release_tick", None)
    try:
        values = game.client.read(list(CLOCKS))
        return values["SimTick"], values["SimPressTick"], values["SimReleaseTick"]
    except Exception:  # noqa: BLE001 - a baseline's server without the input counters
        return game.client.read(["SimTick"])["SimTick"], None, None


def play_job(job: dict) -> dict:
    """Fights of ``job["seeds"]`` for one player along one path, with every step's timing."""
    from env.config import EnvConfig
    from env.factory import make_env
    from env.sim.expert import ScriptedExpert

    from elden_il.evaluation.evaluate import PolicyActor
    from elden_il.evaluation.fight_loop import PlayerActor

    path = job["path"]
    if path.get("server_args") is not None:
        os.environ["ELDEN_IL_SIM_ARGS"] = path["server_args"]
    config = EnvConfig.load(Path(job["config"]))
    if "step_timing" in path:
        config = config.replace(step_timing=path["step_timing"])
    config = config.replace(game_speed=path.get("speed", 1.0))
    if job["player"] != "expert":
        actor = PolicyActor(Path(job["player"]), True)
    elif "clock_error_ms" in path:
        actor = wall_clock_expert()(config, *path["clock_error_ms"])
    else:
        actor = PlayerActor("expert", config)
    live = path["backend"] == "sim_server"
    env = make_env(
        config,
        backend=path["backend"],
        state_attributes=ScriptedExpert.ATTRIBUTES,
        pause_between_steps=live or path.get("pause", False),
    )
    fights, steps = [], {"ticks": [], "reported_ms": [], "wall_ms": [], "tap_delay": [], "tap_hold": []}
    draws = 1 if live else job.get("draws", 1)
    try:
        for seed, draw in ((seed, draw) for seed in job["seeds"] for draw in range(draws)):
            obs, _ = env.reset(seed=seed, options={"timing_draw": draw} if draw else None)
            actor.start(0, seed)
            tick, _, _ = probe(env)
            stamp = env.unwrapped.state.timestamp
            done = False
            while not done:
                action = actor.act([obs], [env], [0])[0]
                tapped = bool(env.unwrapped.actions.command(action).tap)
                started = time.perf_counter()
                obs, _, terminated, truncated, info = env.step(action)
                steps["wall_ms"].append((time.perf_counter() - started) * 1000)
                now, pressed, released = probe(env)
                steps["ticks"].append(now - tick)
                reported = env.unwrapped.state.timestamp - stamp
                steps["reported_ms"].append(info.get("step_game_ms", reported * 1000))
                if tapped and pressed is not None and pressed >= tick:
                    steps["tap_delay"].append(pressed - tick)
                    if released is not None and released > pressed:
                        steps["tap_hold"].append(released - pressed)
                tick, stamp = now, env.unwrapped.state.timestamp
                done = terminated or truncated
            fights.append(
                {
                    "seed": seed,
                    "draw": draw,
                    "win": bool(info["win"]),
                    "length": info["episode_length"],
                    "boss_damage_dealt": info["boss_damage_dealt"],
                    "player_damage_taken": info["player_damage_taken"],
                }
            )
    finally:
        env.close()
    return {"fights": fights, "steps": steps}


def wall_clock_expert():
    """``WallClockExpert``, made where a fight process has imported this checkout's packages."""
    from env.actions import ActionTable
    from env.game import GameState

    from elden_il.evaluation.fight_loop import PlayerActor

    class WallClockExpert(PlayerActor):
        """The scripted expert in a discrete env, shown each state's timestamp off by a random
        walk: each step adds an error of ``mean_ms`` and ``sd_ms``, as a paused step measured on
        the wall's clock is off from the game's."""

        def __init__(self, config, mean_ms: float, sd_ms: float) -> None:
            super().__init__("expert", config)
            self.mean, self.sd = mean_ms / 1000.0, sd_ms / 1000.0

        def start(self, slot: int, seed: int) -> None:
            super().start(slot, seed)
            self.rng = np.random.default_rng([seed, 0x3A11])
            self.off: float | None = None

        def act(self, observations, envs, slots):
            base = envs[0].unwrapped
            self.off = 0.0 if self.off is None else self.off + self.mean + self.sd * self.rng.standard_normal()
            shown = GameState(base.state.attributes, base.state.timestamp + self.off)
            table = self.tables.setdefault(base.profile.name, ActionTable(base.profile, "discrete"))
            return [table.index(self.players[slots[0]].act(shown))]

    return WallClockExpert


# ------------------------------------------------------------------------------- the whole run
def worktree(revision: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(into), revision], check=True)
    return into


def run_job(job: dict, tree: Path) -> dict:
    """``play_job`` in a process of its own, importing ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, __file__, "--job", json.dumps(job)], env=env, cwd=tree, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise SystemExit(f"a fight process failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def summarize(parts: list[dict]) -> dict:
    """Fights and step timing of one (tree, path, player), its processes' parts together."""
    from elden_il.evaluation.win_rate import wilson_interval

    fights = sorted((f for p in parts for f in p["fights"]), key=lambda f: (f["seed"], f.get("draw", 0)))
    wins_by_seed = Counter()
    for f in fights:
        wins_by_seed[str(f["seed"])] += f["win"]
    steps = {k: [v for p in parts for v in p["steps"][k]] for k in parts[0]["steps"]}
    wins = sum(f["win"] for f in fights)
    ticks = np.array(steps["ticks"])
    error = np.array(steps["reported_ms"]) - ticks * TICK_MS
    return {
        "fights": len(fights),
        "wins": wins,
        "win_rate": wins / len(fights),
        "win_rate_ci95": list(wilson_interval(wins, len(fights))),
        "boss_damage_dealt": float(np.mean([f["boss_damage_dealt"] for f in fights])),
        "player_damage_taken": float(np.mean([f["player_damage_taken"] for f in fights])),
        "length": float(np.mean([f["length"] for f in fights])),
        "outcomes": [int(f["win"]) for f in fights],
        "draws": len(fights) // len(wins_by_seed),
        "seed_wins": dict(wins_by_seed),
        "steps": len(ticks),
        "step_ticks": dict(sorted(Counter(int(t) for t in ticks).items())),
        "step_game_ms_mean": float(ticks.mean() * TICK_MS),
        "step_game_ms_sd": float(ticks.std() * TICK_MS),
        "reported_error_ms": {
            "mean": float(error.mean()),
            "sd": float(error.std()),
            "max_abs": float(np.abs(error).max()),
            "whole_ticks_off": int((np.abs(error) >= TICK_MS).sum()),
        },
        "tap_delay_ticks": dict(sorted(Counter(steps["tap_delay"]).items())),
        "tap_hold_ticks": dict(sorted(Counter(steps["tap_hold"]).items())),
        "step_wall_ms_median": float(np.median(steps["wall_ms"])),
    }


def seed_wins(run: dict, seeds: list[int]) -> dict[int, float]:
    """A run's share of wins on each seed: from its ``seed_wins``, or (a file written before runs
    had them: one fight a seed) from its outcomes, which are in seed order over ``seeds``."""
    if "seed_wins" in run:
        return {int(seed): wins / run["draws"] for seed, wins in run["seed_wins"].items()}
    first, last = seeds
    return dict(zip(range(first, last + 1), map(float, run["outcomes"]), strict=True))


def paired(results: dict, earlier: list[dict]) -> list[dict]:
    """Each in-process run set against the live runs of the same code and player (this run's and
    ``earlier``'s, pooled by path) on the seeds both played: the live wins against the sum of the
    in-process win shares. Were the live path no harsher than the in-process draws, the live wins
    would fall about that sum, with the spread of one coin a seed (plus the shares' own error from
    their ``draws``), so ``z`` far below 0 says the in-process simulator is kinder."""
    live: dict[tuple[str, str, str], dict[int, float]] = {}
    for file in (results, *earlier):
        for run in file["runs"]:
            if run["path"].startswith("live"):
                live.setdefault((run["code"], run["path"], run["player"]), {}).update(seed_wins(run, file["seeds"]))
    comparisons = []
    for run in results["runs"]:
        if run["path"].startswith("live"):
            continue
        shares = seed_wins(run, results["seeds"])
        for (code, path, player), won in live.items():
            common = sorted(set(won) & set(shares))
            if code != run["code"] or player != run["player"] or not common:
                continue
            p = np.array([shares[seed] for seed in common])
            expected, sd = p.sum(), float(np.sqrt((p * (1 - p)).sum() * (1 + 1 / run["draws"])))
            live_wins = int(sum(won[seed] for seed in common))
            comparisons.append(
                {
                    "code": code,
                    "player": player,
                    "in_process": run["path"],
                    "draws": run["draws"],
                    "live": path,
                    "seeds": len(common),
                    "expected_wins": float(expected),
                    "sd": sd,
                    "live_wins": live_wins,
                    "z": (live_wins - expected) / sd if sd else float("nan"),
                }
            )
    return comparisons


def busy(n: int) -> list[subprocess.Popen]:
    """``n`` processes that keep a core each busy: the game and everything else on a gaming PC."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run(args: LivePathArgs) -> dict:
    from env.common.machine import describe

    seeds = list(range(args.first_seed, args.first_seed + args.fights))
    players = (["expert"] if args.players in ("both", "expert") else []) + (
        [str(args.policy.resolve())] if args.players in ("both", "policy") else []
    )
    trees = {"this": ROOT}
    jobs = []
    with tempfile.TemporaryDirectory() as scratch:
        if args.baseline:
            trees[args.baseline] = worktree(args.baseline, Path(scratch) / "baseline")
        for tree_name, tree in trees.items():
            for path in args.path:
                for player in players:
                    for chunk in np.array_split(np.asarray(seeds), args.processes):
                        if len(chunk):
                            job = {
                                "path": PATHS[path],
                                "player": player,
                                "config": str(args.config.resolve()),
                                "seeds": [int(s) for s in chunk],
                                "draws": args.draws,
                            }
                            jobs.append(((tree_name, path, player), job, tree))
        load = busy(args.load)
        started = time.perf_counter()
        try:
            with ThreadPoolExecutor(args.processes) as pool:
                parts = list(pool.map(lambda j: (j[0], run_job(j[1], j[2])), jobs))
        finally:
            for p in load:
                p.kill()
            if args.baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees[args.baseline])])
    results: dict = {
        "machine": describe(),
        "load_processes": args.load,
        "fight_processes": args.processes,
        "seeds": [seeds[0], seeds[-1]],
        "minutes": (time.perf_counter() - started) / 60,
        "runs": [],
    }
    for key in dict.fromkeys(k for k, _ in parts):
        tree_name, path, player = key
        summary = summarize([r for k, r in parts if k == key])
        name = "expert" if player == "expert" else Path(player).name
        results["runs"].append({"code": tree_name, "path": path, "player": name, **summary})
    return results


def table(results: dict) -> str:
    lines = [
        f"Machine: {results['machine']}; {results['load_processes']} busy processes, "
        f"{results['fight_processes']} fight processes at once; {results['minutes']:.0f} min",
        "",
        "| code | path | player | won | 95 % interval | damage taken | game ms a step: mean (sd) | "
        "ticks a step | env's report off by, ms: mean (sd) [max] | tap reached the game, tick | tap held, ticks |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---|---|",
    ]
    for r in results["runs"]:
        low, high = r["win_rate_ci95"]
        e = r["reported_error_ms"]
        lines.append(
            f"| {r['code']} | {r['path']} | {r['player']} | {r['wins']} of {r['fights']} | {low:.0%}-{high:.0%} | "
            f"{r['player_damage_taken']:.0%} | {r['step_game_ms_mean']:.1f} ({r['step_game_ms_sd']:.1f}) | "
            f"{share(r['step_ticks'])} | {e['mean']:.1f} ({e['sd']:.1f}) [{e['max_abs']:.0f}] | "
            f"{share(r['tap_delay_ticks'])} | {share(r['tap_hold_ticks'])} |"
        )
    if results.get("paired"):
        lines += [
            "",
            "| code | player | in-process path (draws a seed) | live path | seeds | in-process expects, wins (sd) | "
            "live won | live against it, sd |",
            "|---|---|---|---|---:|---:|---:|---:|",
        ]
        for c in results["paired"]:
            lines.append(
                f"| {c['code']} | {c['player']} | {c['in_process']} ({c['draws']}) | {c['live']} | {c['seeds']} | "
                f"{c['expected_wins']:.1f} ({c['sd']:.1f}) | {c['live_wins']} | {c['z']:+.1f} |"
            )
    return "\n".join(lines)


def share(counts: dict) -> str:
    """``{12: 980, 13: 20}`` as ``12: 98 %, 13: 2 %``."""
    total = sum(counts.values())
    return ", ".join(f"{k}: {v / total:.0%}" for k, v in counts.items()) if total else "-"


PLAYERS = ("both", "expert", "policy")


@dataclass(frozen=True)
class LivePathArgs:
    """Who ``python -m benchmarks.bench_live_path`` plays, along which paths, on which fights, with how
    much else running: each field its flag. Declared here, not from ``benchmarks.flags``: with
    ``--baseline`` this file runs its fight processes on another checkout's code, which may not have it."""

    job: str | None = field(default=None, metadata=flag(argparse.SUPPRESS))  # one fight process's work (internal)
    path: tuple[str, ...] | None = field(
        default=None, metadata=flag("a path to play (repeat; default: all)", action="append", choices=PATHS)
    )
    fights: int = checked(50, whole(1, MAX_FIGHTS), "held-out fights per player and path")
    first_seed: int = checked(
        FIRST_HELD_OUT_SEED, SEED, "seed of the first fight (held out: the pipeline's evaluation seeds)"
    )
    policy: Path = field(
        default=ROOT / "datasets/models/finetuned", metadata=flag("the saved policy to play", type=Path)
    )
    config: Path = field(
        default=ROOT / "datasets/models/bc/env_config.json",
        metadata=flag("the env both players fight in (default: the pipeline's, beside its BC policy)", type=Path),
    )
    players: str = checked("both", one_of(*PLAYERS), "who fights", choices=PLAYERS)
    load: int = checked(0, whole(0, 64), "busy processes kept running throughout")
    processes: int = checked(2, whole(1, 64), "fight processes at once")
    draws: int = checked(1, whole(1, 100), "in-process paths: each fight under this many draws of the live spread")
    against: tuple[Path, ...] | None = field(
        default=None,
        metadata=flag(
            "an earlier --json whose live runs to set the in-process ones against (repeat)", action="append", type=Path
        ),
    )
    baseline: str | None = field(default=None, metadata=flag("also play the live paths with this commit's code"))
    json: Path | None = field(default=None, metadata=flag("also write the results here", type=Path))

    def __post_init__(self) -> None:
        check_fields(self)
        if self.draws > 1 and self.baseline:
            raise FieldError("draws", self.draws, "plays one draw a fight with --baseline (older code draws no other)")


def earlier_results(file: Path) -> dict:
    try:
        return json.loads(file.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"--against {file}: not a results file of this benchmark's --json ({err})") from None


def benchmark(args: LivePathArgs) -> None:
    if args.job:
        print(json.dumps(play_job(json.loads(args.job))))
        return
    config = args.config.parent if args.config.name.endswith(".json") else args.config
    earlier = [earlier_results(file) for file in args.against or ()]
    results = run(replace(args, path=args.path or tuple(PATHS), config=config))
    results["paired"] = paired(results, earlier)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
