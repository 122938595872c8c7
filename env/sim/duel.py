"""Whole fights on the in-process simulator, for the difficulty check and the quick demo.

A fight is played the way the env plays it: one decision every ``step_seconds`` of game time,
each decision a row of the profile's discrete action table, held keys persisting while the
action repeats and tapped keys pressed once. Frames are never rendered, so hundreds of fights
take seconds.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from env.actions import DiscreteActions
from env.game import GameState
from env.sim.expert import ScriptedExpert
from env.sim.game import SimGame

Policy = Callable[[GameState], str]


@dataclass(frozen=True, slots=True)
class FightResult:
    seed: int
    win: bool
    steps: int
    boss_damage_dealt: float  # fraction of the boss's max HP
    player_damage_taken: float  # fraction of the player's max HP, before healing


def random_policy(actions: DiscreteActions, seed: int) -> Policy:
    rng = random.Random(seed)
    return lambda state: rng.choice(actions.names)


def attack_policy(actions: DiscreteActions, seed: int) -> Policy:
    return lambda state: "attack"


def expert_policy(actions: DiscreteActions, seed: int) -> Policy:
    return ScriptedExpert().act


POLICIES: Mapping[str, Callable[[DiscreteActions, int], Policy]] = {
    "random": random_policy,
    "attack": attack_policy,
    "expert": expert_policy,
}


def play_fight(
    game: SimGame, policy: Policy, seed: int, step_seconds: float = 0.2, max_steps: int = 900,
    on_step: Callable[[int, str, GameState], None] | None = None,
) -> FightResult:
    actions = DiscreteActions(game.profile)
    state = game.reset_fight(seed)
    start = game.now()
    taken = 0
    last_hp = state["HeroHp"]
    steps = 0
    while steps < max_steps and state["HeroHp"] > 0 and state["NpcHp"] > 0:
        name = policy(state)
        command = actions.command(actions.index(name))
        game.hold_keys(command.hold)
        if command.tap:
            game.tap_keys(command.tap)
        steps += 1
        game.wait_until(start + steps * step_seconds)
        state = game.read_state()
        taken += max(0, last_hp - state["HeroHp"])
        last_hp = state["HeroHp"]
        if on_step is not None:
            on_step(steps, name, state)
    game.hold_keys(())
    return FightResult(
        seed=seed,
        win=state["NpcHp"] <= 0 and state["HeroHp"] > 0,
        steps=steps,
        boss_damage_dealt=1.0 - state["NpcHp"] / state["NpcMaxHp"],
        player_damage_taken=taken / state["HeroMaxHp"],
    )


def run_fights(policy_name: str, seeds: range, profile: str = "sim_margit") -> list[FightResult]:
    game = SimGame(profile)
    actions = DiscreteActions(game.profile)
    results = []
    for seed in seeds:
        policy = POLICIES[policy_name](actions, seed)
        results.append(play_fight(game, policy, seed))
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m env.sim.duel``: watch policies fight the simulator, one line per fight."""
    import argparse
    import statistics

    from rich.console import Console

    parser = argparse.ArgumentParser(
        prog="python -m env.sim.duel",
        description="Play whole fights against the in-process simulator (no server, no frames) and "
        "print each outcome. The scripted expert should win most fights, a random policy and "
        "attack-every-step almost none: this is the difficulty check.",
        epilog="example: python -m env.sim.duel --policy expert random --fights 20",
    )
    parser.add_argument("--policy", nargs="+", choices=sorted(POLICIES), default=["expert"],
                        help="which policies fight (default: expert)")
    parser.add_argument("--fights", type=int, default=10, help="fights per policy (default 10)")
    parser.add_argument("--first-seed", type=int, default=0, help="seed of the first fight")
    parser.add_argument("--quiet", action="store_true", help="print only the summary per policy")
    args = parser.parse_args(argv)
    console = Console()
    for name in args.policy:
        results = []
        for seed in range(args.first_seed, args.first_seed + args.fights):
            (result,) = run_fights(name, range(seed, seed + 1))
            results.append(result)
            if not args.quiet:
                outcome = "[green]WIN [/]" if result.win else "[red]LOSS[/]"
                console.print(
                    f"{name:>7} seed {seed:4d}  {outcome}  {result.steps * 0.2:6.1f} s  "
                    f"boss damage {result.boss_damage_dealt:6.1%}  damage taken {result.player_damage_taken:6.1%}"
                )
        wins = sum(r.win for r in results)
        console.print(
            f"[bold]{name}: won {wins}/{len(results)} ({wins / len(results):.0%}), mean boss damage "
            f"{statistics.mean(r.boss_damage_dealt for r in results):.0%}[/]"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
