"""``python -m elden_il.duel``: whole fights against the in-process simulator, for the difficulty
check, a player's own rate, and a quick look.

A player of the simulator (``env.sim.players``) is asked what to press on one of two clocks:

- ``step`` (the default): once per env step, through the env and the shared fight loop
  (``elden_il.evaluation.fight_loop``), exactly as evaluation plays a policy, so the expert's win rate here
  and in ``dvc repro``'s evaluation is one number: the same seeds give the same fights. With
  ``RAY_ADDRESS`` set they are played on that Ray cluster (``elden_il.fanout``), with the same
  results.
- ``sample``: as the recorder's autopilot plays it when it records demonstrations (``python -m
  capture.record --backend sim --autopilot --player P``, which this runs, into a folder it then
  deletes): shown every sample, deciding when its clock falls due or when it notices a boss move,
  tapping for its own length. A player that reacts between steps (the person-like player) wins
  as often here as in the fights it records, which is the rate its dataset's teacher row reads.

It sits above the env, the factory, the recorder and the simulator it plays, in the evaluation layer.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from env import fight_rules
from env.common.cli import command_parser, flag, from_flags, run_command
from env.common.fields import FIGHTS, MAX_FIGHTS, MAX_SEED, SEED, Rule, check_fields, checked, one_of
from env.config import EnvConfig
from env.factory import make_env
from env.sim.boss import available_bosses
from env.sim.expert import ScriptedExpert
from env.sim.players import PLAYERS

from capture.episode import read_episode

from elden_il.evaluation.fight_loop import Actor, FightRecord, PlayerActor, RandomActor, play_fights, summarize

POLICIES = ("random", *PLAYERS)
"""What can fight: a uniformly random policy, or a player of the simulator."""
CLOCKS = ("step", "sample")
"""When a player is asked what to press: once per env step, or at every sample the recorder takes."""
HP = ("HeroHp", "HeroMaxHp", "NpcHp", "NpcMaxHp")


def duel(
    policy: str, seeds: list[int], config: EnvConfig = EnvConfig(), parallel: int = 8, clock: str = "step"
) -> list[FightRecord]:
    """``policy`` (``random`` or a player of ``env.sim.players.PLAYERS``) fights once per seed in
    the in-process simulator, asked on ``clock`` (one of ``CLOCKS``)."""
    if clock == "sample":
        return recorded_fights(policy, seeds, config)
    actor: Actor = RandomActor() if policy == "random" else PlayerActor(policy, config)
    return play_fights(lambda: make_env(config, state_attributes=ScriptedExpert.ATTRIBUTES), actor, seeds, parallel)[0]


def recorded_fights(player: str, seeds: list[int], config: EnvConfig) -> list[FightRecord]:
    """``player``'s fights on the consecutive ``seeds`` as the recorder's autopilot plays them,
    lock-step in-process, each cut where the env would cut it (``max_steps``), read back from the
    episodes it recorded."""
    from capture.record import record

    from elden_il.params import DEMO_RECORDING  # the demos stage's session: its small picture, its names

    with tempfile.TemporaryDirectory(prefix="duel-") as folder:
        session = replace(
            DEMO_RECORDING,
            env=config,
            player=player,
            seed=seeds[0],
            max_episodes=len(seeds),
            max_episode_seconds=config.max_steps * config.timestep_ms / 1000.0,
            out=Path(folder),
        )
        return [fight_of(path, seed, config) for path, seed in zip(record(session), seeds, strict=True)]


def fight_of(path: Path, seed: int, config: EnvConfig) -> FightRecord:
    """A recorded fight as the fight loop reports one: the damage between its first and last
    samples, and its length in env steps (a recording has no rewards)."""
    episode = read_episode(path, frames=False)
    columns = {name: episode.column(name) for name in HP}
    first, last = ({name: v[i] for name, v in columns.items()} for i in (0, -1))
    before, after = ({name: v[cut] for name, v in columns.items()} for cut in (slice(None, -1), slice(1, None)))
    return FightRecord(
        seed,
        episode.attrs["outcome"] == "win",
        float(fight_rules.damage_dealt(first, last)),
        float(fight_rules.damage_taken(before, after).sum()),
        round((episode.t[-1] - episode.t[0]) * 1000 / config.timestep_ms),
        None,
    )


@dataclass(frozen=True)
class DuelArgs:
    """What ``python -m elden_il.duel`` plays: each field its flag."""

    policy: tuple[str, ...] = checked(
        ("expert",),
        Rule(lambda v: isinstance(v, tuple) and bool(v) and set(v) <= set(POLICIES), f"must be some of {POLICIES}"),
        "which policies fight: random, or a player of the simulator ("
        + "; ".join(f"{name}: {kind.words}" for name, kind in PLAYERS.items())
        + ") (default: expert)",
        nargs="+",
        choices=POLICIES,
        type=str,
    )
    clock: str = checked(
        "step",
        one_of(*CLOCKS),
        "when a player is asked what to press: step, once per env step, as evaluation asks a policy; sample, at "
        "every sample, as the recorder's autopilot asks it while it records demonstrations (not random)",
        choices=CLOCKS,
    )
    boss: str = checked(
        "margit",
        one_of(*available_bosses()),
        "the simulator's boss they fight (its profile sim_<boss>)",
        choices=available_bosses(),
    )
    fights: int = checked(10, FIGHTS, f"fights per policy, 1 to {MAX_FIGHTS}")
    first_seed: int = checked(0, SEED, "seed of the first fight")
    quiet: bool = field(default=False, metadata=flag("print only the summary per policy"))

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def seeds(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.fights))


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "python -m elden_il.duel",
        "Play whole fights against the in-process simulator and print each outcome. The scripted\n"
        "expert should win most fights, a random policy and attack-every-step almost none: this is the\n"
        "difficulty check. With --clock sample a player plays as it does when the recorder records it.",
        DuelArgs,
        epilog="examples:\n"
        "  python -m elden_il.duel --policy expert random --fights 20\n"
        "  python -m elden_il.duel --policy expert person --boss godrick --fights 40   the expert and the person-like "
        "player against Godrick\n"
        "  python -m elden_il.duel --policy person --clock sample --first-seed 1000000 --fights 100   "
        "the person-like player's own rate on the held-out seeds\n"
        "on a Ray cluster (the same fights, spread over its CPUs): RAY_ADDRESS=127.0.0.1:6379 python -m elden_il.duel ...",
    )
    args = from_flags(DuelArgs, parser.parse_args(argv))
    if args.first_seed + args.fights - 1 > MAX_SEED:
        parser.error(f"--first-seed {args.first_seed} with --fights {args.fights}: the last seed would pass {MAX_SEED}")
    if args.clock == "sample" and "random" in args.policy:
        parser.error("--clock sample plays the simulator's players as the recorder's autopilot does; random is none")
    config = EnvConfig(profile=f"sim_{args.boss}")
    return run_command(lambda: show_duels(list(args.policy), args.seeds, args.quiet, args.clock, config))


def show_duels(
    policies: list[str], seeds: list[int], quiet: bool, clock: str = "step", config: EnvConfig = EnvConfig()
) -> None:
    """Each policy's fights on ``seeds`` in ``config``'s env, printed as they end (``quiet``: the
    summaries alone)."""
    from rich.console import Console

    console = Console()
    for name in policies:
        started = time.perf_counter()
        records = duel(name, seeds, config, clock=clock)
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
