"""Why fine-tuning's learning curve collapses, and what keeps it up: fine-tuning variants run
side by side from the same behaviour-cloned policy, same seeds, same steps.

For each variant it reports the sampled-action win rate of the training fights in windows of
steps (with Wilson 95 % intervals), PPO's own diagnostics after each update (the critic's
explained variance of the returns: near 0 or below, its advantages are noise; the value loss;
how far each update moved the policy), and the trained policy's win rate on held-out fights,
acting deterministically (as the pipeline evaluates it) and by sampling. The BC policy's own
win rates on the same held-out fights are the level the curve starts from.

A variant is a name and the fine-tuning settings it changes from params.yaml's ``finetune``, run
as PPO (``method: ppo``, whatever params.yaml's method: these are PPO's diagnostics):

    python -m elden_il.studies.finetune_stability                       # the pipeline's settings
    python -m elden_il.studies.finetune_stability --variant pipeline --variant kl_decay kl_decay_steps=30000

A fine-tuning already run (the pipeline's, say) is judged the same way without training again:
``--run NAME FOLDER`` with the folder it saved (``datasets/models/finetuned``).

With ``--checkpoints N`` each variant also saves its policy every N steps and reports each one's
deterministic win rate on the held-out fights: how far the policy a run ends with moves
between updates, and so how much one run's final number says.

Each variant (its training and its held-out fights) is one job: with Ray's ``RAY_ADDRESS`` set,
the variants train side by side on that cluster (``elden_il.fanout``), with the same results.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from stable_baselines3.common.callbacks import BaseCallback

from env.common.cli import flag, parse_settings, ruled, run_command
from env.common.errors import ConfigError
from env.common.fields import MAX_FIGHTS, SEED, checked, number, optional, whole
from env.common.machine import describe
from env.config import EnvConfig

from elden_il.params import FIRST_HELD_OUT_SEED, FinetuneConfig

ROOT = Path(__file__).resolve().parents[2]


def windows(rows: list[dict], steps: int, width: int) -> list[dict]:
    """Win rate of the fights that ended in each ``width``-step window, with its interval."""
    from elden_il.evaluation.win_rate import wilson_interval

    out = []
    for start in range(0, steps, width):
        wins = [r["win"] for r in rows if start < r["timesteps"] <= start + width]
        low, high = wilson_interval(sum(wins), len(wins)) if wins else (0.0, 1.0)
        out.append(
            {
                "until": start + width,
                "fights": len(wins),
                "win_rate": float(np.mean(wins)) if wins else None,
                "low": low,
                "high": high,
            }
        )
    return out


def verdict(curve: list[dict], rows: list[dict], start: float | None) -> str:
    """The run's lowest window, its training fights won, and whether it fell "clearly below
    where it started": a window whose whole 95 % interval lies under ``start``."""
    shown = [w for w in curve if w["win_rate"] is not None]
    wins = sum(r["win"] for r in rows)
    line = f"training fights won: {wins} of {len(rows)} ({wins / max(len(rows), 1):.0%})"
    if shown:
        lowest = min(shown, key=lambda w: w["win_rate"])
        line += f"; lowest window {lowest['win_rate']:.0%} ({lowest['low']:.0%}-{lowest['high']:.0%}) until {lowest['until']:,}"
    if start is not None:
        fell = [w["until"] for w in shown if w["high"] < start]
        line += f"; clearly below the start ({start:.1%}): " + (f"yes, windows until {fell}" if fell else "no")
    return line


def curves_chart(variants: dict[str, dict], start: dict | None, path: Path) -> None:
    """Each variant's training win rate by window, with its interval, in panels side by side on
    one scale, and the BC policy's own sampled held-out win rate (where the curve starts) as a
    line across each: a fall "clearly below where it started" is a window whose interval lies
    under that line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(variants), figsize=(4.2 * len(variants), 3.4), sharey=True, squeeze=False)
    for ax, (name, result) in zip(axes[0], variants.items()):
        shown = [w for w in result["curve"] if w["win_rate"] is not None]
        x = np.array([w["until"] for w in shown])
        rate = np.array([w["win_rate"] for w in shown])
        ax.fill_between(x, [w["low"] for w in shown], [w["high"] for w in shown], alpha=0.25, color="#b03030", lw=0)
        ax.plot(x, rate, "o-", color="#b03030", label="training fights (sampled)")
        if start:
            ax.axhline(start["win_rate"], color="#404040", ls="--", label="BC, held out (sampled)")
        ax.set(title=name, xlabel="env steps", ylim=(0, 1))
        ax.legend(loc="upper left", fontsize="small")
    axes[0][0].set_ylabel("win rate (95 % interval)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


MODES = {"deterministic": True, "sampled": False}
"""How a policy is judged: its most likely action, and a draw from it."""


def win_rate(policy_dir: Path, seeds: list[int], deterministic: bool) -> dict:
    """The policy saved in ``policy_dir`` on ``seeds``' fights, deterministic or sampled."""
    from env.factory import make_env

    from elden_il.evaluation.evaluate import PolicyActor
    from elden_il.evaluation.fight_loop import run_fights, summarize

    config = EnvConfig.load(policy_dir)
    torch.manual_seed(0)  # the sampling
    actor = PolicyActor(policy_dir, deterministic=deterministic)
    started = time.perf_counter()
    records, _ = run_fights(lambda: make_env(config), actor, seeds, parallel=8)
    return summarize(records, time.perf_counter() - started)


def held_out_win_rates(policy_dir: Path, fights: int, first_seed: int) -> dict:
    """The policy saved in ``policy_dir`` on held-out fights, acting deterministically (as the
    pipeline evaluates it) and by sampling (as PPO's rollouts act)."""
    seeds = list(range(first_seed, first_seed + fights))
    return {mode: win_rate(policy_dir, seeds, deterministic) for mode, deterministic in MODES.items()}


class PolicyCheckpoints(BaseCallback):
    """Saves the policy (``save_policy``) as ``folder/step-N`` at each update boundary ``steps``
    names (``rollout_starts``): the policy the rollout starting there is collected with."""

    def __init__(self, steps: list[int], env_config: EnvConfig, folder: Path) -> None:
        super().__init__()
        self.steps, self.env_config, self.folder = set(steps), env_config, folder

    def _on_rollout_start(self) -> None:
        from elden_il.policies.policy import save_policy

        if self.num_timesteps in self.steps:
            save_policy(self.model.policy, self.env_config, self.folder / f"step-{self.num_timesteps:07d}")

    def _on_step(self) -> bool:
        return True


def rollout_starts(config: FinetuneConfig, due: range) -> list[int]:
    """The update boundaries a run of ``config`` passes first at or after each step of ``due``
    (SB3 runs whole rollouts of ``n_steps`` per env); none before its first update, none at its end.
    Its envs are the in-process simulator's ``num_envs``: what the variants train on."""
    rollout = config.n_steps * config.num_envs
    end = -(-config.total_steps // rollout) * rollout
    return sorted({-(-max(step, 1) // rollout) * rollout for step in due if step < end} - {end})


def checkpoint_win_rates(folder: Path, fights: int, first_seed: int) -> list[dict]:
    """Each checkpoint in ``folder`` (``PolicyCheckpoints``) on the held-out fights, deterministic."""
    seeds = list(range(first_seed, first_seed + fights))
    return [
        {"timesteps": int(checkpoint.name[5:]), **win_rate(checkpoint, seeds, deterministic=True)}
        for checkpoint in sorted(folder.glob("step-*"))
    ]


def run_outputs(folder: Path, fights: int, first_seed: int) -> dict:
    """What judging a fine-tuning run needs of the folder it saved: its training fights, PPO's
    diagnostics per update, and its policy's held-out win rates (None with no ``fights``)."""
    return {
        "fights": json.loads((folder / "learning_curve.json").read_text()),
        "updates": json.loads((folder / "updates.json").read_text()),
        "held_out": held_out_win_rates(folder, fights, first_seed) if fights else None,
    }


def train_variant(
    bc_policy: dict[str, bytes],
    variant: tuple[str, Any],
    env_config: Any,
    fights: int,
    first_seed: int,
    checkpoints: int = 0,
) -> dict:
    """One variant, fine-tuned from the BC policy (its folder's files: a cluster's node may not
    have them) and judged on the held-out fights, with its policy every ``checkpoints`` steps
    (0: none); a job of its own, so that variants fan out over a Ray cluster (``elden_il.fanout``)."""
    from elden_il.training.finetune import finetune

    _, config = variant
    with tempfile.TemporaryDirectory() as tmp:
        bc = Path(tmp) / "bc"
        bc.mkdir()
        for name, data in bc_policy.items():
            (bc / name).write_bytes(data)
        saved = Path(tmp) / "checkpoints"
        due = range(checkpoints, config.total_steps, checkpoints) if checkpoints else range(0)
        hooks = [PolicyCheckpoints(rollout_starts(config, due), env_config, saved)]
        started = time.perf_counter()
        finetune(bc, config, env_config, Path(tmp) / "run", callbacks=hooks)
        seconds = time.perf_counter() - started
        along = checkpoint_win_rates(saved, fights, first_seed) if checkpoints and fights else None
        return {"seconds": seconds, **run_outputs(Path(tmp) / "run", fights, first_seed), "checkpoints": along}


def parse_variant(words: list[str], base: Any) -> tuple[str, Any]:
    """``NAME [FIELD=VALUE ...]`` as a name and ``base`` with those fields replaced (values in
    YAML, checked by the config's own rules)."""
    from elden_il.params import ParamsError, read_section

    name, *settings = words
    changes = {}
    for setting in settings:
        field, sep, value = setting.partition("=")
        if not sep:
            raise ConfigError(f"--variant {name}: {setting!r} is not FIELD=VALUE (e.g. n_epochs=10)")
        changes[field] = yaml.safe_load(value)
    try:
        return name, read_section({**vars(base), **changes}, "finetune", type(base))
    except ParamsError as e:
        raise ConfigError(f"--variant {name}: {e}") from None


@dataclass(frozen=True)
class StabilityArgs:
    """Which fine-tuning runs the study trains or reads, and how it judges them: each field its flag."""

    policy: Path = field(
        default=ROOT / "datasets/models/bc", metadata=flag("the BC policy folder (default: the pipeline's)", type=Path)
    )
    steps: int | None = checked(
        None,
        optional(whole(1)),
        "steps per variant (default: params.yaml's finetune.total_steps)",
        type=ruled(int, whole(1)),
    )
    variants: tuple[tuple[str, ...], ...] | None = field(
        default=None,
        metadata=flag(
            "a variant: its name, then the finetune settings it changes (repeat for more; "
            "default: one, 'pipeline', with params.yaml's settings)",
            flag_name="variant",
            nargs="+",
            action="append",
            metavar="NAME_AND_SETTINGS",
        ),
    )
    runs: tuple[tuple[str, str], ...] = field(
        default=(),
        metadata=flag(
            "a fine-tuning already run, not trained again: the folder it saved "
            "(learning_curve.json, updates.json and the policy; repeat for more)",
            flag_name="run",
            nargs=2,
            action="append",
            metavar=("NAME", "FOLDER"),
        ),
    )
    window: int = checked(6000, whole(1), "steps per point of the win-rate curve")
    fights: int = checked(200, whole(0, MAX_FIGHTS), "held-out fights for each policy's win rates (0: skip)")
    first_seed: int = checked(FIRST_HELD_OUT_SEED, SEED, "seed of the first held-out fight (the pipeline's)")
    start: float | None = checked(
        None,
        optional(number(0, 1)),
        "the win rate the curve starts from, to judge falls against (default: the BC "
        "policy's sampled held-out win rate; needed with --fights 0)",
        type=ruled(float, number(0, 1)),
    )
    checkpoints: int = checked(
        0,
        whole(0),
        "also save each variant's policy every this many steps and judge each on the held-out "
        "fights, deterministically (0: none)",
        metavar="STEPS",
    )
    json: Path | None = field(default=None, metadata=flag("also write the results here", type=Path))
    plot: Path | None = field(
        default=None, metadata=flag("also draw the variants' curves side by side here (a PNG)", type=Path)
    )


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings(
        "python -m elden_il.studies.finetune_stability",
        __doc__,
        StabilityArgs,
        argv=argv,
        epilog=__doc__.split("\n\n", 2)[2],
    )
    return run_command(lambda: judge_variants(args))


def judge_variants(args: StabilityArgs) -> None:
    """Fine-tune each variant of ``args`` (and read each earlier run it names) and print how each went."""
    from elden_il.fanout import fan_out
    from elden_il.params import load_params

    base = load_params(ROOT / "params.yaml").finetune
    # one run and the policy it ends with: what a variant's settings make, not several runs' ensemble
    base = replace(base, method="ppo", total_steps=args.steps or base.total_steps, runs=1)
    variants = [parse_variant(words, base) for words in (args.variants or ([] if args.runs else [["pipeline"]]))]
    env_config = EnvConfig.load(args.policy)

    def report(name: str, rates: dict) -> None:
        print(
            f"{name}: held-out win rate "
            + ", ".join(
                f"{mode} {r['win_rate']:.1%} ({r['win_rate_ci95'][0]:.1%}-{r['win_rate_ci95'][1]:.1%})"
                for mode, r in rates.items()
            )
        )

    results: dict = {
        "machine": describe(),
        "held_out": {"fights": args.fights, "first_seed": args.first_seed},
        "bc": held_out_win_rates(args.policy, args.fights, args.first_seed) if args.fights else None,
        "variants": {},
    }
    if results["bc"]:
        report("BC", results["bc"])
    start = args.start if args.start is not None else results["bc"] and results["bc"]["sampled"]["win_rate"]
    results["start"] = start

    def judge(name: str, run: dict, steps: int | None, config: dict) -> None:
        """Report a fine-tuning run (``run_outputs``, and its ``seconds`` where it was trained
        here) over ``steps`` (None: the run's own, in whole windows)."""
        rows = run["fights"]
        if steps is None:
            steps = round(rows[-1]["timesteps"] / args.window) * args.window if rows else 0
        curve = windows(rows, steps, args.window)
        explained = [u["explained_variance"] for u in run["updates"]]
        seconds = run.get("seconds")
        results["variants"][name] = {"config": config, "seconds": seconds, "curve": curve, **run}
        took = f" ({seconds:.0f} s)" if seconds is not None else ""
        print(
            f"{name}{took}: training win rate by {args.window}-step window: "
            + "  ".join("-" if w["win_rate"] is None else f"{w['win_rate']:.0%}" for w in curve)
        )
        print(
            f"   critic's explained variance: mean {np.mean(explained):.2f}, last 10 updates {np.mean(explained[-10:]):.2f}"
        )
        print("   " + verdict(curve, rows, start))
        if run["held_out"]:
            report(f"   {name}", run["held_out"])
        if run.get("checkpoints"):
            print(
                "   deterministic held-out win rate along the run: "
                + "  ".join(f"{c['timesteps']}: {c['win_rate']:.0%}" for c in run["checkpoints"])
            )

    for name, folder in args.runs:
        judge(name, run_outputs(Path(folder), args.fights, args.first_seed), None, {"folder": folder})
    trained = fan_out(
        partial(
            train_variant,
            env_config=env_config,
            fights=args.fights,
            first_seed=args.first_seed,
            checkpoints=args.checkpoints,
        ),
        variants,
        lambda variant: f"the variant {variant[0]}",
        shared={p.name: p.read_bytes() for p in args.policy.iterdir() if p.is_file()},
    )
    for (name, config), run in zip(variants, trained):
        judge(name, run, config.total_steps, {k: v for k, v in vars(config).items() if k != "hosts"})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.plot:
        curves_chart(results["variants"], results["bc"] and results["bc"]["sampled"], args.plot)


if __name__ == "__main__":
    raise SystemExit(main())
