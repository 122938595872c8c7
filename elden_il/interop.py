"""A dataset as offline-RL libraries take it: d3rlpy's ``MDPDataset``, a TorchRL replay buffer,
and the env observation wrapper to evaluate what d3rlpy trained.

Every observation comes from ``elden_il.data.Demonstrations.batch``, so it is what the env the
dataset was built for shows, stack and action history included (not the dataset's stored keys
alone). Both libraries' optional extras are imported only here, when a converter is called
(``pip install -e ".[d3rlpy]"`` / ``".[torchrl]"``).

d3rlpy gets a tuple observation (``present``): the frames channels-first, as its conv encoders
want them (the frame stack's frames one after another on the channel axis), and a float32 state
vector with the rest of the observation flattened as ``gymnasium.spaces.flatten`` does it (the
animation ids one-hot). ``FrameAndStateEncoderFactory`` (``elden_il.policies.d3rlpy_encoder``) is an
encoder for that tuple. ``D3rlpyObservation`` presents live observations the same way.

TorchRL 0.14.1's ``MinariExperienceReplay(load_from_local_minari=True)`` returns all-zero
observations (its ``memmap_like`` copy of the dataset is never filled: an upstream bug); the
buffer here is built from the episodes with TorchRL's own ``LazyTensorStorage`` instead, in the
same layout (``observation``, ``action``, ``("next", ...)`` with reward, done, terminated and
truncated).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from elden_il.data import DatasetError, Demonstrations, demonstrations, open_dataset
from elden_il.evaluation.fight_loop import Actor

FRAME_KEYS = ("frame", "frame_stack")


def present(obs: dict[str, np.ndarray], space: gym.spaces.Dict) -> tuple[np.ndarray, np.ndarray]:
    """A batch of env observations (``space``'s keys, one row each) as d3rlpy's tuple: frames
    ``(N, C, H, W)`` uint8 (the stack's frames, oldest first, ``k * 3`` channels; or the frame
    alone) and the state ``(N, S)`` float32, the other keys in ``space``'s order flattened as
    ``gymnasium.spaces.flatten`` does (Discrete one-hot)."""
    frames = obs["frame_stack"] if "frame_stack" in space.spaces else obs["frame"][:, None]
    n, k, h, w, c = frames.shape
    chw = np.ascontiguousarray(frames.transpose(0, 1, 4, 2, 3).reshape(n, k * c, h, w))
    state = []
    for key, sub in space.spaces.items():
        if key in FRAME_KEYS:
            continue
        if isinstance(sub, gym.spaces.Discrete):
            state.append(np.eye(int(sub.n), dtype=np.float32)[np.asarray(obs[key]).reshape(n) - int(sub.start)])
        else:
            state.append(np.asarray(obs[key], np.float32).reshape(n, -1))
    return chw, np.concatenate(state, axis=1)


def presented_space(space: gym.spaces.Dict) -> gym.spaces.Tuple:
    """The ``gymnasium`` space of what ``present`` makes of observations from ``space``."""
    frames, state = present({k: np.zeros((1, *s.shape), s.dtype) for k, s in space.spaces.items()}, space)
    return gym.spaces.Tuple(
        (
            gym.spaces.Box(0, 255, frames.shape[1:], np.uint8),
            gym.spaces.Box(-np.inf, np.inf, state.shape[1:], np.float32),
        )
    )


class D3rlpyObservation(gym.ObservationWrapper):
    """The env's observations as the d3rlpy policies trained on ``to_d3rlpy`` data see them:
    ``(frames CHW, state)``. Wrap the env the dataset recovers (``dataset.recover_environment()``)
    or ``make_env`` with the dataset's config."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        if not isinstance(env.observation_space, gym.spaces.Dict) or "frame" not in env.observation_space.spaces:
            raise DatasetError(
                f"D3rlpyObservation wraps an EldenRingEnv (Dict observations), not {env.observation_space}"
            )
        self._dict_space = env.observation_space
        self.observation_space = presented_space(env.observation_space)

    def observation(self, observation: dict) -> tuple[np.ndarray, np.ndarray]:
        frames, state = present({k: np.asarray(v)[None] for k, v in observation.items()}, self._dict_space)
        return frames[0], state[0]


class D3rlpyActor(Actor):
    """Plays a trained d3rlpy algorithm in ``elden_il.evaluation.fight_loop.run_fights`` over ``D3rlpyObservation``
    envs, one batched ``predict`` for every running fight."""

    def __init__(self, algo: Any) -> None:
        self.algo = algo

    def act(self, observations, envs, slots):
        frames = np.stack([o[0] for o in observations])
        state = np.stack([o[1] for o in observations])
        return [int(a) for a in self.algo.predict([frames, state])]


def _steps(dataset: Any, root: str | Path | None) -> Demonstrations:
    if isinstance(dataset, str):
        dataset = open_dataset(dataset, root)
    return demonstrations(dataset, final_observations=True)


def to_d3rlpy(dataset: Any, root: str | Path | None = None) -> Any:
    """A dataset (id, looked up in ``root``, or a loaded ``MinariDataset``) as a d3rlpy
    ``MDPDataset`` with tuple observations (``present``). Train with
    ``encoder_factory=FrameAndStateEncoderFactory()``; evaluate through ``D3rlpyObservation``."""
    import d3rlpy

    demos = _steps(dataset, root)
    if not isinstance(demos.action_space, gym.spaces.Discrete):
        raise DatasetError(
            f"to_d3rlpy takes discrete-action datasets (d3rlpy has no multi-binary actions); "
            f"this one's actions are {demos.action_space}: rebuild it with --action-mode discrete"
        )
    steps = np.flatnonzero(~demos.final)  # d3rlpy drops each episode's final observation
    frames, state = present(demos.batch(steps), demos.observation_space)
    return d3rlpy.dataset.MDPDataset(
        observations=[frames, state],
        actions=demos.actions[steps].reshape(-1, 1),
        rewards=demos.rewards[steps].reshape(-1, 1),
        terminals=demos.terminated[steps],
        timeouts=demos.truncated[steps],
        action_space=d3rlpy.constants.ActionSpace.DISCRETE,
        action_size=int(demos.action_space.n),
    )


def to_torchrl(dataset: Any, root: str | Path | None = None, batch_size: int | None = None) -> Any:
    """A dataset (id or ``MinariDataset``) as a TorchRL ``TensorDictReplayBuffer`` holding every
    step: ``observation`` (the env's Dict keys), ``action``, ``episode`` and ``next`` with the
    next ``observation``, ``reward``, ``done``, ``terminated`` and ``truncated``, the layout
    ``MinariExperienceReplay`` uses."""
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

    demos = _steps(dataset, root)
    steps = np.flatnonzero(~demos.final)
    terminated = torch.as_tensor(demos.terminated[steps]).unsqueeze(-1)
    truncated = torch.as_tensor(demos.truncated[steps]).unsqueeze(-1)

    def observations(rows: np.ndarray) -> dict:
        return {k: torch.as_tensor(v) for k, v in demos.batch(rows).items()}

    data = TensorDict(
        {
            "observation": observations(steps),
            "action": torch.as_tensor(demos.actions[steps]),
            "episode": torch.as_tensor(demos.episode[steps]),
            "next": {
                "observation": observations(steps + 1),  # the episode's next row: a step, or its final observation
                "reward": torch.as_tensor(demos.rewards[steps], dtype=torch.float32).unsqueeze(-1),
                "done": terminated | truncated,
                "terminated": terminated,
                "truncated": truncated,
            },
        },
        batch_size=[len(steps)],
    )
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(len(steps)), batch_size=batch_size)
    buffer.extend(data)
    return buffer
