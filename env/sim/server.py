"""The simulator behind Siphon's gRPC service, so the live stack runs exactly as against the game.

The service is pysiphon's own (``pysiphon.generated``), served the way the real server behaves,
but strict where the real one is silent: an unknown key or attribute, a value of the wrong type,
a config the simulator cannot serve, all get ``success=false`` with a message naming them. Two
things it never does: run a command (``ExecuteCommand`` is refused; on the real server it is an
unauthenticated Administrator shell) and listen beyond 127.0.0.1 unless told to (then it warns).
No request can crash or hang it: handler errors become failed responses, waits are bounded.

That is the ideal server. With ``real`` (``--real-server``, the default for the game's own
profile) it behaves as the real Siphon server does instead: one mutex for the memory and config
calls, a module scan per attribute call, a config that sticks to the first InitializeMemory, the
NPC hook that blocks until the player locks on (``env/sim/real_server.py``), the capture quirks
(``env/sim/frame_capture.py``) and Siphon's silent handling of key names (``env/sim/scancodes.py``).
Sim-only controls (``Sim*`` attributes) answer in both modes whatever the config says; in
real-server mode they queue on the mutex like any attribute call but cost no scan.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass

import cv2
import grpc
import numpy as np
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.attribute_config import AttributeSpec
from env.common.errors import SetupError
from env.keys import KEYBOARD_KEYS, MOUSE_BUTTONS, normalize_key
from env.profile import load_profile
from env.sim import memory, scancodes
from env.sim.boss import load_boss
from env.sim.broadcaster import FrameBroadcaster
from env.sim.buttons import InputLatch
from env.sim.clock import RealtimeClock
from env.sim.frame_capture import WINDOW_CONTROLS, GameWindow
from env.sim.real_server import STATUS_MARK, RealServer, RealServerTimings
from env.sim.renderer import Renderer
from env.sim.world import Lifecycle, Phase, World
from env.siphon.client import grpc_address, is_loopback
from env.siphon.packed_reads import Block, ObjectIndex

log = logging.getLogger(__name__)

MAX_MESSAGE = 100 * 1024 * 1024
"""The largest message the server sends (a frame)."""
MAX_REQUEST = 4 * 1024 * 1024
"""The largest request it takes: a config of ``MAX_CONFIG_ATTRIBUTES`` long names fits ten times over."""
MAX_CONFIG_ATTRIBUTES = 10_000
"""Attributes one SetProcessConfig may name (the game's TOML has 34)."""
MAX_ARRAY_BYTES = 4096
"""The longest array attribute served: every read of it allocates its length, and more again in
the reply that carries it, so a config may not choose it freely. The client's packed reads ask
for 128 bytes at most."""
MAX_ARRAY_FIELDS = 65_536
"""Scalar attributes all of a config's arrays may hold together, counted before any is matched."""
MAX_WAIT_MS = 10_000
"""The longest a tap may take, its hold and every delay between keys together (Siphon presses
the keys one delay apart, holds, and releases them one delay apart)."""
PROMPT_WORKERS = 2
"""Threads for the calls that answer at once (attributes, frames, config). More only fight over
the GIL (BENCHMARKS.md, the live path: an env step's 7 concurrent calls on 2 threads and on 16)."""
MAX_TAPS = 32
"""Taps in flight at once; one more is refused at once. An env step taps a handful at a time."""
IDLE_RESEND_S = 0.5
"""How often an ideal server's stream repeats the current frame while the game is paused."""
MAX_STREAMS = 4
"""Frame streams open at once; one more is refused at once. A stream nobody reads holds its
thread (gRPC's flow control blocks it, which also drops the frames it would have sent) and
about a frame of memory, so the cap bounds both; taps and streams have threads of their own."""
LOCKED_CALLS = (
    "GetAttribute",
    "SetAttribute",
    "SetProcessConfig",
    "InitializeMemory",
    "InitializeInput",
    "InitializeCapture",
    "GetServerStatus",
)
"""The calls that take Siphon's mutex. In real-server mode they queue on it, on threads of their
own, so input and capture (which take no lock) are served while they wait, as on Siphon."""
MUTEX_WORKERS = 16  # threads for the calls queued on that mutex (real-server mode)
VALUE_FIELDS = {"int": "int_value", "float": "float_value", "bool": "bool_value", "array": "array_value"}
RECORDING_MESSAGE = (
    "the simulator does not record server-side: record with `python -m capture.record`, which "
    "samples frames, memory and input on one clock and writes crash-safe episodes"
)
EXECUTE_MESSAGE = (
    "ExecuteCommand is refused: the simulator never runs commands. (On the real Siphon server it "
    "runs any command as Administrator without authentication: keep that server off open networks.)"
)


class SimProcess:
    """The "game process" the service attaches to: world, input, clock and window.
    ``first_frame_s``: None for an ideal capture, else when its first frame arrives."""

    def __init__(self, world: World, latch: InputLatch, renderer: Renderer, first_frame_s: float | None = None) -> None:
        self.world = world
        self.latch = latch
        self.lock = threading.Lock()
        self.clock = RealtimeClock(world, latch, self.lock)
        self.window = GameWindow(renderer, lambda: self.bgra_frame()[1], first_frame_s)
        self._frame_cache: tuple[tuple[int, Renderer | None], np.ndarray, bytes] = ((-1, None), np.empty(0), b"")

    @property
    def renderer(self) -> Renderer:
        return self.window.renderer

    def bgra_frame(self) -> tuple[int, bytes]:
        """The current frame as tight BGRA bytes and its tick (``bgr_frame``'s, converted once)."""
        tick, bgr = self.bgr_frame()
        with self.lock:
            key, cached, bgra = self._frame_cache
        if cached is bgr and bgra:
            return tick, bgra
        bgra = cv2.cvtColor(bgr, cv2.COLOR_BGR2BGRA).tobytes()
        with self.lock:
            if self._frame_cache[1] is bgr:  # the world has not moved on meanwhile
                self._frame_cache = (key, bgr, bgra)
        return tick, bgra

    def bgr_frame(self) -> tuple[int, np.ndarray]:
        """The current frame (BGR, not to be written to) and its tick, rendered once per change
        of the world (a tick or a write: see ``World.revision``) however often asked."""
        with self.lock:
            self.clock.settle()
            key = (self.world.revision, self.renderer)
            if self._frame_cache[0] != key:
                self._frame_cache = (key, self.renderer.render_bgr(self.world), b"")
            return self.world.tick_count, self._frame_cache[1]


def guarded(response_type: type) -> Callable:
    """Any unexpected error in a handler becomes ``success=false`` with its text, and is logged."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def handler(self, request, context):
            try:
                return method(self, request, context)
            except Exception as e:  # noqa: BLE001 - the server must keep serving
                log.exception("%s failed", method.__name__)
                return response_type(success=False, message=f"{method.__name__} failed: {type(e).__name__}: {e}")

        return handler

    return wrap


class Admission:
    """At most ``limit`` calls of one kind in flight. The next is refused at once with a reason,
    rather than queued behind calls that may never end (a stream nobody reads)."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.what = what
        self._slots = threading.BoundedSemaphore(limit)

    @contextlib.contextmanager
    def slot(self) -> Iterator[str | None]:
        """Yields None with a slot held, or the refusal's message when all are taken."""
        if not self._slots.acquire(blocking=False):
            yield f"{self.limit} {self.what} are already in flight: wait for one to end (or close one), then try again"
            return
        try:
            yield None
        finally:
            self._slots.release()


@dataclass(frozen=True, slots=True)
class ProcessConfig:
    """A config as SetProcessConfig received it: attributes by name, and the arrays among them
    with the attributes each holds."""

    process_name: str
    window_name: str
    specs: dict[str, AttributeSpec]
    arrays: dict[str, Block]


class SimSiphonService(pb2_grpc.SiphonServiceServicer):
    def __init__(self, process: SimProcess, real: RealServer | None = None, profile: str = "sim_margit") -> None:
        self.process = process
        self.real = real
        self.profile = profile  # whose keybinds the game obeys: said in GetServerStatus's message
        self._mutex = real.mutex if real is not None else contextlib.nullcontext()
        self.config: ProcessConfig | None = None  # the latest SetProcessConfig
        self.memory: ProcessConfig | None = None  # the config memory reads go by (InitializeMemory's)
        self.input_ready = self.capture_ready = False
        self.taps = Admission(MAX_TAPS, "taps")
        self.streams = Admission(MAX_STREAMS, "frame streams")
        self.broadcaster = (
            None if real is None else FrameBroadcaster(lambda: process.bgr_frame()[1], real.timings.stream_fps)
        )

    # ------------------------------------------------------------------------------- config
    @guarded(pb2.SetProcessConfigResponse)
    def SetProcessConfig(self, request, context):
        with self._mutex:
            return self._set_process_config(request)

    def _set_process_config(self, request):
        if not request.process_name:
            return pb2.SetProcessConfigResponse(
                success=False, message="process_name is empty: [process_info] name = ... is required"
            )
        if not request.attributes:
            return pb2.SetProcessConfigResponse(
                success=False, message="the config has no attributes: add [attributes.<Name>] tables"
            )
        if len(request.attributes) > MAX_CONFIG_ATTRIBUTES:
            return pb2.SetProcessConfigResponse(
                success=False,
                message=f"the config has {len(request.attributes)} attributes: the simulator takes at most "
                f"{MAX_CONFIG_ATTRIBUTES} (the game's own has 34)",
            )
        problems = []
        scalars = [_spec(a) for a in request.attributes if a.type != "array"]
        for attr in scalars:
            known = memory.ATTRIBUTES.get(attr.name)
            if known is None:
                problems.append(f"{attr.name}: no such attribute")
            elif attr.type != known.type:
                problems.append(f"{attr.name}: type {attr.type!r}, the simulator's is {known.type!r}")
        array_specs = [_spec(a) for a in request.attributes if a.type == "array"]
        too_long = [a for a in array_specs if not 1 <= a.length <= MAX_ARRAY_BYTES]
        if too_long:
            return pb2.SetProcessConfigResponse(
                success=False,
                message=f"{too_long[0].name}: an array of length {too_long[0].length}: the simulator serves arrays "
                f"of 1 to {MAX_ARRAY_BYTES} bytes ({len(too_long)} array(s) out of that range)",
            )
        index = ObjectIndex(scalars)
        held = sum(index.count_in(a) for a in array_specs)
        if held > MAX_ARRAY_FIELDS:
            return pb2.SetProcessConfigResponse(
                success=False,
                message=f"the config's arrays hold {held} attributes in all: the simulator serves at most "
                f"{MAX_ARRAY_FIELDS} (an array holds the few attributes next to each other in one object)",
            )
        arrays = {}
        for attr in array_specs:
            try:
                arrays[attr.name] = Block(attr, index.fields_in(attr))
            except ValueError as e:
                problems.append(f"{attr.name}: {e}")
                continue
            if not arrays[attr.name].fields:
                problems.append(
                    f"{attr.name}: the simulator has no raw memory; it serves an array only where the "
                    "same config places scalar attributes inside it (same pattern, method and pointer "
                    f"chain, last offset within its {attr.length} bytes)"
                )
        if problems:
            return pb2.SetProcessConfigResponse(
                success=False,
                message="the simulator cannot serve this config: "
                + "; ".join(problems)
                + f". It has: {', '.join(sorted(memory.ATTRIBUTES))}",
            )
        config = ProcessConfig(
            request.process_name,
            request.process_window_name,
            {a.name: _spec(a) for a in request.attributes},
            arrays,
        )
        if self.real is None:  # an ideal server: reads follow the latest config of the same game
            if self.config is not None and request.process_name != self.config.process_name:
                self.memory = None  # another game: initialise it anew
                self.input_ready = self.capture_ready = False
            elif self.memory is not None:
                self.memory = config
        self.config = config  # Siphon: what status reports changes; the memory object does not
        return pb2.SetProcessConfigResponse(success=True, message=f"config set: {len(config.specs)} attributes")

    def _need_config(self) -> str | None:
        return None if self.config else "no config: call SetProcessConfig first (pysiphon init <config.toml>)"

    @guarded(pb2.InitializeMemoryResponse)
    def InitializeMemory(self, request, context):
        with self._mutex:
            if (problem := self._need_config()) is not None:
                return pb2.InitializeMemoryResponse(success=False, message=problem)
            if (
                self.real is not None
                and self.memory is not None
                and self.memory.process_name == self.config.process_name
            ):
                return pb2.InitializeMemoryResponse(  # server.cpp:312-326: the first attribute list stays
                    success=True,
                    message="Memory already initialized (reusing existing instance)",
                    process_id=os.getpid(),
                )
            self.memory = self.config
            return pb2.InitializeMemoryResponse(success=True, message="memory initialized", process_id=os.getpid())

    @guarded(pb2.InitializeInputResponse)
    def InitializeInput(self, request, context):
        with self._mutex:
            if (problem := self._need_config()) is not None:
                return pb2.InitializeInputResponse(success=False, message=problem)
            self.input_ready = True
            return pb2.InitializeInputResponse(success=True, message="input initialized")

    @guarded(pb2.InitializeCaptureResponse)
    def InitializeCapture(self, request, context):
        with self._mutex:
            if (problem := self._need_config()) is not None:
                return pb2.InitializeCaptureResponse(success=False, message=problem)
            if self.real is not None:
                self.real.sleep_ms(self.real.timings.capture_init_ms)
            width, height = self.process.window.initialize_capture()
            self.capture_ready = True
            return pb2.InitializeCaptureResponse(
                success=True, message="capture initialized", window_width=width, window_height=height
            )

    @guarded(pb2.GetServerStatusResponse)
    def GetServerStatus(self, request, context):
        with self._mutex:
            config = self.config
            return pb2.GetServerStatusResponse(
                success=True,
                message=f"elden-il simulator, profile {self.profile}" + (f" {STATUS_MARK}" if self.real else ""),
                memory_initialized=self.memory is not None,
                input_initialized=self.input_ready,
                capture_initialized=self.capture_ready,
                config_set=config is not None,
                process_name=config.process_name if config else "",
                window_name=config.window_name if config else "",
                process_id=os.getpid() if self.memory is not None else 0,
            )

    # ------------------------------------------------------------------------------- memory
    def _find(self, name: str, verb: str) -> AttributeSpec | str:
        """The spec memory finds ``name`` by, or why there is none (in Siphon's words, when real).
        ``verb``: "read" or "write"."""
        mem = self.memory
        if name in memory.CONTROLS:
            return AttributeSpec(name, memory.ATTRIBUTES[name].type, "", (), 0, "")
        if self.real is not None:
            if mem is None:
                return f"Memory not initialized or {name} address not found"
            if name not in mem.specs:
                return (
                    f"Failed to {verb} {name} from memory (simulator: {name} is not in the attribute list "
                    "this server's memory was first initialised with; a later config does not change "
                    "that list: restart the server)"
                )
            return mem.specs[name]
        if mem is None:
            return "memory is not initialized: call SetProcessConfig and InitializeMemory first (pysiphon init <config.toml>)"
        if name not in mem.specs:
            return f"attribute {name!r} is not in the current config; configured: {', '.join(mem.specs)}"
        return mem.specs[name]

    def _failed(self, name: str, verb: str, error: Exception) -> str:
        return f"Failed to {verb} {name} from memory ({error})" if self.real is not None else str(error)

    def _has_target(self) -> bool:
        with self.process.lock:
            self.process.clock.settle()
            return self.process.world.last_targeted is not None

    def _pay_for(self, spec: AttributeSpec) -> str | None:
        """Spend the real server's cost of finding ``spec`` (mutex held); a problem or None.
        Sim-only controls cost nothing: they stand in for what a user does by hand (restart a
        fight, restore a save) or for the simulator's own clock, not for memory Siphon scans."""
        if self.real is None or spec.name in memory.CONTROLS or self.real.pay_for(spec, self._has_target):
            return None
        return "the server is stopping"

    @guarded(pb2.GetSiphonResponse)
    def GetAttribute(self, request, context):
        name = request.attributeName
        with self._mutex:
            if name in WINDOW_CONTROLS:
                value = self.process.window.read_control(name)
                return pb2.GetSiphonResponse(success=True, message="ok", **{VALUE_FIELDS[WINDOW_CONTROLS[name]]: value})
            if isinstance(spec := self._find(name, "read"), str):
                return pb2.GetSiphonResponse(success=False, message=spec)
            if (problem := self._pay_for(spec)) is not None:
                return pb2.GetSiphonResponse(success=False, message=problem)
            via_hook = self.real is not None and spec.method == "dll"
            array = self.memory.arrays.get(name) if self.memory else None
            try:
                with self.process.lock:
                    self.process.clock.settle()
                    world = self.process.world
                    if array is None:
                        value = memory.read(world, name, via_hook)
                    else:  # the bytes game memory would hold there: each field at its offset
                        value = array.pack({f.name: memory.read(world, f.name, via_hook) for f in array.fields})
            except memory.MemoryAccessError as e:
                return pb2.GetSiphonResponse(success=False, message=self._failed(name, "read", e))
        return pb2.GetSiphonResponse(success=True, message="ok", **{VALUE_FIELDS[spec.type]: value})

    @guarded(pb2.SetSiphonResponse)
    def SetAttribute(self, request, context):
        name = request.attributeName
        with self._mutex:
            if name in WINDOW_CONTROLS:
                value = getattr(request, VALUE_FIELDS[WINDOW_CONTROLS[name]])
                try:
                    memory.check_range(name, value, memory.WINDOW_RANGES.get(name))
                except memory.MemoryAccessError as e:
                    return pb2.SetSiphonResponse(success=False, message=str(e))
                self.process.window.write_control(name, value)
                return pb2.SetSiphonResponse(success=True, message=f"{name} written")
            if isinstance(spec := self._find(name, "write"), str):
                return pb2.SetSiphonResponse(success=False, message=spec)
            if self.memory is not None and name in self.memory.arrays:
                return pb2.SetSiphonResponse(
                    success=False, message=f"{name} is an array: write the attributes it holds one by one"
                )
            expected = VALUE_FIELDS[spec.type]
            given = request.WhichOneof("value")
            if given != expected:
                return pb2.SetSiphonResponse(
                    success=False, message=f"{name} is {spec.type}: send {expected}, got {given}"
                )
            if (problem := self._pay_for(spec)) is not None:
                return pb2.SetSiphonResponse(success=False, message=problem)
            try:
                with self.process.lock:
                    self.process.clock.settle()  # the write lands after every tick due before it
                    memory.write(
                        self.process.world,
                        name,
                        getattr(request, given),
                        self.real is not None and spec.method == "dll",
                    )
                    self.process.clock.reschedule()
            except memory.MemoryAccessError as e:
                return pb2.SetSiphonResponse(success=False, message=self._failed(name, "write", e))
        return pb2.SetSiphonResponse(success=True, message=f"{name} written")

    # -------------------------------------------------------------------------------- input
    @guarded(pb2.InputKeyTapResponse)
    def InputKeyTap(self, request, context):
        if not self.input_ready:
            return pb2.InputKeyTapResponse(
                success=False, message="input is not initialized: call InitializeInput first"
            )
        hold, delay, count = request.hold_ms, request.delay_ms, len(request.keys)
        if hold < 0 or delay < 0:
            return pb2.InputKeyTapResponse(
                success=False, message=f"hold_ms and delay_ms must be 0 or more, got {hold} and {delay}"
            )
        if hold + 2 * max(0, count - 1) * delay > MAX_WAIT_MS:
            return pb2.InputKeyTapResponse(
                success=False,
                message=(
                    f"a tap of {count} keys with hold_ms={hold} and delay_ms={delay} takes hold + 2 x (keys - 1) x delay ms: "
                    f"it must be at most {MAX_WAIT_MS} ms"
                ),
            )
        with self.taps.slot() as refused:
            if refused:
                return pb2.InputKeyTapResponse(success=False, message=refused)
            return self._tap(request)

    def _tap(self, request) -> pb2.InputKeyTapResponse:
        if self.real is not None:  # Siphon: an unknown name is scancode 0, pressed and reported done
            keys = [k for k in map(scancodes.tapped, request.keys) if k is not None]
        else:
            unknown = [k for k in request.keys if k not in MOUSE_BUTTONS and k.upper() not in KEYBOARD_KEYS]
            if unknown or not request.keys:
                return pb2.InputKeyTapResponse(
                    success=False,
                    message=f"unknown key names {unknown}: nothing was pressed" if unknown else "no keys given",
                )
            keys = [normalize_key(k) for k in request.keys]
        latch = self.process.latch
        for i, key in enumerate(keys):  # press in order, hold, release in reverse: as Siphon does
            if i and request.delay_ms:
                time.sleep(request.delay_ms / 1000)
            latch.press(key)
        time.sleep(request.hold_ms / 1000)
        for i, key in enumerate(reversed(keys)):
            if i and request.delay_ms:
                time.sleep(request.delay_ms / 1000)
            latch.release(key)
        return pb2.InputKeyTapResponse(success=True, message=f"tapped {', '.join(keys)}")

    @guarded(pb2.InputKeyToggleResponse)
    def InputKeyToggle(self, request, context):
        if not self.input_ready:
            return pb2.InputKeyToggleResponse(
                success=False, message="input is not initialized: call InitializeInput first"
            )
        if self.real is not None:  # Siphon: always the keyboard path; a mouse button is scancode 0
            if (key := scancodes.toggled(request.key)) is not None:
                (self.process.latch.press if request.toggle else self.process.latch.release)(key)
            return pb2.InputKeyToggleResponse(success=True, message="Key pressed/released successfully")
        if request.key in MOUSE_BUTTONS:
            return pb2.InputKeyToggleResponse(
                success=False,
                message=f"{request.key} is a mouse button: mouse buttons can only be tapped (InputKeyTap)",
            )
        if request.key.upper() not in KEYBOARD_KEYS:
            return pb2.InputKeyToggleResponse(
                success=False, message=f"unknown key name {request.key!r}: nothing was pressed"
            )
        (self.process.latch.press if request.toggle else self.process.latch.release)(request.key)
        return pb2.InputKeyToggleResponse(
            success=True, message=f"{request.key.upper()} {'down' if request.toggle else 'up'}"
        )

    @guarded(pb2.MoveMouseResponse)
    def MoveMouse(self, request, context):
        if not self.input_ready:
            return pb2.MoveMouseResponse(success=False, message="input is not initialized: call InitializeInput first")
        if request.steps <= 0:
            return pb2.MoveMouseResponse(
                success=False, message="steps must be at least 1 (the real server divides by it)"
            )
        self.process.latch.move_mouse(request.delta_x)
        return pb2.MoveMouseResponse(success=True, message="mouse moved (the camera only yaws: delta_y is ignored)")

    # ------------------------------------------------------------------------------ capture
    @guarded(pb2.CaptureFrameResponse)
    def CaptureFrame(self, request, context):
        if not self.capture_ready:
            return pb2.CaptureFrameResponse(
                success=False, message="capture is not initialized: call InitializeCapture first"
            )
        frame, width, height = self.process.window.capture()
        return pb2.CaptureFrameResponse(success=True, message="ok", frame=frame, width=width, height=height)

    def StreamFrames(self, request, context):
        if not self.capture_ready:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "capture is not initialized: call InitializeCapture first"
            )
        fmt = request.format or "jpeg"
        if fmt not in ("jpeg", "raw"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"format must be 'jpeg' or 'raw', got {fmt!r}")
        quality = request.quality or 85
        with self.streams.slot() as refused:
            if refused:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
            frames = self._broadcast(context) if self.broadcaster is not None else self._ticks(context)
            for number, stamp, bgr in frames:
                # Encoded here, on this call's thread, for this subscriber alone: as Siphon does.
                data = (
                    cv2.cvtColor(bgr, cv2.COLOR_BGR2BGRA).tobytes()
                    if fmt == "raw"
                    else cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])[1].tobytes()
                )
                yield pb2.FrameData(
                    data=data,
                    timestamp_us=stamp,
                    width=bgr.shape[1],
                    height=bgr.shape[0],
                    frame_number=number & 0x7FFFFFFF,
                    format=fmt,
                )

    def _ticks(self, context) -> Iterator[tuple[int, int, np.ndarray]]:
        """Ideal: each new frame once, numbered by its tick, and the current one again every
        half second while the game is paused, so a client tells a paused game from a dead link.
        A frame the client is too slow for is never rendered (the generator waits in gRPC's
        flow control)."""
        process = self.process
        last = -1
        while context.is_active():
            with process.clock.ticked:
                process.clock.ticked.wait_for(lambda last=last: process.world.tick_count != last, timeout=IDLE_RESEND_S)
            stamp = time.time_ns() // 1000
            last, bgr = process.bgr_frame()
            yield last, stamp, bgr

    def _broadcast(self, context) -> Iterator[tuple[int, int, np.ndarray]]:
        """Real: the broadcaster's latest grab whenever there is a newer one (``env/sim/broadcaster.py``)."""
        sent = 0
        with self.broadcaster.subscription():
            while context.is_active():
                grab = self.broadcaster.newer_than(sent, timeout=IDLE_RESEND_S)
                if grab is not None:
                    sent = grab.number
                    yield grab.number, grab.timestamp_us, grab.bgr

    # ------------------------------------------------------------------------------ refused
    @guarded(pb2.ExecuteCommandResponse)
    def ExecuteCommand(self, request, context):
        log.warning("refused ExecuteCommand(%r) from %s", request.command, context.peer())
        return pb2.ExecuteCommandResponse(success=False, message=EXECUTE_MESSAGE, exit_code=-1)

    def StartRecording(self, request, context):
        return pb2.StartRecordingResponse(success=False, message=RECORDING_MESSAGE)

    def StopRecording(self, request, context):
        return pb2.StopRecordingResponse(success=False, message=RECORDING_MESSAGE)

    def GetRecordingStatus(self, request, context):
        return pb2.GetRecordingStatusResponse(success=False, message=RECORDING_MESSAGE)

    def DownloadRecording(self, request, context):
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, RECORDING_MESSAGE)


def _spec(proto: pb2.ProcessAttributeProto) -> AttributeSpec:
    return AttributeSpec(proto.name, proto.type, proto.pattern, tuple(proto.offsets), proto.length, proto.method)


def _on_pool(method: Callable, pool: futures.ThreadPoolExecutor) -> Callable:
    """``method`` as a handler that gRPC runs on ``pool`` instead of the server's own (gRPC
    honours a handler's ``experimental_thread_pool``)."""

    @functools.wraps(method)
    def handler(request, context):
        return method(request, context)

    handler.experimental_thread_pool = pool
    return handler


@dataclass
class RunningServer:
    server: grpc.Server
    process: SimProcess
    address: str
    pools: tuple[futures.ThreadPoolExecutor, ...]
    real: RealServer | None = None

    def stop(self) -> None:
        if self.real is not None:
            self.real.stop()  # a call waiting for the NPC hook gives up
        self.server.stop(grace=1).wait()
        for pool in self.pools:
            pool.shutdown(wait=False, cancel_futures=True)
        self.process.clock.stop()
        self.process.latch.release_all()


REAL_BY_DEFAULT = "eldenring_"
"""Profiles named so (the game's own: eldenring_margit, eldenring_godrick, ...) are served in
real-server mode unless asked otherwise: their clients must survive the real server."""


def serve(
    host: str = "127.0.0.1",
    port: int = 50051,
    seed: int = 0,
    size: tuple[int, int] = (1280, 720),
    profile: str = "sim_margit",
    speed: float | None = None,
    real: bool | None = None,
    timings: RealServerTimings = RealServerTimings(),
    lifecycle: Lifecycle = Lifecycle(),
    start_in_fight: bool | None = None,
) -> RunningServer:
    """Start the simulator and its Siphon service; returns at once (the server runs in threads).

    ``real``: behave as the real Siphon server, with ``timings`` (True), or as the ideal one
    (False); by default real for a profile named ``REAL_BY_DEFAULT...``, as ``python -m env.sim`` is.
    ``start_in_fight``: the world starts in a fight (as after a restart), or at the Site of
    Grace outside the fog wall, where a player arrives in the game; by default in a fight on
    an ideal server, at the grace on a real one."""
    if real is None:
        real = profile.startswith(REAL_BY_DEFAULT)
    if not is_loopback(host):
        log.warning(
            "listening on %s: anyone who can reach this address can drive the simulator (no "
            "authentication, like the real Siphon server). Use 127.0.0.1 unless you mean it.",
            host,
        )
    game_profile = load_profile(profile)
    world = World(seed, lifecycle, load_boss(game_profile.boss))
    if not (not real if start_in_fight is None else start_in_fight):
        world.respawn()
    if speed is not None:
        memory.write(world, "gameSpeedFlag", True)
        memory.write(world, "gameSpeedVal", speed)
    first_frame = timings.first_frame_ms / 1000 if real else None
    process = SimProcess(world, InputLatch(game_profile.keybinds), Renderer(*size), first_frame)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=PROMPT_WORKERS, thread_name_prefix="siphon"),
        options=[
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.max_receive_message_length", MAX_REQUEST),
            # gRPC shares a port by default (SO_REUSEPORT): a second server would then take part
            # of the connections, and a client could reconnect to a different world unawares.
            ("grpc.so_reuseport", 0),
        ],
    )
    siphon = RealServer(timings) if real else None
    service = SimSiphonService(process, siphon, profile)
    # Calls that wait run on threads of their own, so they never hold up an attribute read; each
    # pool has a thread beyond its admission limit, so the call over it is refused, not queued.
    pools = [
        futures.ThreadPoolExecutor(max_workers=MAX_TAPS + 1, thread_name_prefix="siphon-tap"),
        futures.ThreadPoolExecutor(max_workers=MAX_STREAMS + 1, thread_name_prefix="siphon-stream"),
    ]
    service.InputKeyTap = _on_pool(service.InputKeyTap, pools[0])
    service.StreamFrames = _on_pool(service.StreamFrames, pools[1])
    if siphon is not None:
        pools.append(futures.ThreadPoolExecutor(max_workers=MUTEX_WORKERS, thread_name_prefix="siphon-mutex"))
        for name in LOCKED_CALLS:
            setattr(service, name, _on_pool(getattr(service, name), pools[2]))
    pb2_grpc.add_SiphonServiceServicer_to_server(service, server)
    try:
        bound = server.add_insecure_port(grpc_address(host, port))
    except RuntimeError:  # grpc raises this for an address it cannot bind
        bound = 0
    if bound == 0:
        raise SetupError(f"cannot listen on {grpc_address(host, port)}: {bind_problem(host, port)}")
    server.start()
    process.clock.start()
    mode = "real-server mode" if siphon is not None else "ideal server"
    where = "in a fight" if world.phase is Phase.FIGHT else "at the Site of Grace"
    address = grpc_address(host, bound)
    log.info("%s on %s, the world %s", mode, address, where)
    return RunningServer(server, process, address, tuple(pools), siphon)


def bind_problem(host: str, port: int) -> str:
    """Why ``host:port`` cannot be listened on, and what to do, found by binding a plain socket
    there: gRPC's own error says neither (and its log line may name the wrong one)."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as e:
        return f"{host} is no address or host name this machine knows ({e.strerror}): use --host 127.0.0.1"
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            probe.bind(where)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            return f"port {port} is in use (another server, or Siphon): pick another --port"
        if e.errno == errno.EADDRNOTAVAIL:
            return f"{host} is not an address of this machine: use one of its own, or --host 127.0.0.1"
        return f"{e.strerror or e}: pick another --port, or --host 127.0.0.1"
    return "gRPC could not listen there though the address is free (its log line above says why)"
