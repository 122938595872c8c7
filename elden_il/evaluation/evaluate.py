"""Evaluation: every policy fights the same held-out seeds in the same env.

Random, behaviour-cloned, fine-tuned and the scripted expert are run for the same seeds through
the shared fight loop (``elden_il.evaluation.fight_loop``), in the in-process simulator, through a simulator server
over gRPC (the live path), or against a real Siphon host; spread over a Ray cluster when
``RAY_ADDRESS`` is set (``elden_il.fanout``), with the same results. Reported per policy: win rate
with a 95 % Wilson interval, boss damage dealt, damage taken and episode length, plus how many
fights a minute the evaluation ran. Each policy's first fight is kept for people to watch: a GIF,
and a Rerun recording of its steps (``python -m elden_il.view <name>.rrd``). The GIF is the same
bytes on every run; the recording cannot be: Rerun stamps every row, chunk and file it writes
with an id taken from the wall clock and chunks rows by the time they were logged.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from env.common.progress import progress
from env.elden_env import EldenRingEnv

from elden_il.evaluation.fight_loop import Actor, FightTape, play_many, summarize

log = logging.getLogger(__name__)


class PolicyActor(Actor):
    """A saved policy (its folder, read by ``load_policy``) playing its fights."""

    def __init__(self, path: Path, deterministic: bool) -> None:
        from elden_il.policies.policy import load_policy

        self.loaded = load_policy(path)
        self.deterministic = deterministic

    def act(self, observations, envs, slots):
        return self.loaded.act(observations, self.deterministic)


def evaluate(
    actors: dict[str, Actor],
    make_env: Callable[[], EldenRingEnv],
    seeds: list[int],
    gif_dir: Path | None = None,
    recording_dir: Path | None = None,
    parallel: int = 8,
    workers: int = 1,
) -> dict:
    """Each actor's fights over ``seeds``, summarized by actor name; with ``gif_dir`` and
    ``recording_dir``, its first fight as ``<name>.gif`` and ``<name>.rrd`` there. Every actor's
    fights in one go, over ``workers`` processes of this machine when more than one
    (``elden_il.evaluation.fight_loop.play_many``: the same records); a progress bar counts them (on a terminal)."""
    results = {}
    record_first = gif_dir is not None or recording_dir is not None
    with progress(total=len(actors) * len(seeds), desc="evaluation", unit="fight") as bar:
        played = play_many(
            [(make_env, actor, seeds) for actor in actors.values()],
            parallel,
            record_first,
            on_fight=lambda _: bar.update(),
            workers=workers,
        )
    for (name, actor), fights in zip(actors.items(), played):
        results[name] = summarize(fights.records, fights.seconds)  # fights a minute, per process
        log.info("%s: %s", name, results[name])
        tape = fights.tape
        if tape is None or not tape.frames:
            continue
        if gif_dir is not None:
            write_gif(tape.frames, gif_dir / f"{name}.gif")
        if recording_dir is not None:
            write_recording(tape, name, actor, recording_dir / f"{name}.rrd")
    return results


def write_recording(tape: FightTape, name: str, actor: Actor, path: Path) -> None:
    """The first fight as a Rerun recording (``elden_il.view.steps``): the picture, the observation
    and action of every step, its reward, and for a saved policy its action probabilities. Left
    out, with a warning, where rerun-sdk (the ``view`` extra) is not installed."""
    if importlib.util.find_spec("rerun") is None:
        log.warning("no %s: rerun-sdk is not installed (`pip install -e '.[view]'`)", path.name)
        return
    from env.profile import load_profile

    from elden_il.view.steps import STEP, TIME, StepView, log_policy, log_steps
    from elden_il.view.viewer import recording, rerun

    config = tape.config
    rows = np.arange(len(tape.actions))
    observations = {key: np.stack([o[key] for o in tape.observations]) for key in tape.observations[0]}
    view = StepView(
        time_s=rows * config.timestep_ms / 1000.0,
        observations=observations,
        actions=np.asarray(tape.actions),
        rewards=np.asarray(tape.rewards),
        action_names=config.actions(load_profile(config.profile)).names,
        discrete=config.action_mode == "discrete",
    )
    rr = rerun()
    with recording(f"{name}: seed {tape.seed}", save=path) as stream:
        for k, frame in enumerate(tape.frames):  # render() after each step: the picture a person watches
            stream.set_time(STEP, sequence=k)
            stream.set_time(TIME, duration=float(view.time_s[k]))
            stream.log("render", rr.Image(frame))
        stream.reset_time()
        log_steps(rr, stream, view)
        if isinstance(actor, PolicyActor):
            log_policy(rr, stream, view, actor.loaded.probabilities(observations), name)


def write_gif(frames: list[np.ndarray], path: Path, width: int = 320, every: int = 1) -> None:
    """The rendered frames (``render_mode="rgb_array"``) as a GIF ``width`` pixels wide."""
    from PIL import Image

    from env.game import scaled

    path.parent.mkdir(parents=True, exist_ok=True)
    height, frame_width = frames[0].shape[:2]
    size = (width, max(1, round(height * width / frame_width)))
    images = [Image.fromarray(scaled(f, size)) for f in frames[::every]]
    images[0].save(path, save_all=True, append_images=images[1:], duration=200, loop=0)
