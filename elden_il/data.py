"""Demonstrations from a Minari dataset into arrays a trainer can batch from.

A dataset stores each frame and action once; what the env's observations hold of the episode's
past (``frame_stack`` and ``action_history``) is rebuilt here by the env's own rule
(``env.observations.EpisodeMemory``): the last k frames of the episode, padded with its first,
and the last k actions, padded with the action table's idle action. The env the dataset was built for (its ``EnvConfig``) is read from the dataset, so
a batch is, bit for bit, what that env would have shown (``tests/test_replay.py`` holds it to
that).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from env.common.errors import ConfigError, DataError
from env.config import EnvConfig
from env.profile import load_profile

BASE_KEYS = ("frame", "player_hp", "boss_hp", "distance", "player_animation", "boss_animation")
FLASKS_KEY = "flasks"
"""Held by a dataset whose env observes the flask charges (``EnvConfig.observe_flasks``)."""


class DatasetError(DataError):
    """A dataset that cannot be trained on; the message says why and what to do."""


@dataclass
class Demonstrations:
    obs: dict[str, np.ndarray]  # one row per step (the observation the action was taken from)
    actions: np.ndarray
    episode: np.ndarray  # which episode each step belongs to
    first: np.ndarray  # index of the first step of each step's episode
    config: EnvConfig  # the env the dataset was built for
    idle: Any  # the action table's idle action: what the action history is padded with
    observation_space: gym.spaces.Dict  # the env's full observation space (with stack and history)
    action_space: gym.spaces.Space
    source_episodes: int
    rewards: np.ndarray  # the reward for each step's action (0 on a final row)
    terminated: np.ndarray  # the step ended the fight (a win or a death)
    truncated: np.ndarray  # the step ended the episode without deciding the fight
    final: np.ndarray  # the row is an episode's last observation, no step (``final_observations``)
    intervention: np.ndarray  # the person took the step over from a policy (a correction)
    policy_played: np.ndarray  # a policy played the step: its own action, not a demonstration

    def __len__(self) -> int:
        return len(self.actions)

    def first_episodes(self, count: int) -> Demonstrations:
        """The first ``count`` episodes alone. Episodes are stored one after another, so they
        are a prefix of every per-row array and the ``first`` indices stay valid."""
        if not 1 <= count <= self.source_episodes:
            raise DatasetError(f"asked for the first {count} episodes of {self.source_episodes}: record more fights")
        rows = int(np.searchsorted(self.episode, count))
        per_row = {
            f.name: getattr(self, f.name)[:rows]
            for f in fields(self)
            if isinstance(getattr(self, f.name), np.ndarray) and len(getattr(self, f.name)) == len(self.episode)
        }
        return replace(self, obs={k: v[:rows] for k, v in self.obs.items()}, source_episodes=count, **per_row)

    def batch(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """The observations at ``index`` exactly as the env would have given them, with the
        config's stack and history keys rebuilt from the episode."""
        out = {k: v[index] for k, v in self.obs.items()}
        memory = self.config.memory(self.idle)
        out.update(memory.keys(self.obs["frame"], self.actions, index, self.first[index]))
        return out


def minari_root(path: str | Path | None = None) -> Path:
    """Where datasets live: ``$MINARI_DATASETS_PATH`` if set, else ``datasets/minari``."""
    return Path(path or os.environ.get("MINARI_DATASETS_PATH") or "datasets/minari")


REBUILD = "rebuild it with `python -m capture.build_dataset --force` (or `dvc repro dataset`)"
DAMAGED = (OSError, ValueError, KeyError)
"""What Minari and h5py raise for a dataset missing or damaged on disk: no such folder or file, or
an HDF5 file that cannot be read (``OSError``); a ``metadata.json`` that is not JSON or that Minari
cannot use (``ValueError``); a key missing from it (``KeyError``). Anything else is a bug, and
keeps its own type and traceback."""


def dataset_config(dataset: Any) -> EnvConfig:
    """The ``EnvConfig`` a Minari dataset was built for (``capture.build_dataset`` writes it)."""
    from capture.build_dataset import METADATA_KEY

    about = dataset.storage.metadata.get(METADATA_KEY)
    if about is None:
        raise DatasetError(
            f"dataset {dataset.id!r} does not say which env it was built for (no {METADATA_KEY!r} metadata): {REBUILD}"
        )
    try:
        values = json.loads(about)["env_config"]
    except (ValueError, KeyError, TypeError) as e:  # not JSON, no env_config, not a mapping
        raise DatasetError(
            f"dataset {dataset.id!r}: its {METADATA_KEY!r} metadata is damaged ({e!r}): {REBUILD}"
        ) from e
    return EnvConfig.from_dict(values, f"dataset {dataset.id!r}")


def open_dataset(dataset_id: str, root: str | Path | None = None) -> Any:
    """The dataset ``dataset_id`` in ``root`` (see ``minari_root``), as ``minari.load_dataset``
    gives it, opened at its path rather than through ``$MINARI_DATASETS_PATH`` (a library leaves
    the process's environment alone), with a one-line error that says how to build it when the
    dataset is missing or damaged."""
    from minari import MinariDataset

    data = minari_root(root).resolve() / dataset_id / "data"
    check_metadata(dataset_id, data / "metadata.json")
    try:
        return MinariDataset(data)
    except DAMAGED as e:
        raise DatasetError(
            f"cannot load dataset {dataset_id!r} from {minari_root(root)}: {e}. Build it with "
            "`python -m capture.build_dataset` (or `dvc repro dataset`)"
        ) from e


def check_env_spec(dataset: Any) -> None:
    """Refuse a dataset whose env spec would make anything but this project's env, before
    anything is made: ``dataset.recover_environment()`` imports and calls whatever its spec's
    entry point names (``os:system`` in a shared dataset ran its maker's command) and applies
    the wrappers it lists the same way. A dataset ``capture.build_dataset`` built names the
    project's own entry point (``env.factory.make_dataset_env``, which refuses a game to reach
    itself; ``make_env`` in one built before) and no wrapper. Call this on a dataset from anyone
    else before ``recover_environment()``."""
    from gymnasium.envs.registration import EnvSpec

    from capture.build_dataset import DATASET_ENTRY_POINT, ENV_ID

    ours = gym.spec(ENV_ID)
    entry_points = (DATASET_ENTRY_POINT, ours.entry_point)  # a dataset's, or one built before it had its own
    for key in ("env_spec", "eval_env_spec"):
        text = dataset.storage.metadata.get(key)
        if text is None:
            continue
        try:
            spec = EnvSpec.from_json(text)
        except (ValueError, TypeError, KeyError) as e:
            raise DatasetError(f"dataset {dataset.id!r}: its {key} is not an env spec ({e}): {REBUILD}") from None
        found = [
            f"{what} {value!r}"
            for what, value, allowed in (
                ("entry point", spec.entry_point, entry_points),
                ("vector entry point", spec.vector_entry_point, (ours.vector_entry_point,)),
                ("wrappers", [w.entry_point for w in spec.additional_wrappers], ([],)),
            )
            if value not in allowed
        ]
        if found:
            raise DatasetError(
                f"dataset {dataset.id!r}: its {key} names {'; '.join(found)}, not this project's env "
                f"({DATASET_ENTRY_POINT}): recover_environment() would import and run that; build the env from "
                "the dataset's EnvConfig instead (elden_il.data.dataset_config and env.factory.make_env)"
            )
        problem = spec_arguments_problem(spec.kwargs)
        if problem is not None:
            raise DatasetError(
                f"dataset {dataset.id!r}: its {key} {problem}: a dataset says which env it was built for, never "
                "which game to reach or how; build the env from the dataset's EnvConfig instead "
                "(elden_il.data.dataset_config and env.factory.make_env, with the backend you choose)"
            )


def spec_arguments_problem(kwargs: Any) -> str | None:
    """What a dataset's env spec asks of the env beyond an ``EnvConfig`` of a bundled profile,
    or None: a backend, a host, a server's flags or the env's own behaviour would make
    ``recover_environment()`` reach a game the dataset's maker chose; a profile folder would load
    whatever files that folder holds."""
    from env.config import FIELD_NAMES, EnvConfig
    from env.profile import available_profiles

    if not isinstance(kwargs, dict):
        return f"gives the env {type(kwargs).__name__} arguments, not an env config"
    beyond = sorted(set(kwargs) - set(FIELD_NAMES))
    if beyond:
        return f"passes the env {', '.join(beyond)}, which no env config holds"
    try:
        config = EnvConfig.from_dict(kwargs, "its env config")
    except ConfigError as e:
        return f"describes no env config this project makes ({e})"
    if config.profile is not None and config.profile not in available_profiles():
        return f"names the profile {config.profile!r}, not one of this project's ({', '.join(available_profiles())})"
    return None


MINARI_METADATA = ("dataset_id", "data_format", "observation_space", "action_space", "total_episodes")
"""What Minari needs in a dataset's ``metadata.json`` to load it as ``capture.build_dataset``
wrote it; without one it fails on an ``assert`` saying nothing, or a bare ``KeyError``."""
EPISODE_MEMBERS = ("observations", "actions", "rewards", "terminations", "truncations")
"""What each ``episode_<i>`` group of a dataset's data file holds (Minari's HDF5 layout)."""


def check_metadata(dataset_id: str, path: Path) -> None:
    """Refuse a ``metadata.json`` that lacks a key Minari needs, naming them. One that is missing
    or not JSON is left to Minari, which says so (``DAMAGED``)."""
    try:
        metadata = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    missing = (
        [key for key in MINARI_METADATA if key not in metadata] if isinstance(metadata, dict) else list(MINARI_METADATA)
    )
    if missing:
        raise DatasetError(f"dataset {dataset_id!r}: {path} lacks {', '.join(missing)}: {REBUILD}")


def check_episodes(dataset: Any) -> None:
    """Refuse a data file missing an episode its metadata counts, or part of one, naming what is
    missing (Minari would stop mid-training on a bare ``KeyError``)."""
    import h5py

    path = dataset.storage.data_path / "main_data.hdf5"
    with h5py.File(path, "r") as f:
        for i in range(dataset.storage.total_episodes):
            group = f.get(f"episode_{i}")
            missing = "is missing" if group is None else ", ".join(m for m in EPISODE_MEMBERS if m not in group)
            if missing:
                what = missing if group is None else f"lacks {missing}"
                raise DatasetError(f"dataset {dataset.id!r}: in {path}, episode_{i} {what}: {REBUILD}")


def episodes(dataset: Any) -> Iterator[Any]:
    """``dataset.iterate_episodes()``, with a data file HDF5 cannot read (damaged, cut short by a
    copy) or missing an episode or part of one said to be one; errors in the caller's loop are
    not touched."""
    try:
        check_episodes(dataset)
        yield from dataset.iterate_episodes()
    except OSError as e:
        raise DatasetError(f"dataset {dataset.id!r}: its episodes cannot be read ({e}): {REBUILD}") from e


def load_demonstrations(dataset_id: str, root: str | Path | None = None) -> Demonstrations:
    """The dataset ``dataset_id`` as a trainer batches from it: one row per step."""
    return demonstrations(open_dataset(dataset_id, root))


def demonstrations(dataset: Any, final_observations: bool = False) -> Demonstrations:
    """A loaded ``MinariDataset`` as ``Demonstrations``. With ``final_observations`` each episode
    also keeps the observation it ended on, as one more row (``Demonstrations.final`` marks it;
    its action is the idle action, never taken): offline RL needs it as the last step's next
    observation, and ``batch`` rebuilds its stack and history like any other row's."""
    config = dataset_config(dataset)
    space = dataset.observation_space
    stored = (*BASE_KEYS, *((FLASKS_KEY,) if config.observe_flasks else ()))
    if not isinstance(space, gym.spaces.Dict) or not set(stored) <= set(space.spaces):
        raise DatasetError(
            f"dataset {dataset.id!r} does not hold EldenRingEnv observations (keys: {getattr(space, 'spaces', space)})"
        )
    table = config.actions(load_profile(config.profile))
    observation_space, action_space = config.spaces(table.profile)
    obs: dict[str, list[np.ndarray]] = {k: [] for k in stored}
    actions, rewards, terminated, truncated, episode, first, final = [], [], [], [], [], [], []
    marks: dict[str, list[np.ndarray]] = {"intervention": [], "policy": []}
    start = 0
    count = 0
    for count, ep in enumerate(episodes(dataset), start=1):
        steps = len(ep.actions)
        rows = steps + int(final_observations)
        for key in stored:
            obs[key].append(np.asarray(ep.observations[key][:rows]))
        extra = rows - steps
        actions.append(
            np.concatenate([np.asarray(ep.actions), np.repeat(np.asarray([table.idle]), extra, axis=0)])
            if extra
            else np.asarray(ep.actions)
        )
        rewards.append(np.pad(np.asarray(ep.rewards, np.float64), (0, extra)))
        terminated.append(np.pad(np.asarray(ep.terminations, bool), (0, extra)))
        truncated.append(np.pad(np.asarray(ep.truncations, bool), (0, extra)))
        final.append(np.arange(rows) >= steps)
        for name, rows_marked in marks.items():  # infos row k + 1 is step k's (row 0: the reset's)
            marked = np.asarray(ep.infos.get(name, np.zeros(steps + 1, bool)), bool)[1 : steps + 1]
            rows_marked.append(np.pad(marked, (0, extra)))
        episode.append(np.full(rows, count - 1))
        first.append(np.full(rows, start))
        start += rows
    if start == 0:
        raise DatasetError(
            f"dataset {dataset.id!r} has no steps: record demonstrations first (`python -m capture.record`)"
        )
    return Demonstrations(
        obs={k: np.concatenate(v) for k, v in obs.items()},
        actions=np.concatenate(actions),
        episode=np.concatenate(episode),
        first=np.concatenate(first),
        config=config,
        idle=table.idle,
        observation_space=observation_space,
        action_space=action_space,
        source_episodes=count,
        rewards=np.concatenate(rewards),
        terminated=np.concatenate(terminated),
        truncated=np.concatenate(truncated),
        final=np.concatenate(final),
        intervention=np.concatenate(marks["intervention"]),
        policy_played=np.concatenate(marks["policy"]),
    )


def sample_weights(
    demos: Demonstrations, intervention_weight: float = 1.0, action_weights: Mapping[str, float] | None = None
) -> np.ndarray:
    """Each step's weight in behaviour cloning. HG-DAgger style: a demonstration 1, a person's
    correction ``intervention_weight``, a step the policy played itself 0 (its label is its own
    choice, nothing to learn from), an episode's final observation 0 (no action was taken). Then
    a step that presses a keybind ``action_weights`` names (``{"use_item": 30}``) is multiplied by
    its weight, by each one's if it presses several: a rare action a fight turns on (a drink) is
    otherwise learnt as one never taken."""
    if not 0 <= intervention_weight < float("inf"):
        raise DatasetError(f"intervention weight must be 0 or more, got {intervention_weight!r}")
    weights = np.where(demos.intervention, intervention_weight, 1.0)
    weights[demos.policy_played | demos.final] = 0.0
    if action_weights:
        table = demos.config.actions(load_profile(demos.config.profile))
        for keybind, weight in action_weights.items():
            try:
                weights[table.presses(keybind, demos.actions)] *= weight
            except ValueError as e:
                raise DatasetError(
                    f"bc.action_weights: {e} (the dataset's): name one of them, or leave {keybind!r} out"
                ) from None
    return weights


def check_config(built_for: EnvConfig, wanted: EnvConfig, what: str, fix: str) -> None:
    """Refuse to go on when ``what`` was made for another env than ``wanted``, naming every
    setting that differs (a crop or a timestep counts, not only the spaces' shapes)."""
    differences = built_for.differences(wanted)
    if differences:
        raise DatasetError(f"{what} was made for another env ({'; '.join(differences)}, theirs vs wanted): {fix}")
