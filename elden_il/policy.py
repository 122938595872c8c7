"""The policy: a CNN over the frame (or the frame stack) and an MLP over the game state, as a
stable-baselines3 actor-critic so that behaviour cloning and RL fine-tuning train one network.

SB3 feeds image observations channel-first (it transposes them with ``VecTransposeImage``), so
the policy is built on that transposed space; offline batches go through the policy's own
``obs_to_tensor``, which applies the same transpose: behaviour cloning sees exactly what PPO will.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from env.config import FILE as CONFIG_FILE
from env.config import EnvConfig
from env.errors import EldenILError

if TYPE_CHECKING:
    from env.elden_env import EldenRingEnv

POLICY_FILE = "policy.zip"
"""A saved policy's file in its folder: SB3's policy-only zip (behaviour cloning) or SB3's
algorithm zip (``PPO.save``: the fine-tuned model, which ``PPO.load`` reads as it is)."""


def policy_space(space: spaces.Dict) -> spaces.Dict:
    """The env's observation space as SB3's policy sees it: image keys channel-first."""
    keys = {}
    for key, sub in space.spaces.items():
        if is_image_space(sub) and not is_image_space_channels_first(sub):
            h, w, c = sub.shape
            sub = spaces.Box(0, 255, (c, h, w), np.uint8)
        keys[key] = sub
    return spaces.Dict(keys)


@dataclass(frozen=True)
class NetworkSize:
    """How wide the policy network is. The defaults are the pipeline's network (the Nature CNN's
    channels); a narrow one runs every code path of training, saving and loading at a fraction
    of the cost, for checks of that plumbing rather than of how well a policy learns. A saved
    policy keeps its size (SB3 saves the extractor's arguments), and fine-tuning continues the
    network it is given (``network_size``)."""

    cnn_channels: tuple[int, int, int] = (32, 64, 64)
    """The three convolutions' output channels."""
    cnn_dim: int = 512
    """The frame's features, after the convolutions."""
    state_dim: int = 128
    """The game state's features."""
    hidden: tuple[int, ...] = (256,)
    """The actor's and the critic's own layers, each."""


class FightFeatures(BaseFeaturesExtractor):
    """Nature-CNN over the frame or frame stack, plus an MLP over HP, distance, animations and
    the recent actions. Works on both the env's spaces after SB3's preprocessing."""

    def __init__(
        self,
        observation_space: spaces.Dict,
        cnn_channels: tuple[int, int, int] = NetworkSize.cnn_channels,
        cnn_dim: int = NetworkSize.cnn_dim,
        state_dim: int = NetworkSize.state_dim,
    ) -> None:
        stacked = "frame_stack" in observation_space.spaces
        if stacked:
            k, h, w, c = observation_space["frame_stack"].shape
            channels = k * c
        else:
            c, h, w = observation_space["frame"].shape
            channels = c
        super().__init__(observation_space, cnn_dim + state_dim)
        self.stacked = stacked
        c1, c2, c3 = cnn_channels
        self.cnn = nn.Sequential(
            nn.Conv2d(channels, c1, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(c1, c2, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(c2, c3, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_flat = self.cnn(torch.zeros(1, channels, h, w)).shape[1]
        self.cnn_head = nn.Sequential(nn.Linear(n_flat, cnn_dim), nn.ReLU())
        self.history_classes = 0
        state_in = 3 + int(observation_space["player_animation"].n) + int(observation_space["boss_animation"].n)
        if "action_history" in observation_space.spaces:
            hist = observation_space["action_history"]
            if hist.shape and len(hist.shape) == 1:  # discrete actions: one-hot each
                self.history_classes = int(hist.high.max()) + 1
                state_in += hist.shape[0] * self.history_classes
            else:
                state_in += int(np.prod(hist.shape))
        self.state = nn.Sequential(
            nn.Linear(state_in, state_dim), nn.ReLU(), nn.Linear(state_dim, state_dim), nn.ReLU()
        )

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.stacked:
            stack = obs["frame_stack"]  # (N, k, H, W, C) as floats 0..255 (not an SB3 image space)
            n, k, h, w, c = stack.shape
            pixels = stack.permute(0, 1, 4, 2, 3).reshape(n, k * c, h, w) / 255.0
        else:
            pixels = obs["frame"]  # (N, C, H, W), already scaled to [0, 1] by SB3
        parts = [
            obs["player_hp"],
            obs["boss_hp"],
            obs["distance"] / 20.0,
            obs["player_animation"],
            obs["boss_animation"],
        ]
        if "action_history" in obs:
            history = obs["action_history"]
            if self.history_classes:
                history = nn.functional.one_hot(history.long(), self.history_classes).float()
            parts.append(history.flatten(1))
        # flatten(1): SB3's rollout buffer keeps Discrete observations as (N, 1), one-hot (N, 1, n)
        state = torch.cat([p.flatten(1) for p in parts], dim=1)
        return torch.cat([self.cnn_head(self.cnn(pixels)), self.state(state)], dim=1)


def make_policy(
    observation_space: spaces.Dict, action_space: gym.Space, size: NetworkSize = NetworkSize()
) -> ActorCriticPolicy:
    """A fresh actor-critic over ``observation_space`` (the env's; transposed here)."""
    return ActorCriticPolicy(
        policy_space(observation_space),
        action_space,
        lr_schedule=lambda _: 3e-4,
        **policy_kwargs(size),
    )


def policy_kwargs(size: NetworkSize = NetworkSize()) -> dict[str, Any]:
    """The same architecture for BC and for PPO (``PPO(..., policy_kwargs=policy_kwargs())``).
    SB3 saves these with the policy: the extractor is given only the sizes that differ from the
    pipeline's, so a pipeline policy saves exactly what it did without them (DVC tracks its bytes)."""
    extractor = {
        name: getattr(size, name)
        for name in ("cnn_channels", "cnn_dim", "state_dim")
        if getattr(size, name) != getattr(NetworkSize, name)
    }
    return {
        "features_extractor_class": FightFeatures,
        **({"features_extractor_kwargs": extractor} if extractor else {}),
        "net_arch": {"pi": list(size.hidden), "vf": list(size.hidden)},
        "activation_fn": nn.ReLU,
        "ortho_init": True,
    }


def network_size(policy: ActorCriticPolicy) -> NetworkSize:
    """The size ``policy`` was made with (``policy_kwargs``), read from the policy itself: so
    fine-tuning continues the network behaviour cloning trained, whatever its size."""
    return NetworkSize(**policy.features_extractor_kwargs, hidden=tuple(policy.net_arch["pi"]))


@dataclass(frozen=True)
class LoadedPolicy:
    """A saved policy and the env it was trained for: ``policy.predict(obs)`` is SB3's own."""

    policy: ActorCriticPolicy
    config: EnvConfig
    path: Path

    def make_env(self, backend: str = "sim", **options: Any) -> EldenRingEnv:
        """The env this policy acts in (``env.factory.make_env`` with its config); ``options``
        are the env's behaviour (``render_mode``, ``host``, ``seed``...), not config fields."""
        from env.factory import make_env

        return make_env(self.config, backend=backend, **options)

    def probabilities(self, observations: dict[str, np.ndarray]) -> np.ndarray:
        """How likely the policy finds each action for a batch of observations (the env's keys,
        one row each): (N, actions) for a discrete table, (N, bits) of each bit being on for
        multi_binary. What a viewer shows next to the action a person took."""
        with torch.no_grad():
            tensors, _ = self.policy.obs_to_tensor(observations)
            return self.policy.get_distribution(tensors).distribution.probs.cpu().numpy()

    def check_env(self, env: Any) -> None:
        """Refuse an env other than the one the policy was trained for, naming every field
        that differs (an observation key missing would otherwise be a bare shape error)."""
        from elden_il.data import check_config

        check_config(
            self.config,
            env.unwrapped.config,
            f"the policy {self.path}",
            "make its env with load_policy(path).make_env(), or gymnasium.make with the config in its env_config.json",
        )


def policy_path(path: str | Path) -> Path:
    """The policy file of a saved policy given as its folder (``datasets/models/bc``) or its
    ``policy.zip``; one line if there is none, or only the env config a stopped training wrote."""
    path = Path(path)
    if path.is_dir():
        path = path / POLICY_FILE
    if path.is_file():
        return path
    if path.name == POLICY_FILE and (path.parent / CONFIG_FILE).is_file():
        raise EldenILError(
            f"the policy folder {path.parent} is incomplete ({CONFIG_FILE} without {path.name}: "
            "its training was stopped): rerun the stage that trains it (`dvc repro`)"
        )
    raise EldenILError(
        f"no policy at {path}: train one (`dvc repro`) or give a folder with {POLICY_FILE} "
        f"and {CONFIG_FILE} (as datasets/models/bc), or the {POLICY_FILE} itself"
    )


def load_policy(path: str | Path, env: Any = None, device: str = "auto") -> LoadedPolicy:
    """The policy saved at ``path`` (a ``policy.zip`` or the folder holding it) with its env
    config; with ``env``, refuse it unless it is the env the policy was trained for.

    Both of SB3's formats load: the policy-only zip (``ActorCriticPolicy.save``, behaviour
    cloning) and the algorithm zip (``PPO.save``, fine-tuning), told apart by the ``data``
    member only the latter holds."""
    path = policy_path(path)
    config = EnvConfig.load(path.parent)
    policy = _read_policy(path, device)
    policy.set_training_mode(False)
    check_spaces(policy, config, path)
    loaded = LoadedPolicy(policy, config, path)
    if env is not None:
        loaded.check_env(env)
    return loaded


UNREADABLE = (RuntimeError, ValueError, KeyError, EOFError, OSError, pickle.UnpicklingError)
"""What SB3 and torch raise for a zip that holds no saved policy: not torch's archive layout
(``RuntimeError``), a ``data`` member that is not JSON (``ValueError``), a member missing
(``KeyError``), a truncated pickle (``EOFError``, ``UnpicklingError``), a member unreadable (``OSError``)."""


def _read_policy(path: Path, device: str) -> ActorCriticPolicy:
    """The policy in either of SB3's zips, or one line saying the file holds none."""
    try:
        if _is_algorithm_zip(path):
            from stable_baselines3 import PPO

            return PPO.load(str(path), device=device).policy
        return ActorCriticPolicy.load(str(path), device=device)
    except UNREADABLE as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise EldenILError(
            f"{path} is not a saved policy ({reason}): give the policy.zip that training wrote, "
            "or retrain it (`dvc repro`)"
        ) from None


def check_spaces(policy: ActorCriticPolicy, config: EnvConfig, path: Path) -> None:
    """Refuse a policy saved for other spaces than the env its ``env_config.json`` describes (a
    policy of another env, a config copied from another run): it would fail on the first
    observation, or act on the wrong one. Names each space that differs, the policy's and the config's."""
    from env.profile import load_profile

    observation, action = config.spaces(load_profile(config.profile))
    differences = _space_differences("observation", policy.observation_space, policy_space(observation))
    differences += _space_differences("action", policy.action_space, action)
    if differences:
        raise EldenILError(
            f"{path} was saved for other spaces than its {CONFIG_FILE} describes "
            f"({'; '.join(differences)}; the policy's vs the config's): the two belong to different "
            "policies; retrain it (`dvc repro`) or put the env_config.json it was trained with beside it"
        )


def _space_differences(name: str, saved: gym.Space, wanted: gym.Space) -> list[str]:
    """Each key of two Dict spaces that differs, or the two spaces whole."""
    if isinstance(saved, spaces.Dict) and isinstance(wanted, spaces.Dict):
        keys = dict.fromkeys([*saved.spaces, *wanted.spaces])
        return [
            f"{name} {key}: {saved.spaces.get(key, 'none')} vs {wanted.spaces.get(key, 'none')}"
            for key in keys
            if saved.spaces.get(key) != wanted.spaces.get(key)
        ]
    return [] if saved == wanted else [f"{name} space: {saved} vs {wanted}"]


def _is_algorithm_zip(path: Path) -> bool:
    """True for SB3's algorithm zip (``BaseAlgorithm.save``: a ``data`` JSON member); a
    policy-only zip is a ``torch.save`` archive, without one."""
    try:
        with zipfile.ZipFile(path) as archive:
            return "data" in archive.namelist()
    except zipfile.BadZipFile:
        raise EldenILError(f"{path} is not a saved policy (not a zip file): retrain it (`dvc repro`)") from None
