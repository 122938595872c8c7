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


class Actor:
    """Chooses actions for a batch of envs at once (one network call for all of them)."""

    def start(self, slot: int, seed: int) -> None:
        """A new fight begins in ``slot``."""

    def act(self, observations: list[dict], envs: list[EldenRingEnv], slots: list[int]) -> list:
        raise NotImplementedError


class RandomActor(Actor):
    def __init__(self) -> None:
        self.rngs: dict[int, np.random.Generator] = {}

    def start(self, slot: int, seed: int) -> None:
        self.rngs[slot] = np.random.default_rng(seed)

    def act(self, observations, envs, slots):
        out = []
        for env, slot in zip(envs, slots):
            space = env.action_space
            rng = self.rngs[slot]
            out.append(int(rng.integers(space.n)) if hasattr(space, "n") else rng.integers(0, 2, space.shape).astype(np.int8))
        return out


class ExpertActor(Actor):
    """The scripted expert through the env: its named action, as an index or as held keys."""

    def __init__(self) -> None:
        self.experts: dict[int, ScriptedExpert] = {}
        self.tables: dict[str, DiscreteActions] = {}  # per profile, built once
        self.tapped: dict[int, frozenset[str]] = {}  # multi_binary: keys tapped last step, per slot

    def start(self, slot: int, seed: int) -> None:
        self.experts[slot] = ScriptedExpert()
        self.tapped[slot] = frozenset()

    def act(self, observations, envs, slots):
        out = []
        for env, slot in zip(envs, slots):
            base = env.unwrapped
            profile = base.profile
            if profile.name not in self.tables:
                self.tables[profile.name] = DiscreteActions(profile)
            table = self.tables[profile.name]
            index = table.index(self.experts[slot].act(base.state))
            if base.action_mode == "discrete":
                out.append(index)
            else:  # the same keys as held bits, in the env's button order (the profile's keybinds)
                command = table.command(index)
                # a bit held on is one press: a tap repeated at once needs a step released first
                taps = frozenset(command.tap) - self.tapped[slot]
                self.tapped[slot] = taps
                keys = command.hold | taps
                out.append(np.array([key in keys for key in profile.keybinds.values()], np.int8))
        return out


class PolicyActor(Actor):
    def __init__(self, path: Path, deterministic: bool) -> None:
        from stable_baselines3.common.policies import ActorCriticPolicy

        self.policy = ActorCriticPolicy.load(str(path))
        self.policy.set_training_mode(False)
        self.deterministic = deterministic

    def act(self, observations, envs, slots):
        batch = {k: np.stack([o[k] for o in observations]) for k in observations[0]}
        actions, _ = self.policy.predict(batch, deterministic=self.deterministic)
        return list(actions)


def run_fights(
    make_env: Callable[[], EldenRingEnv], actor: Actor, seeds: list[int], parallel: int = 8, record_first: bool = False,
) -> tuple[list[FightRecord], list[np.ndarray]]:
    """One fight per seed, ``parallel`` at a time with batched decisions; optionally the first
    fight's frames for a GIF. Results do not depend on ``parallel``."""
    envs = [make_env() for _ in range(max(1, min(parallel, len(seeds))))]
    queue = list(seeds)
    running: dict[int, tuple[int, dict]] = {}  # slot -> (seed, observation)
    records: dict[int, FightRecord] = {}
    frames: list[np.ndarray] = []

    def begin(slot: int) -> None:
        seed = queue.pop(0)
        actor.start(slot, seed)
        obs, _ = envs[slot].reset(seed=seed)
        running[slot] = (seed, obs)

    try:
        for slot in range(len(envs)):
            begin(slot)
        while running:
            slots = list(running)
            actions = actor.act([running[s][1] for s in slots], [envs[s] for s in slots], slots)
            for slot, action in zip(slots, actions):
                seed = running[slot][0]
                obs, _, terminated, truncated, info = envs[slot].step(action)
                if record_first and seed == seeds[0]:
                    frames.append(envs[slot].render())
                if terminated or truncated:
                    records[seed] = FightRecord(seed, info["win"], info["boss_damage_dealt"], info["player_damage_taken"],
                                                info["episode_length"], info["episode_reward"])
                    del running[slot]
                    if queue:
                        begin(slot)
                else:
                    running[slot] = (seed, obs)
    finally:
        for env in envs:
            env.close()
    return [records[s] for s in seeds], frames


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


def evaluate(
    actors: dict[str, Actor], make_env: Callable[[], EldenRingEnv], seeds: list[int],
    gif_dir: Path | None = None, parallel: int = 8,
) -> dict:
    results = {}
    for name, actor in actors.items():
        started = time.perf_counter()
        records, frames = run_fights(make_env, actor, seeds, parallel, record_first=gif_dir is not None)
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
