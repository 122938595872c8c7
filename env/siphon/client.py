"""A strict, fast client for a Siphon server, over the gRPC stubs that ship in ``pysiphon``.

pysiphon's own ``SiphonClient`` turns every failure into a dict, sets no deadlines, prints, and
converts each frame with a per-pixel Python loop (``benchmarks/bench_live.py`` times that path
against this client). This client instead:

* gives every call a deadline and raises ``SiphonError`` (a ``GameError``) whose message says
  what failed and what to do about it;
* reads many attributes concurrently (one unary RPC each, issued as gRPC futures, awaited
  together), so a snapshot costs about one round trip instead of one per attribute;
* reads neighbours in game memory (HP and max HP, X/Z/Y) as one array attribute and unpacks
  it (``env/siphon/packed_reads.py``), so a snapshot needs fewer calls in the first place;
* decodes frames with OpenCV (BGRA -> RGB), no Python loop over pixels;
* never calls ``ExecuteCommand``: on the real server it runs any shell command as Administrator.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import cv2
import grpc
import numpy as np
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.attribute_config import AttributeSpec, SiphonConfig
from env.common import interrupts
from env.common.errors import GameError
from env.game import AttributeValue, Unreadable
from env.keys import is_mouse_button, normalize_key
from env.siphon.packed_reads import Block, ReadPlan, plan_blocks

log = logging.getLogger(__name__)

MAX_MESSAGE = 100 * 1024 * 1024  # a 4K BGRA frame is 33 MB; the real server allows 100 MB
CHANNEL_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE)]
VALUE_FIELDS = {"int": "int_value", "float": "float_value", "bool": "bool_value", "array": "array_value"}


class SiphonError(GameError):
    """A Siphon call failed; the message names the call, the server and what to do."""


class ReadRefused(SiphonError, Unreadable):
    """The server answered but could not read (or write) an attribute: ``success=false``. On the
    game this is what a loading screen looks like (every pointer chain leads nowhere for a few
    seconds), and what a boss killed for good looks like: not a lost server."""


class NotConfigured(SiphonError):
    """The server has no config from this client: it restarted since (or never got one)."""


FORGOT_CONFIG = ("not initialized", "no config")
"""How a server that lost its config answers (the simulator's and Siphon's wording)."""


class NoFrame(SiphonError, Unreadable):
    """The server has no usable frame of the game window (it answers success with 0 bytes)."""


HOOK_MESSAGE_EVERY_S = 3.0


def grpc_address(host: str, port: int) -> str:
    """``host`` and ``port`` as one gRPC address: an IPv6 literal in brackets (``[::1]:50051``),
    because gRPC reads a bare ``::1:50051`` as a misformatted host name."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:  # a host name, or already bracketed
        return f"{host}:{port}"
    return f"[{host}]:{port}" if literal.version == 6 else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    """``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``, bracketed or not)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


HELD_SIGNALS_AT_MOST_S = 5.0
"""The longest deadline of a call during which Ctrl-C and SIGTERM are held back (``SiphonClient._call``)."""


def _started(start: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """What ``start(*args, **kwargs)`` returns (gRPC futures, or a stream), started with Ctrl-C
    and SIGTERM held: gRPC adds a call to its channel before it starts the thread that finishes
    the channel's calls, and a signal landing in between leaves a call nobody finishes, which the
    channel's close() then waits for for ever. Waiting for the results stays interruptible."""
    with interrupts.deferred():
        return start(*args, **kwargs)


def _cancelled_if_cut(call: grpc.Future) -> Any:
    """The call's response; a signal (or anything else) cutting the wait cancels the call."""
    try:
        return call.result()
    except BaseException:
        call.cancel()
        raise


class SiphonClient:
    def __init__(self, host: str = "127.0.0.1:50051", timeout: float = 2.0, connect_timeout: float = 5.0) -> None:
        self._packed_dropped = False
        self.host = host
        self.timeout = timeout
        self._channel = grpc.insecure_channel(host, options=CHANNEL_OPTIONS)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise SiphonError(self._unreachable(f"within {connect_timeout:g} s")) from None
        self._stub = pb2_grpc.SiphonServiceStub(self._channel)
        self._types: dict[str, str] = {}
        self._hooked: frozenset[str] = frozenset()  # the NPC attributes (and arrays of them), read through the hook
        self._blocks: tuple[Block, ...] = ()
        self._plans: dict[tuple[str, ...], ReadPlan] = {}

    def _unreachable(self, detail: str) -> str:
        return (
            f"no Siphon server at {self.host} ({detail}): start Siphon on the gaming PC (as "
            "Administrator, with the game running), or `python -m env.sim` for the simulator, "
            "and check the host:port"
        )

    # ------------------------------------------------------------------------------- plumbing
    def _call(self, rpc: str, request: Any, timeout: float | None = None, subject: str = "") -> Any:
        """One unary call with a deadline; ``subject`` (a key, an attribute) goes in errors."""
        label = f"{rpc}({subject})" if subject else rpc
        timeout = timeout or self.timeout
        # A blocking unary call cut by a signal (Ctrl-C, SIGTERM) is never finished, and the
        # channel's close() then waits for it for ever. A short call keeps gRPC's blocking call
        # (the cheaper) with the signals held until it returns; a long one (the init's) waits on
        # its future, which a signal cancels, so that Ctrl-C is not held for half a minute.
        try:
            if timeout <= HELD_SIGNALS_AT_MOST_S:
                with interrupts.deferred():
                    response = getattr(self._stub, rpc)(request, timeout=timeout)
            else:
                response = _cancelled_if_cut(_started(getattr(self._stub, rpc).future, request, timeout=timeout))
        except grpc.RpcError as e:
            raise self._rpc_error(label, e, npc=subject in self._hooked) from None
        return self._checked(label, response)

    def _rpc_error(self, name: str, error: grpc.RpcError, npc: bool = False) -> SiphonError:
        """``error`` as a ``SiphonError`` that says what to do; ``npc``: the call read or wrote an
        NPC attribute, which Siphon answers only once something is targeted."""
        code = error.code()
        if code == grpc.StatusCode.UNAVAILABLE:
            return SiphonError(self._unreachable(f"{name} failed: {error.details()}"))
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            why = (
                "Siphon answers NPC attributes only once an enemy is targeted: lock on to the boss (or the "
                "server or the game is hung)"
                if npc
                else "the server or the game may be hung, or the link too slow; if it goes on, restart Siphon"
            )
            return SiphonError(f"Siphon at {self.host} did not answer {name} within its deadline: {why}")
        return SiphonError(f"Siphon {name} at {self.host} failed: {code.name}: {error.details()}")

    def _checked(self, name: str, response: Any) -> Any:
        if not response.success:
            attribute_call = name.startswith(("GetAttribute", "SetAttribute"))
            raise refusal(
                f"Siphon {name} at {self.host} refused: {response.message}",
                ReadRefused if attribute_call else SiphonError,
            )
        return response

    # ------------------------------------------------------------------------------ lifecycle
    def configure(self, config: SiphonConfig, init_timeout: float = 30.0, packed_reads: bool = True) -> None:
        """Send the attribute config and initialise memory, input and capture: both halves,
        ``configure_memory`` then ``initialize_io``."""
        self.configure_memory(config, init_timeout, packed_reads)
        self.initialize_io(config, init_timeout)

    def configure_memory(self, config: SiphonConfig, init_timeout: float = 30.0, packed_reads: bool = True) -> None:
        """Send the attribute config and initialise memory: attributes can be read and written
        from here on, before input is taken (a client that finds the game paused takes it back to
        real time first, so that the lock-on a person makes once input is taken can land).

        With ``packed_reads`` the config sent also holds one array attribute per group of
        neighbouring attributes (named ``First..Last``), which ``read`` then uses: turn it off for
        a server whose array reads misbehave. A server that keeps an older attribute list (Siphon
        keeps the first one it initialised memory with) cannot read them: ``read`` then falls
        back to one attribute at a time, and says so once."""
        self._blocks = plan_blocks(config.attributes) if packed_reads else ()
        self._plans.clear()
        self._packed_dropped = False
        request = pb2.SetProcessConfigRequest(
            process_name=config.process_name,
            process_window_name=config.window_name,
            attributes=[_attribute_proto(a) for a in (*config.attributes.values(), *(b.spec for b in self._blocks))],
        )
        self._call("SetProcessConfig", request)
        self._call("InitializeMemory", pb2.InitializeMemoryRequest(), init_timeout)
        self._types = {a.name: a.type for a in config.attributes.values()}
        self._hooked = frozenset(
            [a.name for a in config.attributes.values() if a.method == "dll"]
            + [b.name for b in self._blocks if b.spec.method == "dll"]
        )

    def initialize_io(self, config: SiphonConfig, init_timeout: float = 30.0) -> None:
        """Initialise input (key presses) and capture (frames) for the config's window."""
        self._call("InitializeInput", pb2.InitializeInputRequest(window_name=config.window_name), init_timeout)
        self._call("InitializeCapture", pb2.InitializeCaptureRequest(window_name=config.window_name), init_timeout)

    def status(self) -> pb2.GetServerStatusResponse:
        return self._call("GetServerStatus", pb2.GetServerStatusRequest())

    def close(self) -> None:
        self._channel.close()

    # ------------------------------------------------------------------------------- memory
    def read(self, names: Sequence[str]) -> dict[str, AttributeValue]:
        """Read ``names`` concurrently; all values or a ``SiphonError`` naming every failure
        (``ReadRefused`` when the server answered that it could not read them)."""
        try:
            plan = self._plan(names)
            return self._collect(names, plan, self._request_attributes(plan))
        except ReadRefused:
            if not self._drop_unreadable_arrays(names):
                raise
        return self.read(names)

    def read_and_capture(self, names: Sequence[str]) -> tuple[dict[str, AttributeValue], np.ndarray]:
        """Attributes and a frame in one concurrent round: the env's observation costs about
        the slower of the two, not their sum."""
        plan = self._plan(names)
        capture = _started(self._stub.CaptureFrame.future, pb2.CaptureFrameRequest(), timeout=self.timeout)
        try:
            values = self._collect(names, plan, self._request_attributes(plan))
        except ReadRefused:
            if not self._drop_unreadable_arrays(names):
                raise
            values = self.read(names)
        try:
            response = self._checked("CaptureFrame", capture.result())
        except grpc.RpcError as e:
            raise self._rpc_error("CaptureFrame", e) from None
        return values, frame_to_rgb(response, self.host)

    def _drop_unreadable_arrays(self, names: Sequence[str]) -> bool:
        """After a refused read that used arrays: if the same attributes read one by one and the
        arrays are refused again, the server cannot read our arrays (it kept an older attribute
        list): stop using them, warn once, and answer True so the read is retried. False when
        even the scalars are refused (a loading screen, a boss gone): then the refusal is the
        game's, not the arrays'. A loading screen that ends between the first read and the
        scalars' looks like the server's fault until the arrays are asked for once more."""
        plan = self._plan(names)
        if not plan.blocks:
            return False
        scalars = ReadPlan.for_names(tuple(names), ())
        try:
            self._collect(names, scalars, self._request_attributes(scalars))
        except ReadRefused:
            return False
        try:
            self._collect(names, plan, self._request_attributes(plan))
            return True  # the arrays read now: it was the game's refusal after all
        except ReadRefused:
            pass
        self._blocks = ()
        self._plans.clear()
        if not self._packed_dropped:
            self._packed_dropped = True
            log.warning(
                "Siphon at %s cannot read this client's packed arrays (%s): it keeps the attribute list it was "
                "first initialised with (e.g. by `pysiphon init`), so attributes are now read one by one, "
                "about twice the calls. Restart Siphon, then connect with this project first, to get "
                "packed reads back.",
                self.host,
                ", ".join(plan.blocks),
            )
        return True

    def wait_for_hook(self, config: SiphonConfig, timeout: float = 60.0) -> None:
        """Read one NPC attribute (``method = "dll"``) with a long deadline, so that Siphon's NPC
        hook is in place before anything else needs it. On the real server the first such read
        injects hook.dll, sleeps 3 s and then waits, holding the server's one lock, until the
        player targets an enemy; once it is in, reads are refused while nothing has been targeted
        since the last loading screen. Either way the player must lock on: this says so, every
        few seconds, until the read succeeds or ``timeout`` passes."""
        hooked = [a.name for a in config.attributes.values() if a.method == "dll"]
        if not hooked:
            return
        label, started = f"GetAttribute({hooked[0]})", time.monotonic()
        deadline, said_at = started + timeout, started
        future = None
        while True:
            if future is None:
                request = pb2.GetSiphonRequest(attributeName=hooked[0])
                left = max(0.1, deadline - time.monotonic())
                future = _started(self._stub.GetAttribute.future, request, timeout=left)
            try:
                self._checked(label, future.result(timeout=HOOK_MESSAGE_EVERY_S))
                return
            except grpc.FutureTimeoutError:
                pass  # still inside the hook's wait
            except ReadRefused:
                future = None  # the hook is in, nothing targeted yet: ask again
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise self._rpc_error(label, e) from None
                break
            if time.monotonic() - said_at >= HOOK_MESSAGE_EVERY_S - 0.1:
                said_at = time.monotonic()
                log.warning(
                    "Siphon is waiting for a target: lock on to the boss now (every other call waits "
                    "until then; %.0f s of %.0f s)",
                    said_at - started,
                    timeout,
                )
        raise SiphonError(
            f"nothing was targeted within {timeout:g} s, so Siphon's NPC attributes cannot be read: lock on to "
            "the boss in the game (the profile's lock_on key), with the game focused; is hook.dll next to "
            "siphon.exe, and Easy Anti-Cheat off (offline mode)?"
        )

    def wait_for_first_frame(self, timeout: float = 5.0) -> None:
        """Capture until the server has a frame: Siphon answers success with 0 bytes until the
        window has presented once, and forever for a window it cannot capture."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.capture_rgb()
                return
            except NoFrame:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _plan(self, names: Sequence[str]) -> ReadPlan:
        key = tuple(names)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = ReadPlan.for_names(key, self._blocks)
        return plan

    def _request_attributes(self, plan: ReadPlan) -> list[grpc.Future]:
        return _started(
            lambda: [
                self._stub.GetAttribute.future(pb2.GetSiphonRequest(attributeName=n), timeout=self.timeout)
                for n in plan.requests
            ]
        )

    def _collect(self, names: Sequence[str], plan: ReadPlan, futures: list[grpc.Future]) -> dict[str, AttributeValue]:
        values: dict[str, AttributeValue] = {}
        failures = []
        for request, future in zip(plan.requests, futures):
            block = plan.blocks.get(request)
            try:
                response = future.result()
            except grpc.RpcError as e:
                raise self._rpc_error(f"GetAttribute({plan.label(request)})", e, npc=request in self._hooked) from None
            field = response.WhichOneof("value") if response.success else None
            if field is None:
                failures.append(f"{plan.label(request)}: {response.message or 'the server returned no value'}")
            elif block is None:
                values[request] = getattr(response, field)
            elif field == "array_value" and len(response.array_value) == block.spec.length:
                values.update(block.unpack(response.array_value))
            else:
                failures.append(
                    f"{plan.label(request)}: expected {block.spec.length} bytes, got "
                    f"{len(response.array_value) if field == 'array_value' else field}; if this server "
                    "cannot read arrays, set packed_reads = false in the profile"
                )
        if failures:
            raise refusal(f"reading attributes from {self.host} failed: " + "; ".join(failures), ReadRefused)
        return {n: values[n] for n in names}  # an array may carry attributes nobody asked for

    def write(self, name: str, value: AttributeValue, value_type: str | None = None) -> None:
        value_type = value_type or self._types.get(name)
        if value_type not in VALUE_FIELDS:
            raise SiphonError(f"cannot write {name!r}: its type is unknown (configure() first, or pass value_type)")
        cast = {"int": int, "float": float, "bool": bool, "array": bytes}[value_type]
        request = pb2.SetSiphonRequest(attributeName=name, **{VALUE_FIELDS[value_type]: cast(value)})
        self._call("SetAttribute", request, subject=name)

    # -------------------------------------------------------------------------------- input
    def toggle_key(self, key: str, down: bool) -> None:
        """Hold (``down``) or release one key. Mouse buttons are refused here: Siphon can only
        tap them, and a toggle of one sends scancode 0 while reporting success."""
        key = normalize_key(key)
        if is_mouse_button(key):
            raise SiphonError(
                f"cannot hold the mouse button {key}: Siphon only taps mouse buttons (bind the action to a key)"
            )
        self._call("InputKeyToggle", pb2.InputKeyToggleRequest(key=key, toggle=down), subject=key)

    def tap_keys(self, keys: Iterable[str], hold_ms: int = 50, delay_ms: int = 0) -> grpc.Future:
        """Start a tap and return at once: the server holds the keys for ``hold_ms`` before it
        answers, so callers that must not wait keep the future and check it later."""
        names = [normalize_key(k) for k in keys]
        request = pb2.InputKeyTapRequest(keys=names, hold_ms=hold_ms, delay_ms=delay_ms)
        timeout = self.timeout + (hold_ms + delay_ms * len(names)) / 1000
        return _started(self._stub.InputKeyTap.future, request, timeout=timeout)

    def check_tap(self, future: grpc.Future) -> None:
        try:
            self._checked("InputKeyTap", future.result())
        except grpc.RpcError as e:
            raise self._rpc_error("InputKeyTap", e) from None

    def move_mouse(self, dx: int, dy: int = 0, steps: int = 1) -> None:
        self._call("MoveMouse", pb2.MoveMouseRequest(delta_x=int(dx), delta_y=int(dy), steps=max(1, steps)))

    # ------------------------------------------------------------------------------ capture
    def capture_rgb(self) -> np.ndarray:
        """One frame as RGB uint8 (H, W, 3), decoded from Siphon's tight top-down BGRA rows."""
        return frame_to_rgb(self._call("CaptureFrame", pb2.CaptureFrameRequest()), self.host)

    def stream_frames(self, quality: int) -> Any:
        """Open ``StreamFrames`` for JPEG at ``quality``: the call, an iterator of ``FrameData``
        that can be cancelled. No deadline: it lasts as long as the client wants it
        (``env.siphon.stream.FrameStream`` reads it and judges its silence)."""
        return _started(self._stub.StreamFrames, pb2.StreamFramesRequest(format="jpeg", quality=quality))


def _attribute_proto(a: AttributeSpec) -> pb2.ProcessAttributeProto:
    return pb2.ProcessAttributeProto(
        name=a.name,
        pattern=a.pattern,
        offsets=list(a.offsets),
        type=a.type,
        length=a.length,
        method=a.method,
    )


def refusal(message: str, kind: type[SiphonError]) -> SiphonError:
    """A server's ``success=false`` as the error it means: ``NotConfigured`` when the server lost
    (or never had) this client's config, else ``kind``."""
    if any(words in message for words in FORGOT_CONFIG):
        return NotConfigured(message + ": the server has no config from this client (it restarted?); reconnect")
    return kind(message)


def frame_to_rgb(response: pb2.CaptureFrameResponse, host: str) -> np.ndarray:
    """A CaptureFrame answer as RGB, or ``NoFrame`` for the empty answer Siphon gives before the
    window's first frame (and for a window it cannot capture)."""
    if not response.frame:
        raise NoFrame(
            f"Siphon at {host} has no frame of the game window yet (it answered 0 bytes): is the game "
            "running, in windowed or borderless mode, and visible (not minimised)?"
        )
    return bgra_bytes_to_rgb(response.frame, response.width, response.height)


def bgra_bytes_to_rgb(data: bytes, width: int, height: int) -> np.ndarray:
    expected = width * height * 4
    if len(data) != expected:
        raise SiphonError(f"frame of {len(data)} bytes does not match {width}x{height} BGRA ({expected} bytes)")
    bgra = np.frombuffer(data, dtype=np.uint8).reshape(height, width, 4)
    return cv2.cvtColor(bgra, cv2.COLOR_BGRA2RGB)
