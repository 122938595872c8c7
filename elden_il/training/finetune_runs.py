"""Several fine-tuning runs from one BC policy, side by side, acting as one policy.

Where a PPO run ends depends on its seed by 10-20 points of win rate, and a single update late in
a run can undo what it had learnt (elden_il/studies/STUDIES.md, "Several runs as one policy"): the policy a run ends with is a draw. The
fights each run's policy loses differ, though, so the runs together, their log-probabilities
averaged (``elden_il.policies.policy.PolicyEnsemble``), win more often than any one of them.
Each run trains in a process of its own with one torch thread: with as many cores as runs, they
cost about the wall time of one, and a run's result does not depend on how many cores the
machine has.

The processes are this module's own, not a pool's: a pool waits for its running tasks when the
main process is interrupted (minutes of training nobody wants), and its worker outlives a main
process killed outright. Here an interrupt ends every run at once, and a run whose main process
is gone ends itself.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from env.common import interrupts
from env.common.progress import progress
from env.common.staging import staged_paths
from env.config import EnvConfig

from elden_il.params import FinetuneConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Run:
    train_one: Callable[..., dict]
    bc_policy_path: Path
    config: FinetuneConfig
    env_config: EnvConfig
    out: Path
    dataset: tuple[str, Path] | None = None
    index: int = 0


PARENT_CHECK_S = 1.0
"""How often a run's process looks for the main process that started it."""
POLL_S = 0.5
"""How often the main process looks at the runs (and updates the bars)."""

_steps = None  # in a run's process: the shared count of env steps all runs took


def _run_process(run: _Run, steps, results) -> None:
    """A run's process: the run, its result (or its error) put on ``results``. Ctrl-C reaches
    every process of the terminal's group; the main process alone decides what it stops."""
    global _steps
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _steps = steps
    threading.Thread(target=_end_with_parent, daemon=True).start()
    try:
        results.put((run.config.seed, _train(run), None))
    except Exception as e:  # the main process raises it, with its own message
        results.put((run.config.seed, None, e))


def _end_with_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    while parent.is_alive():
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


def _count_steps(count: int) -> None:
    """Adds env steps of this run to the count the main process shows."""
    with _steps.get_lock():
        _steps.value += count


def _train(run: _Run) -> dict:
    """One run in its own process, fine-tuned into ``run.out`` with one torch thread."""
    import torch

    torch.set_num_threads(1)
    metrics = run.train_one(
        run.bc_policy_path,
        run.config,
        run.env_config,
        run.out,
        progress_bar=False,
        on_steps=_count_steps,
        dataset=run.dataset,
        run=run.index,
    )
    return {**metrics, "seed": run.config.seed}


def _run_all(runs: list[_Run], workers: int, context, steps, show: Callable[[], None]) -> list[dict]:
    """Every run's result, in the order of ``runs``, ``workers`` processes at a time; ``show``
    is called twice a second. A run's error is raised here; any exit (an interrupt included, one
    a library swallowed too) ends the processes still running."""
    queue = context.SimpleQueue()
    waiting, running, done = list(runs), {}, {}

    def collect() -> None:
        while not queue.empty():
            seed, result, error = queue.get()
            if error is not None:
                raise error
            done[seed] = result

    try:
        while waiting or running:
            while waiting and len(running) < workers:
                run = waiting.pop(0)
                process = context.Process(target=_run_process, args=(run, steps, queue), name=f"run-{run.config.seed}")
                # a signal mid-start would cut the pickled run it hands the new process in half:
                # that process would die with a traceback of its own, and escape the clean-up below
                with interrupts.deferred():
                    process.start()
                    running[run.config.seed] = process
            time.sleep(POLL_S)
            interrupts.check()  # a Ctrl-C some library swallowed: the runs end now, not once trained
            collect()
            for seed, process in list(running.items()):
                if not process.is_alive():
                    process.join()
                    collect()  # what it put just before it ended
                    if seed not in done:
                        raise RuntimeError(
                            f"the fine-tuning run of seed {seed} ended without a result (exit code {process.exitcode})"
                        )
                    del running[seed]
            show()
    finally:
        for process in running.values():
            process.terminate()
            process.join()
    return [done[run.config.seed] for run in runs]


def finetune_runs(
    train_one: Callable[..., dict],
    bc_policy_path: Path,
    config: FinetuneConfig,
    env_config: EnvConfig,
    out: Path,
    on_episode: Callable[[dict], None] | None = None,
    dataset: tuple[str, Path] | None = None,
) -> dict:
    """``config.runs`` fine-tuning runs (training seeds ``config.seed`` counting up), each trained
    by ``train_one`` (``elden_il.training.finetune.finetune_once``, passed in by ``finetune``) from the BC
    policy's network for its place (an ensemble's members in turn, ``elden_il.policies.policy.member``);
    the policies they end with are saved in ``out`` as one ``PolicyEnsemble``, beside the first
    run's curves, swapped in whole once all are done: an interrupted run leaves the previous
    policy, and a killed one a staging folder the next run clears (``env.common.staging``).
    ``on_episode`` gets the first run's learning-curve rows, in order, once all are done."""
    from elden_il.policies.policy import PolicyEnsemble, load_policy, save_policy

    seeds = [config.seed + i for i in range(config.runs)]
    workers = min(config.runs, os.cpu_count() or 1)
    context = multiprocessing.get_context("spawn")  # torch and gRPC in the parent: never fork them
    steps = context.Value("q", 0)
    started = time.perf_counter()
    # every run inside the ensemble's staging folder: one a killed run left is cleared by the next
    with staged_paths(out) as (built,):
        runs = [
            _Run(
                train_one,
                bc_policy_path,
                replace(config, seed=seed, runs=1),
                env_config,
                built.parent / f"run-seed-{seed}",
                dataset,
                index,
            )
            for index, seed in enumerate(seeds)
        ]
        log.info("fine-tuning %d runs (seeds %s), %d at a time, to act as one policy", len(runs), seeds, workers)
        with progress(total=len(runs) * config.total_steps, desc="fine-tuning", unit="step") as trained:
            results = _run_all(
                runs, workers, context, steps, lambda: trained.update(min(steps.value, trained.total) - trained.n)
            )
        first = runs[0].out
        ensemble = PolicyEnsemble([load_policy(run.out, device="cpu").policy for run in runs])
        save_policy(ensemble, env_config, built)
        for curve in ("learning_curve.json", "updates.json"):
            shutil.copyfile(first / curve, built / curve)
    if on_episode is not None:
        for row in json.loads((out / "learning_curve.json").read_text()):
            on_episode(row)
    seconds = time.perf_counter() - started
    return {
        "method": config.method,
        "timesteps": results[0]["timesteps"],
        "env_steps": sum(r["env_steps"] for r in results),
        "envs": sum(r["envs"] for r in results),
        "env_steps_per_second": sum(r["timesteps"] for r in results) / seconds,
        "episodes": sum(r["episodes"] for r in results),
        "train_win_rate_last_50": sum(r["train_win_rate_last_50"] for r in results) / len(results),
        "runs": [{key: r[key] for key in ("seed", "timesteps", "episodes", "train_win_rate_last_50")} for r in results],
        "config": asdict(config),
    }
