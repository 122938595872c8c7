"""``python -m elden_il.duel``: whole fights against the in-process simulator, for the difficulty
check and a quick look.

Fights are played through the env and the shared fight loop (``elden_il.fight_loop``), exactly as
evaluation plays them, so the expert's win rate here and in ``dvc repro``'s evaluation is one
number: the same seeds give the same fights. With ``RAY_ADDRESS`` set they are played on that
Ray cluster (``elden_il.fanout``), with the same results. It sits above the env, the factory and
the simulator it plays, in the evaluation layer.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from env.common.cli import ruled, run_command
from env.common.fields import FIGHTS, MAX_FIGHTS, MAX_SEED, SEED
from env.config import EnvConfig
from env.factory import make_env
from env.sim.expert import ScriptedExpert

from elden_il.fight_loop import Actor, FightRecord, NamingActor, RandomActor, expert_actor, play_fights, summarize

ACTORS: dict[str, Callable[[EnvConfig], Actor]] = {
    "random": lambda config: RandomActor(),
    "attack": lambda config: NamingActor(lambda: lambda state: "attack"),
    "expert": expert_actor,
}
"""Policy name -> the actor that plays it in an env with the given config."""


def duel(policy: str, seeds: list[int], config: EnvConfig = EnvConfig(), parallel: int = 8) -> list[FightRecord]:
    """``policy`` (a name of ``ACTORS``) fights once per seed in the in-process simulator."""
    actor = ACTORS[policy](config)
    return play_fights(lambda: make_env(config, state_attributes=ScriptedExpert.ATTRIBUTES), actor, seeds, parallel)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elden_il.duel",
        description="Play whole fights against the in-process simulator through the env and print each "
        "outcome. The scripted expert should win most fights, a random policy and attack-every-step "
        "almost none: this is the difficulty check.",
        epilog="example: python -m elden_il.duel --policy expert random --fights 20\n"
        "on a Ray cluster (the same fights, spread over its CPUs): RAY_ADDRESS=127.0.0.1:6379 python -m elden_il.duel ...",
    )
    parser.add_argument(
        "--policy", nargs="+", choices=sorted(ACTORS), default=["expert"], help="which policies fight (default: expert)"
    )
    parser.add_argument(
        "--fights", type=ruled(int, FIGHTS), default=10, help=f"fights per policy, 1 to {MAX_FIGHTS} (default 10)"
    )
    parser.add_argument("--first-seed", type=ruled(int, SEED), default=0, help="seed of the first fight (default 0)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary per policy")
    args = parser.parse_args(argv)
    if args.first_seed + args.fights - 1 > MAX_SEED:
        parser.error(f"--first-seed {args.first_seed} with --fights {args.fights}: the last seed would pass {MAX_SEED}")
    return run_command(
        lambda: show_duels(args.policy, list(range(args.first_seed, args.first_seed + args.fights)), args.quiet)
    )


def show_duels(policies: list[str], seeds: list[int], quiet: bool) -> None:
    """Each policy's fights on ``seeds``, printed as they end (``quiet``: the summaries alone)."""
    from rich.console import Console

    console = Console()
    config = EnvConfig()
    for name in policies:
        started = time.perf_counter()
        records = duel(name, seeds, config)
        summary = summarize(records, time.perf_counter() - started)
        if not quiet:
            for r in records:
                outcome = "[green]WIN [/]" if r.win else "[red]LOSS[/]"
                console.print(
                    f"{name:>7} seed {r.seed:4d}  {outcome}  {r.length * config.timestep_ms / 1000:6.1f} s  "
                    f"boss damage {r.boss_damage_dealt:6.1%}  damage taken {r.player_damage_taken:6.1%}"
                )
        console.print(
            f"[bold]{name}: won {sum(r.win for r in records)}/{len(records)} ({summary['win_rate']:.0%}, "
            f"95 % interval {summary['win_rate_ci95'][0]:.0%}-{summary['win_rate_ci95'][1]:.0%}), "
            f"mean boss damage {summary['boss_damage_dealt']:.0%}[/] ({summary['fights_per_minute']:.0f} fights a minute)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
