"""The policy: a CNN over the frame (or the frame stack) and an MLP over the game state, as a
stable-baselines3 actor-critic so that behaviour cloning and RL fine-tuning train one network.

SB3 feeds image observations channel-first (it transposes them with ``VecTransposeImage``), so
the policy is built on that transposed space; offline batches go through the policy's own
``obs_to_tensor``, which applies the same transpose: behaviour cloning sees exactly what PPO will.

Fine-tuning's several runs act as one policy, a ``PolicyEnsemble`` of such networks.

A policy is saved as data (``save_policy``): its weights in safetensors and what rebuilds its
network in JSON, beside the env config it acts in. SB3's own files are pickles, which run
whatever code their maker put in them when read; a policy folder can be shared and loaded
(``load_policy``, the one loader every command uses) without trusting its maker.
``elden_il.policies.sb3_zip`` writes SB3's zip for SB3's own tools, and converts old folders.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from env.common.errors import ConfigError, EldenILError
from env.common.files import UnreadableFile, read_json, regular_file_problem
from env.config import FILE as CONFIG_FILE
from env.config import EnvConfig

from elden_il.params import NetworkSize
from elden_il.policies.policy_json import PolicyFileError, size_from_json, size_to_json, space_from_json, space_to_json

if TYPE_CHECKING:
    from env.elden_env import EldenRingEnv

WEIGHTS_FILE = "policy.safetensors"
"""A saved policy's weights, in safetensors: tensors and their names only, nothing that runs."""
DESCRIPTION_FILE = "policy.json"
"""What rebuilds the network the weights belong to, as plain JSON (``elden_il.policies.policy_json``)."""
PICKLED_FILE = "policy.zip"
"""Where SB3's zips (pickles) were saved before: never read here (``elden_il.policies.sb3_zip`` converts them)."""
FORMAT = 1
MAX_MEMBERS = 64
"""The most networks a saved ensemble may hold (the pipeline's holds one per fine-tuning run)."""
MAX_DESCRIPTION_BYTES = 1_000_000
"""A policy.json is a few kilobytes; a larger one is not read."""
FLASK_SCALE = 4.0
"""Flask charges are fed to the network divided by this: a usual count at a boss like Margit
reads near 1, as HP fractions and distances do."""


def policy_space(space: spaces.Dict) -> spaces.Dict:
    """The env's observation space as SB3's policy sees it: image keys channel-first."""
    keys = {}
    for key, sub in space.spaces.items():
        if is_image_space(sub) and not is_image_space_channels_first(sub):
            h, w, c = sub.shape
            sub = spaces.Box(0, 255, (c, h, w), np.uint8)
        keys[key] = sub
    return spaces.Dict(keys)


SAVED_BEFORE_SIZES = NetworkSize(
    cnn_channels=(32, 64, 64), cnn_kernels=(8, 4, 3), cnn_strides=(4, 2, 1), cnn_dim=512, state_dim=128, hidden=(256,)
)
"""The network of policies saved before a policy kept all of its size (the Nature CNN's channels):
SB3 rebuilds their extractor from ``FightFeatures``' own defaults, which are this one's, so they
still load as they were trained."""


class FightFeatures(BaseFeaturesExtractor):
    """A CNN over the frame or frame stack (``NetworkSize``'s convolutions, then one dense layer),
    plus an MLP over HP, distance, animations and the recent actions. Works on both the env's
    spaces after SB3's preprocessing."""

    def __init__(
        self,
        observation_space: spaces.Dict,
        cnn_channels: tuple[int, ...] = SAVED_BEFORE_SIZES.cnn_channels,
        cnn_dim: int = SAVED_BEFORE_SIZES.cnn_dim,
        state_dim: int = SAVED_BEFORE_SIZES.state_dim,
        cnn_kernels: tuple[int, ...] = SAVED_BEFORE_SIZES.cnn_kernels,
        cnn_strides: tuple[int, ...] = SAVED_BEFORE_SIZES.cnn_strides,
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
        layers: list[nn.Module] = []
        frame = f"{w}x{h}"
        for out, kernel, stride in zip(cnn_channels, cnn_kernels, cnn_strides, strict=True):
            layers += [nn.Conv2d(channels, out, kernel, stride=stride), nn.ReLU()]
            channels = out
            h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
            if h < 1 or w < 1:
                raise ConfigError(
                    f"the network's convolutions (kernels {list(cnn_kernels)}, strides {list(cnn_strides)}) leave "
                    f"nothing of a {frame} frame: use fewer, smaller or less strided convolutions (params.yaml "
                    "network), or a larger env.frame_size"
                )
        self.cnn = nn.Sequential(*layers, nn.Flatten())
        n_flat = channels * h * w
        self.cnn_head = nn.Sequential(nn.Linear(n_flat, cnn_dim), nn.ReLU())
        self.history_classes = 0
        state_in = 3 + int(observation_space["player_animation"].n) + int(observation_space["boss_animation"].n)
        self.flasks = "flasks" in observation_space.spaces
        state_in += int(self.flasks)
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
        if self.flasks:
            parts.append(obs["flasks"] / FLASK_SCALE)
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
    return actor_critic(policy_space(observation_space), action_space, **policy_kwargs(size))


def actor_critic(observation_space: gym.Space, action_space: gym.Space, **kwargs: Any) -> ActorCriticPolicy:
    """SB3's actor-critic without the optimizer SB3 builds into every policy it makes: this
    project trains a policy with an optimizer of its own (behaviour cloning's, the PPO model's,
    AWAC's) and never steps SB3's, and building one imports torch's compiler (``torch._dynamo``,
    the larger part of a command's start that loads a policy)."""
    return ActorCriticPolicy(
        observation_space, action_space, lr_schedule=lambda _: 0.0, optimizer_class=_no_optimizer, **kwargs
    )


def _no_optimizer(parameters: Any, lr: float) -> None:
    """What a policy made by ``actor_critic`` has as its ``optimizer``: none."""
    return None


def policy_kwargs(size: NetworkSize = NetworkSize()) -> dict[str, Any]:
    """The same architecture for BC and for PPO (``PPO(..., policy_kwargs=policy_kwargs())``).
    SB3 saves these with the policy, the extractor's every size among them: a saved policy says
    what it is, whatever the pipeline's default is when it is loaded."""
    extractor = {name: getattr(size, name) for name in EXTRACTOR_SIZES}
    return {
        "features_extractor_class": FightFeatures,
        "features_extractor_kwargs": extractor,
        "net_arch": {"pi": list(size.hidden), "vf": list(size.hidden)},
        "activation_fn": nn.ReLU,
        "ortho_init": True,
    }


EXTRACTOR_SIZES = ("cnn_channels", "cnn_kernels", "cnn_strides", "cnn_dim", "state_dim")
"""``NetworkSize``'s fields that ``FightFeatures`` takes; ``hidden`` is SB3's ``net_arch``."""


def network_size(policy: ActorCriticPolicy) -> NetworkSize:
    """The size ``policy`` was made with (``policy_kwargs``), read from the policy itself: so
    fine-tuning continues the network behaviour cloning trained, whatever its size. A size its
    extractor was not given is ``FightFeatures``' default (``SAVED_BEFORE_SIZES``)."""
    given = {name: getattr(SAVED_BEFORE_SIZES, name) for name in EXTRACTOR_SIZES}
    given.update({name: tuple(v) if isinstance(v, list) else v for name, v in policy.features_extractor_kwargs.items()})
    return NetworkSize(**given, hidden=tuple(policy.net_arch["pi"]))


class PolicyEnsemble(BasePolicy):
    """Several actor-critics over the same spaces acting as one: their log-probabilities averaged,
    so each action's probability is the normalised geometric mean of theirs (for ``multi_binary``,
    each bit's). A PPO run's policy swings by tens of points of win rate from one update to the
    next and from seed to seed, and the fights it loses differ from run to run: where one member
    errs the others outvote it, and an action any member finds very unlikely stays unlikely
    (elden_il/studies/STUDIES.md, "Several runs as one policy", where the geometric mean also won more
    validation fights than the members' plain average). ``predict`` and ``get_distribution``
    are an ``ActorCriticPolicy``'s; it has no critic of its own, so it is played and evaluated,
    not trained further."""

    def __init__(self, members: list[ActorCriticPolicy]) -> None:
        super().__init__(members[0].observation_space, members[0].action_space)
        self.members = nn.ModuleList(members)

    def get_distribution(self, obs: torch.Tensor | dict[str, torch.Tensor]) -> Distribution:
        """The members' action distribution for ``obs`` (a batch, as ``obs_to_tensor`` makes it)."""
        each = [member.get_distribution(obs) for member in self.members]
        mixed = each[0]
        # Categorical's logits are log-probabilities, Bernoulli's log-odds: their mean is the
        # normalised geometric mean of the members' probabilities in both
        logits = torch.stack([d.distribution.logits for d in each]).mean(dim=0)
        mixed.distribution = type(mixed.distribution)(logits=logits)
        return mixed

    def _predict(
        self, observation: torch.Tensor | dict[str, torch.Tensor], deterministic: bool = False
    ) -> torch.Tensor:
        return self.get_distribution(observation).get_actions(deterministic=deterministic)


def networks(policy: BasePolicy) -> list[ActorCriticPolicy]:
    """The actor-critics ``policy`` is made of: itself, or an ensemble's members."""
    return list(policy.members) if isinstance(policy, PolicyEnsemble) else [policy]


def one_network(loaded: LoadedPolicy, use: str) -> ActorCriticPolicy:
    """The single actor-critic of ``loaded``, or one line saying that ``use`` takes one and this
    policy is an ensemble."""
    if isinstance(loaded.policy, PolicyEnsemble):
        raise ConfigError(
            f"{loaded.path} is an ensemble of {len(loaded.policy.members)} networks (runs acting as one), and "
            f"{use} takes one network: give it a single policy, one trained with runs: 1 (bc.runs, finetune.runs)"
        )
    return loaded.policy


def member(loaded: LoadedPolicy, index: int) -> ActorCriticPolicy:
    """The network fine-tuning's run ``index`` continues: the policy's own, or an ensemble's
    members in turn (run 0 the first: behaviour cloning's on ``bc.seed``, what ``bc.runs: 1``
    trains alone). An ensemble has no network of its own to train further."""
    members = networks(loaded.policy)
    return members[index % len(members)]


@dataclass(frozen=True)
class LoadedPolicy:
    """A saved policy and the env it was trained for: ``policy.predict(obs)`` is SB3's own. The
    policy is an ``ActorCriticPolicy``, or a ``PolicyEnsemble`` of them."""

    policy: ActorCriticPolicy | PolicyEnsemble
    config: EnvConfig
    path: Path

    def act(self, observations: list[dict], deterministic: bool = True) -> list:
        """The policy's action for each of several observations (the env's, one per fight) in one
        network call: how every loop that lets a policy play asks it what to press (evaluation's
        fights, batched; the pilot's recording, one at a time)."""
        batch = {key: np.stack([np.asarray(o[key]) for o in observations]) for key in observations[0]}
        actions, _ = self.policy.predict(batch, deterministic=deterministic)
        return list(actions)

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


def policy_folder(path: str | Path) -> Path:
    """The folder of a saved policy given as the folder (``datasets/models/bc``) or one of its
    files; one line if it holds none, only the env config a stopped training wrote, a file that
    is no plain file (a FIFO, a device, a folder), or a policy in SB3's pickle format, which is
    never read here (it can run code)."""
    path = Path(path)
    folder = path if path.is_dir() or path.suffix not in (".json", ".safetensors", ".zip") else path.parent
    for name in (WEIGHTS_FILE, DESCRIPTION_FILE, CONFIG_FILE):
        there = folder / name
        problem = regular_file_problem(there)
        if (there.exists() or there.is_symlink()) and problem is not None:
            raise PolicyFileError(f"{there} {problem}: a policy folder holds plain files; retrain it (`dvc repro`)")
    if (folder / WEIGHTS_FILE).is_file() and (folder / DESCRIPTION_FILE).is_file():
        return folder
    zipped = path if path.suffix == ".zip" else folder / PICKLED_FILE
    if zipped.exists():
        raise PolicyFileError(
            f"{zipped} is a policy in SB3's zip format, a pickle: reading it runs whatever code its maker put in "
            f"it, so it is not read. If you made it or trust who did, convert its folder once: `python -m "
            f"elden_il.policies.sb3_zip convert {folder} --trust-pickle`; or retrain it (`dvc repro`)"
        )
    if (folder / CONFIG_FILE).is_file():
        raise PolicyFileError(
            f"the policy folder {folder} is incomplete ({CONFIG_FILE} without {WEIGHTS_FILE} and {DESCRIPTION_FILE}: "
            "its training was stopped): rerun the stage that trains it (`dvc repro`)"
        )
    raise PolicyFileError(
        f"no policy at {path}: train one (`dvc repro`) or give a folder with {WEIGHTS_FILE}, {DESCRIPTION_FILE} "
        f"and {CONFIG_FILE} (as datasets/models/bc)"
    )


def save_policy(policy: ActorCriticPolicy | PolicyEnsemble, config: EnvConfig, folder: Path) -> None:
    """Save ``policy`` and the env config it acts in as data that cannot run code: its weights
    (safetensors), what rebuilds its network (JSON) and ``config`` (``env_config.json``). The
    same weights give the same bytes on every run and in every checkout (DVC tracks them). An
    ensemble's members are one network size each (fine-tuning's runs all continue one BC policy)."""
    from safetensors.torch import save

    if config.profile is None:
        raise ConfigError(
            "the policy's env config names no profile: name the one it plays on "
            "(EnvConfig(profile='sim_margit') or 'eldenring_margit'), since its keys and spaces depend on it"
        )
    first, *others = members = networks(policy)
    if len({(network_size(m), m.share_features_extractor) for m in members}) > 1:
        raise ValueError("an ensemble's members must all be one network: one size, features shared alike")
    folder.mkdir(parents=True, exist_ok=True)
    config.save(folder)
    description = {
        "format": FORMAT,
        "network": size_to_json(network_size(first)),
        "share_features_extractor": bool(first.share_features_extractor),
        "observation_space": space_to_json(policy.observation_space),
        "action_space": space_to_json(policy.action_space),
    }
    if others:
        description["members"] = len(others) + 1
    (folder / DESCRIPTION_FILE).write_text(json.dumps(description, indent=2, sort_keys=True) + "\n")
    # serialised here and written by Python: a full disk is an OSError (ENOSPC), as every other write's
    (folder / WEIGHTS_FILE).write_bytes(save(_unique_tensors(policy.state_dict()), metadata={"format": "pt"}))


def _unique_tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each tensor once, under its first name in sorted order: SB3 names the shared features
    extractor three times (``features_extractor``, ``pi_`` and ``vf_features_extractor``).
    safetensors' own ``save_model`` records those aliases in a map whose order varies run to
    run; ``load_model`` finds them again from the network itself."""
    unique: dict[str, torch.Tensor] = {}
    seen: set[tuple] = set()
    for name in sorted(state):
        tensor = state[name]
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.dtype)
        if key not in seen:
            seen.add(key)
            unique[name] = tensor.detach().cpu().contiguous()
    return unique


def load_policy(path: str | Path, env: Any = None, device: str = "auto") -> LoadedPolicy:
    """The policy saved at ``path`` (its folder, or a file in it) with its env config; with
    ``env``, refuse it unless it is the env the policy was trained for. Reads JSON and
    safetensors only: nothing in a policy folder, whoever made it, can run code here."""
    from stable_baselines3.common.utils import get_device

    folder = policy_folder(path)
    config = EnvConfig.load(folder)
    where = folder / DESCRIPTION_FILE
    description = _read_description(where)
    observation = space_from_json(description["observation_space"], str(where))
    action = space_from_json(description["action_space"], str(where))
    check_spaces(observation, action, config, where)
    kwargs = {
        **policy_kwargs(size_from_json(description["network"], NetworkSize, str(where))),
        "share_features_extractor": description["share_features_extractor"],
        "ortho_init": False,  # every weight is read from the file: initialising them first is time lost
    }
    count = description.get("members", 1)
    check_network_size(observation, action, kwargs, count, where)
    members = [actor_critic(observation, action, **kwargs) for _ in range(count)]
    policy = members[0] if len(members) == 1 else PolicyEnsemble(members)
    _read_weights(policy, folder / WEIGHTS_FILE)
    policy = policy.to(get_device(device))
    policy.set_training_mode(False)
    loaded = LoadedPolicy(policy, config, folder)
    if env is not None:
        loaded.check_env(env)
    return loaded


def _read_description(path: Path) -> dict[str, Any]:
    """policy.json, checked for every key it must have and none it must not."""
    try:
        description = read_json(path, MAX_DESCRIPTION_BYTES)
    except UnreadableFile as e:
        raise PolicyFileError(f"{e}: it is not a policy's description; retrain it (`dvc repro`)") from None
    keys = {"format", "network", "share_features_extractor", "observation_space", "action_space"}
    if not isinstance(description, dict) or set(description) - {"members"} != keys:
        got = sorted(description) if isinstance(description, dict) else type(description).__name__
        raise PolicyFileError(
            f"{path} is not a policy's description (keys {got}, not {sorted(keys)} and perhaps members): retrain it"
        )
    members = description.get("members", 1)
    if "members" in description and (type(members) is not int or not 2 <= members <= MAX_MEMBERS):
        raise PolicyFileError(
            f"{path} says the policy is an ensemble of {members!r} networks: an ensemble holds 2 to {MAX_MEMBERS}; "
            "retrain it"
        )
    if description["format"] != FORMAT or not isinstance(description["share_features_extractor"], bool):
        raise PolicyFileError(
            f"{path} is format {description['format']!r}, this version reads format {FORMAT}: use the version that "
            "saved it, or retrain it"
        )
    return description


def _read_weights(policy: BasePolicy, path: Path) -> None:
    """Load the weights at ``path`` into ``policy``, every tensor by name, shape and dtype
    (float32, as saved), and every one finite; or one line."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_model

    try:
        with safe_open(str(path), "pt") as f:
            others = sorted({f.get_slice(name).get_dtype() for name in f.keys()} - {"F32"})
        if others:
            raise ValueError(f"tensors of dtype {', '.join(others)}, where a policy saves float32 (F32) alone")
        load_model(policy, str(path), strict=True)
    except (SafetensorError, RuntimeError, OSError, ValueError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PolicyFileError(
            f"{path} does not hold this policy's weights ({reason[:300]}): the folder's files belong to different "
            "policies, or it is damaged; retrain it (`dvc repro`)"
        ) from None
    broken = [name for name, tensor in policy.state_dict().items() if not torch.isfinite(tensor).all()]
    if broken:
        raise PolicyFileError(
            f"{path} holds weights that are not numbers (NaN or infinite, in {', '.join(broken[:3])}"
            f"{' and more' if len(broken) > 3 else ''}): a training run diverged or the file is damaged; retrain it"
        )


MAX_PARAMETERS = 64_000_000
"""The most weights a saved policy may ask for, its members together (256 MB of float32): the
pipeline's network has under a million, an ensemble of 64 of them under 45 million."""


def check_network_size(
    observation: gym.Space, action: gym.Space, kwargs: dict[str, Any], members: int, where: Path
) -> None:
    """Refuse a policy whose description asks for more weights than ``MAX_PARAMETERS``, counted
    on a network built on torch's meta device (shapes only, no memory) before any is made."""
    with torch.device("meta"):
        network = actor_critic(observation, action, **{**kwargs, "ortho_init": False})
    weights = members * sum(p.numel() for p in network.parameters())
    if weights > MAX_PARAMETERS:
        raise PolicyFileError(
            f"{where} describes a policy of {weights:,} weights ({members} network{'s' * (members > 1)}), more "
            f"than any policy of this project ({MAX_PARAMETERS:,} at most): the file is damaged or not a policy's"
        )


def check_spaces(observation: gym.Space, action: gym.Space, config: EnvConfig, path: Path) -> None:
    """Refuse a policy saved for other spaces (its ``observation`` as the policy sees it, and
    ``action``) than the env its ``env_config.json`` describes (a policy of another env, a config
    copied from another run): it would fail on the first observation, or act on the wrong one.
    Names each space that differs, the policy's and the config's."""
    from env.profile import load_profile

    if config.profile is None:
        raise PolicyFileError(
            f"{path}'s {CONFIG_FILE} names no profile, and the policy's keys and spaces depend on it: "
            "put the env_config.json it was trained with beside it, or retrain it (`dvc repro`)"
        )
    wanted_observation, wanted_action = config.spaces(load_profile(config.profile))
    differences = _space_differences("observation", observation, policy_space(wanted_observation))
    differences += _space_differences("action", action, wanted_action)
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
