"""A raw episode into a Rerun recording: every sample on the recorder's clock, and its env steps.

What the recorder kept, sample by sample (timelines ``sample`` and ``time``, seconds since the
first sample): the picture at its master size, by reference into the episode's own video (Rerun's
``AssetVideo`` with a ``VideoFrameReference`` per sample, so the viewer decodes only the frames
shown, never the whole video up front; the Matroska video is remuxed to the MP4 Rerun reads,
packets copied, nothing encoded again); both fighters' HP, FP and stamina; the animation ids
with what the observation makes of them; distance; keys held, one row per key, with each press
marked; mouse movement; intervention spans; the recorder's late and repeated samples; the
outcome. And what the learner would get from it (``step_view``): the dataset builder's own steps
for an env config, so the observation frame beside the picture is the one training would see.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from env.config import EnvConfig
from env.controller import AXES, BUTTONS
from env.observations import (
    BOSS_ANIMATIONS,
    PLAYER_ANIMATIONS,
    AnimationVocabulary,
)
from env.profile import Profile, load_profile

from capture.build_dataset import episode_steps, samples_at
from capture.episode import Episode
from capture.episode_format import EpisodeError
from capture.footage import as_mp4
from capture.video import VideoError

from elden_il.view.steps import TIME, StepView

SAMPLE = "sample"
"""The sequence timeline of a raw episode's samples: one point per sample."""
HUD = {
    ("player", "hp"): ("HeroHp", "HeroMaxHp"),
    ("player", "fp"): ("HeroFp", "HeroMaxFp"),
    ("player", "stamina"): ("HeroSp", "HeroMaxSp"),
    ("boss", "hp"): ("NpcHp", "NpcMaxHp"),
}
"""The bars of the game's HUD, as fractions of their maximum: what the person saw of both fighters."""
HELD_ROW = 0.8
"""How high a held key's line rises above its row (rows are one apart), so rows never touch."""


def step_view(episode: Episode, config: EnvConfig) -> StepView | None:
    """The episode on ``config``'s step grid, by the dataset builder's own code: the observations
    (with the frame stack and action history the env rebuilds), the labelled actions and the
    rewards a dataset built for ``config`` would hold; None if shorter than one step."""
    profile = load_profile(config.profile)
    actions = config.actions(profile)
    steps = episode_steps(episode, config, config.observation_builder(actions), actions)
    if steps is None:
        return None
    count = len(steps.actions)
    time_s = np.arange(count) * config.timestep_ms / 1000.0
    obs = {key: np.asarray(values)[:count] for key, values in steps.observations.items()}
    obs.update(config.memory(actions.idle).keys(obs["frame"], steps.actions, np.arange(count), 0))
    return StepView(
        time_s=time_s,
        observations=obs,
        actions=steps.actions,
        rewards=steps.rewards,
        action_names=actions.names,
        discrete=config.action_mode == "discrete",
        extra_times={SAMPLE: samples_at(episode.t, episode.t[0] + time_s)},
    )


def log_samples(rr: Any, stream: Any, episode: Episode, config: EnvConfig) -> None:
    """Every sample of ``episode``: the picture first (what a viewer shows soonest), then the
    game state, the input and the recorder's own marks. ``config``'s profile names the keys and
    animations; its observation says what the env would make of the state."""
    profile = load_profile(config.profile)
    n = len(episode)
    time_s = episode.t - episode.t[0]

    def indexes(rows: np.ndarray | None = None) -> list:
        rows = np.arange(n) if rows is None else rows
        return [rr.TimeColumn(SAMPLE, sequence=rows), rr.TimeColumn(TIME, duration=time_s[rows])]

    _log_picture(rr, stream, episode, indexes())
    columns = {name: episode.state[:, j] for j, name in enumerate(episode.attribute_names)}
    for (who, bar), (value, top) in HUD.items():
        if value in columns and top in columns:
            fraction = np.clip(columns[value] / np.maximum(1.0, columns[top]), 0.0, 1.0)
            stream.send_columns(
                f"fighters/{who}/{bar}",
                indexes=indexes(),
                columns=rr.Scalars.columns(scalars=fraction),
            )
    observed = config.observation_builder(config.actions(profile)).scalars(columns)
    stream.send_columns(
        "fighters/distance",
        indexes=indexes(),
        columns=rr.Scalars.columns(scalars=np.asarray(observed["distance"], np.float64).ravel()),
    )
    _log_animations(rr, stream, episode, profile, indexes)
    _log_keys(rr, stream, episode, indexes)
    _log_pad(rr, stream, episode, indexes)
    stream.send_columns("input/mouse/dx", indexes=indexes(), columns=rr.Scalars.columns(scalars=episode.mouse[:, 0]))
    stream.send_columns("input/mouse/dy", indexes=indexes(), columns=rr.Scalars.columns(scalars=episode.mouse[:, 1]))
    stream.send_columns(
        "input/intervention",
        indexes=indexes(),
        columns=rr.Scalars.columns(scalars=episode.intervention.astype(np.float64)),
    )
    _log_recorder(rr, stream, episode, indexes)


def _log_picture(rr: Any, stream: Any, episode: Episode, indexes: list) -> None:
    """The master picture: the episode's video by reference (format 2), or its stored frames (format 1)."""
    if episode.video is None:
        for i, frame in enumerate(episode.frames if episode.frames is not None else []):
            stream.set_time(SAMPLE, sequence=i)
            stream.log("video", rr.Image(frame))
        stream.reset_time()
        return
    of = episode.video_of()
    try:
        asset = rr.AssetVideo(contents=as_mp4(episode.video, of), media_type="video/mp4")
        stamps = asset.read_frame_timestamps_nanos()
        of.check_count(episode.video, len(stamps))
    except VideoError as e:
        raise EpisodeError(str(e)) from None
    stream.log("video", asset, static=True)
    stream.send_columns(
        "video",
        indexes=indexes,
        columns=rr.VideoFrameReference.columns_nanos(stamps[: len(episode)]),
    )


def _log_animations(rr: Any, stream: Any, episode: Episode, profile: Profile, indexes: Any) -> None:
    """Each fighter's animation id as a plot, and each change as a line saying what the
    observation makes of the new id: its place in the profile's vocabulary, or 0, unknown."""
    for who, column, ids, size in (
        ("player", "HeroAnimId", profile.player_animations, PLAYER_ANIMATIONS),
        ("boss", "NpcAnimId", profile.boss_animations, BOSS_ANIMATIONS),
    ):
        if column not in episode.attribute_names:
            continue
        anim = episode.column(column).astype(np.int64)
        stream.send_columns(f"animation/{who}", indexes=indexes(), columns=rr.Scalars.columns(scalars=anim))
        changes = np.flatnonzero(np.concatenate([[True], anim[1:] != anim[:-1]]))
        observed = AnimationVocabulary(ids, size)(anim[changes])
        text = [
            f"{who} animation {a}: " + (f"observed as {o}" if o else "not in the profile's vocabulary (observed as 0)")
            for a, o in zip(anim[changes], observed, strict=True)
        ]
        stream.send_columns(
            f"animation/{who}_changes",
            indexes=indexes(changes),
            columns=rr.TextLog.columns(text=text),
        )


def _log_keys(rr: Any, stream: Any, episode: Episode, indexes: Any) -> None:
    """One row per key, top to bottom in ``key_names`` order: a line that rises while the key is
    held (``keys/held/<KEY>``), a point at each sample where it was pressed (``keys/pressed/<KEY>``,
    so a tap shorter than a sample shows too)."""
    count = len(episode.key_names)
    for j, key in enumerate(episode.key_names):
        row = float(count - 1 - j)
        stream.log(f"keys/held/{key}", rr.SeriesLines(names=key), static=True)
        stream.send_columns(
            f"keys/held/{key}",
            indexes=indexes(),
            columns=rr.Scalars.columns(scalars=row + HELD_ROW * episode.keys_held[:, j]),
        )
        pressed = np.flatnonzero(episode.keys_pressed[:, j])
        if len(pressed):
            stream.log(
                f"keys/pressed/{key}",
                rr.SeriesPoints(names=f"{key} pressed", marker_sizes=3.0),
                static=True,
            )
            stream.send_columns(
                f"keys/pressed/{key}",
                indexes=indexes(pressed),
                columns=rr.Scalars.columns(scalars=np.full(len(pressed), row + HELD_ROW)),
            )


def _log_pad(rr: Any, stream: Any, episode: Episode, indexes: Any) -> None:
    """The game controller, where one was played: a row per button it pressed, as the keys'
    (``pad/held/<button>``), and each stick and trigger that moved as a plot (``pad/axes/<axis>``)."""
    used = np.flatnonzero(episode.pad_held.any(axis=0) | episode.pad_pressed.any(axis=0))
    for row, j in enumerate(reversed(used)):
        name = BUTTONS[j]
        stream.log(f"pad/held/{name}", rr.SeriesLines(names=name), static=True)
        stream.send_columns(
            f"pad/held/{name}",
            indexes=indexes(),
            columns=rr.Scalars.columns(scalars=float(row) + HELD_ROW * episode.pad_held[:, j]),
        )
    for j in np.flatnonzero(episode.pad_axes.any(axis=0)):
        stream.send_columns(
            f"pad/axes/{AXES[j]}",
            indexes=indexes(),
            columns=rr.Scalars.columns(scalars=episode.pad_axes[:, j].astype(np.float64)),
        )


def _log_recorder(rr: Any, stream: Any, episode: Episode, indexes: Any) -> None:
    """The recorder's own account: the gap before each sample (late or dropped samples show as
    spikes), frames the encoder repeated, the outcome, and the episode's attributes."""
    period = 1.0 / float(episode.attrs.get("sample_rate_hz") or 30.0)
    gaps = np.diff(episode.t, prepend=episode.t[0])
    stream.send_columns("recorder/gap_ms", indexes=indexes(), columns=rr.Scalars.columns(scalars=gaps * 1000.0))
    notes = {
        int(i): f"{round(gaps[i] / period) - 1} sample(s) dropped before this one ({gaps[i] * 1000:.0f} ms gap)"
        for i in np.flatnonzero(gaps > 1.5 * period)
    }
    for i in np.flatnonzero(episode.frame_repeated):
        notes[int(i)] = (notes.get(int(i), "") + " frame repeated (the video encoder fell behind)").strip()
    if notes:
        rows = np.array(sorted(notes))
        stream.send_columns(
            "recorder/notes",
            indexes=indexes(rows),
            columns=rr.TextLog.columns(text=[notes[i] for i in rows], level=["WARN"] * len(rows)),
        )
    outcome = str(episode.attrs.get("outcome") or "unknown")
    stream.send_columns(
        "recorder/outcome",
        indexes=indexes(np.array([len(episode) - 1])),
        columns=rr.TextLog.columns(text=[f"outcome: {outcome}"]),
    )
    stats = json.loads(episode.attrs.get("stats") or "{}")
    size = episode.master_size
    stream.log(
        "episode",
        rr.TextDocument(
            f"**{episode.path.name}**: {outcome}, {len(episode)} samples over {episode.t[-1] - episode.t[0]:.1f} s, "
            f"played by {episode.attrs.get('source', '?')} with profile {episode.attrs.get('profile', '?')}, picture "
            f"{'?' if size is None else f'{size[0]}x{size[1]}'}.\n\nRecorder: "
            + ", ".join(f"{k} {v}" for k, v in stats.items()),
            media_type="text/markdown",
        ),
        static=True,
    )
