"""``python -m elden_il.studies.corrections``: are a person's corrections worth more than more demonstrations?

The HG-DAgger question, answered on the in-process simulator (lock-step, so it runs in
minutes): record ``demo_fights`` demonstrations with the scripted expert and train BC on them;
then spend a budget of labelled steps two ways and retrain BC on each augmented set:

* **corrections**: BC plays ``correction_fights`` fights while the scripted human
  (``capture.takeover.ScriptedHuman``) takes over whenever BC's choice differs from the
  expert's while a boss attack winds up. Its intervention steps are the budget; they train with
  weight ``bc.intervention_weight``, the steps BC played itself with weight 0.
* **more demonstrations**: further expert fights (the next seeds) until at least as many
  demonstration steps as there were intervention steps.

The base BC and both retrained policies fight the same held-out seeds (``elden_il.evaluation.fight_loop``); the
report gives each one's win rate with its Wilson 95 % interval, damage dealt and taken, the
steps it added (labelled, and recorded in all) and the wall time it took. Nothing of the
default ``dvc repro`` pipeline is touched.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from env.common.cli import add_flags, command_parser, flag, from_flags, output_folder, run_command
from env.common.errors import ConfigError
from env.common.fields import check_fields, checked, number, whole
from env.config import EnvConfig

from elden_il.params import FIRST_HELD_OUT_SEED, BCConfig, DatasetParams, DemosParams, PipelineParams

log = logging.getLogger(__name__)

PROFILE = "sim_margit"
"""The scripted human knows the simulator's moves only."""


@dataclass(frozen=True)
class CorrectionsConfig:
    """The comparison's knobs; the defaults run in a few minutes on two cores."""

    demo_fights: int = checked(10, whole(1, 10_000), "first demonstrations")
    correction_fights: int = checked(5, whole(1, 10_000), "fights BC plays with the scripted human correcting")
    takeover_quiet: float = checked(0.6, number(0, 60), "seconds with no key held before the policy plays again")
    eval_fights: int = checked(50, whole(1, 100_000), "held-out fights per policy")
    first_eval_seed: int = checked(FIRST_HELD_OUT_SEED, whole(0))  # held out: recordings use small seeds
    seed: int = checked(0, whole(0, 100_000), "first demonstration fight's seed")
    bc: BCConfig = field(default_factory=lambda: BCConfig(epochs=6))
    env: EnvConfig = field(default_factory=lambda: EnvConfig(profile=PROFILE, action_history=4))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class Arm:
    """One way of spending the budget: what it recorded, what it trained on, how long it took."""

    raw: list[Path] = field(default_factory=list)  # the episodes added to the first demonstrations
    seconds: float = 0.0


def _record(out: Path, config: CorrectionsConfig, seed: int, fights: int, policy: Path | None = None) -> list[Path]:
    """``fights`` recorded as a person records them: the autopilot's, or ``policy``'s with the
    scripted human correcting it (``elden_il.pilot``)."""
    from capture.record import RecordSettings, record

    from elden_il.pilot import PilotSettings, pilot

    step = config.env.timestep_ms / 1000.0
    settings = RecordSettings(
        env=config.env,
        backend="sim",
        out=out,
        seed=seed,
        max_episodes=fights,
        max_episode_seconds=(config.env.max_steps + 1) * step,  # what a dataset keeps
        autopilot=policy is None,
    )
    if policy is None:
        return record(settings)
    return pilot(PilotSettings(policy, settings, config.takeover_quiet, scripted_human=True))


def _train(name: str, raw: list[Path], work: Path, config: CorrectionsConfig) -> tuple[Path, dict]:
    """The pipeline's own dataset and bc stages on ``raw`` (linked into one folder, in recording
    order), in a workspace of their own (``work/name``): the policy's folder and its dataset's
    step counts."""
    from capture.episode_format import video_path

    from elden_il.data import load_demonstrations
    from elden_il.pipeline import Workspace, stage_bc, stage_dataset

    folder = work / "raw" / name
    folder.mkdir(parents=True)
    for i, path in enumerate(raw):  # numbered: list_episodes keeps this order; each with its video
        for file in (path, video_path(path)):
            os.link(file, folder / f"{i:05d}_{file.name}")
    params = PipelineParams(
        demos=DemosParams(source="raw", raw_dir=str(folder)),
        dataset=DatasetParams(id=f"corrections/{name}-v0"),
        env=config.env,
        bc=config.bc,
    )
    ws = Workspace(work / name)
    stage_dataset(params, ws)
    stage_bc(params, ws)
    demos = load_demonstrations(params.dataset.id, ws.minari)
    counts = {
        "demonstration_steps": int((~demos.intervention & ~demos.policy_played).sum()),
        "intervention_steps": int(demos.intervention.sum()),
        "policy_steps": int(demos.policy_played.sum()),
    }
    return ws.models / "bc", counts


def compare(config: CorrectionsConfig, work: Path) -> dict:
    """Run the whole comparison in ``work`` (created, must not exist); the report."""
    from env.factory import make_env

    from capture.build_dataset import steps_in
    from capture.episode import read_episode

    from elden_il.evaluation.evaluate import PolicyActor, evaluate

    work.mkdir(parents=True)
    started = time.perf_counter()
    demos_raw = _record(work / "recorded" / "demos", config, config.seed, config.demo_fights)
    bc_path, base = _train("bc", demos_raw, work, config)
    base_seconds = time.perf_counter() - started

    corrections = Arm()
    t = time.perf_counter()
    corrections.raw = _record(
        work / "recorded" / "corrections",
        config,
        config.seed + config.demo_fights,
        config.correction_fights,
        policy=bc_path,
    )
    corrected_path, corrected = _train("bc_corrections", demos_raw + corrections.raw, work, config)
    corrections.seconds = time.perf_counter() - t
    budget = corrected["intervention_steps"]

    more = Arm()
    t = time.perf_counter()
    seed, added = config.seed + config.demo_fights + config.correction_fights, 0
    while added < max(1, budget):
        more.raw += _record(work / "recorded" / "more_demos", config, seed, 1)
        added += steps_in(more.raw[-1], config.env)
        seed += 1
    more_path, more_counts = _train("bc_more_demos", demos_raw + more.raw, work, config)
    more.seconds = time.perf_counter() - t

    seeds = list(range(config.first_eval_seed, config.first_eval_seed + config.eval_fights))
    actors = {
        name: PolicyActor(path, deterministic=True)
        for name, path in (("bc", bc_path), ("bc+corrections", corrected_path), ("bc+more demos", more_path))
    }
    results = evaluate(actors, lambda: make_env(config.env), seeds)

    def samples(paths: list[Path]) -> int:
        return sum(len(read_episode(p, frames=False)) for p in paths)

    def takeovers(paths: list[Path]) -> int:
        """How often the person took control: the runs of marked samples."""
        marks = [read_episode(p, frames=False).intervention.astype(int) for p in paths]
        return int(sum((np.diff(m, prepend=0) == 1).sum() for m in marks))

    arms = {
        "bc": {
            "added_fights": 0,
            "added_labelled_steps": 0,
            "added_recorded_steps": 0,
            "added_samples": 0,
            "dataset": base,
            "seconds": base_seconds,
        },
        "bc+corrections": {
            "added_fights": len(corrections.raw),
            "added_labelled_steps": budget,
            "added_recorded_steps": corrected["intervention_steps"] + corrected["policy_steps"],
            "added_samples": samples(corrections.raw),
            "takeovers": takeovers(corrections.raw),
            "dataset": corrected,
            "seconds": corrections.seconds,
        },
        "bc+more demos": {
            "added_fights": len(more.raw),
            "added_labelled_steps": more_counts["demonstration_steps"] - base["demonstration_steps"],
            "added_recorded_steps": more_counts["demonstration_steps"] - base["demonstration_steps"],
            "added_samples": samples(more.raw),
            "dataset": more_counts,
            "seconds": more.seconds,
        },
    }
    return {
        "config": asdict(config) | {"env": config.env.to_dict()},
        "eval_seeds": [seeds[0], seeds[-1]],
        "policies": {name: {**arms[name], **results[name]} for name in arms},
        "total_seconds": time.perf_counter() - started,
    }


def show(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    fights = report["config"]["eval_fights"]
    table = Table(title=f"BC + corrections vs BC + more demonstrations ({fights} held-out fights each)")
    for column in (
        "policy",
        "labelled steps added",
        "steps recorded",
        "win rate",
        "95 % CI",
        "boss damage dealt",
        "damage taken",
        "wall time",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name, r in report["policies"].items():
        low, high = r["win_rate_ci95"]
        table.add_row(
            name,
            str(r["added_labelled_steps"]),
            str(r["added_recorded_steps"]),
            f"{r['win_rate']:.0%}",
            f"{low:.0%}-{high:.0%}",
            f"{r['boss_damage_dealt']:.0%}",
            f"{r['player_damage_taken']:.0%}",
            f"{r['seconds']:.0f} s",
        )
    Console().print(table)


@dataclass(frozen=True)
class WorkFolder:
    """Where the comparison records, trains and reports."""

    out: Path = field(
        default=Path("datasets/corrections"),
        metadata=flag("work folder, created; must not exist", type=output_folder),
    )


def main(argv: list[str] | None = None) -> int:
    defaults = CorrectionsConfig()
    p = command_parser(
        "python -m elden_il.studies.corrections",
        __doc__,
        WorkFolder,
        CorrectionsConfig,
        epilog="example: python -m elden_il.studies.corrections --out /tmp/corrections",
    )
    add_flags(p, BCConfig, ("epochs", "intervention_weight"), epochs={"default": defaults.bc.epochs})
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = from_flags(CorrectionsConfig, args, bc=from_flags(BCConfig, args))
    return run_command(lambda: compare_and_show(config, from_flags(WorkFolder, args).out))


def compare_and_show(config: CorrectionsConfig, out: Path) -> None:
    """The comparison in a new folder ``out``: its report there as corrections.json, and printed."""
    if out.exists():
        raise ConfigError(f"--out {out} exists: give a new folder (the comparison records afresh)")
    report = compare(config, out)
    (out / "corrections.json").write_text(json.dumps(report, indent=2, default=str))
    show(report)


if __name__ == "__main__":
    raise SystemExit(main())
