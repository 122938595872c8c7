"""The simulator behind Siphon's gRPC service, so the live stack runs exactly as against the game.

The service is pysiphon's own (``pysiphon.generated``), served the way the real server behaves,
but strict where the real one is silent: an unknown key or attribute, a value of the wrong type,
a config the simulator cannot serve, all get ``success=false`` with a message naming them. Two
things it never does: run a command (``ExecuteCommand`` is refused; on the real server it is an
unauthenticated Administrator shell) and listen beyond 127.0.0.1 unless told to (then it warns).
No request can crash or hang it: handler errors become failed responses, waits are bounded.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field

import cv2
import grpc
import numpy as np
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.keys import KEYBOARD_KEYS, MOUSE_BUTTONS, normalize_key
from env.packed_reads import Block, fields_in
from env.profile import load_profile
from env.siphon_config import AttributeSpec
from env.sim import memory
from env.sim.clock import RealtimeClock
from env.sim.inputs import InputLatch
from env.sim.renderer import Renderer
from env.sim.world import World

log = logging.getLogger(__name__)

MAX_MESSAGE = 100 * 1024 * 1024
MAX_WAIT_MS = 10_000  # longest hold or delay a tap may ask for
PROMPT_WORKERS = 2
"""Threads for the calls that answer at once (attributes, frames, config). More only fight over
the GIL: an env step's 7 concurrent calls cost the server about 30 % more CPU with 16 threads."""
WAITING_WORKERS = 16
WAITING_CALLS = ("InputKeyTap", "StreamFrames")
"""Calls that wait (a tap's hold, a stream's life) run on threads of their own, so they can never
hold up an attribute read."""
VALUE_FIELDS = {"int": "int_value", "float": "float_value", "bool": "bool_value", "array": "array_value"}
RECORDING_MESSAGE = (
    "the simulator does not record server-side: record with `python -m capture.record`, which "
    "samples frames, memory and input on one clock and writes crash-safe episodes"
)
EXECUTE_MESSAGE = (
    "ExecuteCommand is refused: the simulator never runs commands. (On the real Siphon server it "
    "runs any command as Administrator without authentication: keep that server off open networks.)"
)


@dataclass
class SimProcess:
    """The "game process" the service attaches to: world, input, clock and renderer."""

    world: World
    latch: InputLatch
    renderer: Renderer
    lock: threading.Lock = field(default_factory=threading.Lock)
    clock: RealtimeClock = field(init=False)
    _frame_cache: tuple[int, bytes] = (-1, b"")

    def __post_init__(self) -> None:
        self.clock = RealtimeClock(self.world, self.latch, self.lock)

    def bgra_frame(self) -> tuple[int, bytes]:
        """The current frame as tight BGRA bytes, rendered once per tick however often asked."""
        with self.lock:
            self.clock.settle()
            tick = self.world.tick_count
            if self._frame_cache[0] != tick:
                bgra = cv2.cvtColor(self.renderer.render_bgr(self.world), cv2.COLOR_BGR2BGRA)
                self._frame_cache = (tick, bgra.tobytes())
            return self._frame_cache

    def bgr_frame(self) -> tuple[int, np.ndarray]:
        with self.lock:
            self.clock.settle()
            return self.world.tick_count, self.renderer.render_bgr(self.world)


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


class SimSiphonService(pb2_grpc.SiphonServiceServicer):
    def __init__(self, process: SimProcess) -> None:
        self.process = process
        self.attributes: dict[str, str] = {}  # configured name -> type
        self.arrays: dict[str, Block] = {}  # configured array attributes and what they hold
        self.process_name = ""
        self.window_name = ""
        self.memory_ready = self.input_ready = self.capture_ready = False

    # ------------------------------------------------------------------------------- config
    @guarded(pb2.SetProcessConfigResponse)
    def SetProcessConfig(self, request, context):
        if not request.process_name:
            return pb2.SetProcessConfigResponse(success=False, message="process_name is empty: [process_info] name = ... is required")
        if not request.attributes:
            return pb2.SetProcessConfigResponse(success=False, message="the config has no attributes: add [attributes.<Name>] tables")
        problems = []
        scalars = [_spec(a) for a in request.attributes if a.type != "array"]
        for attr in scalars:
            known = memory.ATTRIBUTES.get(attr.name)
            if known is None:
                problems.append(f"{attr.name}: no such attribute")
            elif attr.type != known.type:
                problems.append(f"{attr.name}: type {attr.type!r}, the simulator's is {known.type!r}")
        arrays = {}
        for attr in (_spec(a) for a in request.attributes if a.type == "array"):
            try:
                arrays[attr.name] = Block(attr, fields_in(attr, scalars))
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
                message="the simulator cannot serve this config: " + "; ".join(problems)
                + f". It has: {', '.join(sorted(memory.ATTRIBUTES))}",
            )
        if request.process_name != self.process_name:  # another game: initialise it anew
            self.memory_ready = self.input_ready = self.capture_ready = False
        self.attributes = {a.name: a.type for a in request.attributes}
        self.arrays = arrays
        self.process_name, self.window_name = request.process_name, request.process_window_name
        return pb2.SetProcessConfigResponse(success=True, message=f"config set: {len(self.attributes)} attributes")

    def _need_config(self) -> str | None:
        return None if self.attributes else "no config: call SetProcessConfig first (pysiphon init <config.toml>)"

    @guarded(pb2.InitializeMemoryResponse)
    def InitializeMemory(self, request, context):
        if (problem := self._need_config()) is not None:
            return pb2.InitializeMemoryResponse(success=False, message=problem)
        self.memory_ready = True
        return pb2.InitializeMemoryResponse(success=True, message="memory initialized", process_id=os.getpid())

    @guarded(pb2.InitializeInputResponse)
    def InitializeInput(self, request, context):
        if (problem := self._need_config()) is not None:
            return pb2.InitializeInputResponse(success=False, message=problem)
        self.input_ready = True
        return pb2.InitializeInputResponse(success=True, message="input initialized")

    @guarded(pb2.InitializeCaptureResponse)
    def InitializeCapture(self, request, context):
        if (problem := self._need_config()) is not None:
            return pb2.InitializeCaptureResponse(success=False, message=problem)
        self.capture_ready = True
        r = self.process.renderer
        return pb2.InitializeCaptureResponse(success=True, message="capture initialized", window_width=r.width, window_height=r.height)

    @guarded(pb2.GetServerStatusResponse)
    def GetServerStatus(self, request, context):
        return pb2.GetServerStatusResponse(
            success=True, message="elden-il simulator",
            memory_initialized=self.memory_ready, input_initialized=self.input_ready,
            capture_initialized=self.capture_ready, config_set=bool(self.attributes),
            process_name=self.process_name, window_name=self.window_name,
            process_id=os.getpid() if self.memory_ready else 0,
        )

    # ------------------------------------------------------------------------------- memory
    def _attribute_problem(self, name: str) -> str | None:
        if not self.memory_ready:
            return "memory is not initialized: call SetProcessConfig and InitializeMemory first (pysiphon init <config.toml>)"
        if name not in self.attributes:
            return f"attribute {name!r} is not in the current config; configured: {', '.join(self.attributes)}"
        return None

    @guarded(pb2.GetSiphonResponse)
    def GetAttribute(self, request, context):
        name = request.attributeName
        if (problem := self._attribute_problem(name)) is not None:
            return pb2.GetSiphonResponse(success=False, message=problem)
        array = self.arrays.get(name)
        with self.process.lock:
            self.process.clock.settle()
            world = self.process.world
            if array is None:
                value = memory.read(world, name)
            else:  # the bytes game memory would hold there: each field at its offset
                value = array.pack({f.name: memory.read(world, f.name) for f in array.fields})
        return pb2.GetSiphonResponse(success=True, message="ok", **{VALUE_FIELDS[self.attributes[name]]: value})

    @guarded(pb2.SetSiphonResponse)
    def SetAttribute(self, request, context):
        name = request.attributeName
        if (problem := self._attribute_problem(name)) is not None:
            return pb2.SetSiphonResponse(success=False, message=problem)
        if name in self.arrays:
            return pb2.SetSiphonResponse(success=False, message=f"{name} is an array: write the attributes it holds one by one")
        expected = VALUE_FIELDS[self.attributes[name]]
        given = request.WhichOneof("value")
        if given != expected:
            return pb2.SetSiphonResponse(success=False, message=f"{name} is {self.attributes[name]}: send {expected}, got {given}")
        try:
            with self.process.lock:
                self.process.clock.settle()  # the write lands after every tick due before it
                memory.write(self.process.world, name, getattr(request, given))
                self.process.clock.reschedule()
        except memory.MemoryError_ as e:
            return pb2.SetSiphonResponse(success=False, message=str(e))
        return pb2.SetSiphonResponse(success=True, message=f"{name} written")

    # -------------------------------------------------------------------------------- input
    @guarded(pb2.InputKeyTapResponse)
    def InputKeyTap(self, request, context):
        if not self.input_ready:
            return pb2.InputKeyTapResponse(success=False, message="input is not initialized: call InitializeInput first")
        unknown = [k for k in request.keys if k not in MOUSE_BUTTONS and k.upper() not in KEYBOARD_KEYS]
        if unknown or not request.keys:
            return pb2.InputKeyTapResponse(success=False, message=f"unknown key names {unknown}: nothing was pressed" if unknown else "no keys given")
        if not (0 <= request.hold_ms <= MAX_WAIT_MS and 0 <= request.delay_ms <= MAX_WAIT_MS):
            return pb2.InputKeyTapResponse(success=False, message=f"hold_ms and delay_ms must be within 0..{MAX_WAIT_MS}")
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
            return pb2.InputKeyToggleResponse(success=False, message="input is not initialized: call InitializeInput first")
        if request.key in MOUSE_BUTTONS:
            return pb2.InputKeyToggleResponse(success=False, message=f"{request.key} is a mouse button: mouse buttons can only be tapped (InputKeyTap)")
        if request.key.upper() not in KEYBOARD_KEYS:
            return pb2.InputKeyToggleResponse(success=False, message=f"unknown key name {request.key!r}: nothing was pressed")
        (self.process.latch.press if request.toggle else self.process.latch.release)(request.key)
        return pb2.InputKeyToggleResponse(success=True, message=f"{request.key.upper()} {'down' if request.toggle else 'up'}")

    @guarded(pb2.MoveMouseResponse)
    def MoveMouse(self, request, context):
        if not self.input_ready:
            return pb2.MoveMouseResponse(success=False, message="input is not initialized: call InitializeInput first")
        if request.steps <= 0:
            return pb2.MoveMouseResponse(success=False, message="steps must be at least 1 (the real server divides by it)")
        self.process.latch.move_mouse(request.delta_x)
        return pb2.MoveMouseResponse(success=True, message="mouse moved (the camera only yaws: delta_y is ignored)")

    # ------------------------------------------------------------------------------ capture
    @guarded(pb2.CaptureFrameResponse)
    def CaptureFrame(self, request, context):
        if not self.capture_ready:
            return pb2.CaptureFrameResponse(success=False, message="capture is not initialized: call InitializeCapture first")
        _, frame = self.process.bgra_frame()
        r = self.process.renderer
        return pb2.CaptureFrameResponse(success=True, message="ok", frame=frame, width=r.width, height=r.height)

    def StreamFrames(self, request, context):
        if not self.capture_ready:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "capture is not initialized: call InitializeCapture first")
        fmt = request.format or "jpeg"
        if fmt not in ("jpeg", "raw"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"format must be 'jpeg' or 'raw', got {fmt!r}")
        quality = request.quality or 85
        process = self.process
        last = -1
        while context.is_active():
            with process.clock.ticked:
                process.clock.ticked.wait_for(lambda: process.world.tick_count != last, timeout=0.5)
                tick = process.world.tick_count
            if tick == last:
                continue  # paused: no new frame, nothing to send
            stamp = time.time_ns() // 1000
            if fmt == "raw":
                tick, data = process.bgra_frame()
            else:
                tick, bgr = process.bgr_frame()
                data = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])[1].tobytes()
            last = tick
            r = process.renderer
            yield pb2.FrameData(data=data, timestamp_us=stamp, width=r.width, height=r.height, frame_number=tick & 0x7FFFFFFF, format=fmt)

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
    waiting_pool: futures.ThreadPoolExecutor

    def stop(self) -> None:
        self.server.stop(grace=1).wait()
        self.waiting_pool.shutdown(wait=False, cancel_futures=True)
        self.process.clock.stop()
        self.process.latch.release_all()


def serve(
    host: str = "127.0.0.1", port: int = 50051, seed: int = 0, size: tuple[int, int] = (1280, 720),
    profile: str = "sim_margit", speed: float | None = None,
) -> RunningServer:
    """Start the simulator and its Siphon service; returns at once (the server runs in threads)."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning(
            "listening on %s: anyone who can reach this address can drive the simulator (no "
            "authentication, like the real Siphon server). Use 127.0.0.1 unless you mean it.", host,
        )
    world = World(seed)
    if speed is not None:
        memory.write(world, "gameSpeedFlag", True)
        memory.write(world, "gameSpeedVal", speed)
    process = SimProcess(world, InputLatch(load_profile(profile).keybinds), Renderer(*size))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=PROMPT_WORKERS, thread_name_prefix="siphon"),
        options=[("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE)],
    )
    service = SimSiphonService(process)
    waiting_pool = futures.ThreadPoolExecutor(max_workers=WAITING_WORKERS, thread_name_prefix="siphon-wait")
    for name in WAITING_CALLS:
        setattr(service, name, _on_pool(getattr(service, name), waiting_pool))
    pb2_grpc.add_SiphonServiceServicer_to_server(service, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot listen on {host}:{port}: is another server (or Siphon) already using it?")
    server.start()
    process.clock.start()
    return RunningServer(server, process, f"{host}:{bound}", waiting_pool)
