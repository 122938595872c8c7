"""One HDF5 file per episode, durable while it grows.

An episode is written as ``<name>.h5.partial`` in HDF5's single-writer/multiple-reader (SWMR)
mode: samples are buffered in memory and appended, then flushed, at most every
``flush_every_s``, so a crash or a SIGKILL loses at most that last second and never corrupts what
was flushed (``python -m capture.recover`` salvages a partial file). Lock-step, where no one's
play can be lost and the game runs many times faster than real time, it flushes only every
``FLUSH_BYTES``. ``finish`` writes the final attributes, fsyncs and renames the file to
``<name>.h5`` atomically: a ``.h5`` file is always a whole episode. While a partial file is
written its OS lock (``env.common.lock``) is held, so recovery never touches a live recording;
HDF5's own file locking is off for partial files (on POSIX that lock is the same kind, on the
same file).

A full disk is checked for before each flush, not found by failing to write: on a full disk HDF5
does not always report a failed write (it went on "writing" zeros into a sparse file, and the
episode came back as thousands of blank frames), and where it does, its file is left half
updated. So the writer stops before a flush the disk cannot hold, closes the file as of its last
flush, and raises ``DiskError``; a write that fails anyway (a failing disk) raises it too.

The file's names and columns are ``capture.episode_format``'s; ``capture.episode`` reads it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import h5py
import numpy as np

from env.common import files
from env.common.lock import FileLock
from env.controller import AXES, BUTTONS

from capture.episode_format import FORMAT_VERSION, MARKS, PAD, PARTIAL, EpisodeError, partial_video_path, video_path
from capture.inputs import EVENT_DTYPE
from capture.video import SUFFIX as VIDEO_SUFFIX
from capture.video import EpisodeVideo, VideoCodec, VideoError

log = logging.getLogger(__name__)


FLUSH_BYTES = 4 * 2**20
"""Buffered samples are flushed at the latest when they reach this size, however fast they come
(lock-step recording makes hundreds a second): the buffer, and the free space a flush must find,
stay small."""
RESERVE_BYTES = 256 * 1024
"""Free space a flush leaves untouched: enough for HDF5 to close the file and for ``finish`` to
write the closing attributes."""


class DiskError(EpisodeError):
    """The disk an episode is written to is full or failing: the recording cannot go on. The
    message names the file and what to do; every sample flushed before is kept.

    ``unclosed``: HDF5 could not close the file after a failed write. It then retries that
    write when the process ends and crashes (SIGSEGV), so the command ends at once once it has
    said what happened (``exit_at_once``); the file on disk stays recoverable."""

    def __init__(self, message: str, unclosed: bool = False) -> None:
        super().__init__(message)
        self.unclosed = self.exit_at_once = unclosed


_UNCLOSABLE: list[h5py.File] = []
"""Files HDF5 failed to close. Kept referenced: releasing their objects retries the failed
write and prints HDF5's tracebacks (see ``DiskError.unclosed``)."""


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    frame_t: float
    frame: np.ndarray  # (H, W, 3) uint8 RGB as captured: the master size
    state: np.ndarray  # (A,) float64
    held: np.ndarray  # (K,) bool
    pressed: np.ndarray  # (K,) bool
    mouse_dx: float
    mouse_dy: float
    intervention: bool = False  # the person had taken control from the policy (``capture.takeover``)
    pad_held: np.ndarray = field(default_factory=lambda: np.zeros(len(BUTTONS), bool))
    pad_pressed: np.ndarray = field(default_factory=lambda: np.zeros(len(BUTTONS), bool))
    pad_axes: np.ndarray = field(default_factory=lambda: np.zeros(len(AXES), np.float32))


@dataclass(frozen=True, slots=True)
class EpisodeMeta:
    profile: str
    attribute_names: tuple[str, ...]
    key_names: tuple[str, ...]
    sample_rate_hz: float
    codec: VideoCodec  # how the picture is encoded (``capture.video.CODECS``)
    window_size: tuple[int, int]  # (width, height) captured: the video's master size
    source: str  # "human" | "autopilot" | "policy" (a policy played, the person could take over)
    sim_seed: int | None
    host: str
    controller: str = ""  # the controller heard when the episode started ("" for none)


RECORDED_PACKAGES = ("numpy", "h5py", "av", "elden-il", "pysiphon")
"""The packages whose versions every episode records. The demos stage's recordings are committed
outputs (dvc.lock holds their hash), so pyproject.toml pins each of these exactly: a new release
installed by a fresh clone would otherwise change those bytes and nothing else."""


def software_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version()}
    for package in RECORDED_PACKAGES:
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            pass
    return versions


def _create_datasets(f: h5py.File, meta: EpisodeMeta, started_at_unix: float | None, video: str, video_id: str) -> None:
    a, k = len(meta.attribute_names), len(meta.key_names)
    for name in ("t", "frame_t"):
        f.create_dataset(name, (0,), np.float64, maxshape=(None,), chunks=(1024,))
    f.create_dataset("state", (0, a), np.float64, maxshape=(None, a), chunks=(256, a))
    for name in ("keys_held", "keys_pressed"):
        f.create_dataset(name, (0, k), bool, maxshape=(None, k), chunks=(1024, k))
    f.create_dataset("mouse", (0, 2), np.float32, maxshape=(None, 2), chunks=(1024, 2))
    for name, (dtype, columns) in PAD.items():
        f.create_dataset(name, (0, len(columns)), dtype, maxshape=(None, len(columns)), chunks=(1024, len(columns)))
    for name in MARKS:
        f.create_dataset(name, (0,), bool, maxshape=(None,), chunks=(1024,))
    f.create_dataset("events", (0,), EVENT_DTYPE, maxshape=(None,), chunks=(1024,))
    attrs = {
        "format_version": FORMAT_VERSION,
        "profile": meta.profile,
        "attribute_names": json.dumps(list(meta.attribute_names)),
        "key_names": json.dumps(list(meta.key_names)),
        "pad_buttons": json.dumps(list(BUTTONS)),
        "pad_axes": json.dumps(list(AXES)),
        "controller": meta.controller,
        "sample_rate_hz": meta.sample_rate_hz,
        "window_size": list(meta.window_size),
        "video": video,
        "video_id": video_id,
        "video_codec": meta.codec.name,
        "video_lossless": meta.codec.lossless,
        "source": meta.source,
        "sim_seed": -1 if meta.sim_seed is None else meta.sim_seed,
        "host": meta.host,
        "software": json.dumps(software_versions()),
        **({} if started_at_unix is None else {"started_at_unix": started_at_unix}),
        "clock": "time.monotonic (live) or game time (in-process simulator)",
        "finished": False,
        "recovered": False,
        "outcome": "",
        "stats": "{}",
    }
    f.attrs.update(attrs)  # every attribute exists before SWMR starts (SWMR forbids new ones)


def recording_id(meta: EpisodeMeta, name: str | None) -> str:
    """The id an episode and its video both carry (``capture.footage.VideoOf``): random, or for
    an episode of a given ``name`` (a reproducible recording) made from that name and ``meta``,
    so that the same recording gives the same bytes."""
    if name is None:
        return uuid.uuid4().hex
    described = json.dumps([name, repr(meta)], sort_keys=True)
    return hashlib.sha256(described.encode()).hexdigest()[:32]


def _append(dataset: h5py.Dataset, rows: np.ndarray) -> None:
    if len(rows) == 0:
        return
    n = dataset.shape[0]
    dataset.resize(n + len(rows), axis=0)
    dataset[n:] = rows


def _sample_bytes(sample: Sample) -> int:
    """What a sample takes in the HDF5 file at most (its frame goes to the video)."""
    return (
        sample.state.nbytes
        + sample.held.nbytes
        + sample.pressed.nbytes
        + sample.pad_held.nbytes
        + sample.pad_pressed.nbytes
        + sample.pad_axes.nbytes
        + 34
    )


class EpisodeWriter:
    """Writes one episode as ``<name>_<source>.h5`` and its video ``<name>_<source>.mkv``.

    ``name`` None names it by the UTC wall-clock time it starts, which is also stored as
    ``started_at_unix``: what a person recording wants. A given name (the pipeline's
    ``demos`` stage gives the episode's index and seed) stores no wall-clock time at all, so with
    a ``clock`` that is game time the file depends only on what was recorded: two recordings
    with the same settings are byte-identical, and DVC sees no change. ``flush_every_s`` is
    measured on ``clock`` (the recorder's: ``time.monotonic`` live, game time in-process).
    ``lock_step``: no real time passes while the encoder works, so a full video queue waits
    rather than repeating a frame (``capture.video``), and the file is flushed by size alone.
    """

    def __init__(
        self,
        directory: Path,
        meta: EpisodeMeta,
        flush_every_s: float = 1.0,
        name: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        lock_step: bool = False,
    ) -> None:
        started_at_unix = time.time() if name is None else None
        if name is None:
            name = datetime.fromtimestamp(started_at_unix, UTC).strftime("%Y%m%d-%H%M%S-%f")
        self.meta = meta
        self.final_path = directory / f"{name}_{meta.source}.h5"
        self.path = directory / f"{name}_{meta.source}{PARTIAL}"
        self.final_video = video_path(self.final_path)
        self.video_path = partial_video_path(self.path)
        self.flush_every_s = flush_every_s
        self._clock = clock
        self._lock_step = lock_step
        self._file: h5py.File | None = None
        self._video: EpisodeVideo | None = None
        self._lock = FileLock(self.path)
        with self._writing("start"):
            directory.mkdir(parents=True, exist_ok=True)
            self._check_space(0)
            if not self._lock.acquire(create=True):
                raise EpisodeError(f"{self.path} is already being recorded by another process")
            self.video_id = recording_id(meta, None if started_at_unix is not None else name)
            self._video = EpisodeVideo(
                self.video_path,
                meta.window_size,
                meta.sample_rate_hz,
                meta.codec,
                wait=lock_step,
                video_id=self.video_id,
            )
            self._file = h5py.File(self.path, "w", libver="latest", locking=False)
            _create_datasets(self._file, meta, started_at_unix, self.final_video.name, self.video_id)
            self._file.swmr_mode = True
        self._pending: list[Sample] = []
        self._repeated: list[bool] = []  # per pending sample: its frame repeats the one before
        self._pending_bytes = 0
        self._events: list[np.ndarray] = []
        self._last_flush = clock()
        self._video_bytes = 0  # the video's size at the last flush
        self.samples = 0
        self._flushed = 0  # samples on disk: a file holding none is removed if writing fails
        self._span: tuple[float, float] | None = None  # the first and the last sample's time

    @property
    def duration_s(self) -> float:
        """From the first sample to the last (0 with fewer than two)."""
        return 0.0 if self._span is None else self._span[1] - self._span[0]

    @property
    def repeated_frames(self) -> int:
        """Samples whose frame the encoder could not take in time (its queue was full)."""
        return self._video.repeated

    @property
    def encode_cpu_s(self) -> float:
        """CPU time the video's encoder thread has spent so far (not stored: it differs run to
        run, and a lock-step recording's files must not)."""
        return self._video.encode_cpu_s

    def append(self, sample: Sample) -> None:
        """Cheap: queues the frame for the encoder and buffers the rest; HDF5 is touched at most
        once per ``flush_every_s`` (or ``FLUSH_BYTES``; lock-step, only the latter)."""
        self._span = (sample.t if self._span is None else self._span[0], sample.t)
        self._repeated.append(not self._video.add(sample.t, sample.frame))
        self._pending.append(sample)
        self._pending_bytes += _sample_bytes(sample)
        self.samples += 1
        due = not self._lock_step and self._clock() - self._last_flush >= self.flush_every_s
        if due or self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def append_events(self, events: np.ndarray) -> None:
        if len(events):
            self._events.append(np.asarray(events, EVENT_DTYPE))

    def flush(self) -> None:
        """Append what is buffered and flush it to disk; ``DiskError`` if the disk cannot hold it
        or the video could not be written (the files then stay as of the last flush, closed,
        ready for ``capture.recover``). The space kept free for the video is what it grew by
        since the last flush: the encoder writes on its own thread, between flushes."""
        with self._writing("flush"):
            self._video.check()
            size = self.video_path.stat().st_size if self.video_path.exists() else 0  # made at its first frame
            grown, self._video_bytes = size - self._video_bytes, size
            self._check_space(self._pending_bytes + sum(e.nbytes for e in self._events) + grown)
            self._flush()

    def _flush(self) -> None:
        f, pending = self._file, self._pending
        if pending:
            _append(f["t"], np.array([s.t for s in pending]))
            _append(f["frame_t"], np.array([s.frame_t for s in pending]))
            _append(f["state"], np.stack([s.state for s in pending]))
            _append(f["keys_held"], np.stack([s.held for s in pending]))
            _append(f["keys_pressed"], np.stack([s.pressed for s in pending]))
            _append(f["mouse"], np.array([(s.mouse_dx, s.mouse_dy) for s in pending], np.float32))
            for name in PAD:
                _append(f[name], np.stack([getattr(s, name) for s in pending]))
            _append(f["intervention"], np.array([s.intervention for s in pending], bool))
            _append(f["frame_repeated"], np.array(self._repeated, bool))
        if self._events:
            _append(f["events"], np.concatenate(self._events))
        f.flush()
        self._flushed += len(pending)
        self._pending, self._repeated, self._pending_bytes, self._events = [], [], 0, []
        self._last_flush = self._clock()

    def finish(self, outcome: str, stats: dict[str, float]) -> Path:
        """Flush, finish the video, record the outcome, and atomically publish the episode as
        ``<name>.h5`` (its video, ``<name>.mkv``, is renamed just before)."""
        self.flush()
        with self._writing("finish"):
            self._video.close()
            if self.samples:  # FFmpeg makes the file at the first frame
                _fsync(self.video_path)
                files.replace(self.video_path, self.final_video)
            self._file.close()
            stats = {**stats, "n_samples": self.samples, "repeated_frames": self._video.repeated}
            finalize(self.path, self.final_path, outcome, stats, recovered=False)
        if self._video.repeated:
            log.warning(
                "%s: %d of %d frames repeat the one before (the video encoder fell behind; marked in frame_repeated)",
                self.final_path.name,
                self._video.repeated,
                self.samples,
            )
        self._lock.release()
        return self.final_path

    def discard(self) -> None:
        self._video.discard()
        self._file.close()
        self.path.unlink(missing_ok=True)
        self._lock.release()

    def _check_space(self, pending_bytes: int) -> None:
        require_space(self.path.parent, pending_bytes, self._kept())

    def _kept(self, fix: str = "free some space") -> str:
        if self._file is None:
            return "no episode file was started"
        if not self._flushed:
            return f"{self.path.name} had no sample on disk yet and is removed: {fix}, then record again"
        return (
            f"{self.path.name} and its video keep every sample up to their last flush: {fix}, then run "
            f"`python -m capture.recover {self.path.parent}`"
        )

    @contextmanager
    def _writing(self, step: str) -> Iterator[None]:
        """Turn a full or failing disk into one ``DiskError`` and close the files as of their last
        flush, so nothing half-written follows and the partial stays recoverable."""
        hooks = sys.unraisablehook, sys.excepthook
        sys.unraisablehook, sys.excepthook = _quiet_hdf5_release(*hooks)
        try:
            yield
        except DiskError:
            self._abandon()
            raise
        except (OSError, RuntimeError, VideoError) as e:  # h5py raises either for a write the disk refused
            closed = self._abandon()
            kept = self._kept("fix what refused the write")
            raise DiskError(
                f"writing {self.path} failed ({step}: {getattr(e, 'strerror', None) or e}): {kept}", unclosed=not closed
            ) from None
        finally:
            sys.unraisablehook, sys.excepthook = hooks

    def _abandon(self) -> bool:
        """Close the files as of their last flush, removing them if no sample reached them (there
        is nothing to recover); False if HDF5 could not close it (see ``_UNCLOSABLE``)."""
        closed = True
        if self._video is not None:
            self._video.abandon()
        if self._file is not None:
            try:
                self._file.close()
            except (OSError, RuntimeError) as e:  # the disk that failed the write may fail the close too
                log.debug("closing %s after a failed write: %s", self.path, e)
                _UNCLOSABLE.append(self._file)
                closed = False
        if self._file is not None and not self._flushed:
            for path in (self.path, self.video_path):
                try:
                    path.unlink(missing_ok=True)
                except OSError as e:  # Windows keeps a file HDF5 could not close
                    log.warning("%s holds no sample but cannot be removed (%s): delete it", path, e)
        self._lock.release()
        return closed


def _fsync(path: Path) -> None:
    with open(path, "rb+") as raw:
        os.fsync(raw.fileno())


def _quiet_hdf5_release(
    unraisable_hook: Callable[[Any], None],
    except_hook: Callable[..., None],
) -> tuple[Callable[[Any], None], Callable[..., None]]:
    """Hooks for while a write may fail. After a failed write, HDF5 fails again for every
    object h5py releases, and h5py prints each with a traceback (through both hooks); the one
    ``DiskError`` already says it, so those go to the debug log. Anything else goes on as usual."""

    def from_release(error: BaseException | None, tb: TracebackType | None) -> bool:
        return isinstance(error, RuntimeError) and any(
            frame.filename.endswith("_objects.pyx") for frame in traceback.extract_tb(tb)
        )

    def unraisable(info: Any) -> None:
        if from_release(info.exc_value, info.exc_traceback):
            log.debug("HDF5 after a failed write: %s", info.exc_value)
        else:
            unraisable_hook(info)

    def excepthook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        if from_release(error, tb):
            log.debug("HDF5 after a failed write: %s", error)
        else:
            except_hook(kind, error, tb)

    return unraisable, excepthook


def finalize(source: Path, target: Path, outcome: str, stats: dict, recovered: bool) -> None:
    """Write the closing attributes into ``source``, fsync it, and rename it to ``target``."""
    with h5py.File(source, "r+", locking=False) as f:  # the writer may hold its own lock on it
        f.attrs["finished"] = True
        f.attrs["recovered"] = recovered
        f.attrs["outcome"] = outcome
        f.attrs["stats"] = json.dumps(stats)
    _fsync(source)
    files.replace(source, target)


def require_space(directory: Path, needed: int, consequence: str) -> None:
    """Raise ``DiskError`` unless the disk holding ``directory`` has ``needed`` bytes free and
    ``RESERVE_BYTES`` to spare; ``consequence`` says what that means for the user's data."""
    free = shutil.disk_usage(directory).free
    if free < needed + RESERVE_BYTES:
        raise DiskError(
            f"the disk holding {directory} is full ({_mib(free)} free, "
            f"{_mib(needed + RESERVE_BYTES)} needed to go on): {consequence}"
        )


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


DISCARDED = "discarded"
"""The subfolder where the "discard last episode" hotkey sets finished episodes aside."""


def set_aside(path: Path) -> Path:
    """The "discard last episode" hotkey: move a finished episode (and its video) into
    ``discarded/`` beside it, where nothing looks for episodes, rather than delete it: a hotkey
    pressed by mistake is undone by moving the file back. Returns where it went."""
    folder = path.parent / DISCARDED
    folder.mkdir(exist_ok=True)
    for file in (path, video_path(path)):
        if file.exists():
            files.replace(file, folder / file.name)
    return folder / path.name


def empty_discarded(directory: Path) -> None:
    """Remove for good what the hotkey set aside in ``directory``: called once a newer episode
    is saved, the moment the chance to undo a discard ends."""
    folder = directory / DISCARDED
    for file in [*folder.glob("*.h5"), *folder.glob(f"*{VIDEO_SUFFIX}")]:
        file.unlink()
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
