"""The stages of ``dvc repro``, each a subcommand reading its section of ``params.yaml``.

    python -m elden_il.pipeline demos      demonstrations: the expert recorded in the simulator
    python -m elden_il.pipeline dataset    raw episodes -> Minari dataset
    python -m elden_il.pipeline bc         behaviour cloning
    python -m elden_il.pipeline finetune   RL fine-tuning near the BC policy
    python -m elden_il.pipeline evaluate   every policy, same seeds, same env; metrics and plots
    python -m elden_il.pipeline evaluate_live   the same policies over the live path (not in dvc repro:
                                           real time, about an hour): a simulator server in Siphon's
                                           real-server mode, paused between steps at evaluate_live.game_speed
    python -m elden_il.pipeline summary    the last evaluation, as a table
    python -m elden_il.pipeline compare    whether this run reproduced the committed one: the same
                                           bytes, a changed CPU (its kernels), or a changed result

Outputs, all under ``datasets/``: ``demos/``, ``minari/``, ``models/`` (DVC-cached, git-ignored);
``reports/``: metrics as JSON for ``dvc metrics show``, the data of ``dvc plots`` (DVCLive's
training curves in ``reports/live/``, ``reports/eval_policies.csv``), these committed to git;
plots as PNG and a GIF per policy (DVC-cached); and, git-ignored and not DVC outputs, per stage
a ``<stage>.run.json`` with how that run went on this machine (timings, device, the config it
ran with), ``reports/recordings/``, a Rerun recording per policy (never the same bytes twice,
``elden_il.evaluation.evaluate``: DVC would see a new output on every run), and
``reports/finetune.rrd``, the fine-tuning run as it went, PC by PC (``elden_il.view.live_run``).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import signal
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm.contrib.logging import logging_redirect_tqdm

from env.common.cli import flag, parse_settings, run_command
from env.common.errors import DataError, EldenILError, Interrupted
from env.common.files import UnreadableFile, read_json
from env.common.staging import staged_folder, staged_paths
from env.config import EnvConfig

from elden_il.params import PipelineParams, load_params

log = logging.getLogger("elden_il.pipeline")

USER_RAW_DIR = Path("datasets/raw")


@dataclass(frozen=True)
class Workspace:
    """The folder the stages read and write: ``datasets/`` for ``dvc repro`` (the outputs
    ``dvc.yaml`` names), or another one where a study runs the pipeline's own stages with
    params of its own (``elden_il.studies.scaling``, ``elden_il.studies.corrections``)."""

    root: Path = Path("datasets")

    @property
    def demos(self) -> Path:
        """The demonstrations the ``demos`` stage records."""
        return self.root / "demos" / "sim"

    @property
    def minari(self) -> Path:
        """The Minari datasets' root."""
        return self.root / "minari"

    @property
    def models(self) -> Path:
        """A folder per policy: ``bc``, ``finetuned``."""
        return self.root / "models"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def live(self) -> Path:
        """DVCLive's training curves, a folder per training stage."""
        return self.reports / "live"

    @property
    def live_path_report(self) -> tuple[Path, Path]:
        """Where ``evaluate_live`` writes its evaluation over the live path, and its run report:
        kept in git beside the studies, as no ``dvc repro`` writes it."""
        folder = self.root / "studies" / "live_path"
        return folder / "eval.json", folder / "eval.run.json"

    def report(self, stage: str) -> tuple[Path, Path]:
        """Where ``stage`` writes its metrics, and the rest of its report (``write_report``)."""
        return self.reports / f"{stage}.json", self.reports / f"{stage}.run.json"


REPOSITORY_WORKSPACE = Workspace()
"""``dvc repro``'s workspace: what ``dvc.yaml``'s stages read and write."""
EVAL_REPORT = REPOSITORY_WORKSPACE.report("eval")[0]
"""The last evaluation of ``dvc repro``, which ``summary`` shows."""
RUN_ONLY = frozenset(
    {
        "config",
        "env_config",
        "id",
        "device",
        "checkout",
        "train_samples_per_second",
        "env_steps_per_second",
        "fights_per_minute",
        "fights_begun_again",
    }
)
"""Report keys, at any depth, that are not results: copies of params, the git commit the code
was at (``capture.provenance``) and timings of this run on this machine. They go to
``<stage>.run.json``, not the metrics DVC tracks: a metric that changes on every rerun (a speed)
or that repeats params.yaml or git would leave ``dvc.lock`` modified and widen ``dvc metrics
show`` for nothing."""


def write_json(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, whole or not at all (written beside it, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=2))
    os.replace(partial, path)


def split_report(report: dict) -> tuple[dict, dict]:
    """``report`` as (metrics, run): the ``RUN_ONLY`` keys at any depth in the second, at the
    same place; everything else in the first."""
    metrics: dict = {}
    run: dict = {}
    for key, value in report.items():
        if key in RUN_ONLY:
            run[key] = value
        elif isinstance(value, dict):
            metrics[key], inner = split_report(value)
            if inner:
                run[key] = inner
        else:
            metrics[key] = value
    return metrics, run


def write_report(report: dict, paths: tuple[Path, Path]) -> None:
    """The stage's metrics and the rest of its ``report`` into ``paths`` (``Workspace.report``, or
    where a stage builds them before swapping them in)."""
    metrics, run = split_report(report)
    metrics_path, run_path = paths
    write_json(metrics_path, metrics)
    write_json(run_path, run)


# --------------------------------------------------------------------------------------- stages
def stage_demos(params: PipelineParams, ws: Workspace = REPOSITORY_WORKSPACE) -> None:
    """Record the demonstrations into ``ws.demos``, swapped in whole once all are recorded: an
    interrupted run leaves the demonstrations of the last finished one."""
    demos = params.demos
    if demos.source == "raw":  # nothing to record, so nothing is replaced: not the expert's, not yours
        ws.demos.mkdir(parents=True, exist_ok=True)  # the stage's output (DVC's) exists, as it was or empty
        log.info(
            "demos.source is 'raw': nothing recorded; the dataset is built from your recordings in %s", demos.raw_dir
        )
        return
    check_only_the_experts(ws.demos)
    with staged_folder(ws.demos) as folder:
        from env.common.progress import progress

        from capture.record import record

        # the recording session params.yaml asks for, in the env it describes, into the staging folder
        session = replace(demos.record, env=params.env.replace(profile=f"sim_{demos.boss}"), out=folder)
        wanted = session.max_episodes
        try:
            with progress(total=wanted, desc="demonstrations", unit="fight") as bar:
                record(session, on_saved=lambda _: bar.update())
        except Interrupted as e:
            # fewer demonstrations than params ask for: the stage fails, so DVC records nothing as
            # done, and they are not put in place; a rerun records the same bytes again
            got = len(list(folder.glob("*.h5")))
            raise Interrupted(
                f"the demos stage was interrupted by {signal.Signals(e.signum).name} with {got} of the {wanted} "
                f"episodes demos.record.max_episodes asks for: it failed, and {ws.demos} is as it was before; run it "
                "again (`dvc repro`) to record them all",
                e.signum,
            ) from None


EXPERTS_FILES = ("_autopilot.h5", "_autopilot.mkv")
"""What the demos stage writes: the scripted expert's episodes and their videos."""


def check_only_the_experts(folder: Path) -> None:
    """Refuse to replace ``folder`` (the demos stage's output, replaced whole) where it holds
    anything the stage will not write again: a person's fights kept beside the demos cannot be
    recorded again, and would go with the folder."""
    if not folder.is_dir() or folder.is_symlink():  # a link is refused by the swap itself, naming it
        return
    others = sorted(p.name for p in folder.iterdir() if not (p.is_file() and p.name.endswith(EXPERTS_FILES)))
    if others:
        raise DataError(
            f"{folder} holds {len(others)} file(s) the demos stage does not write ({', '.join(others[:3])}"
            f"{', ...' if len(others) > 3 else ''}), and it replaces the folder whole with the expert's new "
            f"recordings: move your recordings to {USER_RAW_DIR} (demos.raw_dir) and run it again"
        )


def stage_dataset(params: PipelineParams, ws: Workspace = REPOSITORY_WORKSPACE) -> None:
    from capture.build_dataset import build_dataset
    from capture.provenance import provenance

    from elden_il.evaluation.teacher import teacher_record

    demos = params.demos
    raw = ws.demos if demos.source == "sim" else Path(demos.raw_dir or USER_RAW_DIR)
    name = params.dataset.id
    dataset = build_dataset(raw, name, params.env, root=ws.minari, force=True)
    built = json.loads((ws.minari / name / "build.json").read_text())
    player = demos.record.player if demos.source == "sim" else None
    report = {
        "episodes": dataset.total_episodes,
        "steps": dataset.total_steps,
        "id": name,
        "teacher": teacher_record(raw, built["source_episodes"], player),
        # the digest of the code that built it, as the dataset carries it: the committed report
        # says in git which code the committed dvc.lock's dataset came from (tests/test_dvc.py)
        "code": built["code"],
    }
    write_report({**report, "checkout": provenance().to_dict()}, ws.report("dataset"))


def stage_bc(params: PipelineParams, ws: Workspace = REPOSITORY_WORKSPACE) -> None:
    from elden_il.data import check_config, load_demonstrations
    from elden_il.policies.cpu_kernels import cpu_kernels
    from elden_il.training.bc import train_bc
    from elden_il.training.tracking import TrainingLog

    name = params.dataset.id
    demos = load_demonstrations(name, ws.minari)
    # BC trains for the env the dataset was built for (demos.config); params.yaml is read only to
    # refuse a dataset it no longer describes (a stage run by hand after editing it), which is
    # why dvc.yaml's bc stage declares the env params too. The profile and the
    # picture (the window size captured) are the recordings', which params.yaml leaves to them
    wanted = params.env.replace(profile=demos.config.profile, capture_size=demos.config.capture_size)
    check_config(
        demos.config, wanted, f"dataset {name!r}", "rebuild it with the params it should follow (`dvc repro dataset`)"
    )
    with TrainingLog(ws.live / "bc") as live:
        metrics = train_bc(demos, params.bc, ws.models / "bc", on_epoch=live.bc_epoch, size=params.network)
    # the kernels that decided the floats (`compare`: a changed CPU, or a changed result)
    write_report({**metrics, "cpu_kernels": cpu_kernels()}, ws.report("bc"))


def stage_finetune(params: PipelineParams, ws: Workspace = REPOSITORY_WORKSPACE) -> None:
    from elden_il.policies.cpu_kernels import cpu_kernels
    from elden_il.policies.policy import load_policy
    from elden_il.training.finetune import finetune
    from elden_il.training.tracking import TrainingLog

    bc = load_policy(ws.models / "bc")  # a folder a stopped bc stage left, or a policy of other spaces: one line
    with TrainingLog(ws.live / "finetune") as live:
        metrics = finetune(
            bc.path,
            params.finetune,
            bc.config,
            ws.models / "finetuned",
            on_episode=live.rl_episode,
            dataset=(params.dataset.id, ws.minari),
            watch_file=ws.reports / "finetune.rrd",
        )
    write_report({**metrics, "cpu_kernels": cpu_kernels()}, ws.report("finetune"))


def stage_evaluate(params: PipelineParams, ws: Workspace = REPOSITORY_WORKSPACE) -> None:
    from elden_il.evaluation.plots import comparison_chart, learning_curves
    from elden_il.evaluation.teacher import warn_if_far_below

    ev = params.evaluate
    parallel, workers = (ev.parallel, ev.workers) if ev.backend == "sim" else (1, 1)
    # every output built aside and swapped in together once all fights are played: an interrupted
    # evaluation leaves the last one's report, GIFs, plots and recordings as they were. Recordings
    # are not an output DVC clears: none is left of another run's policies
    outputs = ("gifs", "recordings", "plots", "eval.json", "eval.run.json", "eval_policies.csv")
    with staged_paths(*(ws.reports / name for name in outputs)) as (gifs, recordings, plots, report, run, table):
        results = judge_policies(
            ws,
            ev.seeds,
            ev.deterministic,
            ev.backend,
            game_speed=ev.game_speed,
            host=ev.host,
            parallel=parallel,
            workers=workers,
            gif_dir=gifs,
            recording_dir=recordings,
        )
        teacher = recorded_teacher(ws)
        evaluation = {"backend": ev.backend, "fights": ev.fights, "policies": results, **fine_tuning(ws)}
        write_report({**evaluation, "teacher": teacher} if teacher else evaluation, (report, run))
        write_policy_table(results, table)
        comparison_chart(results, plots / "comparison.png")
        learning_curves(
            ws.models / "bc" / "history.json",
            ws.models / "finetuned" / "learning_curve.json",
            plots / "learning_curves.png",
        )
    show_summary(path=ws.report("eval")[0])
    if "bc" in results and teacher:
        warn_if_far_below(results["bc"], teacher)


def fine_tuning(ws: Workspace) -> dict:
    """How the fine-tuned policy in ``ws`` was made, from its stage's report, for the results
    table to name it by (``{"finetuned_by": {"method", "env_steps", "envs"}}``); nothing where no
    finetune stage reported in ``ws`` (a study's evaluation of policies trained elsewhere)."""
    try:
        report = json.loads(ws.report("finetune")[0].read_text())
    except FileNotFoundError:
        return {}
    if not all(key in report for key in FINETUNED_BY):  # a stage's report from before it said so
        return {}
    return {"finetuned_by": {key: report[key] for key in FINETUNED_BY}}


def recorded_teacher(ws: Workspace) -> dict | None:
    """The teacher's row the dataset stage reported (``elden_il.evaluation.teacher``), or None where no
    dataset stage ran in ``ws`` (a study's evaluation of policies trained elsewhere) or one
    ran before the teacher was reported."""
    try:
        return json.loads(ws.report("dataset")[0].read_text()).get("teacher")
    except FileNotFoundError:
        return None


def stage_evaluate_live(params: PipelineParams, ws: Workspace = REPOSITORY_WORKSPACE) -> None:
    """The evaluate stage's policies over the live path (``params.evaluate_live``), into
    ``ws.live_path``: swapped in whole once every fight is played, as the evaluate stage's."""
    from elden_il.params import check_seed_range

    live, ev = params.evaluate_live, params.evaluate
    check_seed_range(ev.first_seed, live.fights, "evaluate.first_seed")
    seeds = list(range(ev.first_seed, ev.first_seed + live.fights))
    with staged_paths(*ws.live_path_report) as paths:
        results = judge_policies(
            ws,
            seeds,
            ev.deterministic,
            "sim_server",
            game_speed=live.game_speed,
            server_args=("--real-server",) if live.server == "real" else (),
            workers=live.workers,
        )
        report = {"backend": "sim_server", "server": live.server, "game_speed": live.game_speed, **fine_tuning(ws)}
        write_report({**report, "fights": live.fights, "policies": results}, paths)
    show_summary(path=ws.live_path_report[0])


def judge_policies(
    ws: Workspace,
    seeds: list[int],
    deterministic: bool,
    backend: str,
    *,
    game_speed: float = 1.0,
    host: str = "127.0.0.1:50051",
    server_args: tuple[str, ...] = (),
    parallel: int = 1,
    workers: int = 1,
    gif_dir: Path | None = None,
    recording_dir: Path | None = None,
) -> dict:
    """Random, BC, fine-tuned and (but against a real game) the scripted expert on ``seeds``, in
    the env the BC policy was trained for, over ``backend``: each policy's results by name."""
    from env.factory import make_env
    from env.sim.expert import ScriptedExpert

    from elden_il.data import check_config
    from elden_il.evaluation.evaluate import PolicyActor, evaluate
    from elden_il.evaluation.fight_loop import PlayerActor, RandomActor

    config = EnvConfig.load(ws.models / "bc")
    check_config(
        EnvConfig.load(ws.models / "finetuned"),
        config,
        "the fine-tuned policy",
        "fine-tune it again from this BC policy (`dvc repro finetune`)",
    )
    actors = {
        "random": RandomActor(),
        "bc": PolicyActor(ws.models / "bc", deterministic),
        "finetuned": PolicyActor(ws.models / "finetuned", deterministic),
    }
    if backend == "siphon":
        log.info("the scripted expert knows only the simulator's moves: not evaluated against a real game")
    else:
        actors["expert"] = PlayerActor("expert", config)

    played = config.replace(game_speed=game_speed)  # how the env runs, not which env: the policies' own

    def make():
        if backend == "siphon":
            return make_env(played, backend=backend, host=host, render_mode="rgb_array")
        # a simulator server runs in real time: paused while the policies think, so the live path is exact
        return make_env(
            played,
            backend=backend,
            server_args=server_args,
            state_attributes=ScriptedExpert.ATTRIBUTES,
            pause_between_steps=backend == "sim_server",
            render_mode="rgb_array",
        )

    return evaluate(
        actors, make, seeds, gif_dir=gif_dir, recording_dir=recording_dir, parallel=parallel, workers=workers
    )


POLICY_COLUMNS = (
    "policy",
    "win_rate",
    "win_rate_ci95_low",
    "win_rate_ci95_high",
    "boss_damage_dealt",
    "player_damage_taken",
    "episode_length",
    "episode_reward",
)


def write_policy_table(results: dict[str, dict], path: Path) -> None:
    """The evaluation, a row per policy, as CSV: what ``dvc plots`` draws as bars (it needs rows,
    and ``eval.json`` keys its results by policy) and what a spreadsheet opens."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, POLICY_COLUMNS, extrasaction="ignore")  # not the timings
        writer.writeheader()
        for name, r in results.items():
            low, high = r["win_rate_ci95"]
            writer.writerow({**r, "policy": name, "win_rate_ci95_low": low, "win_rate_ci95_high": high})


POLICY_NAMES = {"random": "random", "bc": "behaviour cloning", "expert": "scripted expert"}
"""How the results table names each evaluated policy but the fine-tuned one (``finetuned_name``)."""
FINETUNED_BY = ("method", "env_steps", "envs")
"""What an evaluation records of how its fine-tuned policy was made (the finetune stage's report)."""
METHOD_NAMES = {"ppo": "PPO + KL to BC", "awac": "AWAC"}


def finetuned_name(report: dict) -> str:
    """The fine-tuned policy's row name: its method and the env steps it took, from how many envs;
    plain "fine-tuned" where the evaluation does not record how (one from before it did)."""
    made = report.get("finetuned_by")
    if made is None:
        return "fine-tuned"
    envs = made["envs"]
    return f"fine-tuned ({METHOD_NAMES[made['method']]}, {made['env_steps']:,} steps of {envs} env{'s' * (envs != 1)})"


def policy_name(name: str, report: dict) -> str:
    return finetuned_name(report) if name == "finetuned" else POLICY_NAMES.get(name, name)


SUMMARY_COLUMNS = ("policy", "win rate", "95 % interval", "boss damage dealt", "damage taken", "episode length (steps)")
LIVE_COLUMNS = ("live: win rate", "live: 95 % interval")
"""Beside a policy's own win rate: the same policy's over the live path (``evaluate_live``)."""


LEARNED = ("bc", "finetuned")
"""The policies an experiment trains, and all the table shows of it: random and the expert learn nothing."""


MAX_REPORT_BYTES = 10_000_000
"""An eval.json is a few kilobytes; a larger file is no evaluation's and is not read."""
RESULT_NUMBERS = ("win_rate", "boss_damage_dealt", "player_damage_taken", "episode_length")


def load_report(path: Path) -> dict:
    """An evaluation's ``eval.json``, or one line saying the file is none: read within bounds
    (``read_json``), so a FIFO or a device given for it is refused, not waited on for ever."""
    if not (path.exists() or path.is_symlink()):
        raise EldenILError(f"no evaluation yet ({path}): run `dvc repro`")
    try:
        report = read_json(path, MAX_REPORT_BYTES)
    except UnreadableFile as e:
        raise EldenILError(
            f"{path} is not an evaluation's eval.json (it {e.reason}): give the datasets/reports/eval.json an "
            "evaluation wrote (a truncated copy cannot be read: copy it again)"
        ) from None
    problem = report_problem(report)
    if problem is not None:
        raise EldenILError(
            f"{path} is not an evaluation's eval.json ({problem}): give the datasets/reports/eval.json an "
            "evaluation wrote"
        )
    return report


def report_problem(report: Any) -> str | None:
    """What an evaluation's report lacks that the results table reads, or None."""
    if not isinstance(report, dict):
        return f"a {type(report).__name__}, not a mapping"
    if not isinstance(report.get("backend"), str) or not isinstance(report.get("fights"), int):
        return "no backend and fights"
    policies = report.get("policies")
    if not isinstance(policies, dict) or not policies:
        return "no policies"
    for name, result in policies.items():
        if not isinstance(result, dict):
            return f"policy {name!r} has no results"
        missing = [k for k in RESULT_NUMBERS if not isinstance(result.get(k), int | float)]
        interval = result.get("win_rate_ci95")
        if missing or not (isinstance(interval, list) and len(interval) == 2):
            return f"policy {name!r} lacks {', '.join(missing) or 'win_rate_ci95'}"
    if "teacher" in report and not is_teacher(report["teacher"]):
        return "a teacher without who, fights, win_rate and win_rate_ci95"
    if "finetuned_by" in report and not is_fine_tuning(report["finetuned_by"]):
        return f"a finetuned_by without {', '.join(FINETUNED_BY)} (a method of {', '.join(METHOD_NAMES)})"
    return None


def is_teacher(teacher: Any) -> bool:
    """Whether ``teacher`` is the teacher's row the dataset stage reports (``elden_il.evaluation.teacher``)."""
    return (
        isinstance(teacher, dict)
        and isinstance(teacher.get("who"), str)
        and isinstance(teacher.get("fights"), int)
        and isinstance(teacher.get("win_rate"), int | float)
        and isinstance(teacher.get("win_rate_ci95"), list)
        and len(teacher["win_rate_ci95"]) == 2
        and all(isinstance(bound, int | float) for bound in teacher["win_rate_ci95"])
    )


def is_fine_tuning(made: Any) -> bool:
    """Whether ``made`` is how a fine-tuned policy was made, as ``fine_tuning`` records it."""
    return (
        isinstance(made, dict)
        and made.get("method") in METHOD_NAMES
        and all(isinstance(made.get(key), int) and not isinstance(made.get(key), bool) for key in FINETUNED_BY[1:])
    )


def summary_rows(
    path: Path = EVAL_REPORT, experiments: dict[str, Path] | None = None, live: Path | None = None
) -> tuple[str, list[tuple[str, ...]]]:
    """The last evaluation (``path``) as a title and one row of text per policy, and its teacher's
    (who recorded the fights, ``elden_il.evaluation.teacher``); then, for each
    experiment (a label and its own ``eval.json``, played on the same fights), a row per learned
    policy, named with the label. With ``live`` (an ``evaluate_live`` report of the same
    policies), each policy's live win rate and interval beside its own."""
    report = load_report(path)
    judged_live = None
    if live is not None:
        live_report = load_report(live)
        if live_report.get("finetuned_by") != report.get("finetuned_by"):
            raise EldenILError(
                f"{live} judged a fine-tuned policy made otherwise ({live_report.get('finetuned_by', 'not recorded')}) "
                f"than {path}'s ({report.get('finetuned_by', 'not recorded')}): play these policies over the live path "
                "again (`python -m elden_il.pipeline evaluate_live`), or leave --live out"
            )
        judged_live = live_report["policies"]

    def beside(name: str) -> tuple[str, ...]:
        if judged_live is None:
            return ()
        return win_rate_cells(judged_live[name]) if name in judged_live else ("", "")

    rows = [policy_row(policy_name(name, report), r, beside(name)) for name, r in report["policies"].items()]
    if "teacher" in report:  # evaluations before the teacher was reported have none
        rows.append(teacher_row(report["teacher"], live is not None))
    for label, experiment_path in (experiments or {}).items():
        experiment = load_report(experiment_path)
        if (experiment["backend"], experiment["fights"]) != (report["backend"], report["fights"]):
            raise EldenILError(
                f"{experiment_path} played {experiment['fights']} fights on {experiment['backend']}, {path} "
                f"{report['fights']} on {report['backend']}: one table compares evaluations of the same fights"
            )
        rows += [
            policy_row(
                f"{policy_name(name, experiment)}, {label}", experiment["policies"][name], ("", "") if live else ()
            )
            for name in LEARNED
            if name in experiment["policies"]
        ]
    title = f"{report['fights']} fights per policy, same seeds ({report['backend']})"
    return title + (f"; live: {live_title(live_report)}" if live else ""), rows


def teacher_row(teacher: dict, live: bool) -> tuple[str, ...]:
    """The teacher's win rate over the fights recorded (no other column: they were not judged)."""
    from elden_il.evaluation.teacher import teacher_label

    return (teacher_label(teacher), *win_rate_cells(teacher), *(("", "") if live else ()), "", "", "")


def live_title(report: dict) -> str:
    """How an ``evaluate_live`` report played: ``50 fights, real-server mode, 3x``."""
    mode = {"real": "real-server mode", "ideal": "ideal server"}.get(report.get("server"), report["backend"])
    return f"{report['fights']} fights, {mode}, {report.get('game_speed', 1):g}x"


def win_rate_cells(r: dict) -> tuple[str, str]:
    low, high = r["win_rate_ci95"]
    return f"{r['win_rate']:.0%}", f"{low:.0%}-{high:.0%}"


def policy_row(name: str, r: dict, live: tuple[str, ...] = ()) -> tuple[str, ...]:
    return (
        name,
        *win_rate_cells(r),
        *live,
        f"{r['boss_damage_dealt']:.0%}",
        f"{r['player_damage_taken']:.0%}",
        f"{r['episode_length']:.0f}",
    )


def summary_columns(live: bool) -> tuple[str, ...]:
    return SUMMARY_COLUMNS[:3] + LIVE_COLUMNS + SUMMARY_COLUMNS[3:] if live else SUMMARY_COLUMNS


def markdown_summary(
    path: Path = EVAL_REPORT, experiments: dict[str, Path] | None = None, live: Path | None = None
) -> str:
    """The results table as Markdown: the README's, which a test holds equal to this."""
    _, rows = summary_rows(path, experiments, live)
    columns = summary_columns(live is not None)
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def show_summary(
    markdown: bool = False,
    experiments: dict[str, Path] | None = None,
    path: Path = EVAL_REPORT,
    live: Path | None = None,
) -> None:
    """The evaluation at ``path`` as one readable table (``dvc metrics show`` spreads it over
    dozens of columns), or as Markdown to paste."""
    if markdown:
        print(markdown_summary(path, experiments, live))
        return
    from rich.console import Console
    from rich.table import Table

    title, rows = summary_rows(path, experiments, live)
    table = Table(title=title)
    for column in summary_columns(live is not None):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def show_comparison(revision: str) -> int:
    """The verdict of ``elden_il.evaluation.reproduced.compare`` in one line: 0 where the run
    reproduced the committed one (its bytes, or only a changed CPU's), 1 where a result changed."""
    from elden_il.evaluation.reproduced import compare

    comparison = compare(revision)
    print(comparison.verdict())
    return 0 if comparison.reproduced else 1


def experiment(text: str) -> tuple[str, Path]:
    """``--experiment LABEL=PATH``."""
    label, separator, path = text.partition("=")
    if not (separator and label and path):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a label and an eval.json, as in '128x128 frames=path/eval.json'"
        )
    return label, Path(path)


STAGES = {
    "demos": stage_demos,
    "dataset": stage_dataset,
    "bc": stage_bc,
    "finetune": stage_finetune,
    "evaluate": stage_evaluate,
    "evaluate_live": stage_evaluate_live,
}
"""Each stage reads the whole tree (``load_params`` checks every section before any stage starts)
and works in a ``Workspace``."""


@dataclass(frozen=True)
class PipelineArgs:
    """What ``python -m elden_il.pipeline`` runs: a stage with params.yaml, or the summary."""

    stage: str = field(
        metadata=flag(
            "a stage; summary: the last evaluation as a table; compare: whether the run in this checkout "
            "reproduced the committed one (the same bytes, a changed CPU, or a changed result: exit 1)",
            positional=True,
            choices=(*STAGES, "summary", "compare"),
        )
    )
    params: Path = field(default=Path("params.yaml"), metadata=flag("the pipeline's params", type=Path))
    markdown: bool = field(default=False, metadata=flag("summary: as the Markdown table the README shows"))
    report: Path = field(
        default=EVAL_REPORT,
        metadata=flag(
            "summary: the evaluation to show (another boss's run, kept as datasets/studies/bosses/<boss>/eval.json)",
            type=Path,
            metavar="EVAL_JSON",
        ),
    )
    experiment: tuple[tuple[str, Path], ...] = field(
        default=(),
        metadata=flag(
            "summary: add the learned policies of another evaluation of the same fights (a `dvc exp run`'s "
            "datasets/reports/eval.json, kept under datasets/studies/), named with LABEL; repeatable",
            type=experiment,
            action="append",
            metavar="LABEL=EVAL_JSON",
        ),
    )
    live: Path | None = field(
        default=None,
        metadata=flag(
            "summary: each policy's win rate over the live path beside its own (evaluate_live's report, "
            f"{REPOSITORY_WORKSPACE.live_path_report[0]})",
            type=Path,
            metavar="EVAL_JSON",
        ),
    )
    against: str = field(
        default="HEAD",
        metadata=flag("compare: the git revision whose committed run this one is compared with", metavar="REV"),
    )


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m elden_il.pipeline", __doc__, PipelineArgs, argv=argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.stage == "summary":
        return run_command(lambda: show_summary(args.markdown, dict(args.experiment), args.report, args.live))
    if args.stage == "compare":
        return run_command(lambda: show_comparison(args.against))
    # torch's threads wait for work asleep, not spinning, set before a stage imports torch: on a
    # machine whose cores other work keeps busy, spinning threads made a training step several
    # times slower than one thread (BENCHMARKS.md, the default pipeline's time)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with logging_redirect_tqdm():  # the log's lines above the stage's progress bar, not through it
        return run_command(lambda: STAGES[args.stage](load_params(args.params), REPOSITORY_WORKSPACE))


if __name__ == "__main__":
    raise SystemExit(main())
