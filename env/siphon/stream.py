"""Frames from Siphon's ``StreamFrames``: one server stream held open on a thread of its own,
the newest frame kept, JPEG decoded only when asked for.

A unary ``CaptureFrame`` carries raw BGRA (3.7 MB per 720p frame) and costs a round trip each
time; across a real network that is the step's cost. The stream is pushed by the server at its
own rate (about 15 fps on the real server), JPEG-encoded, and a client too slow for it simply
skips frames. What that costs is the frame's age, so every frame carries its own capture time
and the server's frame number, and the env and the recorder report the age instead of hiding it.

pysiphon's own streaming thread prints and exits when the stream breaks, after which its
``get_latest_frame`` returns ``None`` forever (EldenGym turns that into black frames). Here a
stream that ends, fails, or goes silent for longer than the client's deadline (a network that
dropped without a word, a server that hung) raises ``StreamLost`` on the next request, naming
the server and what to do.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import cv2
import grpc
import numpy as np
from pysiphon.generated import siphon_service_pb2 as pb2

from env.siphon.client import NoFrame, SiphonClient, SiphonError

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 2.0


class StreamLost(SiphonError):
    """The frame stream from the server ended, failed or went silent past its deadline."""


@dataclass(frozen=True, slots=True)
class StreamedFrame:
    """A decoded frame: RGB, when it was captured on this machine's ``time.monotonic()`` clock,
    and the server's frame number (a frame received twice keeps its number)."""

    rgb: np.ndarray
    taken: float
    number: int


class FrameStream:
    """One ``StreamFrames`` call (JPEG at ``quality``) read on a daemon thread until ``close``.

    ``silence_s``: how long the stream may deliver nothing before a request fails. The real
    server sends about 15 frames a second even when nothing moves (it re-broadcasts the last
    picture), and the simulator at least every half second, so silence means the server or the
    link is gone."""

    def __init__(self, client: SiphonClient, quality: int = 85, silence_s: float = 2.0) -> None:
        self.host = client.host
        self.silence_s = silence_s
        self._call = client.stream_frames(quality)
        self._cond = threading.Condition()
        self._latest: tuple[pb2.FrameData, float] | None = None  # the newest frame, and its capture time
        self._decoded: tuple[int, StreamedFrame] | None = None  # the last one decoded, by arrival count
        self._arrivals = 0
        self._heard = time.monotonic()  # when the stream last delivered (or opened)
        self._lost: str | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._read, name=f"siphon-stream-{self.host}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        why = "the server ended it"
        try:
            for data in self._call:
                arrived, wall = time.monotonic(), time.time()
                with self._cond:
                    self._latest = (data, arrived - in_flight(data.timestamp_us, wall))
                    self._arrivals += 1
                    self._heard = arrived
                    self._cond.notify_all()
        except grpc.RpcError as e:
            why = f"{e.code().name}: {e.details()}"
        with self._cond:
            if not self._closing:
                self._lost = why
                log.warning("the frame stream from Siphon at %s ended (%s)", self.host, why)
            self._cond.notify_all()

    def wait_for_first(self, timeout: float) -> None:
        """Block until the first frame has arrived: a real server sends nothing until the game
        window has presented one, which is ``NoFrame`` past ``timeout``."""
        with self._cond:
            self._cond.wait_for(lambda: self._latest is not None or self._lost is not None, timeout)
            self._check(silence=False)
            if self._latest is None:
                raise NoFrame(
                    f"Siphon at {self.host} streamed no frame of the game window within {timeout:g} s: is the "
                    "game running, in windowed or borderless mode, and visible (not minimised)?"
                )

    def latest(self) -> StreamedFrame:
        """The newest frame received, decoded (once, however often asked), or ``StreamLost``."""
        with self._cond:
            self._check()
            if self._latest is None:
                raise NoFrame(f"Siphon at {self.host} has streamed no frame yet")
            (data, taken), count = self._latest, self._arrivals
            if self._decoded is not None and self._decoded[0] == count:
                return self._decoded[1]
        frame = StreamedFrame(jpeg_to_rgb(data.data, self.host), taken, data.frame_number)
        with self._cond:
            if self._arrivals == count:
                self._decoded = (count, frame)
        return frame

    def _check(self, silence: bool = True) -> None:
        """Raise ``StreamLost`` for a stream that ended, or (``silence``) has been silent past
        ``silence_s``; call with the lock held."""
        if self._lost is not None:
            raise StreamLost(
                f"the frame stream from Siphon at {self.host} ended ({self._lost}): the server stopped or the "
                "network dropped; check the gaming PC and the link, then start again (a new env or recording)"
            )
        silent = time.monotonic() - self._heard
        if silence and silent > self.silence_s:
            raise StreamLost(
                f"no frame from Siphon at {self.host} for {silent:.1f} s (deadline {self.silence_s:g} s): the "
                "network dropped or the server hung; check the link and the gaming PC, then start again"
            )

    def close(self) -> None:
        """Cancel the call and wait (bounded) for the reading thread to end."""
        with self._cond:
            self._closing = True
        self._call.cancel()
        self._thread.join(JOIN_TIMEOUT_S)


def in_flight(timestamp_us: int, wall: float) -> float:
    """How long ago, at Unix time ``wall``, the server stamped a frame ``timestamp_us`` (its own
    Unix clock, read as it captured): right where both clocks agree (one machine, or NTP on
    both), never below 0 (a server clock ahead of ours would put the capture in the future)."""
    return max(0.0, wall - timestamp_us / 1e6)


def jpeg_to_rgb(data: bytes, host: str) -> np.ndarray:
    """A streamed JPEG as RGB uint8 (H, W, 3), decoded by OpenCV."""
    rgb = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR_RGB)
    if rgb is None:
        raise SiphonError(f"Siphon at {host} streamed a frame that is not a JPEG ({len(data)} bytes)")
    return rgb
