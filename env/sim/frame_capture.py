"""The game's window as Siphon's CaptureFrame sees it, and the simulator's controls over it.

Ideal mode: every capture is the world as it is now, at the window's current size. Real-server
mode follows Siphon's window capture (src/process_capture.cpp, server.cpp:240-254): CaptureFrame
always reports success; before the capture pool's first frame it carries zero bytes
(``GetPixelData`` returns ``{}`` while ``latestFrame`` is null); a minimised window stops
presenting, so the last frame comes back forever; and the size is the one fixed when capture was
initialised (the frame pool is created at that size and never resized), so a window resized
afterwards is cut or padded to it.

Controls (sim-only attributes, answered whatever the config says): ``SimMinimised`` (bool) and
``SimWindowWidth`` / ``SimWindowHeight`` (int), the window a user could minimise or resize.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from env.sim.renderer import Renderer

WINDOW_CONTROLS = {"SimMinimised": "bool", "SimWindowWidth": "int", "SimWindowHeight": "int"}


class GameWindow:
    """The window's state and what a capture of it returns. ``render`` gives the current frame
    as tight BGRA bytes at the renderer's size; ``first_frame_s`` is None for an ideal server,
    else how long after InitializeCapture the first frame arrives."""

    def __init__(self, renderer: Renderer, render: Callable[[], bytes], first_frame_s: float | None) -> None:
        self.renderer = renderer
        self._render = render
        self._first_frame_s = first_frame_s
        self._lock = threading.Lock()
        self.minimised = False
        self._capture_size = (renderer.width, renderer.height)
        self._first_frame_at = 0.0
        self._last = b""

    @property
    def real(self) -> bool:
        return self._first_frame_s is not None

    def initialize_capture(self) -> tuple[int, int]:
        """Start capturing: the size is fixed now; the first frame comes later (real mode)."""
        with self._lock:
            self._capture_size = (self.renderer.width, self.renderer.height)
            self._first_frame_at = time.monotonic() + (self._first_frame_s or 0.0)
            self._last = b""
            return self._capture_size

    def capture(self) -> tuple[bytes, int, int]:
        """(BGRA bytes, width, height) as CaptureFrame answers them."""
        if not self.real:
            data = self._render()
            return data, self.renderer.width, self.renderer.height
        with self._lock:
            width, height = self._capture_size
            if self.minimised or time.monotonic() < self._first_frame_at:
                return self._last, width, height
            self._last = _fit(self._render(), (self.renderer.width, self.renderer.height), (width, height))
            return self._last, width, height

    # ------------------------------------------------------------------------------- controls
    def read_control(self, name: str) -> int | bool:
        return {
            "SimMinimised": self.minimised,
            "SimWindowWidth": self.renderer.width,
            "SimWindowHeight": self.renderer.height,
        }[name]

    def write_control(self, name: str, value: int | bool) -> None:
        if name == "SimMinimised":
            with self._lock:
                if value and not self.minimised and self.real and time.monotonic() >= self._first_frame_at:
                    width, height = self._capture_size  # the last frame presented before it went
                    self._last = _fit(self._render(), (self.renderer.width, self.renderer.height), (width, height))
                self.minimised = bool(value)
            return
        size = [self.renderer.width, self.renderer.height]
        size[name == "SimWindowHeight"] = int(value)
        self.renderer = Renderer(*size)  # raises ValueError for a size it cannot draw


def _fit(bgra: bytes, size: tuple[int, int], target: tuple[int, int]) -> bytes:
    """A frame of ``size`` in a capture of ``target``: cut, or padded with black, at the top left."""
    if size == target:
        return bgra
    (width, height), (tw, th) = size, target
    frame = np.frombuffer(bgra, np.uint8).reshape(height, width, 4)
    out = np.zeros((th, tw, 4), np.uint8)
    out[: min(th, height), : min(tw, width)] = frame[:th, :tw]
    return out.tobytes()
