"""The episode's picture as video: exactly one frame per sample, written as the episode grows.

A person's fights cannot be recorded again, so an episode keeps the picture as captured (its
master size) and every training frame is derived from it later (``capture.footage``), never
baked in when recording. The video is Matroska, because a Matroska file cut short by a kill
still plays up to its last complete cluster: each cluster starts at a key frame, a key frame
comes once a second of samples, and each packet is flushed to the file as it is muxed, so a
SIGKILL loses at most about the last second of video, as of state.

Encoding a large frame costs milliseconds the sampler cannot spare, so frames go through a
bounded queue to an encoder thread. Live, a full queue never delays a sample: that sample's
frame is left out of the queue, counted, and the encoder repeats the frame before it in its
place, so the video still holds one frame per sample (the episode marks each such sample,
``frame_repeated``). Lock-step (the in-process simulator) has no real time to lose: a full
queue waits, and every frame is encoded.

Frame ``i`` is sample ``i``; its presentation time is that sample's time on the recorder's
clock, in milliseconds since the episode's first sample (raised by a millisecond where two
samples fall within one, as Matroska counts whole milliseconds). The file's metadata carries the
recording's id (``VIDEO_ID_TAG``), which the episode carries too: a video beside the wrong
episode (renamed, swapped, cut to its length) is told apart by it (``capture.footage.VideoOf``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from env.common.errors import DataError

log = logging.getLogger(__name__)

FORMAT = "matroska"
SUFFIX = ".mkv"
VIDEO_ID_TAG = "ELDEN_IL_VIDEO_ID"
"""The Matroska tag holding the recording's id, the episode's ``video_id`` attribute."""
TIME_BASE = Fraction(1, 1000)
QUEUE_FRAMES = 30
"""Frames waiting for the encoder at most: a second at 30 Hz (80 MB of 1280x720 frames), enough
to ride out an encoder slowed for a moment by other work, few enough to keep memory flat."""


class VideoError(DataError):
    """A video that cannot be written or read as an episode's; the message names the file, what
    is wrong and what to do."""


@dataclass(frozen=True)
class VideoCodec:
    """One codec setting an episode's video can be written with."""

    name: str  # what --video-codec says
    encoder: str  # FFmpeg's encoder
    pix_fmt: str
    options: tuple[tuple[str, str], ...]
    lossless: bool
    about: str

    def encoder_options(self) -> dict[str, str]:
        return dict(self.options)


# No B-frames: packets come out in frame order, one per frame, so the first n packets are the
# first n frames (what recovery keeps). One encoder thread: the sampler keeps the other core, and
# the same frames give the same bytes on every machine (the pipeline's demos, tracked by DVC).
_X264 = (("preset", "ultrafast"), ("bf", "0"), ("threads", "1"))
CODECS = {
    "h264": VideoCodec(
        "h264",
        "libx264",
        "yuv444p",
        (*_X264, ("crf", "18")),
        False,
        "H.264 4:4:4, CRF 18 (lossy; full colour resolution, so thin HUD bars keep their colour)",
    ),
    "lossless": VideoCodec(
        "lossless",
        "libx264rgb",
        "rgb24",
        (*_X264, ("qp", "0")),
        True,
        "H.264 RGB at QP 0 (lossless: decodes to the captured pixels, bit for bit)",
    ),
}
DEFAULT_CODEC = "h264"


def codec(name: str) -> VideoCodec:
    """The codec setting ``name``, checked against the FFmpeg build PyAV carries."""
    setting = CODECS.get(name)
    if setting is None:
        raise VideoError(f"unknown video codec {name!r}: choose one of {', '.join(CODECS)}")
    try:
        av.codec.Codec(setting.encoder, "w")
    except (av.codec.codec.UnknownCodecError, ValueError):
        raise VideoError(
            f"video codec {name!r} needs FFmpeg's {setting.encoder} encoder, which the installed PyAV "
            f"{av.__version__} lacks: reinstall PyAV from its wheels (`pip install --force-reinstall av`) "
            f"or record with another --video-codec ({', '.join(n for n in CODECS if n != name)})"
        ) from None
    return setting


class EpisodeVideo:
    """Writes one episode's video at ``path``; ``add`` one frame per sample, then ``close``.

    ``wait``: a full queue waits (lock-step) rather than repeating the previous frame (live).
    ``video_id``: the recording's id, written into the file's metadata. Errors of the encoder
    thread (a full disk) are kept and raised by ``check`` and ``close``."""

    def __init__(
        self,
        path: Path,
        size: tuple[int, int],
        rate_hz: float,
        setting: VideoCodec,
        wait: bool = False,
        max_queue: int = QUEUE_FRAMES,
        video_id: str | None = None,
    ) -> None:
        self.path = path
        self.size = (int(size[0]), int(size[1]))
        self.setting = setting
        self.wait = wait
        self.frames = 0  # frames added (one per sample)
        self.repeated = 0  # of them, left out of a full queue and repeated from the one before
        self.encode_cpu_s = 0.0  # CPU time the encoder thread spent on them (converting, encoding, writing)
        self._times: list[float] = []  # each added frame's sample time, read by the encoder thread
        self._queue: queue.Queue[tuple[int, np.ndarray] | None] = queue.Queue(max_queue)
        self._error: BaseException | None = None
        self._closed = False
        try:
            self._container = av.open(
                str(path), "w", format=FORMAT, options={"flush_packets": "1", "fflags": "+bitexact"}
            )
        except OSError as e:
            raise VideoError(f"{path} cannot be created ({e.strerror or e}): check the folder is writable") from None
        if video_id is not None:
            self._container.metadata[VIDEO_ID_TAG] = video_id  # in the header, written before the first frame
        stream = self._container.add_stream(setting.encoder, options=setting.encoder_options())
        stream.width, stream.height = self.size
        stream.pix_fmt = setting.pix_fmt
        stream.time_base = TIME_BASE
        stream.codec_context.time_base = TIME_BASE
        stream.codec_context.gop_size = max(1, round(rate_hz))  # a key frame, so a cluster, a second
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        self._stream = stream
        self._t0: float | None = None
        self._last_pts = -1
        self._thread = threading.Thread(target=self._run, name=f"video {path.name}", daemon=True)
        self._thread.start()

    def add(self, t: float, rgb: np.ndarray) -> bool:
        """Queue the frame of the sample taken at ``t``; False when the queue was full and the
        encoder will repeat the frame before it instead (live only, counted in ``repeated``)."""
        index = self.frames
        self._times.append(t)
        self.frames += 1
        if self.wait:
            self._queue.put((index, rgb))
            return True
        try:
            self._queue.put_nowait((index, rgb))
            return True
        except queue.Full:
            if index == 0:  # nothing to repeat yet: the first frame always goes in
                self._queue.put((index, rgb))
                return True
            self.repeated += 1
            return False

    def check(self) -> None:
        """Raise the encoder thread's error, if it had one."""
        if self._error is not None:
            raise self._failure()

    def close(self) -> None:
        """Encode what is queued, finish the file (its index: seeking, duration) and stop."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
        self.check()

    def abandon(self) -> None:
        """Stop without finishing the file: it stays as of its last cluster, for ``capture.recover``."""
        if not self._closed:
            self._closed = True
            self._error = self._error or _Abandoned()
            self._queue.put(None)
            self._thread.join()

    def discard(self) -> None:
        """Stop and delete the video: its episode was discarded."""
        self.abandon()
        self.path.unlink(missing_ok=True)

    def _failure(self) -> VideoError:
        e = self._error
        why = getattr(e, "strerror", None) or str(e)
        return VideoError(f"writing the video {self.path} failed ({why})")

    # ------------------------------------------------------------------ the encoder thread
    def _run(self) -> None:
        encoded, last = 0, None
        try:
            while (item := self._queue.get()) is not None:
                if self._error is not None:
                    continue  # drain, so a waiting producer never blocks on a dead encoder
                index, rgb = item
                while encoded < index:  # frames left out of a full queue: the one before, again
                    self._encode(last, encoded)
                    encoded += 1
                self._encode(rgb, index)
                encoded, last = index + 1, rgb
            if self._error is None:
                while encoded < self.frames:
                    self._encode(last, encoded)
                    encoded += 1
                for packet in self._stream.encode(None):
                    self._container.mux(packet)
                self._container.close()
        except Exception as e:  # noqa: BLE001 - kept and raised on the sampling thread (check, close)
            self._error = e
            while self._queue.get() is not None:
                pass
        finally:
            if self._error is not None:
                _close_quietly(self._container)

    def _encode(self, rgb: np.ndarray, index: int) -> None:
        started = time.thread_time()
        t = self._times[index]
        if self._t0 is None:
            self._t0 = t
        pts = max(round((t - self._t0) * 1000), self._last_pts + 1)
        self._last_pts = pts
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        if (frame.width, frame.height) != self.size:  # a window resized mid-fight: scaled to the master size
            frame = frame.reformat(width=self.size[0], height=self.size[1])
        frame.pts, frame.time_base = pts, TIME_BASE
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self.encode_cpu_s += time.thread_time() - started


class _Abandoned(Exception):
    """The writer stopped the video without finishing it (a failed write elsewhere)."""


def _close_quietly(container: av.container.OutputContainer) -> None:
    """Release the file without writing its index: what is on disk stays as flushed."""
    try:
        container.close()
    except Exception as e:  # noqa: BLE001 - the file is already as good as it will get
        log.debug("closing an abandoned video: %s", e)


def psnr(squared_error: float, values: int) -> float:
    """Peak signal-to-noise ratio of 8-bit pictures, in dB, from their summed squared error over
    ``values`` samples: how close a decoded video is to what was captured (inf: the same)."""
    return float("inf") if squared_error == 0 else 10 * np.log10(255.0**2 * values / squared_error)
