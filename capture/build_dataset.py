"""``python -m capture.build_dataset``: raw episodes -> a Minari dataset the trainers read.

Each recorded episode is resampled on the env's step grid (step k begins at the episode's first
sample time plus k timesteps). The observation at a step boundary is built from the last sample
at or before it by the env's own ``ObservationBuilder``, so dataset frames are produced by the
very code that produces live ones; the action is read from the key log over the step
(``capture.labels``); the reward is the env's base reward between consecutive boundaries; a
death or a kill terminates the episode there, anything else truncates it. Frames are stored
losslessly (``jpeg_encoding=False``). Not ``minari.DataCollector``: it keeps a whole session in a
temporary folder (a crash loses it all) and needs jax.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from env.cli import parse_size
from env.elden_env import EldenRingEnv
from env.observations import FrameSpec, ObservationBuilder
from env.profile import Profile, load_profile
from env.siphon_config import ConfigError
from env.rewards import BaseReward

from capture.episode import PARTIAL, Episode, EpisodeError, list_episodes, read_episode
from capture.labels import StepLabeler

log = logging.getLogger(__name__)


class BuildError(ValueError):
    """The dataset cannot be built; the message says why and what to do."""


@dataclass(frozen=True)
class BuildSettings:
    action_mode: str = "discrete"
    timestep_ms: float = 200.0
    frame_size: tuple[int, int] = (84, 84)
    frame_crop: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)
    max_steps: int = 900


@dataclass
class Steps:
    observations: dict[str, np.ndarray]  # T + 1 rows
    actions: np.ndarray  # T rows
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray


def episode_steps(episode: Episode, profile: Profile, settings: BuildSettings) -> Steps | None:
    """One recorded episode on the env's step grid, or None if it is shorter than one step."""
    builder = ObservationBuilder(profile, FrameSpec(settings.frame_size, settings.frame_crop))
    labeler = StepLabeler(profile, episode.key_names, settings.action_mode)
    names = episode.attribute_names
    missing = [a for a in builder.attributes if a not in names]
    if missing:
        raise BuildError(f"{episode.path.name} lacks attributes the observation needs: {missing}")
    dt = settings.timestep_ms / 1000.0
    t = episode.t
    if len(t) < 2:
        return None
    full_steps = int((t[-1] - t[0]) / dt + 1e-9)
    # A fight decided after the last full step ends with one more (shorter) step, so that the
    # death or the kill, always the final sample, is in the dataset as the env would end it.
    last = dict(zip(names, episode.state[-1]))
    decided = last["HeroHp"] <= 0 or last["NpcHp"] <= 0
    final_short_step = decided and t[0] + dt * full_steps < t[-1]
    boundaries = t[0] + dt * np.arange(full_steps + 1 + int(final_short_step))
    if len(boundaries) < 2:
        return None
    at = np.searchsorted(t, boundaries, side="right") - 1  # last sample at or before each boundary
    reward = BaseReward()
    states = [dict(zip(names, episode.state[i])) for i in at]
    observations = [builder.reset(states[0], episode.frames[at[0]], 0)]
    actions, rewards, terminations = [], [], []
    for k in range(1, len(boundaries)):
        window = slice(at[k - 1] + 1, at[k] + 1)  # samples in (boundary k-1, boundary k]
        actions.append(labeler.label(episode.keys_held[window], episode.keys_pressed[window]))
        observations.append(builder.step(states[k], episode.frames[at[k]], actions[-1]))
        rewards.append(reward(states[k - 1], states[k]))
        over = states[k]["HeroHp"] <= 0 or states[k]["NpcHp"] <= 0
        terminations.append(over)
        if over or k >= settings.max_steps:
            break
    truncations = [False] * len(actions)
    truncations[-1] = not terminations[-1]
    return Steps(
        observations={key: np.stack([o[key] for o in observations]) for key in observations[0]},
        actions=np.array(actions),
        rewards=np.array(rewards, np.float64),
        terminations=np.array(terminations),
        truncations=np.array(truncations),
    )


def recorded_profile(paths: list[Path]) -> str:
    """The one profile every episode was recorded with (a dataset holds one game's actions)."""
    names = {}
    for path in paths:
        try:
            names.setdefault(read_episode(path, frames=False).attrs.get("profile"), path.name)
        except EpisodeError as e:
            raise BuildError(str(e)) from None
    if len(names) > 1:
        examples = ", ".join(f"{name!r} ({path})" for name, path in names.items())
        raise BuildError(f"the episodes were recorded with different profiles: {examples}; "
                         "build one dataset per profile (keep their episodes in separate folders)")
    return next(iter(names))


def build_dataset(
    raw_dir: str | Path,
    dataset_id: str,
    profile: str | Profile | None = None,
    settings: BuildSettings = BuildSettings(),
    root: str | Path | None = None,
    force: bool = False,
):
    """Build (or with ``force``, rebuild) ``dataset_id`` from every finished episode in ``raw_dir``,
    with ``profile`` (by default the one the episodes were recorded with)."""
    import minari
    from minari.data_collector import EpisodeBuffer
    from tqdm import tqdm

    raw_dir = Path(raw_dir)
    root = Path(root or os.environ.get("MINARI_DATASETS_PATH") or "datasets/minari").resolve()
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    paths = list_episodes(raw_dir)
    if not paths:
        partials = sorted(raw_dir.glob(f"*{PARTIAL}"))
        hint = f" ({len(partials)} unfinished: run `python -m capture.recover {raw_dir}`)" if partials else ""
        raise BuildError(f"no finished episodes in {raw_dir}{hint}; record some with `python -m capture.record`")
    try:
        profile = profile if isinstance(profile, Profile) else load_profile(profile or recorded_profile(paths))
    except ConfigError as e:
        raise BuildError(str(e)) from None
    target = root / dataset_id
    if target.exists():
        if not force:
            raise BuildError(f"dataset {dataset_id!r} already exists in {root}: pass --force to rebuild it")
        shutil.rmtree(target)

    env = EldenRingEnv(profile=profile, action_mode=settings.action_mode, frame_size=settings.frame_size,
                       frame_crop=settings.frame_crop, max_steps=settings.max_steps)
    buffers, sources = [], []
    for path in tqdm(paths, desc="episodes", unit="episode", disable=None):
        try:
            episode = read_episode(path)
        except EpisodeError as e:
            raise BuildError(str(e)) from None
        if episode.attrs.get("profile") != profile.name:
            raise BuildError(f"{path.name} was recorded with profile {episode.attrs.get('profile')!r}, not {profile.name!r}")
        steps = episode_steps(episode, profile, settings)
        if steps is None:
            log.warning("skipping %s: shorter than one step (%d samples)", path.name, len(episode))
            continue
        buffers.append(EpisodeBuffer(
            id=len(buffers), seed=int(episode.attrs.get("sim_seed", -1)), observations=steps.observations,
            actions=steps.actions, rewards=list(steps.rewards), terminations=list(steps.terminations),
            truncations=list(steps.truncations),
        ))
        sources.append(path.name)
    env.close()
    if not buffers:
        raise BuildError(f"every episode in {raw_dir} is shorter than one {settings.timestep_ms:g} ms step")
    description = {"source_episodes": sources, "raw_dir": str(raw_dir), "profile": profile.name, "settings": asdict(settings)}
    dataset = minari.create_dataset_from_buffers(
        dataset_id, buffers, observation_space=env.observation_space, action_space=env.action_space,
        algorithm_name="human or autopilot play (capture.record)", author="elden-il",
        code_permalink="https://github.com/elden-il/elden-il", description=json.dumps(description),
        jpeg_encoding=False,
    )
    (target / "build.json").write_text(json.dumps(description, indent=2))
    log.info("built %s: %d episodes, %d steps", dataset_id, len(buffers), sum(len(b.actions) for b in buffers))
    return dataset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m capture.build_dataset",
        description="Build a Minari dataset (lossless frames) from recorded episodes, with the env's "
        "own preprocessing so training data matches live observations exactly.",
        epilog="example: python -m capture.build_dataset --raw datasets/raw --id eldenil/margit-v0 --action-mode discrete",
    )
    parser.add_argument("--raw", type=Path, default=Path("datasets/raw"), help="episode folder (default: %(default)s)")
    parser.add_argument("--id", default="eldenil/margit-v0", help="dataset id (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=None, help="dataset root (default: $MINARI_DATASETS_PATH or datasets/minari)")
    parser.add_argument("--profile", default=None,
                        help="profile to build with (default: the one the episodes were recorded with)")
    parser.add_argument("--action-mode", choices=("discrete", "multi_binary"), default="discrete")
    parser.add_argument("--timestep-ms", type=float, default=200.0)
    parser.add_argument("--frame-size", type=parse_size, default=(84, 84))
    parser.add_argument("--max-steps", type=int, default=900)
    parser.add_argument("--force", action="store_true", help="replace an existing dataset with this id")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = BuildSettings(args.action_mode, args.timestep_ms, args.frame_size, max_steps=args.max_steps)
    try:
        build_dataset(args.raw, args.id, args.profile, settings, args.root, args.force)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
