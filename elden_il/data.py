"""Demonstrations from a Minari dataset into arrays a trainer can batch from.

Frame stacks and action histories are rebuilt here from single frames and actions, by the env's
own rule (the last k frames of the episode, padded with the first; the last k actions, padded
with the idle action 0), so a dataset stores each frame once and still matches the env's
``frame_stack``/``action_history`` observations exactly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

BASE_KEYS = ("frame", "player_hp", "boss_hp", "distance", "player_animation", "boss_animation")


class DatasetError(ValueError):
    """A dataset that cannot be trained on; the message says why and what to do."""


@dataclass
class Demonstrations:
    obs: dict[str, np.ndarray]  # one row per step (the observation the action was taken from)
    actions: np.ndarray
    episode: np.ndarray  # which episode each step belongs to
    first: np.ndarray  # index of the first step of each step's episode
    observation_space: gym.spaces.Dict  # the base space of the dataset (no stack/history)
    action_space: gym.spaces.Space
    source_episodes: int

    def __len__(self) -> int:
        return len(self.actions)

    def batch(self, index: np.ndarray, frame_stack: int | None = None, action_history: int | None = None) -> dict[str, np.ndarray]:
        """The observations at ``index`` as the env would have given them, with the optional
        stack and history keys rebuilt from the episode."""
        out = {k: v[index] for k, v in self.obs.items()}
        first = self.first[index]
        if frame_stack:
            back = np.arange(frame_stack - 1, -1, -1)
            frames = np.maximum(index[:, None] - back[None, :], first[:, None])
            out["frame_stack"] = self.obs["frame"][frames]
        if action_history:
            back = np.arange(action_history, 0, -1)
            steps = index[:, None] - back[None, :]
            history = self.actions[np.maximum(steps, 0)].astype(np.int32)
            history[steps < first[:, None]] = 0
            out["action_history"] = history
        return out


def minari_root(path: str | Path | None = None) -> Path:
    """Where datasets live: ``$MINARI_DATASETS_PATH`` if set, else ``datasets/minari``."""
    return Path(path or os.environ.get("MINARI_DATASETS_PATH") or "datasets/minari")


def load_demonstrations(dataset_id: str, root: str | Path | None = None) -> Demonstrations:
    import minari

    os.environ["MINARI_DATASETS_PATH"] = str(minari_root(root).resolve())
    try:
        dataset = minari.load_dataset(dataset_id)
    except Exception as e:  # minari raises several types for a missing or broken dataset
        raise DatasetError(
            f"cannot load dataset {dataset_id!r} from {minari_root(root)}: {e}. Build it with "
            "`python -m capture.build_dataset` (or `dvc repro dataset`)"
        ) from None
    space = dataset.observation_space
    if not isinstance(space, gym.spaces.Dict) or not set(BASE_KEYS) <= set(space.spaces):
        raise DatasetError(f"dataset {dataset_id!r} does not hold EldenRingEnv observations (keys: {getattr(space, 'spaces', space)})")
    obs: dict[str, list[np.ndarray]] = {k: [] for k in BASE_KEYS}
    actions, episode, first = [], [], []
    start = 0
    count = 0
    for count, ep in enumerate(dataset.iterate_episodes(), start=1):
        steps = len(ep.actions)
        for key in BASE_KEYS:
            obs[key].append(np.asarray(ep.observations[key][:steps]))
        actions.append(np.asarray(ep.actions))
        episode.append(np.full(steps, count - 1))
        first.append(np.full(steps, start))
        start += steps
    if start == 0:
        raise DatasetError(f"dataset {dataset_id!r} has no steps: record demonstrations first (`python -m capture.record`)")
    base_space = gym.spaces.Dict({k: space[k] for k in BASE_KEYS})
    return Demonstrations(
        obs={k: np.concatenate(v) for k, v in obs.items()},
        actions=np.concatenate(actions),
        episode=np.concatenate(episode),
        first=np.concatenate(first),
        observation_space=base_space,
        action_space=dataset.action_space,
        source_episodes=count,
    )


def check_compatible(demos: Demonstrations, env_space: gym.spaces.Dict, env_actions: gym.Space) -> None:
    """Refuse a dataset whose spaces differ from the env the policy will act in."""
    differences = [
        f"{k}: dataset {demos.observation_space[k]} vs env {env_space[k]}"
        for k in BASE_KEYS
        if k not in env_space.spaces or demos.observation_space[k] != env_space[k]
    ]
    if demos.action_space != env_actions:
        differences.append(f"actions: dataset {demos.action_space} vs env {env_actions}")
    if differences:
        raise DatasetError(
            "the dataset does not match the env (rebuild it with the env's settings, e.g. the same "
            "--action-mode and --frame-size): " + "; ".join(differences)
        )
