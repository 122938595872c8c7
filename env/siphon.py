"""A strict, fast client for a Siphon server, over the gRPC stubs that ship in ``pysiphon``.

pysiphon's own ``SiphonClient`` turns every failure into a dict, sets no deadlines, prints, and
converts a 1080p frame with a per-pixel Python loop (0.3 s). This client instead:

* gives every call a deadline and raises ``SiphonError`` (a ``GameError``) whose message says
  what failed and what to do about it;
* reads many attributes concurrently (one unary RPC each, issued as gRPC futures, awaited
  together), so a snapshot costs about one round trip instead of one per attribute;
* reads neighbours in game memory (HP and max HP, X/Z/Y) as one array attribute and unpacks
  it (``env/packed_reads.py``), so a snapshot needs fewer calls in the first place;
* decodes frames with OpenCV (BGRA -> RGB), no Python loop over pixels;
* never calls ``ExecuteCommand``: on the real server it runs any shell command as Administrator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import cv2
import grpc
import numpy as np
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.game import AttributeValue, GameError
from env.keys import normalize_key
from env.packed_reads import Block, ReadPlan, plan_blocks
from env.siphon_config import AttributeSpec, SiphonConfig

log = logging.getLogger(__name__)

MAX_MESSAGE = 100 * 1024 * 1024  # a 4K BGRA frame is 33 MB; the real server allows 100 MB
CHANNEL_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE)]
VALUE_FIELDS = {"int": "int_value", "float": "float_value", "bool": "bool_value", "array": "array_value"}


class SiphonError(GameError):
    """A Siphon call failed; the message names the call, the server and what to do."""


class SiphonClient:
    def __init__(self, host: str = "127.0.0.1:50051", timeout: float = 2.0, connect_timeout: float = 5.0) -> None:
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
        try:
            response = getattr(self._stub, rpc)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as e:
            raise self._rpc_error(label, e) from None
        return self._checked(label, response)

    def _rpc_error(self, name: str, error: grpc.RpcError) -> SiphonError:
        code = error.code()
        if code == grpc.StatusCode.UNAVAILABLE:
            return SiphonError(self._unreachable(f"{name} failed: {error.details()}"))
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return SiphonError(
                f"Siphon at {self.host} did not answer {name} within its deadline: the server or "
                "the game may be hung (Siphon blocks on NPC reads until a boss is targeted: lock on)"
            )
        return SiphonError(f"Siphon {name} at {self.host} failed: {code.name}: {error.details()}")

    def _checked(self, name: str, response: Any) -> Any:
        if not response.success:
            raise SiphonError(f"Siphon {name} at {self.host} refused: {response.message}")
        return response

    # ------------------------------------------------------------------------------ lifecycle
    def configure(self, config: SiphonConfig, init_timeout: float = 30.0, packed_reads: bool = True) -> None:
        """Send the attribute config and initialise memory, input and capture.

        With ``packed_reads`` the config sent also holds one array attribute per group of
        neighbouring attributes (named ``First..Last``), which ``read`` then uses: turn it off for
        a server whose array reads misbehave."""
        self._blocks = plan_blocks(config.attributes) if packed_reads else ()
        self._plans.clear()
        request = pb2.SetProcessConfigRequest(
            process_name=config.process_name,
            process_window_name=config.window_name,
            attributes=[_attribute_proto(a) for a in (*config.attributes.values(), *(b.spec for b in self._blocks))],
        )
        self._call("SetProcessConfig", request)
        self._call("InitializeMemory", pb2.InitializeMemoryRequest(), init_timeout)
        self._call("InitializeInput", pb2.InitializeInputRequest(window_name=config.window_name), init_timeout)
        self._call("InitializeCapture", pb2.InitializeCaptureRequest(window_name=config.window_name), init_timeout)
        self._types = {a.name: a.type for a in config.attributes.values()}

    def status(self) -> pb2.GetServerStatusResponse:
        return self._call("GetServerStatus", pb2.GetServerStatusRequest())

    def close(self) -> None:
        self._channel.close()

    # ------------------------------------------------------------------------------- memory
    def read(self, names: Sequence[str]) -> dict[str, AttributeValue]:
        """Read ``names`` concurrently; all values or a ``SiphonError`` naming every failure."""
        plan = self._plan(names)
        return self._collect(names, plan, self._request_attributes(plan))

    def read_and_capture(self, names: Sequence[str]) -> tuple[dict[str, AttributeValue], np.ndarray]:
        """Attributes and a frame in one concurrent round: the env's observation costs about
        the slower of the two, not their sum."""
        plan = self._plan(names)
        capture = self._stub.CaptureFrame.future(pb2.CaptureFrameRequest(), timeout=self.timeout)
        values = self._collect(names, plan, self._request_attributes(plan))
        try:
            response = self._checked("CaptureFrame", capture.result())
        except grpc.RpcError as e:
            raise self._rpc_error("CaptureFrame", e) from None
        return values, bgra_bytes_to_rgb(response.frame, response.width, response.height)

    def _plan(self, names: Sequence[str]) -> ReadPlan:
        key = tuple(names)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = ReadPlan.for_names(key, self._blocks)
        return plan

    def _request_attributes(self, plan: ReadPlan) -> list[grpc.Future]:
        return [
            self._stub.GetAttribute.future(pb2.GetSiphonRequest(attributeName=n), timeout=self.timeout)
            for n in plan.requests
        ]

    def _collect(self, names: Sequence[str], plan: ReadPlan, futures: list[grpc.Future]) -> dict[str, AttributeValue]:
        values: dict[str, AttributeValue] = {}
        failures = []
        for request, future in zip(plan.requests, futures):
            block = plan.blocks.get(request)
            try:
                response = future.result()
            except grpc.RpcError as e:
                raise self._rpc_error(f"GetAttribute({plan.label(request)})", e) from None
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
            raise SiphonError(f"reading attributes from {self.host} failed: " + "; ".join(failures))
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
        key = normalize_key(key)
        self._call("InputKeyToggle", pb2.InputKeyToggleRequest(key=key, toggle=down), subject=key)

    def tap_keys(self, keys: Iterable[str], hold_ms: int = 50, delay_ms: int = 0) -> grpc.Future:
        """Start a tap and return at once: the server holds the keys for ``hold_ms`` before it
        answers, so callers that must not wait keep the future and check it later."""
        names = [normalize_key(k) for k in keys]
        request = pb2.InputKeyTapRequest(keys=names, hold_ms=hold_ms, delay_ms=delay_ms)
        return self._stub.InputKeyTap.future(request, timeout=self.timeout + (hold_ms + delay_ms * len(names)) / 1000)

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
        response = self._call("CaptureFrame", pb2.CaptureFrameRequest())
        return bgra_bytes_to_rgb(response.frame, response.width, response.height)


def _attribute_proto(a: AttributeSpec) -> pb2.ProcessAttributeProto:
    return pb2.ProcessAttributeProto(
        name=a.name, pattern=a.pattern, offsets=list(a.offsets), type=a.type, length=a.length, method=a.method,
    )


def bgra_bytes_to_rgb(data: bytes, width: int, height: int) -> np.ndarray:
    expected = width * height * 4
    if len(data) != expected:
        raise SiphonError(f"frame of {len(data)} bytes does not match {width}x{height} BGRA ({expected} bytes)")
    bgra = np.frombuffer(data, dtype=np.uint8).reshape(height, width, 4)
    return cv2.cvtColor(bgra, cv2.COLOR_BGRA2RGB)
