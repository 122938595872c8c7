"""The live env against a simulator server across an emulated network link.

The benchmark builds the link itself: a network namespace holding the server, a veth pair
between it and this namespace (10.200.0.1/30 here, 10.200.0.2/30 there), and ``tc netem`` on
both ends for the link's rate and one-way delay. Where the kernel has no netem, ``tc tbf`` gives
the rate and a relay beside the server (``benchmarks.delay_proxy``) the delay. Every row says the
round trip it measured (the median of small calls). Everything is removed in a ``finally``, also
on Ctrl-C. It needs root (``ip netns add``, ``tc``).

Rows: each link, each capture size (the server's window), each frame source of the Siphon
backend (``capture``: a unary CaptureFrame of raw BGRA per observation; ``stream``: StreamFrames,
JPEG pushed at the real server's ~15 fps, the newest kept). The server runs in real-server mode
(1 ms scans, the world in the fight), so its stream is as unkind as Siphon's. Columns: bytes per
step on the wire (the veth's rx + tx counters over the run, so a stream's frames count whether
or not a step used them), steps/s at timestep 0 (as fast as the link and the machine allow),
the observation's frame age at the step's end (``info["frame_age_ms"]``: median and p95), and
the physical bound, the link's rate over the bytes per step.

Then the recorder's loop (``benchmarks.bench_recorder.record_from``: sampler, episode writer and
its video) at 30 Hz for ``--record-seconds`` per row, over the same links, sizes and frame
sources: the rate it held, the samples it dropped, and the bytes a sample took on the wire
against the link's bound.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from env.common.cli import JsonOut, add_flags, command_parser, from_flags, run_command
from env.common.errors import GameError
from env.common.fields import check_fields, checked, number, whole
from env.common.machine import describe
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.profile import load_profile
from env.sim.launcher import SimServer
from env.siphon.client import SiphonClient
from env.siphon.game import SiphonGame

from benchmarks.bench_recorder import record_from


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("python -m benchmarks.bench_link", __doc__, LinkArgs)
    add_flags(parser, JsonOut, json={"help": "also write the rows here"})
    flags = parser.parse_args(argv)
    # run_command takes SIGTERM as Ctrl-C, so the link is taken down on the way out either way
    return run_command(lambda: benchmark(from_flags(LinkArgs, flags), from_flags(JsonOut, flags)))


NAMESPACE = "elden-link"
HERE_IF, THERE_IF = "elden-link0", "elden-link1"
HERE_IP, THERE_IP = "10.200.0.1", "10.200.0.2"
PORT = 50051
RELAY_PORT = 50052
LINKS = (("1 Gbit/s, 0.5 ms", "1gbit", 1e9, 0.5), ("100 Mbit/s, 2 ms", "100mbit", 1e8, 2.0))
"""Each link: its name, tc's rate, the rate in bits/s, the one-way delay in ms."""
SIZES = ((1280, 720), (1920, 1080))
SOURCES = ("capture", "stream")
SERVER_ARGS = ("--real-server", "--scan-ms", "1", "--hook-delay-s", "0.2", "--start", "fight")
ROW_SECONDS = 30.0  # the most one row may take, whatever --steps asks

log = logging.getLogger("bench_link")


@dataclass
class Row:
    link: str
    round_trip_ms: float
    round_trip_undelayed_ms: float
    size: str
    source: str
    steps: int
    bytes_per_step: float
    steps_per_s: float
    age_median_ms: float
    age_p95_ms: float
    bound_steps_per_s: float


def ip(*args: str) -> None:
    subprocess.run(("ip", *args), check=True, capture_output=True)


@contextmanager
def emulated_link() -> Iterator[None]:
    """The namespace and the veth pair, removed on the way out (deleting the namespace takes its
    end of the pair, and the pair goes with it)."""
    try:
        ip("netns", "add", NAMESPACE)
        ip("link", "add", HERE_IF, "type", "veth", "peer", "name", THERE_IF)
        ip("link", "set", THERE_IF, "netns", NAMESPACE)
        ip("addr", "add", f"{HERE_IP}/30", "dev", HERE_IF)
        ip("link", "set", HERE_IF, "up")
        for args in (
            ("addr", "add", f"{THERE_IP}/30", "dev", THERE_IF),
            ("link", "set", THERE_IF, "up"),
            ("link", "set", "lo", "up"),
        ):
            ip("netns", "exec", NAMESPACE, "ip", *args)
        yield
    finally:
        subprocess.run(("ip", "netns", "del", NAMESPACE), capture_output=True)
        subprocess.run(("ip", "link", "del", HERE_IF), capture_output=True)


def shape(rate: str, bits_per_s: float, delay_ms: float) -> bool:
    """``rate`` and one-way ``delay_ms`` on both directions of the link, with netem; where the
    kernel has no netem (``sch_netem`` absent, as in some containers), the rate alone with a
    token bucket (tbf), and False: the delay is then the relay's (``delayed_host``)."""
    burst = f"{max(32_000, int(bits_per_s / 8 * 0.002))}b"  # 2 ms of the rate
    netem = ("netem", "delay", f"{delay_ms}ms", "rate", rate, "limit", "10000")
    tbf = ("tbf", "rate", rate, "burst", burst, "latency", "50ms")
    for qdisc in (netem, tbf):
        done = [
            subprocess.run((*where, "tc", "qdisc", "replace", "dev", dev, "root", *qdisc), capture_output=True)
            for where, dev in (((), HERE_IF), (("ip", "netns", "exec", NAMESPACE), THERE_IF))
        ]
        if all(d.returncode == 0 for d in done):
            return qdisc is netem
        log.warning("tc refused %s: %s", qdisc[0], b" ".join(d.stderr.strip() for d in done).decode())
    raise RuntimeError("tc could shape the link with neither netem nor tbf")


@contextmanager
def delayed_host(server: SimServer, delay_ms: float) -> Iterator[str]:
    """The address of a relay beside ``server`` (in its namespace) that holds every byte for
    ``delay_ms`` each way: the link's delay where tc has no netem."""
    relay = subprocess.Popen(
        (
            *("ip", "netns", "exec", NAMESPACE, sys.executable, "-m", "benchmarks.delay_proxy"),
            *("--listen", f"{THERE_IP}:{RELAY_PORT}", "--to", server.host, "--delay-ms", str(delay_ms)),
        ),
        stderr=subprocess.DEVNULL,
    )
    host = f"{THERE_IP}:{RELAY_PORT}"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((THERE_IP, RELAY_PORT), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or relay.poll() is not None:
                    raise RuntimeError(f"the delay relay did not start at {host}") from None
                time.sleep(0.1)
        yield host
    finally:
        relay.terminate()
        relay.wait()


def round_trip_ms(host: str, calls: int = 50) -> float:
    """The median time of a small call (GetServerStatus) to ``host``: the link's round trip
    plus the server's answer."""
    client = SiphonClient(host)
    try:
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            client.status()
            times.append(1000 * (time.perf_counter() - started))
        return statistics.median(times)
    finally:
        client.close()


def wire_bytes() -> int:
    stats = Path(f"/sys/class/net/{HERE_IF}/statistics")
    return int((stats / "rx_bytes").read_text()) + int((stats / "tx_bytes").read_text())


def quiet_wire_bytes(settle_s: float = 0.3, longest_s: float = 15.0) -> int:
    """The wire's byte count once the link has gone quiet: what a row before (a failed one's
    frames still in flight) sent is not counted as the next row's."""
    deadline, last = time.monotonic() + longest_s, wire_bytes()
    while time.monotonic() < deadline:
        time.sleep(settle_s)
        now = wire_bytes()
        if now == last:
            break
        last = now
    return last


def measure(host: str, source: str, steps: int) -> tuple[int, float, int, list[float]]:
    """(steps taken, seconds stepping, bytes on the wire, frame ages in ms) of the env stepping
    at timestep 0 with random actions, over ``source``. Bytes count resets too (few, small)."""
    game = SiphonGame(host, replace(load_profile("sim_margit"), frame_source=source), timeout=5.0)
    try:
        env = EldenRingEnv(game, EnvConfig(timestep_ms=0, max_steps=10**9))
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(3):
            env.step(env.action_space.sample())
        ages, stepping, before, started = [], 0.0, wire_bytes(), time.monotonic()
        while len(ages) < steps and time.monotonic() - started < ROW_SECONDS:
            step_started = time.monotonic()
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            stepping += time.monotonic() - step_started
            ages.append(info["frame_age_ms"])
            if terminated or truncated:  # a fight over: the next one (its reset is not timed)
                env.reset()
        return len(ages), stepping, wire_bytes() - before, ages
    finally:
        game.close()


RECORD_HZ = 30.0


def record_over(
    server: SimServer, host: str, size: tuple[int, int], link: str, bits_per_s: float, seconds: float
) -> list[dict]:
    """The recorder's loop against ``server`` (reached at ``host``) for ``seconds`` per frame source: a row each, or
    the error that stopped it (a link too slow for the frames asked of it ends in the client's
    deadline, as it would for a person recording)."""
    rows = []
    for source in SOURCES:
        row = {"link": link, "window": f"{size[0]}x{size[1]}", "source": source, "target_hz": RECORD_HZ}
        before = quiet_wire_bytes()
        try:
            result = record_from(
                server, size, RECORD_HZ, seconds, replace(load_profile("sim_margit"), frame_source=source), host
            )
        except GameError as e:
            rows.append({**row, "error": str(e)})
            log.warning("recorder %s %s %s failed: %s", link, row["window"], source, e)
            continue
        per_sample = (wire_bytes() - before) / max(result["samples"], 1)
        rows.append({**row, **result, "wire_bytes_per_sample": per_sample, "bound_hz": bits_per_s / 8 / per_sample})
        log.info(
            "recorder %s %s %s: %.1f Hz, %d dropped",
            link,
            row["window"],
            source,
            result["achieved_hz"],
            result["dropped"],
        )
    return rows


def run(steps: int, record_seconds: float) -> tuple[list[Row], list[dict]]:
    rows, recordings = [], []
    with emulated_link():
        for size in SIZES:
            server = SimServer(
                size=size, port=PORT, extra_args=SERVER_ARGS, bind=THERE_IP, prefix=("ip", "netns", "exec", NAMESPACE)
            )
            try:
                for name, rate, bits_per_s, delay_ms in LINKS:
                    by_netem = shape(rate, bits_per_s, delay_ms)
                    undelayed = round_trip_ms(server.host) if not by_netem else float("nan")
                    with contextlib.ExitStack() as relay:
                        host = server.host if by_netem else relay.enter_context(delayed_host(server, delay_ms))
                        link = name if by_netem else f"{name} (tbf + relay: no netem)"
                        rtt = round_trip_ms(host)
                        for source in SOURCES:
                            taken, seconds, wire, ages = measure(host, source, steps)
                            per_step = wire / taken
                            rows.append(
                                Row(
                                    link,
                                    rtt,
                                    undelayed,
                                    f"{size[0]}x{size[1]}",
                                    source,
                                    taken,
                                    per_step,
                                    taken / seconds,
                                    statistics.median(ages),
                                    float(np.percentile(ages, 95)),
                                    bits_per_s / 8 / per_step,
                                )
                            )
                            log.info("%s", rows[-1])
                        if record_seconds > 0:
                            recordings += record_over(server, host, size, link, bits_per_s, record_seconds)
            finally:
                server.stop()
    return rows, recordings


def table(rows: list[Row]) -> str:
    lines = [
        "| link | round trip ms (without the relay) | capture | frame source | bytes/step | steps/s | frame age median (ms) | p95 (ms) | link bound (steps/s) |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.link} | {r.round_trip_ms:.1f} ({r.round_trip_undelayed_ms:.1f}) | {r.size} | {r.source} | {r.bytes_per_step / 1e3:,.0f} kB | {r.steps_per_s:.1f} | "
            f"{r.age_median_ms:.0f} | {r.age_p95_ms:.0f} | {r.bound_steps_per_s:,.0f} |"
        )
    return "\n".join(lines)


def recorder_table(recordings: list[dict]) -> str:
    lines = [
        "| link | capture | frame source | target Hz | achieved Hz | dropped | bytes/sample on the wire | link bound (Hz) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in recordings:
        if "error" in r:
            lines.append(
                f"| {r['link']} | {r['window']} | {r['source']} | {r['target_hz']:g} | failed: {r['error']} | | | |"
            )
            continue
        lines.append(
            f"| {r['link']} | {r['window']} | {r['source']} | {r['target_hz']:g} | {r['achieved_hz']:.1f} | "
            f"{r['dropped']} of {r['samples'] + r['dropped']} | {r['wire_bytes_per_sample'] / 1e3:,.0f} kB | "
            f"{r['bound_hz']:,.0f} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class LinkArgs:
    """How long ``python -m benchmarks.bench_link`` measures each row: each field its flag."""

    steps: int = checked(100, whole(1, 100_000), "env steps per row (each row stops after 30 s)")
    record_seconds: float = checked(20.0, number(0, 3600), "the recorder's seconds per row (0: no recorder rows)")

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: LinkArgs, out: JsonOut) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    rows, recordings = run(args.steps, args.record_seconds)
    print(f"machine: {describe()}\n")
    print(table(rows))
    if recordings:
        print("\nthe recorder at 30 Hz:\n")
        print(recorder_table(recordings))
    if out.json:
        out.json.write_text(
            json.dumps({"machine": describe(), "rows": [asdict(r) for r in rows], "recorder": recordings}, indent=2)
        )


if __name__ == "__main__":
    raise SystemExit(main())
