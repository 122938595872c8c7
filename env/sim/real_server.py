"""Siphon's own behaviour, for the simulator's real-server mode (``python -m env.sim --real-server``).

An ideal server hides defects a user meets on their first evening with the game, so this mode
reproduces what Siphon's source does (HEAD 6ad5bdf; ../shared/reference/real-game.md):

* **One server-wide mutex** (src/server.cpp:93, 158, 267, 305, 367, 431, 502): GetAttribute,
  SetAttribute, SetProcessConfig, the Initialize* calls and GetServerStatus queue on it; input
  and CaptureFrame (server.cpp:202-256) do not take it.
* **A scan per read** (process_memory.cpp:126-173): every attribute found by pattern rescans the
  game module in 64 KB chunks, no cache, under the mutex. ``scan_ms`` is its cost.
* **The NPC hook** (process_memory.cpp:241-346): the first read of a ``method = "dll"`` attribute
  injects hook.dll, sleeps 3 s (:317), then loops once a second until the game reports a targeted
  NPC, holding the mutex all along; later reads answer whatever NPC was targeted last, with no
  scan (the pointer comes from shared memory).
* **A config that sticks** (server.cpp:312-326, process_memory.cpp:17-20): InitializeMemory for
  the same process reuses the memory object, which keeps the attribute list it was made with.

The timings are configurable so tests stay fast; the defaults and their reasons are
``RealServerTimings``'s. The capture and input quirks live with the service (``env/sim/frame_capture.py``
and ``SimSiphonService``), which asks ``RealServer`` for the locking and the costs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from env.attribute_config import AttributeSpec
from env.common.fields import check_fields, checked, number

log = logging.getLogger(__name__)

STATUS_MARK = "(real-server mode)"
"""What GetServerStatus's message carries in this mode (how ``SimServer`` tells the modes apart)."""


DAY_S = 86_400
"""The longest wait a timing may be given: a test's "never" (a first frame that never arrives)."""


@dataclass(frozen=True, slots=True)
class RealServerTimings:
    """What Siphon's calls cost. Defaults, and why:

    * ``scan_ms`` 10: the scan reads Elden Ring's ~80 MB module 64 KB at a time with a byte loop
      and stops at the first match; where a pattern lies decides the cost (unverified on the
      game: a few ms for a pattern early in .text, tens of ms near the end). 10 ms is a middle;
      the benchmark measures 2, 10 and 30.
    * ``hook_delay_s`` 3: ``Sleep(3000)`` after injecting hook.dll (process_memory.cpp:317).
    * ``hook_poll_s`` 1: the ``Sleep(1000)`` of the "No target" loop that follows.
    * ``capture_init_ms`` 100: InitializeCapture starts the capture session and sleeps 100 ms
      (process_capture.cpp, ``Initialize``).
    * ``stream_fps`` 15: StreamFrames' broadcaster grabs on one loop iteration in four and sleeps
      1 ms on the others (frame_broadcaster.cpp, "~15fps at 60Hz polling"); the real rate
      follows the Windows timer resolution.
    * ``first_frame_ms`` 250: the capture pool's first frame arrives when the window next
      presents; until then CaptureFrame answers success with zero bytes. A window that presents
      at once delivers within a frame or two; a game busy loading or a window on another desktop
      takes longer. 250 ms (so ~150 ms after InitializeCapture returns) makes a client that
      captures straight after initialising meet it.
    """

    scan_ms: float = checked(10.0, number(0, 60_000), "cost of each attribute call's module scan, in ms")
    hook_delay_s: float = checked(3.0, number(0, DAY_S), "NPC hook injection delay, in seconds")
    hook_poll_s: float = checked(
        1.0, number(0, DAY_S, above=True), "how often the hook checks for a target, in seconds"
    )
    capture_init_ms: float = checked(100.0, number(0, 1000 * DAY_S), "InitializeCapture's sleep, in ms")
    first_frame_ms: float = checked(
        250.0, number(0, 1000 * DAY_S), "after InitializeCapture, when the first frame arrives, in ms"
    )
    stream_fps: float = checked(
        15.0, number(0, 240, above=True), "frames a second StreamFrames sends, whatever the client reads"
    )

    def __post_init__(self) -> None:
        check_fields(self)


class RealServer:
    """The mutex, the per-read cost and the NPC hook of one Siphon server."""

    def __init__(self, timings: RealServerTimings) -> None:
        self.timings = timings
        self.mutex = threading.Lock()
        self.hook_injected = False
        self._stopping = threading.Event()

    def pay_for(self, spec: AttributeSpec, has_target: Callable[[], bool]) -> bool:
        """Spend what finding ``spec`` costs on Siphon; call with the mutex held. A pattern
        attribute costs a module scan; a ``dll`` one costs nothing once the hook is in, and the
        first one injects it: the injection delay, then a wait until ``has_target()`` (the
        player has locked on to something). False only when the server stops during that wait."""
        if spec.method != "dll":
            time.sleep(self.timings.scan_ms / 1000)
            return True
        if self.hook_injected:
            return True
        log.info(
            "injecting the NPC hook: every locked call waits %.1f s, then until an enemy is targeted",
            self.timings.hook_delay_s,
        )
        if self._stopping.wait(self.timings.hook_delay_s):
            return False
        while not has_target():
            log.info("No target (lock on to an enemy in the game)")
            if self._stopping.wait(self.timings.hook_poll_s):
                return False
        log.info("NPC hook in place")
        self.hook_injected = True
        return True

    def sleep_ms(self, ms: float) -> None:
        """A fixed cost of a call (InitializeCapture's sleep), cut short when the server stops."""
        self._stopping.wait(ms / 1000)

    def stop(self) -> None:
        """Release any call waiting for the hook, so the server can shut down."""
        self._stopping.set()
