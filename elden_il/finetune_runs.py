"""Several fine-tuning runs from one BC policy, side by side, and the one that wins most
validation fights kept.

Where a PPO run ends depends on its seed by tens of points of win rate (BENCHMARKS.md), and the
judged policy is deterministic, so a run is a draw. Fights of their own (``validation_seeds``:
apart from the demonstrations', training's and the evaluation's) tell the runs apart as the
held-out fights would, without the evaluation's fights deciding anything. Each run plays in a
process of its own with one torch thread: with as many cores as runs, they cost the wall time
of one, and a run's result does not depend on how many cores the machine has.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from stable_baselines3.common.callbacks import BaseCallback
from tqdm import tqdm

from env.config import EnvConfig

from capture.staging import staged_paths

from elden_il.params import FinetuneConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Run:
    train_one: Callable[..., dict]
    bc_policy_path: Path
    config: FinetuneConfig
    env_config: EnvConfig
    out: Path


PARENT_CHECK_S = 1.0
"""How often a run's process looks for the main process that started it."""

_steps = None  # the run's process: the shared count of env steps all runs took
_fights = None  # and of validation fights played


def _start_run_process(steps, fights) -> None:
    """A run's process: the shared counts, and an end when the main process ends. A pool's
    worker outlives a main process killed outright (SIGTERM, SIGKILL, a closed terminal) and
    would train on for minutes, holding a core nobody asked for."""
    global _steps, _fights
    _steps, _fights = steps, fights
    threading.Thread(target=_end_with_parent, daemon=True).start()


def _end_with_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    while parent.is_alive():
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


class _CountSteps(BaseCallback):
    """Adds each env step of this run to the count the main process shows."""

    def _on_step(self) -> bool:
        with _steps.get_lock():
            _steps.value += self.training_env.num_envs
        return True


def _count_fight(_record) -> None:
    with _fights.get_lock():
        _fights.value += 1


def _train_and_judge(run: _Run) -> dict:
    """One run in its own process: fine-tuned into ``run.out``, then judged on the validation
    fights with its most likely actions (as the evaluation judges)."""
    import torch

    from env.factory import make_env

    from elden_il.evaluate import PolicyActor
    from elden_il.fights import play_fights

    torch.set_num_threads(1)
    metrics = run.train_one(
        run.bc_policy_path, run.config, run.env_config, run.out, callbacks=[_CountSteps()], progress_bar=False
    )
    seeds = run.config.validation_seeds
    records, _ = play_fights(
        lambda: make_env(run.env_config, backend="sim"), PolicyActor(run.out, True), seeds, on_fight=_count_fight
    )
    wins = sum(r.win for r in records)
    return {**metrics, "seed": run.config.seed, "validation_wins": wins, "validation_win_rate": wins / len(seeds)}


def kept_run(results: list[dict]) -> dict:
    """The run that won most validation fights; of equals, the lowest seed (the same choice on
    every machine and every order the runs finish in)."""
    return max(results, key=lambda r: (r["validation_wins"], -r["seed"]))


def finetune_runs(
    train_one: Callable[..., dict],
    bc_policy_path: Path,
    config: FinetuneConfig,
    env_config: EnvConfig,
    out: Path,
    on_episode: Callable[[dict], None] | None = None,
) -> dict:
    """``config.runs`` fine-tuning runs (training seeds ``config.seed`` counting up), each trained
    by ``train_one`` (``elden_il.finetune.finetune_once``, passed in by ``finetune``) and judged
    on ``config.validation_fights`` fights; the one with most wins (the lower seed on a tie) is
    saved in ``out``, swapped in whole once all are done: an interrupted choice leaves the
    previous policy, and a killed one a staging folder the next run clears (``capture.staging``). ``on_episode`` gets the kept run's learning-curve rows, in order."""
    seeds = [config.seed + i for i in range(config.runs)]
    workers = min(config.runs, os.cpu_count() or 1)
    context = multiprocessing.get_context("spawn")  # torch and gRPC in the parent: never fork them
    steps, fights = context.Value("q", 0), context.Value("q", 0)
    started = time.perf_counter()
    # every run inside the kept policy's staging folder: one a killed run left is cleared by the next
    with staged_paths(out) as (built,):
        runs = [
            _Run(
                train_one,
                bc_policy_path,
                replace(config, seed=seed, runs=1),
                env_config,
                built.parent / f"run-seed-{seed}",
            )
            for seed in seeds
        ]
        log.info(
            "fine-tuning %d runs (seeds %s), %d at a time, each judged on %d validation fights",
            len(runs),
            seeds,
            workers,
            config.validation_fights,
        )
        with (
            ProcessPoolExecutor(workers, context, _start_run_process, (steps, fights)) as pool,
            tqdm(total=len(runs) * config.total_steps, desc="fine-tuning", unit="step", disable=None) as trained,
            tqdm(total=len(runs) * config.validation_fights, desc="validation", unit="fight", disable=None) as judged,
        ):
            futures = [pool.submit(_train_and_judge, run) for run in runs]
            pending = futures
            while pending:
                _, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
                trained.update(min(steps.value, trained.total) - trained.n)
                judged.update(fights.value - judged.n)
                if any(f.done() and f.exception() is not None for f in futures):
                    break
            results = [f.result() for f in futures]  # a run's error, raised here with its own message
        kept = kept_run(results)
        log.info(
            "kept the run of seed %d: %s",
            kept["seed"],
            ", ".join(f"seed {r['seed']} won {r['validation_wins']} of {config.validation_fights}" for r in results),
        )
        shutil.move(runs[seeds.index(kept["seed"])].out, built)
    if on_episode is not None:
        for row in json.loads((out / "learning_curve.json").read_text()):
            on_episode(row)
    seconds = time.perf_counter() - started
    return {
        "timesteps": kept["timesteps"],
        "env_steps_per_second": sum(r["timesteps"] for r in results) / seconds,
        "episodes": kept["episodes"],
        "train_win_rate_last_50": kept["train_win_rate_last_50"],
        "kept_seed": kept["seed"],
        "runs": [
            {key: r[key] for key in ("seed", "validation_win_rate", "train_win_rate_last_50", "episodes")}
            for r in results
        ],
        "config": asdict(config),
    }
