"""An optional full-resolution MP4 next to each episode, for a human to review the fight.

Encoding a 720p frame costs milliseconds, which the sampler cannot spare, so frames go through a
bounded queue to a writer thread; if it falls behind, frames are skipped and counted rather than
delaying samples. The HDF5 episode, not this video, is the data.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

import cv2
import numpy as np

log = logging.getLogger(__name__)


class VideoSidecar:
    def __init__(self, path: Path, fps: float, max_queue: int = 64) -> None:
        self.path = path
        self.fps = fps
        self.skipped = 0
        self._queue: queue.Queue[np.ndarray | None] = queue.Queue(max_queue)
        self._thread = threading.Thread(target=self._run, name="video", daemon=True)
        self._thread.start()

    def add(self, rgb: np.ndarray) -> None:
        try:
            self._queue.put_nowait(rgb)
        except queue.Full:
            self.skipped += 1

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self.skipped:
            log.warning("video %s skipped %d frames (the encoder fell behind)", self.path.name, self.skipped)

    def discard(self) -> None:
        """Stop and delete the video: its episode was discarded (the F6 hotkey)."""
        self.close()
        self.path.unlink(missing_ok=True)

    def _run(self) -> None:
        writer = None
        while (rgb := self._queue.get()) is not None:
            if writer is None:
                h, w = rgb.shape[:2]
                writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*"mp4v"), self.fps, (w, h))
            writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        if writer is not None:
            writer.release()
