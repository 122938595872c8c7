"""Siphon's ``FrameBroadcaster``, for the real-server mode's ``StreamFrames``.

What Siphon does (src/frame_broadcaster.cpp, server.cpp's StreamFrames; see
reference/siphon-eldengym.md section 5.4): one capture loop grabs the screen at about 15 fps,
stamps each grab with the Unix time read *before* it, numbers it, and hands it to every
subscriber, each of which keeps only the latest: a subscriber too slow for the rate skips frames.
When nothing changed the loop re-broadcasts the previous pixels under a new number and time, so
duplicates look like new frames. Each subscriber's RPC thread then encodes its frame itself
(``StreamFrames`` in ``env.sim.server``), so two subscribers cost two encodes per frame.

The simulator's loop runs only while someone subscribes (an idle server renders nothing).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Broadcast:
    """One grab: BGR pixels (shared, never written), its number and its Unix time in µs."""

    bgr: np.ndarray
    number: int
    timestamp_us: int


class FrameBroadcaster:
    """Grabs ``grab()`` (the window's BGR picture) ``fps`` times a second while subscribed."""

    def __init__(self, grab: Callable[[], np.ndarray], fps: float) -> None:
        self._grab = grab
        self.period = 1.0 / fps
        self._cond = threading.Condition()
        self._latest: Broadcast | None = None
        self._number = 0  # frames numbered across subscriptions, as one server's are
        self._subscribers = 0
        self._thread: threading.Thread | None = None

    @contextmanager
    def subscription(self) -> Iterator[None]:
        """Subscribe while the context lasts; the first subscriber starts the loop."""
        with self._cond:
            self._subscribers += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="siphon-broadcaster", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._cond:
                self._subscribers -= 1

    def newer_than(self, number: int, timeout: float) -> Broadcast | None:
        """The latest grab if it is newer than ``number`` (waiting up to ``timeout``), else None."""
        with self._cond:
            self._cond.wait_for(lambda: self._latest is not None and self._latest.number > number, timeout)
            latest = self._latest
        return latest if latest is not None and latest.number > number else None

    def _run(self) -> None:
        next_at = time.monotonic()
        while True:
            with self._cond:
                if self._subscribers == 0:
                    self._thread = None
                    return
            stamp = time.time_ns() // 1000  # read before the grab, as Siphon does
            bgr = self._grab()
            with self._cond:
                self._number += 1
                self._latest = Broadcast(bgr, self._number, stamp)
                self._cond.notify_all()
            next_at = max(next_at + self.period, time.monotonic())
            time.sleep(max(0.0, next_at - time.monotonic()))
