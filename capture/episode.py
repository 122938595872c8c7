"""Reading a finished episode (``capture.episode_format`` describes the file): its samples and
events whole, and its frames as the env makes them, decoded from its video when asked for."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from env.common.files import plain_file_problem
from env.observations import FrameSpec

from capture.bounds import check_columns, check_rows
from capture.episode_format import MARKS, PAD, PARTIAL, PER_SAMPLE, EpisodeError, partial_video_path, video_path
from capture.footage import VideoOf, frames_at
from capture.video import VideoError


@dataclass(frozen=True)
class Episode:
    path: Path
    frames: np.ndarray | None  # format 1's stored frames; None in format 2 (``frames_at``) or with ``frames=False``
    t: np.ndarray
    frame_t: np.ndarray
    state: np.ndarray
    keys_held: np.ndarray
    keys_pressed: np.ndarray
    mouse: np.ndarray
    events: np.ndarray
    pad_held: np.ndarray  # (N, len(BUTTONS)) bool: the controller's buttons down (all False before format 3)
    pad_pressed: np.ndarray  # (N, len(BUTTONS)) bool: pressed since the previous sample
    pad_axes: np.ndarray  # (N, len(AXES)) float32: its sticks and triggers (0 before format 3)
    intervention: np.ndarray  # (N,) bool: the person had taken control from a policy
    frame_repeated: np.ndarray  # (N,) bool: the video repeats the frame before (``capture.video``)
    attribute_names: tuple[str, ...]
    key_names: tuple[str, ...]
    attrs: dict

    def __len__(self) -> int:
        return len(self.t)

    def column(self, name: str) -> np.ndarray:
        return self.state[:, self.attribute_names.index(name)]

    @property
    def format(self) -> int:
        return int(self.attrs.get("format_version", 1))

    @property
    def video(self) -> Path | None:
        """Format 2: the video beside it holding its picture at the master size, by its own name
        (``x.h5`` -> ``x.mkv``), so an episode renamed with its video still finds it."""
        return None if self.format < 2 else video_path(self.path)

    def video_of(self) -> VideoOf:
        """What this episode says of its video (format 2): its frame count (one per sample
        recorded, before any trim), its size and its recording's id."""
        recorded = json.loads(self.attrs.get("stats") or "{}").get("n_samples", len(self))
        video_id = self.attrs.get("video_id")
        return VideoOf(self.path, int(recorded), self.master_size, str(video_id) if video_id else None)

    @property
    def master_size(self) -> tuple[int, int] | None:
        """(width, height) of the picture it keeps: the video's, or format 1's stored frames'."""
        size = self.attrs.get("window_size") if self.format >= 2 else self.attrs.get("frame_size")
        return None if size is None else (int(size[0]), int(size[1]))

    @property
    def stored_frames(self) -> FrameSpec | None:
        """Format 1: how its stored frames were made from the captured ones (the recorder's
        ``FrameSpec``; files written before ``frame_crop`` was stored lack it: the recorder
        could not crop then). None for format 2, whose frames are made when read."""
        if self.format >= 2:
            return None
        size = tuple(int(v) for v in self.attrs["frame_size"])
        if "frame_crop" not in self.attrs:
            return FrameSpec(size)
        return FrameSpec(size, tuple(float(v) for v in self.attrs["frame_crop"]))

    def frames_at(self, indices: np.ndarray, spec: FrameSpec) -> np.ndarray:
        """The frames of samples ``indices`` (ascending) as ``spec`` makes them: decoded from the
        video and cropped and resized (format 2), or as stored (format 1, which can give only
        the spec it was recorded with). ``EpisodeError`` naming the file where they cannot be."""
        if self.format >= 2:
            check_master(self.path, self.master_size, spec)
            try:
                return frames_at(self.video, self.video_of(), indices, spec)
            except VideoError as e:
                raise EpisodeError(str(e)) from None
        if self.stored_frames != spec:
            raise EpisodeError(
                f"{self.path.name} is a format 1 episode: its frames were stored at {self.stored_frames} when "
                f"recorded, and that is all it can give, not {spec}. Build at {self.stored_frames} "
                f"({self.stored_frames.flags}; in params.yaml, env.frame_size: {list(self.stored_frames.size)}), "
                "or record again: episodes recorded now keep the whole picture as video, for any size"
            )
        frames = self.frames if self.frames is not None else read_episode(self.path).frames
        return frames[indices]


def check_master(path: Path, master: tuple[int, int], spec: FrameSpec) -> None:
    """Refuse a frame larger than the part of the master picture its crop keeps: it would be
    scaled up, inventing pixels the recording does not hold."""
    left, top, right, bottom = spec.crop
    kept = (round((right - left) * master[0]), round((bottom - top) * master[1]))
    if spec.size[0] > kept[0] or spec.size[1] > kept[1]:
        raise EpisodeError(
            f"{path.name} keeps its picture at {master[0]}x{master[1]}"
            f"{'' if kept == master else f' ({kept[0]}x{kept[1]} after the crop)'}, smaller than the {spec} "
            f"frames asked for: build at most {kept[0]}x{kept[1]}, or record with a larger master size "
            "(capture.record --master-size, or the game's window)"
        )


def check_finished(path: Path, f: h5py.File) -> None:
    """Refuse a file that is no finished episode, with advice that works: an HDF5 file of another
    program (every episode carries ``format_version``) is to be moved out of the folder, and an
    episode never finished but named as a finished one (a partial renamed by hand) renamed back
    and recovered: ``capture.recover`` takes partials only."""
    if "format_version" not in f.attrs:
        raise EpisodeError(
            f"{path} is an HDF5 file but no episode of this project's (it carries no format_version): it is not "
            "read; move it out of the recordings folder"
        )
    if not f.attrs.get("finished", False):
        partial = path.with_name(path.name + ".partial")
        raise EpisodeError(
            f"{path} is an unfinished episode named as a finished one (a recorder stopped while writing it, and "
            f"it was renamed): rename it to {partial.name} and its video to {partial_video_path(partial).name}, "
            f"then run `python -m capture.recover {partial}`"
        )


def read_episode(path: str | Path, frames: bool = True) -> Episode:
    """A finished episode, whole, less its picture: ``Episode.frames_at`` decodes the frames
    asked for from the video (format 2). Format 1 files hold their frames, read here unless
    ``frames=False`` (most of the file, not needed by summaries of times, state and keys)."""
    path = Path(path)
    if path.name.endswith(PARTIAL):
        raise EpisodeError(
            f"{path} is unfinished (a recorder stopped while writing it): run `python -m capture.recover {path}`"
        )
    if (problem := plain_file_problem(path)) is not None:
        raise EpisodeError(f"{path} is {problem}: it is not read; move it out of the folder")
    try:
        with h5py.File(path, "r") as f:
            check_finished(path, f)
            attrs = {k: (v.item() if hasattr(v, "item") and np.ndim(v) == 0 else v) for k, v in f.attrs.items()}
            names = {key: json.loads(attrs[key]) for key in ("attribute_names", "key_names")}
            check_columns(path, f, len(names["attribute_names"]), len(names["key_names"]))
            stored = ("frames",) if frames and "frames" in f else ()  # format 1's frames
            optional = tuple(name for name in (*MARKS, *PAD) if name in f)
            for name in (*stored, *PER_SAMPLE, "events", *optional):
                check_rows(path, f[name])  # before anything is allocated
            data = {name: f[name][()] for name in (*stored, *PER_SAMPLE, "events")}
            n = len(data["t"])
            # marks and the controller's columns: absent from older files, and past a tear that took
            # them (capture.recover keeps them as far as they reach) read as absent
            absent = {name: (bool, ()) for name in MARKS} | {name: (d, (len(c),)) for name, (d, c) in PAD.items()}
            for name, (dtype, width) in absent.items():
                data[name] = np.zeros((n, *width), dtype)
                if name in f:
                    kept = f[name][:n]
                    data[name][: len(kept)] = kept
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise EpisodeError(
            f"{path} is not a readable episode file ({e}); it may be corrupt or not an episode"
        ) from None
    data.setdefault("frames", None)
    return Episode(
        path=path,
        attribute_names=tuple(names["attribute_names"]),
        key_names=tuple(names["key_names"]),
        attrs=attrs,
        **data,
    )


def recorded_outcome(path: Path) -> tuple[str, str]:
    """Who played the finished episode at ``path`` and how its fight ended (``"win"``,
    ``"death"``, ``"timeout"``, ...), from its attributes alone."""
    if (problem := plain_file_problem(path)) is not None:
        raise EpisodeError(f"{path} is {problem}: it is not read; move it out of the folder")
    try:
        with h5py.File(path, "r") as f:
            return str(f.attrs["source"]), str(f.attrs["outcome"])
    except (OSError, KeyError) as e:
        raise EpisodeError(
            f"{path} is not a readable episode file ({e}); it may be corrupt or not an episode"
        ) from None


def list_episodes(directory: str | Path) -> list[Path]:
    """Finished episodes in ``directory``, oldest first."""
    return sorted(Path(directory).glob("*.h5"))
