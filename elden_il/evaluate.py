"""Evaluation: every policy fights the same held-out seeds in the same env.

Random, behaviour-cloned, fine-tuned and the scripted expert are run for the same seeds, in the
in-process simulator, through a simulator server over gRPC (the live path), or against a real
Siphon host. Reported per policy: win rate with a 95 % Wilson interval, boss damage dealt,
damage taken and episode length, plus how many fights a minute the evaluation ran.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from env.actions import DiscreteActions
from env.elden_env import EldenRingEnv
from env.sim.expert import ScriptedExpert

log = logging.getLogger(__name__)

Act = Callable[[dict, EldenRingEnv], object]


def wilson_interval(wins: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % confidence interval of a win rate (Wilson score: sane at 0 % and 100 %)."""
    if n == 0:
        return (0.0, 0.0)
    p = wins / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class FightRecord:
    seed: int
    win: bool
    boss_damage_dealt: float
    player_damage_taken: float
    length: int
    episode_reward: float


def random_actor(seed: int) -> Act:
    rng = np.random.default_rng(seed)

    def act(obs: dict, env: EldenRingEnv):
        space = env.action_space
        if hasattr(space, "n"):
            return int(rng.integers(space.n))
        return rng.integers(0, 2, space.shape).astype(np.int8)

    return act


def expert_actor() -> Act:
    """The scripted expert through the env: its named action, as an index or as held keys."""
    expert = ScriptedExpert()
    tables: dict[int, DiscreteActions] = {}

    def act(obs: dict, env: EldenRingEnv):
        base = env.unwrapped
        if base.state is not None and base._steps == 0:
            expert.reset()
        table = tables.setdefault(id(base), DiscreteActions(base.profile))
        index = table.index(expert.act(base.state))
        if base.action_mode == "discrete":
            return index
        command = table.command(index)
        keys = command.hold | set(command.tap)
        return np.array([base.profile.keybinds[b] in keys for b in base._buttons], np.int8)

    return act


def policy_actor(path: Path, deterministic: bool) -> Act:
    from stable_baselines3.common.policies import ActorCriticPolicy

    policy = ActorCriticPolicy.load(str(path))
    policy.set_training_mode(False)

    def act(obs: dict, env: EldenRingEnv):
        action, _ = policy.predict(obs, deterministic=deterministic)
        return action

    return act


def run_fights(make_env: Callable[[], EldenRingEnv], act: Act, seeds: list[int], record_first: bool = False) -> tuple[list[FightRecord], list[np.ndarray]]:
    """Play one fight per seed; optionally keep the first fight's frames for a GIF."""
    env = make_env()
    records, frames = [], []
    try:
        for i, seed in enumerate(seeds):
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(act(obs, env))
                done = terminated or truncated
                if record_first and i == 0:
                    frames.append(env.render())
            records.append(FightRecord(seed, info["win"], info["boss_damage_dealt"], info["player_damage_taken"],
                                       info["episode_length"], info["episode_reward"]))
    finally:
        env.close()
    return records, frames


def summarize(records: list[FightRecord], seconds: float) -> dict:
    wins = sum(r.win for r in records)
    low, high = wilson_interval(wins, len(records))
    return {
        "fights": len(records),
        "win_rate": wins / len(records),
        "win_rate_ci95": [low, high],
        "boss_damage_dealt": float(np.mean([r.boss_damage_dealt for r in records])),
        "player_damage_taken": float(np.mean([r.player_damage_taken for r in records])),
        "episode_length": float(np.mean([r.length for r in records])),
        "episode_reward": float(np.mean([r.episode_reward for r in records])),
        "fights_per_minute": len(records) / seconds * 60.0,
    }


def evaluate(actors: dict[str, Act], make_env: Callable[[], EldenRingEnv], seeds: list[int], gif_dir: Path | None = None) -> dict:
    results = {}
    for name, act in actors.items():
        started = time.perf_counter()
        records, frames = run_fights(make_env, act, seeds, record_first=gif_dir is not None)
        results[name] = summarize(records, time.perf_counter() - started)
        log.info("%s: %s", name, results[name])
        if gif_dir is not None and frames:
            write_gif(frames, gif_dir / f"{name}.gif")
    return results


def write_gif(frames: list[np.ndarray], path: Path, size: int = 168, every: int = 1) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f).resize((size, size), Image.NEAREST) for f in frames[::every]]
    images[0].save(path, save_all=True, append_images=images[1:], duration=200, loop=0)
