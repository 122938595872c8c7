"""Several fine-tuning runs from one BC policy, side by side, each judged on validation fights
along the way and at its end, and the policy that wins most kept.

Where a PPO run ends depends on its seed by 10-20 points of win rate, and a single update late in
a run can undo what it had learnt (BENCHMARKS.md): the judged policy is deterministic, so the
policy a run ends with is a draw. Fights of their own (``validation_seeds``: apart from the
demonstrations', training's and the evaluation's) tell the policies apart as the held-out fights
would, without the evaluation's fights deciding anything. Each run plays in a process of its own
with one torch thread: with as many cores as runs, they cost about the wall time of one, and a
run's result does not depend on how many cores the machine has.

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

from stable_baselines3.common.callbacks import BaseCallback
from tqdm import tqdm

from env.common import interrupts
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
POLL_S = 0.5
"""How often the main process looks at the runs (and updates the bars)."""

_steps = None  # in a run's process: the shared count of env steps all runs took
_fights = None  # and of validation fights played


def _run_process(run: _Run, steps, fights, results) -> None:
    """A run's process: the run, its result (or its error) put on ``results``. Ctrl-C reaches
    every process of the terminal's group; the main process alone decides what it stops."""
    global _steps, _fights
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _steps, _fights = steps, fights
    threading.Thread(target=_end_with_parent, daemon=True).start()
    try:
        results.put((run.config.seed, _train_and_judge(run), None))
    except Exception as e:  # the main process raises it, with its own message
        results.put((run.config.seed, None, e))


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


class PolicyCheckpoints(BaseCallback):
    """Saves the policy (``save_policy``) as ``folder/step-N`` at each update boundary ``steps``
    names (``rollout_starts``): the policy the rollout starting there is collected with."""

    def __init__(self, steps: list[int], env_config: EnvConfig, folder: Path) -> None:
        super().__init__()
        self.steps, self.env_config, self.folder = set(steps), env_config, folder

    def _on_rollout_start(self) -> None:
        from elden_il.policy import save_policy

        if self.num_timesteps in self.steps:
            save_policy(self.model.policy, self.env_config, self.folder / f"step-{self.num_timesteps:07d}")

    def _on_step(self) -> bool:
        return True


def rollout_starts(config: FinetuneConfig, due: range) -> list[int]:
    """The update boundaries a run of ``config`` passes first at or after each step of ``due``
    (SB3 runs whole rollouts of ``n_steps`` per env); none before its first update, none at its end.
    Its envs are the in-process simulator's ``num_envs``: what validation and the benchmarks train on."""
    rollout = config.n_steps * config.num_envs
    end = -(-config.total_steps // rollout) * rollout
    return sorted({-(-max(step, 1) // rollout) * rollout for step in due if step < end} - {end})


def judged_steps(config: FinetuneConfig) -> list[int]:
    """Where a run's policy is judged besides its end: every ``validation_every`` steps from
    ``validation_from``, at the update boundary that follows."""
    if not config.validation_every:
        return []
    return rollout_starts(config, range(config.validation_from, config.total_steps, config.validation_every))


def _train_and_judge(run: _Run) -> dict:
    """One run in its own process: fine-tuned into ``run.out``, its policy saved at each of
    ``judged_steps`` beside it, then each of them and the one it ended with judged on the
    validation fights with its most likely actions (as the evaluation judges)."""
    import torch

    from env.factory import make_env

    from elden_il.evaluate import PolicyActor
    from elden_il.fights import play_many

    torch.set_num_threads(1)
    checkpoints = run.out.with_name(f"{run.out.name}-checkpoints")
    callbacks = [_CountSteps(), PolicyCheckpoints(judged_steps(run.config), run.env_config, checkpoints)]
    metrics = run.train_one(
        run.bc_policy_path, run.config, run.env_config, run.out, callbacks=callbacks, progress_bar=False
    )
    policies = {int(p.name.removeprefix("step-")): p for p in sorted(checkpoints.glob("step-*"))}
    policies[metrics["timesteps"]] = run.out

    def make():
        return make_env(run.env_config, backend="sim")

    seeds = run.config.validation_seeds
    played = play_many([(make, PolicyActor(path, True), seeds) for path in policies.values()], on_fight=_count_fight)
    judged = [
        {"timesteps": step, "validation_wins": sum(r.win for r in fights.records), "path": str(path)}
        for (step, path), fights in zip(policies.items(), played)
    ]
    return {**metrics, "seed": run.config.seed, "judged": judged}


def _run_all(runs: list[_Run], workers: int, context, steps, fights, show: Callable[[], None]) -> list[dict]:
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
                process = context.Process(
                    target=_run_process, args=(run, steps, fights, queue), name=f"run-{run.config.seed}"
                )
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


def kept_policy(results: list[dict]) -> tuple[dict, dict]:
    """The run and the judged policy of it that won most validation fights; of equals, the lowest
    seed's, then the earliest, the nearest its teacher (the same choice on every machine and in
    every order the runs finish)."""
    return max(
        ((run, judged) for run in results for judged in run["judged"]),
        key=lambda pair: (pair[1]["validation_wins"], -pair[0]["seed"], -pair[1]["timesteps"]),
    )


def finetune_runs(
    train_one: Callable[..., dict],
    bc_policy_path: Path,
    config: FinetuneConfig,
    env_config: EnvConfig,
    out: Path,
    on_episode: Callable[[dict], None] | None = None,
) -> dict:
    """``config.runs`` fine-tuning runs (training seeds ``config.seed`` counting up), each trained
    by ``train_one`` (``elden_il.finetune.finetune_once``, passed in by ``finetune``), its policy
    judged on ``config.validation_fights`` fights at each of ``judged_steps`` and at its end; the
    policy with most wins is saved in ``out`` with its run's curves, swapped in whole once all are
    done: an interrupted choice leaves the previous policy, and a killed one a staging folder the
    next run clears (``capture.staging``). ``on_episode`` gets the kept run's learning-curve rows,
    in order, once it is chosen."""
    seeds = [config.seed + i for i in range(config.runs)]
    workers = min(config.runs, os.cpu_count() or 1)
    context = multiprocessing.get_context("spawn")  # torch and gRPC in the parent: never fork them
    steps, fights = context.Value("q", 0), context.Value("q", 0)
    judged_per_run = len(judged_steps(config)) + 1
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
            "fine-tuning %d runs (seeds %s), %d at a time, %d policies of each judged on %d validation fights",
            len(runs),
            seeds,
            workers,
            judged_per_run,
            config.validation_fights,
        )
        with (
            tqdm(total=len(runs) * config.total_steps, desc="fine-tuning", unit="step", disable=None) as trained,
            tqdm(
                total=len(runs) * judged_per_run * config.validation_fights,
                desc="validation",
                unit="fight",
                disable=None,
            ) as judged,
        ):

            def show() -> None:
                trained.update(min(steps.value, trained.total) - trained.n)
                judged.update(fights.value - judged.n)

            results = _run_all(runs, workers, context, steps, fights, show)
        run, policy = kept_policy(results)
        log.info(
            "kept the policy of seed %d at step %d (%d of %d validation fights won)",
            run["seed"],
            policy["timesteps"],
            policy["validation_wins"],
            config.validation_fights,
        )
        kept = runs[seeds.index(run["seed"])].out
        if Path(policy["path"]) != kept:  # a policy from along the run: in place of the one it ended with
            for file in Path(policy["path"]).iterdir():
                shutil.copyfile(file, kept / file.name)
        shutil.move(kept, built)
    if on_episode is not None:
        for row in json.loads((out / "learning_curve.json").read_text()):
            on_episode(row)
    seconds = time.perf_counter() - started
    return {
        "timesteps": run["timesteps"],
        "env_steps_per_second": sum(r["timesteps"] for r in results) / seconds,
        "episodes": run["episodes"],
        "train_win_rate_last_50": run["train_win_rate_last_50"],
        "kept_seed": run["seed"],
        "kept_timesteps": policy["timesteps"],
        "runs": [
            {
                "seed": r["seed"],
                "validation_win_rates": {
                    str(j["timesteps"]): j["validation_wins"] / config.validation_fights for j in r["judged"]
                },
                **{key: r[key] for key in ("train_win_rate_last_50", "episodes")},
            }
            for r in results
        ],
        "config": asdict(config),
    }
