"""Fan-out: many independent jobs (fights, training runs) on a Ray cluster when Ray's own
``RAY_ADDRESS`` is set; when it is not, one after another in this process, or side by side in
``workers`` processes of this machine (its cores, which one Python process running the
simulator cannot keep busy).

One switch, Ray's own: ``RAY_ADDRESS=auto`` (a cluster started on this machine with
``ray start --head``), ``HOST:6379`` (a head's GCS) or ``ray://HOST:10001`` (Ray Client). Unset,
nothing here imports Ray, so the quick start never needs it. Jobs are decided by their inputs
(a fight by its seed), so where a job runs changes nothing in its result.

A worker (or a whole node) that dies mid-job has its job rerun elsewhere, up to ``retries``
times; a job still lost after that is named in one line (``FanoutError``) rather than leaving a
silently short count.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from multiprocessing import get_context, resource_tracker
from pathlib import Path
from typing import Any, TypeVar

from env.common.errors import SetupError

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

ADDRESS_VARIABLE = "RAY_ADDRESS"
RETRIES = 3
"""Reruns of a job whose worker died (Ray's own default for tasks)."""
CONNECT_TIMEOUT_S = 5.0
"""How long a head's address may take to accept a TCP connection: Ray itself waits minutes for
a GCS that is not there, printing warnings, before it gives up."""
HANDSHAKE_TIMEOUT_S = 10.0
"""How long a head may take to answer Ray's first call (``_check_speaks_ray``)."""


TOKEN_HINT = "RAY_AUTH_MODE=token here and the head's ~/.ray/auth_token copied to this machine"


class FanoutError(SetupError):
    """The Ray cluster cannot be reached or lost jobs for good; the message says which and what to do."""


def cluster_address() -> str | None:
    """``RAY_ADDRESS``, or None when fan-out is off (the variable unset or empty)."""
    return os.environ.get(ADDRESS_VARIABLE) or None


LOOPBACK_HOSTS = ("127.", "localhost", "::1", "[::1]")


def _host(address: str) -> str:
    return address.removeprefix("ray://").rpartition(":")[0]


def keep_to_loopback() -> None:
    """Make this process's Ray take ``127.0.0.1`` at its word. Ray rewrites a loopback address
    to the machine's network address before connecting, so a head started on loopback only
    (``--node-ip-address 127.0.0.1``, the safe default: nothing reachable from the network)
    would never answer. Must run before ``ray`` is imported; Ray's own switch for it is named
    for Windows and macOS, where it is the default."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


def _head(address: str) -> str | None:
    """The head ``address`` names: ``auto`` is the last cluster started on this machine, as Ray
    records it in its temporary folder (None: no record, and Ray says so at once)."""
    if address != "auto":
        return address
    record = Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    try:
        return record.read_text().strip() or None
    except OSError:
        return None


def _check_reachable(address: str) -> None:
    """A head's host:port must accept a connection, checked quickly: Ray's own connect waits
    minutes for an unreachable GCS before it fails."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise FanoutError(
            f"{ADDRESS_VARIABLE}={address} is not auto, HOST:PORT or ray://HOST:PORT: "
            f"set it to a head's address, or unset it to run in this process"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise FanoutError(
            f"{ADDRESS_VARIABLE}={address}: no Ray head answers there ({e.strerror or e}); start one with "
            f"`ray start --head`, or unset {ADDRESS_VARIABLE} to run in this process"
        ) from None


def _check_speaks_ray(address: str) -> None:
    """The first call Ray makes of a head, made here with a deadline: the GCS's ``GetClusterId``
    (``HOST:PORT``) or the client server's ``PING`` (``ray://``). A port that accepts connections
    but is no Ray head (another server, a proxy, a port forward to nothing) left ``ray.init``
    waiting for minutes without a word. A head that asks for a token has answered: Ray's own
    connect says what it needs."""
    import grpc

    target = address.removeprefix("ray://")
    try:
        with grpc.insecure_channel(target) as channel:
            if address.startswith("ray://"):
                from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

                ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(
                    ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING),
                    timeout=HANDSHAKE_TIMEOUT_S,
                )
            else:
                from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

                gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(
                    gcs_service_pb2.GetClusterIdRequest(), timeout=HANDSHAKE_TIMEOUT_S
                )
    except grpc.RpcError as e:
        if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return
        why = (
            "it speaks gRPC but not Ray's calls: another server, such as a Siphon or simulator server?"
            if e.code() == grpc.StatusCode.UNIMPLEMENTED
            else f"it did not answer Ray's handshake within {HANDSHAKE_TIMEOUT_S:g} s"
        )
        raise FanoutError(
            f"{ADDRESS_VARIABLE}={address}: something listens there, but no Ray head ({why}); point it at a "
            f"head's address (`ray start --head` prints it), or unset {ADDRESS_VARIABLE} to run in this process"
        ) from None


def connect() -> Any:
    """The ``ray`` module, connected to the cluster ``RAY_ADDRESS`` names (once per process);
    usage statistics off."""
    address = cluster_address()
    if address is None:
        raise FanoutError(f"{ADDRESS_VARIABLE} is not set: there is no Ray cluster to fan out to")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    head = _head(address)
    if head is not None and _host(head).startswith(LOOPBACK_HOSTS):
        keep_to_loopback()
    try:
        import ray
    except ImportError:
        raise FanoutError(
            f"{ADDRESS_VARIABLE} is set but Ray is not installed: `pip install -e '.[ray]'` "
            f"(scripts/setup.sh does), or unset {ADDRESS_VARIABLE} to run in this process"
        ) from None
    if not ray.is_initialized():
        if head is not None:
            _check_reachable(head)
            _check_speaks_ray(head)
        try:
            ray.init(address=address, logging_level=logging.WARNING)
        except ConnectionError as e:
            raise FanoutError(
                f"{ADDRESS_VARIABLE}={address}: {e} Start a head with `ray start --head`, or unset "
                f"{ADDRESS_VARIABLE}; a head with token authentication needs {TOKEN_HINT}"
            ) from None
        log.info("fanning out to the Ray cluster at %s (%s CPUs)", address, ray.cluster_resources().get("CPU", 0))
    return ray


def cluster_cpus() -> int:
    """CPUs of the cluster ``RAY_ADDRESS`` names, 1 when fan-out is off."""
    if cluster_address() is None:
        return 1
    return max(1, int(connect().cluster_resources().get("CPU", 1)))


def fan_out(
    job: Callable[..., R],
    items: Sequence[T],
    describe: Callable[[T], str] = str,
    retries: int = RETRIES,
    shared: Any = None,
    workers: int = 1,
    on_result: Callable[[R], None] | None = None,
    on_progress: Callable[[Any], None] | None = None,
) -> list[R]:
    """``[job(item) for item in items]``, or ``job(shared, item)`` with ``shared`` given: here
    (over ``workers`` processes of this machine when more than one, ``in_processes``), or as
    Ray tasks (one CPU each) when ``RAY_ADDRESS`` is set, where ``shared`` (a dataset) travels to
    each node once, not once per job. Results come back in the items' order; ``on_result`` gets
    each as it comes in (a progress bar). What a job passes to ``report_progress`` while it runs
    reaches ``on_progress`` here as it is sent, where the job runs in this process or in one of
    this machine's (not from Ray's: there the results alone tell). An error raised by a job propagates as itself; a job
    whose Ray worker died ``retries + 1`` times is reported, with every other lost job, by a
    ``FanoutError`` naming it (``describe(item)``)."""
    front = () if shared is None else (shared,)
    report = on_result or (lambda _: None)
    if cluster_address() is None:
        if workers > 1 and len(items) > 1:
            return in_processes(job, [(*front, item) for item in items], workers, report, on_progress)
        results = []
        with _progress_to(on_progress):
            for item in items:
                results.append(job(*front, item))
                report(results[-1])
        return results
    ray = connect()
    from ray.exceptions import NodeDiedError, ObjectLostError, OwnerDiedError, WorkerCrashedError

    task = ray.remote(num_cpus=1, max_retries=retries)(_call)
    front = tuple(ray.put(value) for value in front)
    refs = [task.remote(job, *front, item) for item in items]
    results: list[R] = []
    lost: list[str] = []
    for item, ref in zip(items, refs):
        try:
            results.append(ray.get(ref))
            report(results[-1])
        except (WorkerCrashedError, NodeDiedError, ObjectLostError, OwnerDiedError) as e:
            lost.append(describe(item))
            log.warning("lost %s: %s", describe(item), type(e).__name__)
    if lost:
        raise FanoutError(
            f"{len(lost)} of {len(items)} jobs lost with their Ray workers after {retries} reruns "
            f"({'; '.join(lost)}); nothing was written: rerun when the cluster is healthy"
        )
    return results


def _call(job: Callable[..., R], *args: Any) -> R:
    """A job as one Ray task: any callable (a ``functools.partial`` too, which Ray's decorator refuses)."""
    return job(*args)


_progress: Callable[[Any], None] | None = None
"""Where ``report_progress`` sends, in this process: a callback, or a worker's queue's ``put``."""


def report_progress(message: Any) -> None:
    """Tell the ``fan_out`` caller's ``on_progress`` of ``message`` (small and picklable: a
    fight's record) from inside a job, as it happens; nothing where nobody listens."""
    if _progress is not None:
        _progress(message)


@contextmanager
def _progress_to(listener: Callable[[Any], None] | None) -> Iterator[None]:
    global _progress
    before, _progress = _progress, listener
    try:
        yield
    finally:
        _progress = before


def in_processes(
    job: Callable[..., R],
    arguments: Sequence[tuple],
    workers: int,
    on_result: Callable[[R], None],
    on_progress: Callable[[Any], None] | None = None,
) -> list[R]:
    """``[job(*args) for args in arguments]`` over ``workers`` fresh processes of this machine,
    in the arguments' order; ``on_result`` gets each result as it comes in, ``on_progress``
    what the jobs pass to ``report_progress`` (over a queue, drained by a thread of this
    process). Spawned, not forked
    (a fork of a process whose torch has started its thread pool can hang), each with one torch
    thread (the processes are the parallelism) and deaf to Ctrl-C: this process hears it, and
    stops them all at once (``Pool.terminate``) rather than letting them finish their queue.
    Jobs travel by cloudpickle, so closures do too (an env factory that captures its config)."""
    import cloudpickle

    results: list[Any] = [None] * len(arguments)
    pickled = [(i, cloudpickle.dumps((job, *args))) for i, args in enumerate(arguments)]
    context = get_context("spawn")
    messages = context.SimpleQueue() if on_progress is not None else None
    with ExitStack() as stack:  # a Ctrl-C heard as the spawns end still stops the pool
        if messages is not None:
            stack.enter_context(_drained(messages, on_progress))
        with _born_deaf_to_ctrl_c():
            pool = stack.enter_context(context.Pool(min(workers, len(arguments)), _worker_start, (messages,)))
        for i, result in pool.imap_unordered(_call_pickled, pickled):
            results[i] = result
            on_result(result)
    return results


DRAIN_TIMEOUT_S = 2.0
"""How long the pool's end waits for its progress messages to be handed on."""
DRAIN_POLL_S = 0.05
"""How often the progress thread looks for a message (and for the pool's end) while none waits."""


@contextmanager
def _drained(messages: Any, on_progress: Callable[[Any], None]) -> Iterator[None]:
    """A thread handing each message of ``messages`` to ``on_progress`` while the block runs,
    and, when it ends normally, every message sent before then. The end is told by an event, not
    by a message of this process's own: a worker stopped in the middle of sending (the pool
    terminated on Ctrl-C) dies holding the queue's write lock, and a last message would wait for
    that lock for ever. A block that raises hands on nothing more and waits for nothing; the
    thread, maybe stuck on the dead worker's half a message, dies with the process."""
    ended, abandoned = threading.Event(), threading.Event()

    def drain() -> None:
        while True:
            if not messages.empty():
                message = messages.get()
                if not abandoned.is_set():
                    on_progress(message)
            elif ended.is_set():
                return
            else:
                ended.wait(DRAIN_POLL_S)

    thread = threading.Thread(target=drain, name="fanout-progress", daemon=True)
    thread.start()
    try:
        yield
    except BaseException:
        abandoned.set()
        raise
    finally:
        ended.set()
    thread.join(timeout=DRAIN_TIMEOUT_S)


@contextmanager
def _born_deaf_to_ctrl_c() -> Iterator[None]:
    """SIGINT blocked in this thread while it starts worker processes. A process is born with its
    parent's signal mask, so a Ctrl-C that reaches the terminal's whole group while a worker is
    still importing waits in it, unheard, until ``_worker_start`` ignores it (no KeyboardInterrupt
    traceback of the worker's own beside the command's line). This process hears it as soon as
    the spawns are done: blocked, it was pending, where an ignored one was lost and the command
    ran on to its end. Where there is no signal mask (Windows) the workers ignore it from
    ``_worker_start`` on."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    # multiprocessing starts its resource tracker with the first spawn, and unblocks SIGINT in
    # this thread once it has (its own start blocks it, then SIG_UNBLOCK): started first, it is
    # left running and the mask below stays as set
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _worker_start(messages: Any = None) -> None:
    """A worker process's start: one thread for torch (and the BLAS under it), set before it is
    imported; SIGINT ignored (the parent stops the pool); ``report_progress`` sent up
    ``messages`` where the parent listens."""
    global _progress
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if messages is not None:
        _progress = messages.put


def _call_pickled(indexed: tuple[int, bytes]) -> tuple[int, Any]:
    import cloudpickle

    i, pickled = indexed
    job, *args = cloudpickle.loads(pickled)
    return i, job(*args)
