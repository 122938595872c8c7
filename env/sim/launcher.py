"""Start and stop ``python -m env.sim`` servers from Python: for vector envs, tests and benchmarks.

Each server is its own process on its own loopback port; ``SimServer`` waits until it answers
``GetServerStatus`` before handing out its address, and stops it (SIGTERM, then SIGKILL) on
``stop()`` or when used as a context manager. A server also stops when the process that started
it ends without stopping it (killed, say): it watches the pipe on its standard input.

``ELDEN_IL_SIM_ARGS`` (e.g. ``"--real-server --scan-ms 1 --hook-delay-s 0.2"``) is added to
every server's command line: that is how a whole test run, a benchmark or a vector env is pointed
at the real-server mode without changing the code that starts the servers. A server in that mode
starts at the Site of Grace, where a connecting client's NPC hook waits for someone to lock on:
``SimServer.player()`` is that person, and a no-op wherever nobody is needed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import grpc
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.common.errors import GameError
from env.observations import FRAME_SIZE
from env.profile import Profile, load_profile
from env.sim.real_server import STATUS_MARK
from env.sim.world import Phase
from env.siphon.client import grpc_address
from env.siphon.game import SiphonGame

ARGS_VARIABLE = "ELDEN_IL_SIM_ARGS"


PORT_ATTEMPTS = 3


class ServerExited(GameError):
    """The server process ended before it answered (on a port taken meanwhile, say)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SimServer:
    """``bind``: the address the server listens on (anything but loopback makes it warn);
    ``prefix``: what runs the command, e.g. ``ip netns exec NS`` for a server in a network
    namespace (then give ``port``: a free port here says nothing about the namespace's)."""

    def __init__(
        self,
        seed: int = 0,
        size: tuple[int, int] = FRAME_SIZE,
        port: int | None = None,
        extra_args: tuple[str, ...] = (),
        log_path: Path | None = None,
        start_timeout: float = 30.0,
        bind: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> None:
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        self.real = False  # in real-server mode (as the server says once it answers)
        self.profile = "sim_margit"  # whose keybinds its game obeys (as the server says once it answers)
        self.at_grace = False  # its world started outside the fog wall, nothing targeted
        for attempt in range(1 if port else PORT_ATTEMPTS):
            self.port = port or free_port()
            self.host = grpc_address(bind, self.port)
            command = [
                *prefix,
                sys.executable,
                "-m",
                "env.sim",
                "--host",
                bind,
                "--port",
                str(self.port),
                "--seed",
                str(seed),
                "--size",
                f"{size[0]}x{size[1]}",
                # Its standard input is a pipe whose write end this process holds: the kernel
                # closes it however this process ends, and the server stops then.
                "--stop-with-stdin",
                *shlex.split(os.environ.get(ARGS_VARIABLE, "")),
                *extra_args,
            ]
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT)
            try:
                self._wait_ready(start_timeout)
                return
            except ServerExited:
                # A port picked here can be taken by someone else before the server binds it
                # (it refuses to share a port): pick another.
                if port or attempt == PORT_ATTEMPTS - 1:
                    self.stop()
                    raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.host) as channel:
            stub = pb2_grpc.SiphonServiceStub(channel)
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise ServerExited(
                        f"the simulator server on {self.host} exited with code {self.process.returncode}"
                    )
                try:
                    status = stub.GetServerStatus(pb2.GetServerStatusRequest(), timeout=0.5)
                except grpc.RpcError:
                    time.sleep(0.1)
                    continue
                self.real = STATUS_MARK in status.message
                named = re.search(r"profile (\S+)", status.message)
                self.profile = named.group(1) if named else self.profile
                phase = stub.GetAttribute(pb2.GetSiphonRequest(attributeName="SimPhase"), timeout=5)
                self.at_grace = phase.int_value == Phase.OUTSIDE
                return
        self.stop()
        raise GameError(f"the simulator server on {self.host} did not answer within {timeout:g} s")

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def player(self) -> AbstractContextManager[None]:
        """The person at the game while the context lasts, where a client cannot do without one:
        on a real-server-mode server whose world started at the grace, Siphon's NPC hook holds
        the server until something is targeted, so someone locks on once when a client asks
        (``someone_locks_on``). Nobody elsewhere: an ideal server reads NPCs with nothing
        targeted, and a world started in a fight has the boss targeted, so no key is pressed
        there and such runs are untouched."""
        if not (self.real and self.at_grace):
            return contextlib.nullcontext()
        return someone_locks_on(self.host, self.lock_on_keys)

    @property
    def lock_on_keys(self) -> tuple[str, ...]:
        """What the person at this server's game presses to lock on: its profile's binding."""
        return load_profile(self.profile).keys_for("lock_on")

    def __enter__(self) -> SimServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SimServerGame(SiphonGame):
    """A ``SiphonGame`` over a simulator server of its own: started here, stopped on ``close()``.
    The ``sim_server`` backend: the live gRPC path, with nothing to start by hand. Nobody sits at
    a game the env started itself, so on a real-server-mode server started at the grace it also
    plays the person's one part in connecting (``SimServer.player``: lock on once when the hook
    asks); every later lock-on is the client's own (its resets walk in and lock on). Its server
    plays the client's profile (``--profile``): its keys, and its boss (``sim_godrick``'s Godrick);
    a ``--profile`` among ``extra_args`` says otherwise."""

    def __init__(
        self,
        profile: Profile | str = "sim_margit",
        seed: int = 0,
        size: tuple[int, int] = FRAME_SIZE,
        **server_options: object,
    ) -> None:
        name = profile.ref if isinstance(profile, Profile) else profile
        extra_args = ("--profile", name, *server_options.pop("extra_args", ()))
        self.server = SimServer(seed=seed, size=size, extra_args=extra_args, **server_options)
        try:
            with self.server.player():
                super().__init__(self.server.host, profile)
        except BaseException:
            self.server.stop()
            raise

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.server.stop()


@contextmanager
def someone_locks_on(host: str, keys: tuple[str, ...], timeout: float = 60.0) -> Iterator[None]:
    """The person at the game, for tests and benchmarks against the real-server mode: taps the
    lock-on ``keys`` (their game's binding) once, as soon as the server takes input (a client's InitializeInput), which is
    what a connecting client's NPC hook asks of them (Siphon holds its lock until something is
    targeted). Outside the fog wall that is the sentry; a fight restart or a walk through the fog
    wall targets the boss."""
    stop = threading.Event()

    def press() -> None:
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(host) as channel:
            stub = pb2_grpc.SiphonServiceStub(channel)
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    if stub.InputKeyTap(pb2.InputKeyTapRequest(keys=list(keys), hold_ms=50), timeout=2).success:
                        return
                except grpc.RpcError:
                    pass
                stop.wait(0.05)

    thread = threading.Thread(target=press, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
