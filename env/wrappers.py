"""Wrappers for what Gymnasium does not already provide: rewards over game states, and a curriculum.

Frame stacking and action history are built into the env's observation Dict (they are keys of
it, ``frame_stack`` and ``action_history``), and Gymnasium's own wrappers (``RecordEpisodeStatistics``, ``TimeLimit``,
``RecordVideo``...) apply to this env unchanged.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym

from env.rewards import RewardFn


class RewardOverride(gym.Wrapper):
    """Replace the env's reward with ``reward_fn(before, after)`` over game-state snapshots
    (the same signature as ``reward_fn=`` on the env, for code that wraps an existing env)."""

    def __init__(self, env: gym.Env, reward_fn: RewardFn) -> None:
        super().__init__(env)
        self.reward_fn = reward_fn
        self._before = None

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self._before = self.env.unwrapped.state
        return obs, info

    def step(self, action: Any):
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        after = self.env.unwrapped.state
        reward = self._reward(env_reward, float(self.reward_fn(self._before, after)))
        self._before = after
        return obs, reward, terminated, truncated, info

    def _reward(self, env_reward: float, term: float) -> float:
        return term


class RewardBonus(RewardOverride):
    """Add ``reward_fn(before, after)`` to the env's own reward (a shaping term while training,
    ``env.rewards.HealReward``), the env's reward contract untouched."""

    def _reward(self, env_reward: float, term: float) -> float:
        return env_reward + term


class BossHpCurriculum(gym.Wrapper):
    """Start fights against a weakened boss and make it whole as the agent starts winning.

    At each reset the boss starts at the current level's fraction of its HP (the env's
    ``boss_hp`` reset option, a memory write). After ``window`` episodes at a level with a win rate of at
    least ``promote_at``, the next level begins. ``info["curriculum_level"]`` says which is on.
    """

    def __init__(
        self,
        env: gym.Env,
        levels: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0),
        window: int = 20,
        promote_at: float = 0.5,
    ) -> None:
        super().__init__(env)
        if not levels or not all(0 < f <= 1 for f in levels):
            raise ValueError(f"curriculum levels must be HP fractions in (0, 1], got {levels}")
        self.levels = levels
        self.level = 0
        self.window = window
        self.promote_at = promote_at
        self._results: deque[bool] = deque(maxlen=window)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        options = {**(options or {}), "boss_hp": self.levels[self.level]}
        obs, info = self.env.reset(seed=seed, options=options)
        info["curriculum_level"] = self.level
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self._results.append(bool(info["win"]))
            full = len(self._results) == self.window
            if full and sum(self._results) / self.window >= self.promote_at and self.level + 1 < len(self.levels):
                self.level += 1
                self._results.clear()
        info["curriculum_level"] = self.level
        return obs, reward, terminated, truncated, info
