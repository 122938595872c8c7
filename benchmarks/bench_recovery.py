"""Fights on the game's profile against the simulator's real-server mode, with real deaths and
kills forced in between, and the resets that recover from them, timed by what they recovered from.

The scripted expert plays ``--fights`` fights through ``backend="siphon"`` (``EldenRingEnv`` over
``SiphonGame``, the Elden Ring profile: HP floors, reset by memory writes and a teleport, a walk
back through the fog wall after a death), full length by default (900 steps of 200 ms, the env's
limit). Every fifth fight ends in a forced real death (HP written to 0: a floor missed), every
eighth in a forced real kill (the boss's HP written to 0). A death must be recovered by the next
``reset()`` alone; a kill must be reported (``BossKilled``, with the manual step), after which the
benchmark restores the save as a user would (``SimRestoreSave``, the simulator's stand-in). Real
deaths and kills that nobody forced (a blow the floors missed) are counted apart: the floors'
target is 0. A reset that fails otherwise is one a human would have had to do: it is counted, the
save restored as that human would, and the run goes on.

Each reset is timed in its bucket, by what came before it (the episode's last state, a forced
event, else the game's ``SimPhase``): the first walk in from the Site of Grace, after a real death (YOU DIED, the loading screen, the walk back
in), after a real kill (from restoring the save to the boss targeted again; the time to report
the kill is apart), or in place (memory writes and a teleport). The server uses the game's own
timings (6 s of "YOU DIED", an 8 s loading screen, Siphon's 3 s hook, a 10 ms scan) unless
``--server-args`` says otherwise.

    python -m benchmarks.bench_recovery [--fights 20] [--max-steps 900] [--server-args "..."] [--json out.json]
"""

from __future__ import annotations

import json
import shlex
import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from env.common.cli import JsonOut, flag, parse_settings, run_command
from env.common.errors import GameError
from env.common.fields import MAX_FIGHTS, check_fields, checked, whole
from env.common.machine import describe
from env.config import EnvConfig
from env.factory import make_env
from env.profile import load_profile
from env.sim.expert import ScriptedExpert
from env.sim.launcher import SimServer, someone_locks_on
from env.sim.world import Phase
from env.siphon.arena import BossKilled

from elden_il.evaluation.fight_loop import PlayerActor


def main(argv: list[str] | None = None) -> int:
    args, env, out = parse_settings(
        "python -m benchmarks.bench_recovery", __doc__, RecoveryArgs, (EnvConfig, ("max_steps",)), JsonOut, argv=argv
    )
    return run_command(lambda: benchmark(args, env, out))


BUCKETS = ("first", "after_death", "after_kill", "in_place")
AFTER = {Phase.FIGHT: "in_place", Phase.FELLED: "after_kill", Phase.CLEARED: "after_kill"}
"""The reset bucket by the phase the world was in before the reset (any other: a death's)."""


def run(fights: int, max_steps: int, server_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """Play ``fights`` fights against a fresh real-server-mode simulator; the counts and times."""
    config = EnvConfig(profile="eldenring_margit", max_steps=max_steps)
    r: dict[str, Any] = {
        "fights": 0,
        "wins": 0,
        "resets": {b: [] for b in BUCKETS},
        "kill_reported_s": [],
        "forced_deaths": 0,
        "forced_kills": 0,
        "real_deaths": 0,
        "real_kills": 0,
        "kills_reported": 0,
        "human_needed": 0,
        "human_errors": [],
    }
    with ExitStack() as stack:
        server = stack.enter_context(
            SimServer(size=(320, 180), extra_args=("--profile", "eldenring_margit", *server_args))
        )
        stack.enter_context(someone_locks_on(server.host, server.lock_on_keys))
        attributes = tuple(a for a in ScriptedExpert.ATTRIBUTES if a in load_profile(config.profile).siphon.attributes)
        env = make_env(config, backend="siphon", host=server.host, state_attributes=attributes)
        stack.callback(env.close)
        game, actor, bucket = env.unwrapped.game, PlayerActor("expert", config), "first"
        for fight in range(1, fights + 1):
            if bucket == "in_place":  # a real death or kill after the episode ended, if any: the game shows it
                bucket = AFTER.get(Phase(game.client.read(["SimPhase"])["SimPhase"]), "after_death")
            obs = _reset(env, fight, bucket, r)
            actor.start(0, fight)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(actor.act([obs], [env], [0])[0])
                done = terminated or truncated
            r["fights"] += 1
            r["wins"] += info["win"]
            final = env.unwrapped.state
            died, killed = final["HeroHp"] <= 0, final["NpcHp"] <= 0
            r["real_deaths"] += died  # a floor missed: nobody forced these
            r["real_kills"] += killed
            forced = "kill" if fight % 8 == 0 else "death" if fight % 5 == 0 else None
            if forced is not None:  # between episodes: the next reset() finds it
                game.write("HeroHp" if forced == "death" else "NpcHp", 0)
                r[f"forced_{forced}s"] += 1
            died, killed = died or forced == "death", killed or forced == "kill"
            bucket = "after_death" if died else "after_kill" if killed else "in_place"
            print(
                f"fight {fight}: {'win' if info['win'] else 'loss'} in {info['episode_length']} steps"
                + (f", then a forced real {forced}" if forced else ""),
                flush=True,
            )
    return r


def _reset(env, fight: int, bucket: str, r: dict[str, Any]) -> Any:
    """``env.reset`` timed in ``bucket``; a reported kill is answered by restoring the save (the
    manual step), any other failure is counted as a human's reset and answered the same way."""
    game = env.unwrapped.game
    started = time.monotonic()
    try:
        obs, _ = env.reset(seed=fight)
    except GameError as e:
        if isinstance(e, BossKilled):
            r["kills_reported"] += 1
            r["kill_reported_s"].append(time.monotonic() - started)
        else:
            r["human_needed"] += 1
            r["human_errors"].append(f"fight {fight}: {e}")
            print(f"fight {fight}: reset needed a human: {e}", flush=True)
        game.client.write("SimRestoreSave", 1, "int")  # the user restores the backup save
        bucket, started = "after_kill" if isinstance(e, BossKilled) else bucket, time.monotonic()
        obs, _ = env.reset(seed=fight)  # fails the run if even a restored save cannot be fought again
    r["resets"][bucket].append(time.monotonic() - started)
    return obs


def report(r: dict[str, Any], fights: int) -> str:
    def mean(values: list[float]) -> str:
        return f"{statistics.mean(values):.2f} s over {len(values)}" if values else "none"

    kills = r["forced_kills"] + r["real_kills"]
    return "\n".join(
        [
            "| measurement | value |",
            "|---|---:|",
            f"| fights completed | {r['fights']} of {fights} ({r['wins']} won) |",
            f"| real deaths / real kills nobody forced (floors missed) | {r['real_deaths']} / {r['real_kills']} |",
            f"| first reset (from the Site of Grace: teleport, fog wall, lock-on), mean | {mean(r['resets']['first'])} |",
            f"| resets after a real death (YOU DIED, loading, fog wall, lock-on), mean | {mean(r['resets']['after_death'])} |",
            f"| resets after a real kill, from restoring the save, mean | {mean(r['resets']['after_kill'])} |",
            f"| a real kill reported (BossKilled, with the manual step), mean | {mean(r['kill_reported_s'])}; {r['kills_reported']} of {kills} kills |",
            f"| in-place resets (memory writes and teleport), mean | {mean(r['resets']['in_place'])} |",
            f"| resets that needed a human (other than restoring a killed boss's save) | {r['human_needed']} |",
        ]
    )


@dataclass(frozen=True)
class RecoveryArgs:
    """How many fights ``python -m benchmarks.bench_recovery`` plays, against which server: each field
    its flag (a fight's steps are the env's own, ``EnvConfig.max_steps``)."""

    fights: int = checked(20, whole(1, MAX_FIGHTS), "fights the scripted expert plays")
    server_args: str = field(
        default="",
        metadata=flag('extra `python -m env.sim` flags, e.g. "--death-screen-s 0.5 --loading-s 1" (default: none)'),
    )

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: RecoveryArgs, env: EnvConfig, out: JsonOut) -> None:
    results = run(args.fights, env.max_steps, tuple(shlex.split(args.server_args)))
    print(f"\nMachine: {describe()}\n\n{report(results, args.fights)}")
    if out.json:
        out.json.write_text(json.dumps({"machine": describe(), **results}, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
