"""``python -m capture.recover``: salvage episodes a crashed or killed recorder left unfinished.

A ``.h5.partial`` file holds everything the recorder flushed before it died (HDF5's SWMR mode
keeps it consistent), and its video ``.mkv.partial`` every frame up to its last complete cluster
(``capture.video``). A partial that a running recorder is still writing is locked
(``env.common.lock``: the OS lock itself, not a file a user may delete) and is skipped with a line
saying so; so is one that another ``capture.recover`` is recovering. Recovery reads it, keeps the
samples present in every per-sample dataset and in the video (frame i is sample i, so both are
cut to the shorter), writes a finished ``.h5`` and ``.mkv`` next to them, the ``.h5`` marked
``recovered`` (the video's frames copied as they are, not encoded again), and only then moves
the partials aside as ``.h5.partial.bak`` and ``.mkv.partial.bak``: no data is deleted before
its copy is safely on disk, and the line that reports it says whether the ``.bak`` files hold
anything the finished pair lacks.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from env.common import files
from env.common.cli import ERROR_EXIT, flag, parse_settings, run_command
from env.common.files import plain_file_problem
from env.common.lock import FileLock

from capture.bounds import BoundsError, check_columns, check_rows
from capture.episode_format import MARKS, PAD, PARTIAL, PER_SAMPLE, EpisodeError, partial_video_path, video_path
from capture.episode_writer import finalize, require_space
from capture.footage import VideoOf, count_frames, keep_first
from capture.torn import intact_rows, recorded_length, torn_copy
from capture.video import VideoError

log = logging.getLogger(__name__)


class Skipped(EpisodeError):
    """A partial episode left alone on purpose: a running recorder is still writing it."""


def recover(partial: Path) -> Path:
    """Recover one partial episode; returns the finished file. Raises ``Skipped`` for a file
    being recorded right now (it holds its lock) and ``EpisodeError`` for one that cannot be
    recovered; either way the partial is left untouched."""
    if not partial.name.endswith(PARTIAL):
        raise EpisodeError(f"{partial} is not a partial episode (*.h5.partial)")
    if not partial.exists():
        raise EpisodeError(f"{partial} does not exist")
    if (problem := plain_file_problem(partial)) is not None:
        raise EpisodeError(f"{partial} is {problem}: it is not read, and left as it is")
    lock = FileLock(partial)
    try:
        if not lock.acquire():
            raise Skipped(f"skipped {partial}: {_holder(partial)}")
    except FileNotFoundError:
        raise Skipped(f"skipped {partial}: its recording finished meanwhile") from None
    try:
        if not partial.exists():
            raise Skipped(f"skipped {partial}: its recording finished meanwhile")
        return _recover(partial)
    finally:
        lock.release()


def _staging(partial: Path) -> Path:
    """Where a recovery writes its copy before publishing it."""
    return partial.with_name(partial.name + ".recovering")


def _holder(partial: Path) -> str:
    """Who holds a partial's lock: a recovery writes its staging copy while it holds it, a
    recorder never has one."""
    if _staging(partial).exists():
        return "another capture.recover is recovering it right now"
    return "it is being recorded right now (a running recorder holds its lock)"


def _recover(partial: Path) -> Path:
    target = partial.with_name(partial.name[: -len(".partial")])
    staging = _staging(partial)
    # the copy takes at most what the partial takes; on a full disk HDF5 may "write" zeros
    # a torn file is read through a copy of its recorded length
    recorded = recorded_length(partial)
    video = _video_of(partial, target)
    needed = partial.stat().st_size + (recorded or 0) + (video.stat().st_size if video else 0)
    require_space(
        partial.parent,
        needed,
        f"{partial.name} is left untouched; free some space and run `python -m capture.recover` again",
    )
    torn = partial.with_name(partial.name + ".torn")
    try:
        source, rows_before_tear = _open(partial, torn, recorded)
        with source:
            per_sample = (*(("frames",) if "frames" in source else ()), *PER_SAMPLE)  # format 1 holds its frames
            # marks and a controller's columns (later formats) are kept as far as they reach; past
            # a tear that took them, they read as absent (no intervention, a pad at rest)
            optional = tuple(name for name in (*MARKS, *PAD) if name in source)
            check_columns(
                partial, source, *(len(json.loads(source.attrs[key])) for key in ("attribute_names", "key_names"))
            )
            for name in (*per_sample, *optional, "events"):
                check_rows(partial, source[name])  # before anything is allocated
            lengths = [rows_before_tear(source[name]) for name in per_sample]
            if min(lengths) == 0:
                raise OSError(
                    "nothing before the tear can be read: the file was cut short before its first samples were indexed"
                )
            if "video" in source.attrs:  # format 2: its frames are the video's, if it is the episode's
                lengths.append(count_frames(video, _expected_video(partial, source)) if video else 0)
                if lengths[-1] == 0:
                    raise OSError(
                        f"its video {partial_video_path(partial).name} holds no whole frame (the recorder "
                        "stopped within its first second)"
                    )
            n, unfinished = min(lengths), max(lengths) - min(lengths)
            short = [name for name in optional if rows_before_tear(source[name]) < n]
            if short:
                log.warning(
                    "%s: %s lost past the tear: kept as far as they reach, read as absent after",
                    partial.name,
                    ", ".join(short),
                )
            with h5py.File(staging, "w", libver="latest") as out:
                for name in (*per_sample, *optional, "events"):
                    data = source[name]
                    rows = rows_before_tear(data) if name in ("events", *optional) else n
                    kept = data[: min(rows, n) if name in optional else rows]
                    if name in optional and len(kept) < n:
                        kept = np.concatenate([kept, np.zeros((n - len(kept), *data.shape[1:]), data.dtype)])
                    out.create_dataset(
                        name,
                        data=kept,
                        maxshape=(None, *data.shape[1:]),
                        chunks=data.chunks,
                        compression=data.compression,
                        compression_opts=data.compression_opts,
                    )
                out.attrs.update(dict(source.attrs))
                t = source["t"][:n]
            if video is not None and "video" in source.attrs:
                keep_first(video, _staging(video), n)
        duration = float(t[-1] - t[0]) if n > 1 else 0.0
        stats = {
            "n_samples": int(n),
            "duration_s": duration,
            "achieved_rate_hz": (n - 1) / duration if duration > 0 else 0.0,
        }
        if video is not None and _staging(video).exists():
            files.replace(_staging(video), video_path(target))
        finalize(staging, target, "recovered", stats, recovered=True)
    except (OSError, KeyError, ValueError, TypeError, VideoError, BoundsError) as e:
        staging.unlink(missing_ok=True)
        if video is not None:
            _staging(video).unlink(missing_ok=True)
        raise EpisodeError(f"{partial} cannot be recovered ({e}); it is left untouched") from None
    finally:
        torn.unlink(missing_ok=True)
    bak = partial.with_name(partial.name + ".bak")
    files.replace(partial, bak)
    if video is not None and video != video_path(target):
        files.replace(video, video.with_name(video.name + ".bak"))
    log.info("recovered %s: %d samples, %.1f s; %s", target.name, n, duration, _about_bak(bak, unfinished))
    return target


def _video_of(partial: Path, target: Path) -> Path | None:
    """A partial episode's video: still partial, or already renamed when the recorder died while
    publishing the pair; None when there is none (a format 1 partial, or a kill before it began)."""
    for video in (partial_video_path(partial), video_path(target)):
        if video.exists():
            return video
    return None


def _expected_video(partial: Path, source: h5py.File) -> VideoOf:
    """What a partial episode says of its video: its size and recording id (its length is what
    recovery finds out)."""
    width, height = (int(v) for v in source.attrs["window_size"])
    video_id = source.attrs.get("video_id")
    return VideoOf(partial, 0, (width, height), str(video_id) if video_id else None)


def _open(partial: Path, torn: Path, recorded: int | None) -> tuple[h5py.File, Callable[[h5py.Dataset], int]]:
    """The partial opened for reading, and how many rows of a dataset to trust. A file shorter
    than the ``recorded`` length its superblock says (cut short mid-write, ``capture.torn``; or a
    write the disk refused) is read through a repaired copy at ``torn``, trusting only the rows
    written before its end; any other partial as it is, every row."""
    if recorded is not None:
        tear = torn_copy(partial, torn, recorded)
        log.warning(
            "%s ends at byte %d, short of its recorded length: recovering the samples written before that",
            partial.name,
            tear,
        )
        return h5py.File(torn, "r"), lambda dataset: intact_rows(dataset, tear)
    try:
        return h5py.File(partial, "r", libver="latest", swmr=True, locking=False), _all_rows  # we hold its lock
    except OSError as e:
        raise OSError(f"it cannot be read: {e}") from None


def _all_rows(dataset: h5py.Dataset) -> int:
    return dataset.shape[0]


def _about_bak(bak: Path, unfinished: int) -> str:
    """What the partial kept aside holds beyond the recovered file: whether deleting it loses anything."""
    if unfinished:
        return (
            f"{bak.name} also holds parts of {unfinished} later sample(s) that were not completely "
            "flushed (left out of the recovered episode): keep it if you need those"
        )
    return f"{bak.name} holds no sample that {bak.name.removesuffix('.partial.bak')} lacks: you may delete it"


def find_partials(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        found.extend(sorted(path.glob(f"*{PARTIAL}")) if path.is_dir() else [path])
    return found


@dataclass(frozen=True)
class RecoverArgs:
    """What ``python -m capture.recover`` salvages."""

    paths: tuple[Path, ...] = field(
        default=(Path("datasets/raw"),),
        metadata=flag("partial files or folders (default: datasets/raw)", positional=True, nargs="*", type=Path),
    )


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings(
        "python -m capture.recover",
        "Salvage unfinished episodes (*.h5.partial) up to their last flush, which is at most a second\n"
        "before the recorder stopped. Each becomes a finished .h5 marked 'recovered'; the partial is kept\n"
        "as .h5.partial.bak (each line says whether it holds anything the .h5 lacks).",
        RecoverArgs,
        argv=argv,
        epilog="example: python -m capture.recover datasets/raw",
    )
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return run_command(lambda: recover_all(list(args.paths)))


def recover_all(paths: list[Path]) -> int:
    """Recover every partial under ``paths``, one line each; a partial that cannot be recovered
    is said in an ``error:`` line and the others still go ahead. The exit status: ``ERROR_EXIT``
    if any failed."""
    partials = find_partials(paths)
    if not partials:
        print(f"nothing to recover in {', '.join(map(str, paths))}")
        return 0
    failed = 0
    for partial in partials:
        try:
            target = recover(partial)
            with h5py.File(target, "r") as f:
                print(f"recovered {target} ({json.loads(f.attrs['stats'])['n_samples']} samples)")
        except Skipped as e:
            print(e)
        except EpisodeError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
    return ERROR_EXIT if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
