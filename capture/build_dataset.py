"""``python -m capture.build_dataset``: raw episodes -> a Minari dataset the trainers read.

Each recorded episode is resampled on the env's step grid (step k begins at the episode's first
sample time plus k timesteps, or from where a person's presses fall). A step observes the sample
showing the game as it began (``step_starts``, ``samples_at``): its frame, decoded from the
episode's video and cropped and resized by the env's own ``FrameSpec`` (``capture.footage``), as
the live env does with the frame it captures, and its state scalars by the env's own
``ObservationBuilder`` (over the whole episode's columns at once).
So one recording gives datasets of any frame size and crop up to its master picture; and each is
built for the window size it was captured at (``EnvConfig.capture_size``), so that the envs
trained and evaluated on it render the same picture of the arena before cropping and resizing.
Format 1 episodes hold frames already cropped and resized when recorded, and give only those. The
action is read from the key log over the step (``capture.labels``); the
reward is the env's base reward between consecutive boundaries; a death or a kill
(``env.fight_rules``) terminates the episode there, anything else truncates it. Each step's infos say
who played it (``step_infos``): the person correcting a policy (``intervention``), or the
policy itself (``policy``, its own action, not a demonstration). Frames are stored
losslessly: not JPEG (``jpeg_encoding=False``), but gzip-compressed by HDF5 (``capture.compression``).
Not ``minari.DataCollector``: it keeps a whole session in a
temporary folder (a crash loses it all) and needs jax.

The dataset describes its env: the ``EnvConfig`` it was built for is its Minari env spec
(``dataset.recover_environment()`` rebuilds that env) and, with the source episodes, its
``elden_il`` metadata, which training and evaluation read back. Its Minari description says in
words what was recorded and how to load it, its ``code_permalink`` is the project's repository
and its ``elden_il`` metadata holds the digest of the code that built it
(``capture.provenance``): the same code writes the same bytes from any checkout, at any commit.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import gymnasium as gym
import numpy as np

import env  # noqa: F401 - registers EldenIL/Margit-v0, the dataset's env spec
from env.actions import ActionTable
from env.common.cli import add_flags, command_parser, flag, from_flags, output_folder, run_command
from env.common.errors import DataError
from env.common.fields import STEP_MS, FieldError
from env.common.lock import is_being_written
from env.common.staging import NAMESPACE_METADATA, staged
from env.config import EnvConfig
from env.observations import FrameSpec, ObservationBuilder, observation_space
from env.profile import load_profile
from env.rewards import BaseReward

from capture.bounds import check_times
from capture.compression import DEFAULT as DEFAULT_COMPRESSION
from capture.compression import FrameCompression, compress_frames
from capture.dataset_id import check_dataset_id
from capture.episode import Episode, list_episodes, read_episode
from capture.episode_format import PARTIAL, EpisodeError
from capture.episode_writer import RESERVE_BYTES
from capture.labels import EVENT_TOLERANCE_S, HeardActions, StepLabeler, press_phase
from capture.provenance import REPOSITORY, code_digest

log = logging.getLogger(__name__)

ENV_ID = "EldenIL/Margit-v0"
DATASET_ENTRY_POINT = "env.factory:make_dataset_env"
"""The entry point a dataset's env spec names, which ``dataset.recover_environment()`` calls with
the spec's arguments: the env the dataset was built for, in-process, refusing a game to reach."""
METADATA_KEY = "elden_il"
"""The dataset metadata key holding the project's own description (JSON): the env config, the
source episodes, the raw folder, the frame compression and the digest of the code that built it."""
ALGORITHM = "human or autopilot play (capture.record)"
"""What played the episodes, as the dataset's Minari ``algorithm_name`` says."""
AUTHOR = "elden-il"
CONTACT = f"{REPOSITORY}/issues"
"""A dataset's Minari ``author_email``, which Minari asks for as "an author email, or some other
obvious contact information": its author is this project (the recordings name no person), whose
contact is its issue tracker."""


MAX_HELD_S = 1.0
"""The longest run of non-finite state samples the builder repairs (by holding the last finite
value): a memory read that failed for a moment. A longer run is reads that stopped working."""
PER_SAMPLE_FIELDS = (
    "frames",
    "t",
    "frame_t",
    "state",
    "keys_held",
    "keys_pressed",
    "mouse",
    "intervention",
    "frame_repeated",
)
"""The ``Episode`` fields with one row per sample."""


class BuildError(DataError):
    """The dataset cannot be built; the message says why and what to do."""


@dataclass
class Steps:
    observations: dict[str, np.ndarray]  # T + 1 rows
    actions: np.ndarray  # T rows
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    infos: dict[str, np.ndarray]  # T + 1 rows, as Minari keeps them: the reset's, then each step's


def step_infos(episode: Episode, at: np.ndarray) -> dict[str, np.ndarray]:
    """Who played each step (the samples after boundary k-1 up to boundary k): ``intervention``
    when the person had taken control from the policy at every one of its samples (so its action
    is theirs alone), ``policy`` when the policy played it (an episode recorded with ``--policy``,
    outside interventions). Row 0 is the reset's, as in Minari: step k's is row k."""
    marked = episode.intervention
    intervention = np.array([bool(marked[a + 1 : b + 1].all()) and b > a for a, b in zip(at[:-1], at[1:])], bool)
    policy = ~intervention if episode.attrs.get("source") == "policy" else np.zeros_like(intervention)
    return {
        name: np.concatenate([[False], column]) for name, column in (("intervention", intervention), ("policy", policy))
    }


BOUNDARY_TOLERANCE_S = 1e-6
"""A sample this close after a step boundary counts as at it: boundaries are sums of floats, so a
lock-step sample taken exactly at one can land a rounding error past it (more so late in a long
session, where times are large), which would make that step one sample short and the next one
sample long."""


PRESS_SAMPLE_S = 0.005
"""A sample started this soon after a step begins shows the game as the step began: the live
recorder samples at once on a press (``capture.sampler``), well within this on a busy machine
(elden_il/studies/STUDIES.md, the human path), and a game shows a press at its next tick at the soonest."""


def samples_at(t: np.ndarray, moments: np.ndarray) -> np.ndarray:
    """The index of the sample showing the game at each moment (sample times ``t``): the one
    started within ``PRESS_SAMPLE_S`` after it where there is one (the live recorder's sample at
    a press), else the last one at or before it (within the tolerance).

    Why not the nearest one, which may come later: a press shows in the game's state at its next
    tick (a pushed stick walks the hero at once), and a step paired with its own action under way
    teaches a policy, deciding before it acts, to roll only when already walking. A lock-step
    recording's steps begin at sample times, whose samples this gives exactly."""
    after = np.minimum(np.searchsorted(t, moments - BOUNDARY_TOLERANCE_S), len(t) - 1)
    taken_then = (t[after] >= moments - BOUNDARY_TOLERANCE_S) & (t[after] <= moments + PRESS_SAMPLE_S)
    before = np.searchsorted(t, moments + BOUNDARY_TOLERANCE_S, side="right") - 1
    return np.where(taken_then, after, before)


def step_starts(boundaries: np.ndarray, presses: np.ndarray, slice_s: float) -> np.ndarray:
    """When each step begins, as a policy's observation is the game at the moment it acts: at its
    first press (``presses``: ``HeardActions.press_times``) where one falls in its first slice of
    ``slice_s`` seconds, else at its boundary.

    Why not the boundary alone: a person's grid is laid where most presses fall
    (``capture.labels.press_phase``), each a few milliseconds of jitter after it, and the person
    presses off the recorder's schedule, so the last sample before the boundary can be up to a
    period older than the game the press was made on: BC on that pairing dodges early, by the
    game tick or two a dodge has to spare. A lock-step recording presses on its boundaries."""
    starts = np.asarray(boundaries, np.float64).copy()
    if len(presses):
        first = np.minimum(np.searchsorted(presses, starts - EVENT_TOLERANCE_S), len(presses) - 1)
        in_first_slice = (presses[first] >= starts - EVENT_TOLERANCE_S) & (
            presses[first] < starts + slice_s - EVENT_TOLERANCE_S
        )
        starts[in_first_slice] = presses[first[in_first_slice]]
    return starts


def episode_step_starts(episode: Episode, boundaries: np.ndarray, heard: HeardActions, dt: float) -> np.ndarray:
    """``step_starts`` for ``episode``'s steps of ``dt`` seconds: its presses, its slices."""
    return step_starts(boundaries, heard.press_times(episode), dt / slices_per_step(episode, dt))


def slices_per_step(episode: Episode, dt: float) -> int:
    """How many equal slices a step of ``dt`` seconds is cut into for its labels: as many as it
    holds samples (``capture.labels.step_inputs``)."""
    return max(1, round(dt * float(episode.attrs.get("sample_rate_hz", 0))))


def step_grid(
    episode: Episode, dt: float, decided: bool, heard: HeardActions, align_to_presses: bool = True
) -> np.ndarray:
    """The step boundaries laid over ``episode``: every ``dt`` seconds from the first sample, or
    (``align_to_presses``) from where the presses ``heard`` fall (``capture.labels.press_phase``). A
    fight ``decided`` after the last full step ends with one more, shorter step, so that the death
    or the kill, always the final sample, is in the dataset as the env would end it."""
    t = episode.t
    slice_s = dt / slices_per_step(episode, dt)
    phase = press_phase(heard.press_times(episode), t[0], dt, slice_s) if align_to_presses else 0.0
    start = t[0] + phase
    full_steps = max(0, int((t[-1] - start) / dt + 1e-9))
    final_short_step = decided and start + dt * full_steps < t[-1]
    return start + dt * np.arange(full_steps + 1 + int(final_short_step))


def step_labels(episode: Episode, boundaries: np.ndarray, heard: HeardActions, labeler: StepLabeler) -> list:
    """The action of each step between consecutive ``boundaries``, from what was ``heard`` in
    [boundary k, boundary k+1) by the input log's event times (``capture.labels``), each step
    cut into as many slices as it holds samples."""
    slices = slices_per_step(episode, float(np.median(np.diff(boundaries)))) if len(boundaries) > 1 else 1
    held, pressed = heard.steps(episode, boundaries, slices)
    return [
        labeler.label(held[k * slices : (k + 1) * slices], pressed[k * slices : (k + 1) * slices])
        for k in range(len(boundaries) - 1)
    ]


def episode_steps(
    episode: Episode,
    config: EnvConfig,
    builder: ObservationBuilder,
    actions: ActionTable,
    align_to_presses: bool = True,
) -> Steps | None:
    """One recorded episode on the env's step grid (``step_grid``), or None if it is shorter than one step."""
    try:
        heard = HeardActions(actions.profile, episode.key_names)
        labeler = StepLabeler(actions)
    except EpisodeError as e:
        raise BuildError(f"{episode.path.name}: {e}") from None
    names = episode.attribute_names
    missing = [a for a in builder.attributes if a not in names]
    if missing:
        raise BuildError(f"{episode.path.name} lacks attributes the observation needs: {missing}")
    dt = config.timestep_ms / 1000.0
    t = episode.t
    if len(t) < 2:
        return None
    rules = actions.profile.fight_rules
    decided = rules.is_over(dict(zip(names, episode.state[-1])))
    try:
        boundaries = step_grid(episode, dt, decided, heard, align_to_presses)
    except EpisodeError as e:
        raise BuildError(str(e)) from None
    if len(boundaries) < 2:
        return None
    at = samples_at(t, episode_step_starts(episode, boundaries, heard, dt))
    over = rules.is_over({name: episode.state[at, j] for j, name in enumerate(names)})
    # the episode ends at the first boundary where the fight is over, or after max_steps steps
    ended = np.flatnonzero(over[1:])
    steps = min(int(ended[0]) + 1 if len(ended) else len(at) - 1, config.max_steps)
    at = at[: steps + 1]
    states = {name: episode.state[at, j] for j, name in enumerate(names)}
    before = {name: column[:-1] for name, column in states.items()}
    after = {name: column[1:] for name, column in states.items()}
    labels = step_labels(episode, boundaries[: steps + 1], heard, labeler)
    terminations = over[1 : steps + 1]
    truncations = np.zeros(steps, bool)
    truncations[-1] = not terminations[-1]
    return Steps(
        observations={
            "frame": episode.frames_at(at, config.frame_spec),
            **builder.scalars(states),
        },
        actions=np.array(labels),
        rewards=np.asarray(BaseReward(rules=rules)(before, after), np.float64),
        terminations=terminations,
        truncations=truncations,
        infos=step_infos(episode, at),
    )


def check_timestep(config: EnvConfig) -> None:
    """Refuse a timestep no step grid can be made of (0 would be endless steps)."""
    try:
        STEP_MS.check("timestep_ms", config.timestep_ms)
    except FieldError as e:
        raise BuildError(f"{e}: build the dataset with a timestep such as --timestep-ms 200") from None


def common_prefix(episode: Episode) -> Episode:
    """The samples every per-sample dataset holds. A file whose datasets disagree in length (a
    copy or a tool cut one short) keeps its common prefix, said in one warning line: the samples
    past it lack their state, keys or frame, and cannot be stepped. A file where one of them holds
    no row has no sample to use: a ``BuildError`` naming it (the viewer's too)."""
    lengths = {name: len(getattr(episode, name)) for name in PER_SAMPLE_FIELDS if getattr(episode, name) is not None}
    n = min(lengths.values())
    if n == len(episode.t) == max(lengths.values()):
        return episode
    shown = ", ".join(f"{name} {length}" for name, length in lengths.items())
    if n == 0:  # nothing to step or show: said as the file's fault, not as an index past its end
        empty = [name for name, length in lengths.items() if length == 0]
        raise BuildError(
            f"{episode.path}: its {' and '.join(empty)} {'has' if len(empty) == 1 else 'have'} 0 rows ({shown} rows), "
            "so no sample of it can be used: a tool or a copy cut it short; record the fight again, or move the "
            "file out of the folder"
        )
    log.warning(
        "%s: its per-sample datasets differ in length (%s rows): only the first %d samples, which all of them "
        "hold, are used",
        episode.path.name,
        shown,
        n,
    )
    return replace(episode, **{name: getattr(episode, name)[:n] for name in lengths})


def finite_state(episode: Episode) -> Episode:
    """The episode with every short run of non-finite state values (a memory read that failed
    for a moment) replaced by the last finite value before it, said in one warning line naming
    the samples. A run from the first sample (nothing to hold) or longer than ``MAX_HELD_S`` is
    refused with a ``BuildError`` naming them: the observations and rewards would be made up."""
    bad = ~np.isfinite(episode.state)
    if not bad.any():
        return episode
    rows = np.flatnonzero(bad.any(axis=1))
    columns = [episode.attribute_names[j] for j in np.flatnonzero(bad.any(axis=0))]
    runs = np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1)
    where = f"{episode.path.name}: {', '.join(columns)} not a finite number at samples {_spans(runs)}"
    longest = max(float(episode.t[run[-1]] - episode.t[run[0]]) for run in runs)
    if rows[0] == 0 or longest > MAX_HELD_S:
        why = "from the first sample, with no value before to hold" if rows[0] == 0 else f"for {longest:.1f} s"
        raise BuildError(
            f"{where} ({why}): the game's memory could not be read there. Record the fight again, "
            "or move the file out of the folder to build without it"
        )
    state = episode.state.copy()
    for i in rows:  # in order: row i - 1 is finite by now
        state[i] = np.where(bad[i], state[i - 1], state[i])
    log.warning("%s: held the last finite value over them (a failed memory read)", where)
    return replace(episode, state=state)


def usable(episode: Episode) -> Episode:
    """The episode as the builder uses it: its sample and event times checked (``capture.bounds``),
    the samples every per-sample dataset holds, short runs of failed memory reads held at the
    last value."""
    check_times(episode.path, episode.t)
    check_times(episode.path, episode.events["t"], "input events' times", ordered=False)
    return finite_state(common_prefix(episode))


def _spans(runs: list[np.ndarray]) -> str:
    """Sample indices as ranges: ``40-49, 120``."""
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}" for run in runs)


def recorded_with(paths: list[Path]) -> tuple[str, FrameSpec | None, tuple[int, int] | None]:
    """The one profile, the one way frames were stored (format 1's frame size and crop; None:
    a video of the picture) and the one window size (None for files from before it was stored)
    every episode was recorded with: a dataset holds one game's actions, made from one picture
    of the arena."""
    found: dict[tuple[str, FrameSpec | None, tuple[int, int] | None], str] = {}  # (profile, frames, window) -> first
    for path in paths:
        try:
            episode = read_episode(path, frames=False)
        except EpisodeError as e:
            raise BuildError(str(e)) from None
        window = episode.attrs.get("window_size")
        window = None if window is None else (int(window[0]), int(window[1]))
        found.setdefault((episode.attrs.get("profile"), episode.stored_frames, window), path.name)
    for i, (what, show) in enumerate(
        (
            ("profiles", repr),
            ("stored frames", _stored_text),
            ("window sizes (the picture captured before crop and resize)", _size_text),
        )
    ):
        first: dict[str, str] = {}
        for key, name in found.items():
            first.setdefault(show(key[i]), name)
        if len(first) > 1:
            examples = ", ".join(f"{value} ({name})" for value, name in first.items())
            raise BuildError(
                f"the episodes were recorded with different {what}: {examples}; "
                "build one dataset from each (keep their episodes in separate folders)"
            )
    return next(iter(found))


def _stored_text(stored: FrameSpec | None) -> str:
    return "a video of the picture" if stored is None else f"{stored} frames (format 1)"


def _size_text(size: tuple[int, int] | None) -> str:
    return "unknown" if size is None else f"{size[0]}x{size[1]}"


def recorded_picture(config: EnvConfig, window: tuple[int, int] | None) -> EnvConfig:
    """``config`` for the picture the episodes were captured from (``EnvConfig.capture_size``), so
    that every env built from the dataset renders that picture; a config asking for another
    picture is refused. Episodes from before the window size was stored leave it as asked."""
    if window is None:
        return config
    recorded = config.with_picture(window)
    if config.capture_size is not None and config.picture_size != recorded.picture_size:
        wanted = config.capture_size
        raise BuildError(
            f"the episodes were captured from a {_size_text(window)} window, not the {_size_text(wanted)} this "
            f"dataset is for (capture_size): build it for their window (leave capture_size out), or record "
            f"again with the game's window at {_size_text(wanted)}"
        )
    return recorded


def build_dataset(
    raw_dir: str | Path,
    dataset_id: str,
    config: EnvConfig = EnvConfig(),
    root: str | Path | None = None,
    force: bool = False,
    compression: FrameCompression = DEFAULT_COMPRESSION,
    align_to_presses: bool = True,
):
    """Build (or with ``force``, rebuild) ``dataset_id`` for the env ``config`` describes, from
    every finished episode in ``raw_dir``, in the datasets root ``root`` (None:
    ``$MINARI_DATASETS_PATH``, else ``datasets/minari``), and return it as Minari reads it there.
    ``config.profile`` None means the profile the episodes were recorded with. A rebuild replaces
    the old dataset only once the new one is complete (``env.common.staging``). ``compression`` is
    how frames are stored (lossless either way). ``align_to_presses`` False lays each episode's
    step grid from its first sample instead of where its presses fall (``step_grid``): the
    comparison the human-path benchmark makes."""
    from minari import MinariDataset

    check_dataset_id(dataset_id)
    check_timestep(config)
    raw_dir = Path(raw_dir)
    root = Path(root or os.environ.get("MINARI_DATASETS_PATH") or "datasets/minari").resolve()
    paths = finished_episodes(raw_dir)
    config, actions = resolved_config(config, paths)
    if (root / dataset_id).exists() and not force:
        raise BuildError(f"dataset {dataset_id!r} already exists in {root}: pass --force to rebuild it")
    buffers, sources = episode_buffers(paths, config, actions, align_to_presses)
    if not buffers:
        raise BuildError(f"every episode in {raw_dir} is shorter than one {config.timestep_ms:g} ms step")
    about = build_record(config, sources, raw_dir, compression)
    write_dataset(root, dataset_id, buffers, config, actions, about, compression)
    log.info("built %s: %d episodes, %d steps", dataset_id, len(buffers), sum(len(b.actions) for b in buffers))
    return MinariDataset(root / dataset_id / "data")


def finished_episodes(raw_dir: Path) -> list[Path]:
    """The finished episodes in ``raw_dir``; each partial one beside them is named in a warning
    (``_warn_unfinished``), and a folder with none finished is refused."""
    paths = list_episodes(raw_dir)
    partials = sorted(raw_dir.glob(f"*{PARTIAL}"))
    if not paths:
        hint = f" ({len(partials)} unfinished: run `python -m capture.recover {raw_dir}`)" if partials else ""
        raise BuildError(f"no finished episodes in {raw_dir}{hint}; record some with `python -m capture.record`")
    for partial in partials:
        _warn_unfinished(partial)
    return paths


def resolved_config(config: EnvConfig, paths: list[Path]) -> tuple[EnvConfig, ActionTable]:
    """``config`` made whole for the episodes at ``paths``: the profile they were recorded with
    unless it names one, and the picture they were captured from (``recorded_picture``); with
    the action table it gives."""
    recorded_profile, _, window = recorded_with(paths)
    profile = load_profile(config.profile or recorded_profile)
    config = recorded_picture(config, window).replace(profile=profile.ref)
    return config, config.actions(profile)


def episode_buffers(
    paths: list[Path], config: EnvConfig, actions: ActionTable, align_to_presses: bool
) -> tuple[list[Any], list[str]]:
    """Each episode at ``paths`` on the env's step grid as a Minari ``EpisodeBuffer``, and the
    names of the files they came from; an episode shorter than one step is left out, said in a
    warning."""
    from minari.data_collector import EpisodeBuffer
    from tqdm import tqdm

    builder = config.observation_builder(actions)
    buffers, sources = [], []
    # an episode a thread: its video decodes, and its frames are made, with the GIL let go
    with ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="episode") as threads:
        done = threads.map(lambda path: stepped(path, config, builder, actions, align_to_presses), paths)
        read = list(tqdm(done, total=len(paths), desc="episodes", unit="episode", disable=None))
    for path, (episode, steps) in zip(paths, read):
        if steps is None:
            log.warning("skipping %s: shorter than one step (%d samples)", path.name, len(episode))
            continue
        buffers.append(
            EpisodeBuffer(
                id=len(buffers),
                seed=int(episode.attrs.get("sim_seed", -1)),
                observations=steps.observations,
                actions=steps.actions,
                rewards=list(steps.rewards),
                terminations=list(steps.terminations),
                truncations=list(steps.truncations),
                infos=steps.infos,
            )
        )
        sources.append(path.name)
    return buffers, sources


def stepped(
    path: Path, config: EnvConfig, builder: ObservationBuilder, actions: ActionTable, align_to_presses: bool
) -> tuple[Episode, Steps | None]:
    """The episode at ``path``, as the builder uses it (``usable``), and its steps
    (``episode_steps``); a file that cannot be read or stepped is a ``BuildError`` naming it."""
    try:
        episode = read_episode(path)
    except EpisodeError as e:
        raise BuildError(str(e)) from None
    if episode.attrs.get("profile") != actions.profile.name:
        raise BuildError(
            f"{path.name} was recorded with profile {episode.attrs.get('profile')!r}, not {actions.profile.name!r}"
        )
    episode = usable(episode)
    try:
        steps = episode_steps(episode, config, builder, actions, align_to_presses)
    except EpisodeError as e:  # its video, or a format 1 episode asked for another frame
        raise BuildError(str(e)) from None
    if episode.frame_repeated.any():
        log.warning(
            "%s: %d frames repeat the one before (the recorder's video encoder fell behind there)",
            path.name,
            int(episode.frame_repeated.sum()),
        )
    return episode, steps


def steps_in(path: Path, config: EnvConfig) -> int:
    """How many env steps the episode at ``path`` gives a dataset built for ``config``: its steps
    exactly as ``build_dataset`` lays and cuts them."""
    config, actions = resolved_config(config, [path])
    _, steps = stepped(path, config, config.observation_builder(actions), actions, align_to_presses=True)
    return 0 if steps is None else len(steps.actions)


def build_record(config: EnvConfig, sources: list[str], raw_dir: Path, compression: FrameCompression) -> dict[str, Any]:
    """What the dataset says of how it was made (its ``METADATA_KEY`` metadata and its
    ``build.json``): the env config, the source episodes, the raw folder, the frame compression
    and the digest of the code that built it (``capture.provenance``)."""
    return {
        "env_config": config.to_dict(),
        "source_episodes": sources,
        "raw_dir": str(raw_dir),
        "frame_compression": str(compression),
        "code": {"digest": code_digest()},
    }


def write_dataset(
    root: Path,
    dataset_id: str,
    buffers: list[Any],
    config: EnvConfig,
    actions: ActionTable,
    about: dict[str, Any],
    compression: FrameCompression,
) -> None:
    """Write ``buffers`` as ``dataset_id`` in a staging folder beside ``root / dataset_id`` and
    swap it in whole (``env.common.staging``), its frames compressed (``capture.compression``) and
    ``about`` in its metadata and its ``build.json``."""
    # the env that collects and evaluates, made in-process by recover_environment(), and refusing a
    # game to reach if a copy's spec were given one
    spec = replace(gym.spec(ENV_ID), entry_point=DATASET_ENTRY_POINT, kwargs=config.to_dict())
    outcomes = [bool(b.terminations[-1]) for b in buffers]
    require_room(root, dataset_id, buffers, compression)
    try:
        with hdf5_failures_held(), staged(root, dataset_id) as staging:
            storage = create_minari_dataset(
                staging,
                dataset_id,
                buffers,
                env_spec=spec,
                observation_space=observation_space(
                    config.frame_spec, action_space=actions.space, flasks=config.observe_flasks
                ),
                action_space=actions.space,
                description=describe(dataset_id, config, outcomes, compression),
            )
            compress_frames(storage.data_path / "main_data.hdf5", compression)
            storage.update_metadata({METADATA_KEY: json.dumps(about), "dataset_size": storage.get_size()})
            (staging / dataset_id / "build.json").write_text(json.dumps(about, indent=2))
    except (OSError, RuntimeError) as e:  # h5py says a failed write as either
        if not _disk_full(e):
            if not isinstance(e, OSError):
                raise
            raise BuildError(
                f"writing dataset {dataset_id!r} in {root} failed ({e}); "
                "the previous dataset with this id, if any, is unchanged"
            ) from None
        raise DiskFull(
            f"the disk is full: writing dataset {dataset_id!r} in {root} failed (No space left on device); the "
            "dataset being built is removed and the previous dataset with this id, if any, is unchanged: free some "
            "space and build it again"
        ) from None


def require_room(root: Path, dataset_id: str, buffers: list[Any], compression: FrameCompression) -> None:
    """Refuse, before a byte is written, a dataset the disk holding ``root`` has no room for: its
    arrays as Minari writes them, and as much again for the compressed copy made beside them.
    HDF5 cannot always be stopped once a write has found the disk full: closing the file it could
    not flush sometimes crashes the process (a segmentation fault) before any line is said."""
    arrays = sum(_bytes_held([b.observations, b.actions, b.rewards, b.infos]) for b in buffers)
    needed = arrays * (1 if compression.filter is None else 2) + RESERVE_BYTES
    disk = next(folder for folder in (root, *root.parents) if folder.exists())
    free = shutil.disk_usage(disk).free
    if free < needed:
        raise DiskFull(
            f"the disk is full: dataset {dataset_id!r} needs about {needed / 2**20:.1f} MiB in {root} while it is "
            f"built and its disk has {free / 2**20:.1f} MiB free; nothing was written and the previous dataset "
            "with this id, if any, is unchanged: free some space and build it again"
        )


def _bytes_held(tree: Any) -> int:
    """The bytes of the arrays and numbers in ``tree`` (an episode's steps: arrays, dicts and lists of them)."""
    if isinstance(tree, np.ndarray):
        return tree.nbytes
    if isinstance(tree, dict):
        return sum(_bytes_held(value) for value in tree.values())
    if isinstance(tree, list | tuple):
        return sum(_bytes_held(value) for value in tree)
    return 8


class DiskFull(BuildError):
    """The disk filled up while a dataset was written. HDF5 holds the file it could not flush and
    retries the writes as Python exits, where it crashed (a segmentation fault): the command says
    this one line and ends at once (``exit_at_once``), the staging folder already removed."""

    exit_at_once = True


def _disk_full(error: BaseException) -> bool:
    """Whether ``error`` is a write the disk refused for want of space: an ``OSError`` with that
    errno, or h5py's ``RuntimeError`` that quotes HDF5's own (``errno = 28``)."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return f"errno = {errno.ENOSPC}," in str(error) or f"errno = {errno.EDQUOT}," in str(error)


@contextmanager
def hdf5_failures_held() -> Iterator[None]:
    """h5py's failures to let go of an object of a file whose writes fail (a full disk) while the
    ``with`` body runs, which Python can only print (two tracebacks each, two dozen a build), left
    unsaid: the write's own error, raised from the body, says it once. Any other such failure is
    printed as before."""
    excepthook, unraisablehook = sys.excepthook, sys.unraisablehook

    def said_by_the_write(error: BaseException | None) -> bool:
        return isinstance(error, (OSError, RuntimeError)) and _disk_full(error)

    def except_hook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        if not said_by_the_write(error):
            excepthook(kind, error, tb)

    def unraisable_hook(info: Any) -> None:
        if not said_by_the_write(info.exc_value):
            unraisablehook(info)

    sys.excepthook, sys.unraisablehook = except_hook, unraisable_hook
    try:
        yield
    finally:
        sys.excepthook, sys.unraisablehook = excepthook, unraisablehook


def create_minari_dataset(
    root: Path,
    dataset_id: str,
    buffers: list[Any],
    *,
    env_spec: gym.envs.registration.EnvSpec,
    observation_space: gym.Space,
    action_space: gym.Space,
    description: str,
) -> Any:
    """What ``minari.create_dataset_from_buffers`` writes for this project's datasets (the same
    files, byte for byte: ``tests/test_recording.py`` holds them equal), but in the datasets
    root ``root``, given: Minari finds its root only in ``$MINARI_DATASETS_PATH``, which a library
    must not set for the whole process. The env spec is also the evaluation env's; frames are
    stored as arrays, not JPEG. Returns the dataset's ``MinariStorage``."""
    from minari import __version__ as minari_version
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.dataset.minari_storage import MinariStorage
    from minari.namespace import namespace_hierarchy

    for namespace in namespace_hierarchy(parse_dataset_id(dataset_id)[0]):
        folder = root / namespace
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / NAMESPACE_METADATA).exists():
            (folder / NAMESPACE_METADATA).write_text(json.dumps({}))
    data = root / dataset_id / "data"
    data.mkdir(parents=True)
    storage = MinariStorage.new(
        data, observation_space=observation_space, action_space=action_space, env_spec=env_spec, jpeg_encoding=False
    )
    storage.update_metadata(  # Minari's own keys, in its order: metadata.json's bytes follow it
        {
            "dataset_id": dataset_id,
            "code_permalink": REPOSITORY,
            "author": {AUTHOR},
            "author_email": {CONTACT},
            "algorithm_name": ALGORITHM,
            "description": description,
            "minari_version": minari_version,
            "eval_env_spec": env_spec.to_json(),
        }
    )
    storage.update_episodes(buffers)
    return storage


def _warn_unfinished(partial: Path) -> None:
    """A partial episode is not in the dataset: say so, and how to get it in."""
    if is_being_written(partial):
        log.warning("not included: %s is being recorded right now", partial.name)
    else:
        log.warning(
            "not included: %s is unfinished (a recorder stopped while writing it): run "
            "`python -m capture.recover %s`, then build again",
            partial.name,
            partial.parent,
        )


def describe(dataset_id: str, config: EnvConfig, decided: list[bool], compression: FrameCompression) -> str:
    """The dataset's Minari description (what ``minari show`` prints): what was recorded, the
    env in words, and how to load it; ``decided`` says per episode whether the fight ended in a
    win or a death (terminated) rather than being cut."""
    fights = len(decided)
    ended = sum(decided)
    stack = f"a stack of the last {config.frame_stack} frames" if config.frame_stack else "no frame stack"
    history = f"the last {config.action_history} actions" if config.action_history else "no action history"
    captured = "" if config.capture_size is None else f" (made from a {_size_text(config.capture_size)} window)"
    return (
        f"{fights} recorded boss fight{'s' * (fights != 1)} against the {config.profile} profile's boss, "
        f"{ended} played to a win or a death and {fights - ended} cut short (truncated). "
        f"One step is {config.timestep_ms:g} ms of game time with a {config.action_mode} action "
        f"(the profile's action table) and the env's base reward; episodes end after at most "
        f"{config.max_steps} steps. Observations: the RGB frame at {config.frame_size[0]}x{config.frame_size[1]}{captured} "
        f"(stored losslessly, HDF5 {compression}), player and boss HP (0-1), their distance "
        f"and both animation ids{', the flask charges left' if config.observe_flasks else ''}. The env it was built for (see the env spec) adds {stack} and "
        f"{history}; elden_il.data rebuilds them from each episode. "
        f"Load it: minari.load_dataset({dataset_id!r}) with MINARI_DATASETS_PATH pointing at the "
        f"datasets root; dataset.recover_environment() makes that env, in-process (on a dataset from anyone else, call "
        f"elden_il.data.check_env_spec(dataset) first: it refuses a spec naming other code or a game to reach). For d3rlpy or TorchRL use "
        f"elden_il.interop. Built by python -m capture.build_dataset from recorded episodes."
    )


@dataclass(frozen=True)
class BuildArgs:
    """Which recordings ``python -m capture.build_dataset`` builds, and where (the env's settings
    are ``EnvConfig``'s own flags)."""

    raw: Path = field(default=Path("datasets/raw"), metadata=flag("episode folder", type=Path))
    id: str = field(default="eldenil/margit-v0", metadata=flag("dataset id"))
    root: Path | None = field(
        default=None,
        metadata=flag("dataset root (default: $MINARI_DATASETS_PATH or datasets/minari)", type=output_folder),
    )
    force: bool = field(default=False, metadata=flag("replace an existing dataset with this id"))


def main(argv: list[str] | None = None) -> int:
    defaults = EnvConfig()
    parser = command_parser(
        "python -m capture.build_dataset",
        "Build a Minari dataset (lossless frames) from recorded episodes, at any frame size and crop,\n"
        "decoding each episode's video with the env's own preprocessing so training data matches live\n"
        "observations exactly.",
        (BuildArgs, ("raw", "id", "root")),
        epilog="example: python -m capture.build_dataset --raw datasets/raw --id eldenil/margit-v0 --action-mode discrete",
    )
    add_flags(  # every env setting a command line takes
        parser,
        EnvConfig,
        profile={"help": "profile to build with (default: the one the episodes were recorded with)"},
        frame_size={
            "default": None,
            "help": f"observation frame WxH, made from each episode's video (default: {defaults.frame_spec}; "
            "format 1 episodes: the size they were recorded at, the only one they give)",
        },
        frame_crop={
            "default": None,
            "help": "LEFT,TOP,RIGHT,BOTTOM fractions of the recorded picture kept before resizing (default: "
            "all of it; format 1 episodes: the crop they were recorded with)",
        },
    )
    add_flags(parser, BuildArgs, ("force",))
    flags = parser.parse_args(argv)
    args = from_flags(BuildArgs, flags)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    def work() -> None:
        paths = list_episodes(args.raw)
        recorded = (recorded_with(paths)[1] if paths else None) or defaults.frame_spec  # none: build_dataset says so
        config = from_flags(
            EnvConfig, flags, frame_size=flags.frame_size or recorded.size, frame_crop=flags.frame_crop or recorded.crop
        )
        build_dataset(args.raw, args.id, config, args.root, args.force)

    return run_command(work)


if __name__ == "__main__":
    raise SystemExit(main())
