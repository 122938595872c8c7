"""How many fights must I record? Behaviour cloning on growing numbers of demonstration fights.

The scripted expert's fights (or, with ``--player person``, a person-like player's:
``env.sim.person``) are recorded once (seeds 0, 1, ...) and built into one dataset by the
pipeline's own ``demos`` and ``dataset`` stages (params.yaml's ``demos`` and ``env``), and a
BC policy is trained on the first 5, 10, 20, 40 and 80 of them, three training seeds each (the
params.yaml ``bc`` settings otherwise). Every policy then fights the same held-out seeds. Per
number of fights: the win rate over all its policies' fights with a Wilson 95 % interval, the
spread between training seeds, and damage dealt and taken. The table answers "how much do I
need to play?" for the simulator's boss; a real boss needs its own run on your recordings.

    python -m elden_il.studies.scaling                                     # the full study (its time: elden_il/studies/STUDIES.md)
    python -m elden_il.studies.scaling --fights 5 10 --seeds 0 --eval-fights 20   # a quick look
    RAY_ADDRESS=127.0.0.1:6379 python -m elden_il.studies.scaling                 # each policy a Ray task
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from env.common.cli import flag, parse_settings, ruled, run_command
from env.common.fields import check_fields, checked, one_of, whole
from env.sim.players import PLAYERS

from elden_il.fanout import fan_out
from elden_il.params import FIRST_HELD_OUT_SEED, DatasetParams, NetworkSize, PipelineParams

if TYPE_CHECKING:
    from elden_il.data import Demonstrations
    from elden_il.params import BCConfig

log = logging.getLogger(__name__)

OUT = Path("datasets/studies/scaling")


def study(
    fights: list[int], seeds: list[int], eval_fights: int, params: PipelineParams, out: Path, player: str = "expert"
) -> dict:
    """Record (``player``: who the autopilot is, ``env.sim.players.PLAYERS``), train and
    evaluate as the module docstring says; writes ``out/results.json`` and ``out/scaling.png``
    and returns the results."""
    from elden_il.data import demonstrations, open_dataset
    from elden_il.evaluation.win_rate import wilson_interval
    from elden_il.pipeline import Workspace, stage_dataset, stage_demos

    bc_config = params.bc
    held_out = list(range(FIRST_HELD_OUT_SEED, FIRST_HELD_OUT_SEED + eval_fights))
    results: dict = {
        "player": player,
        "fights": fights,
        "training_seeds": seeds,
        "eval_fights": eval_fights,
        "bc": vars(bc_config),
        "network": vars(params.network),
        "rows": [],
    }
    # the pipeline's own demos and dataset stages, in a workspace of the study's, for all the
    # fights the largest policy learns from (the smaller ones take the first of them)
    recorded = replace(
        params,
        demos=replace(
            params.demos,
            source="sim",
            record=replace(params.demos.record, max_episodes=max(fights), seed=0, player=player),
        ),
        dataset=DatasetParams(id="study/scaling-v0"),
    )
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(Path(tmp))
        started = time.perf_counter()
        stage_demos(recorded, ws)
        stage_dataset(recorded, ws)
        everything = demonstrations(open_dataset(recorded.dataset.id, ws.minari))
        results["record_and_build_seconds"] = time.perf_counter() - started
        units = [(n, seed) for n in fights for seed in seeds]
        trained = fan_out(
            partial(_train_and_evaluate, bc_config=bc_config, size=params.network, held_out=held_out),
            units,
            lambda unit: f"BC on {unit[0]} fights, training seed {unit[1]}",
            shared=everything,
        )
        for n in fights:
            demos = everything.first_episodes(n)
            runs = [run for (count, _), run in zip(units, trained) if count == n]
            wins = sum(r.win for run in runs for r in run["records"])
            total = sum(len(run["records"]) for run in runs)
            results["rows"].append(
                {
                    "fights": n,
                    "samples": len(demos),
                    "policies": len(runs),
                    "eval_fights": total,
                    "win_rate": wins / total,
                    "win_rate_ci95": list(wilson_interval(wins, total)),
                    "win_rate_by_seed": [run["win_rate"] for run in runs],
                    "boss_damage_dealt": float(np.mean([r.boss_damage_dealt for run in runs for r in run["records"]])),
                    "boss_damage_dealt_sd": float(
                        np.std([r.boss_damage_dealt for run in runs for r in run["records"]])
                    ),
                    "player_damage_taken": float(
                        np.mean([r.player_damage_taken for run in runs for r in run["records"]])
                    ),
                    "train_seconds": float(np.mean([run["train_seconds"] for run in runs])),
                }
            )
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    plot(results, out / "scaling.png")
    return results


def _train_and_evaluate(
    everything: Demonstrations,
    unit: tuple[int, int],
    bc_config: BCConfig,
    size: NetworkSize,
    held_out: list[int],
) -> dict:
    """One policy of the study: BC on the first ``n`` fights with training seed ``seed``
    (``unit``), then its held-out fights. A job of its own, so the study fans out over a Ray
    cluster (``elden_il.fanout``) unit by unit."""
    from env.factory import make_env

    from elden_il.evaluation.evaluate import PolicyActor
    from elden_il.evaluation.fight_loop import run_fights
    from elden_il.training.bc import train_bc

    n, seed = unit
    demos = everything.first_episodes(n)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        train_bc(demos, replace(bc_config, seed=seed), Path(tmp), size=size)
        trained = time.perf_counter() - started
        records, _ = run_fights(lambda: make_env(demos.config), PolicyActor(Path(tmp), True), held_out, parallel=8)
    win_rate = sum(r.win for r in records) / len(records)
    log.info("%d fights, seed %d: win rate %.0f %%", n, seed, 100 * win_rate)
    return {"train_seconds": trained, "records": records, "win_rate": win_rate}


def plot(results: dict, path: Path) -> None:
    """Win rate (with its interval and each training seed) and damage dealt against fights."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["rows"]
    n = np.array([r["fights"] for r in rows])
    fig, (win, damage) = plt.subplots(1, 2, figsize=(10, 4))
    rate = np.array([r["win_rate"] for r in rows]) * 100
    low, high = (np.array([r["win_rate_ci95"][i] for r in rows]) * 100 for i in (0, 1))
    win.fill_between(n, low, high, alpha=0.25, label="95 % interval")
    win.plot(n, rate, "o-", label="all training seeds")
    for r in rows:
        win.scatter(
            [r["fights"]] * len(r["win_rate_by_seed"]), np.array(r["win_rate_by_seed"]) * 100, s=10, color="grey"
        )
    win.set(
        xscale="log",
        xticks=n,
        xticklabels=n,
        xlabel="demonstration fights",
        ylabel="win rate (%)",
        ylim=(0, 100),
        title=f"BC win rate on {results['eval_fights']} held-out fights per policy",
    )
    win.legend()
    dealt = np.array([r["boss_damage_dealt"] for r in rows])
    damage.errorbar(n, dealt, yerr=[r["boss_damage_dealt_sd"] for r in rows], fmt="o-", capsize=3, label="dealt (± sd)")
    damage.plot(n, [r["player_damage_taken"] for r in rows], "s--", label="taken")
    damage.set(
        xscale="log",
        xticks=n,
        xticklabels=n,
        xlabel="demonstration fights",
        ylabel="fraction of max HP per fight",
        title="damage",
    )
    damage.legend()
    for axes in (win, damage):
        axes.minorticks_off()  # the log axis's minor labels (6x10^0) would crowd the fight counts
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(results: dict) -> str:
    """The results as the Markdown table elden_il/studies/STUDIES.md shows (damage as a fraction of max HP)."""
    lines = [
        "| fights recorded | samples | BC win rate (95 % interval) | by training seed | damage dealt | damage taken |",
        "|---:|---:|---|---|---:|---:|",
    ]
    for r in results["rows"]:
        low, high = r["win_rate_ci95"]
        seeds = ", ".join(f"{w:.0%}" for w in r["win_rate_by_seed"])
        lines.append(
            f"| {r['fights']} | {r['samples']:,} | {r['win_rate']:.0%} ({low:.0%}-{high:.0%}) | {seeds} | "
            f"{r['boss_damage_dealt']:.0%} | {r['player_damage_taken']:.0%} |"
        )
    return "\n".join(lines)


COUNT = whole(1, 10_000)


@dataclass(frozen=True)
class ScalingArgs:
    """What the study trains and plays: each field its flag."""

    fights: tuple[int, ...] = field(
        default=(5, 10, 20, 40, 80),
        metadata=flag("numbers of demonstration fights", type=ruled(int, COUNT), nargs="+"),
    )
    seeds: tuple[int, ...] = field(
        default=(0, 1, 2), metadata=flag("BC training seeds", type=ruled(int, whole(0, 2**31 - 1)), nargs="+")
    )
    eval_fights: int = checked(100, COUNT, "held-out fights per policy")
    params: Path = field(default=Path("params.yaml"), metadata=flag("the env and bc settings", type=Path))
    player: str = checked(
        "expert",
        one_of(*PLAYERS),
        "who records the demonstrations: a player of the simulator (env/sim/players.py)",
        choices=tuple(PLAYERS),
    )
    out: Path | None = field(
        default=None,
        metadata=flag(
            f"where results.json and scaling.png go (default: {OUT}, or {OUT}-PLAYER for another player)", type=Path
        ),
    )

    def __post_init__(self) -> None:
        check_fields(self)


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m elden_il.studies.scaling", __doc__, ScalingArgs, argv=argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from elden_il.params import load_params

    out = args.out or (OUT if args.player == "expert" else Path(f"{OUT}-{args.player}"))

    def work() -> None:
        results = study(
            sorted(set(args.fights)), list(args.seeds), args.eval_fights, load_params(args.params), out, args.player
        )
        print(table(results))
        print(f"\nresults and plot in {out}", file=sys.stderr)

    return run_command(work)


if __name__ == "__main__":
    raise SystemExit(main())
