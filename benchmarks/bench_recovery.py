"""Fights on the game's profile against the simulator's real-server mode, with real deaths and
kills forced in between, and the resets that recover from them, timed.

The scripted expert plays ``--fights`` fights through ``backend="siphon"`` (``EldenRingEnv`` over
``SiphonGame``, the Elden Ring profile: HP floors, reset by memory writes and a teleport, a walk
back through the fog wall after a death). Every fifth fight ends in a forced real death (HP
written to 0: a floor missed), every eighth in a forced real kill (the boss's HP written to 0).
A death must be recovered by the next ``reset()`` alone; a kill must be reported (``BossKilled``,
with the manual step), after which the benchmark restores the save as a user would
(``SimRestoreSave``, the simulator's stand-in) and counts it. The server uses the game's own
timings: 6 s of "YOU DIED", an 8 s loading screen, Siphon's 3 s hook and a 10 ms scan.

    python -m benchmarks.bench_recovery [--fights 20] [--max-steps 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import ExitStack
from pathlib import Path


from benchmarks.machine import describe
from env.arena import BossKilled
from env.config import EnvConfig
from env.factory import make_env
from env.profile import load_profile
from env.sim.expert import ScriptedExpert, expert_actor
from env.sim.launcher import SimServer, someone_locks_on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fights", type=int, default=20)
    parser.add_argument("--max-steps", type=int, default=50, help="steps per fight (200 ms each)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    config = EnvConfig(profile="eldenring_margit", max_steps=args.max_steps)
    results: dict = {"machine": describe(), "fights": 0, "resets": {"in_place": [], "after_death": []},
                     "kills_reported": 0, "kills": 0, "deaths": 0, "human_needed": 0}
    with ExitStack() as stack:
        server = stack.enter_context(SimServer(size=(320, 180), extra_args=("--profile", "eldenring_margit")))
        stack.enter_context(someone_locks_on(server.host))
        attributes = tuple(a for a in ScriptedExpert.ATTRIBUTES if a in load_profile(config.profile).siphon.attributes)
        env = make_env(config, backend="siphon", host=server.host, state_attributes=attributes)
        game, actor, kind = env.unwrapped.game, expert_actor(config), "in_place"
        try:
            for fight in range(1, args.fights + 1):
                forced = "kill" if fight % 8 == 0 else "death" if fight % 5 == 0 else None
                started = time.monotonic()
                try:
                    obs, _ = env.reset(seed=fight)
                except BossKilled:
                    results["kills_reported"] += 1
                    game.client.write("SimRestoreSave", 1, "int")  # the user restores the backup save
                    obs, _ = env.reset(seed=fight)
                except Exception:  # noqa: BLE001 - anything else is a reset a human would have to do
                    results["human_needed"] += 1
                    raise
                results["resets"][kind].append(time.monotonic() - started)
                actor.start(0, fight)
                done = False
                while not done:
                    obs, _, terminated, truncated, info = env.step(actor.act([obs], [env], [0])[0])
                    done = terminated or truncated
                results["fights"] += 1
                kind = "in_place"
                if forced is not None:
                    game.write("HeroHp" if forced == "death" else "NpcHp", 0)
                    env.step(0)
                    results["deaths" if forced == "death" else "kills"] += 1
                    kind = "after_death" if forced == "death" else "in_place"
                print(f"fight {fight}: {'win' if info['win'] else 'loss'} in {info['episode_length']} steps"
                      + (f", then a forced real {forced}" if forced else ""), flush=True)
        finally:
            env.close()

    r = results
    mean = {k: statistics.mean(v) if v else float("nan") for k, v in r["resets"].items()}
    print(f"\nMachine: {r['machine']}\n")
    print("| measurement | value |\n|---|---:|")
    print(f"| fights completed | {r['fights']} of {args.fights} |")
    print(f"| in-place resets (memory writes and teleport), mean | {mean['in_place']:.2f} s over {len(r['resets']['in_place'])} |")
    print(f"| resets after a forced real death (YOU DIED, loading, fog wall, lock-on), mean | {mean['after_death']:.2f} s over {len(r['resets']['after_death'])} |")
    print(f"| forced real kills reported as such, with the manual step | {r['kills_reported']} of {r['kills']} |")
    print(f"| resets that needed a human (other than restoring a killed boss's save) | {r['human_needed']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
