"""Evaluation: every policy fights the same held-out seeds in the same env.

Random, behaviour-cloned, fine-tuned and the scripted expert are run for the same seeds through
the shared fight loop (``env.play``), in the in-process simulator, through a simulator server
over gRPC (the live path), or against a real Siphon host; spread over a Ray cluster when
``RAY_ADDRESS`` is set (``env.fanout``), with the same results. Reported per policy: win rate
with a 95 % Wilson interval, boss damage dealt, damage taken and episode length, plus how many
fights a minute the evaluation ran.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from env.elden_env import EldenRingEnv
from env.fanout import play_fights
from env.play import Actor, summarize

log = logging.getLogger(__name__)


class PolicyActor(Actor):
    """A saved policy (either of SB3's formats, see ``load_policy``) playing its fights."""

    def __init__(self, path: Path, deterministic: bool) -> None:
        from elden_il.policy import load_policy

        self.policy = load_policy(path).policy
        self.deterministic = deterministic

    def act(self, observations, envs, slots):
        batch = {k: np.stack([o[k] for o in observations]) for k in observations[0]}
        actions, _ = self.policy.predict(batch, deterministic=self.deterministic)
        return list(actions)


def evaluate(
    actors: dict[str, Actor], make_env: Callable[[], EldenRingEnv], seeds: list[int],
    gif_dir: Path | None = None, parallel: int = 8,
) -> dict:
    results = {}
    for name, actor in actors.items():
        started = time.perf_counter()
        records, frames = play_fights(make_env, actor, seeds, parallel, record_first=gif_dir is not None)
        results[name] = summarize(records, time.perf_counter() - started)
        log.info("%s: %s", name, results[name])
        if gif_dir is not None and frames:
            write_gif(frames, gif_dir / f"{name}.gif")
    return results


def write_gif(frames: list[np.ndarray], path: Path, width: int = 320, every: int = 1) -> None:
    """The rendered frames (``render_mode="rgb_array"``) as a GIF ``width`` pixels wide."""
    from PIL import Image

    from env.game import scaled

    path.parent.mkdir(parents=True, exist_ok=True)
    height, frame_width = frames[0].shape[:2]
    size = (width, max(1, round(height * width / frame_width)))
    images = [Image.fromarray(scaled(f, size)) for f in frames[::every]]
    images[0].save(path, save_all=True, append_images=images[1:], duration=200, loop=0)
