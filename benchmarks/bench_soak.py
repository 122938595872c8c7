"""Soak: the recorder left running for a long session, as a user would leave it for an evening.

``python -m capture.record --autopilot`` (the real command line, in its own process) records a
1280x720 ``python -m env.sim`` server at 30 Hz for ``--minutes`` (default 30), cutting episodes
and restarting fights as it goes, each episode's picture kept as video at 1280x720. Every ``--every`` seconds the recorder's and the server's
resident memory are sampled; at the end the recorder is stopped as a user stops it (SIGINT)
and every episode it wrote is read back for its samples, late and dropped samples and rate.
A leak shows as RSS growing minute after minute (the slope, after a warm-up minute); a
recorder that cannot keep up shows as drops.

    python -m benchmarks.bench_soak                      # 30 minutes
    python -m benchmarks.bench_soak --minutes 2 --json soak.json
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from env.common.cli import JsonOut, parse_settings, run_command
from env.common.fields import check_fields, checked, number
from env.common.machine import describe
from env.sim.launcher import SimServer

from capture.episode import list_episodes, read_episode
from capture.record import RecordSettings


def main(argv: list[str] | None = None) -> int:
    args, recording, out = parse_settings(
        "python -m benchmarks.bench_soak",
        __doc__,
        SoakArgs,
        (RecordSettings, ("rate", "video_codec")),
        JsonOut,
        argv=argv,
    )
    return run_command(lambda: benchmark(args, recording, out))


WARMUP_S = 60.0
"""Memory before this is start-up (imports, first frames, buffers filling), not a trend."""


def rss_mib(pid: int) -> float:
    """Resident memory of a process, from /proc (the soak runs on Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def slope_mib_per_min(times: list[float], values: list[float]) -> float:
    """Least-squares growth after the warm-up (0 when too few points)."""
    points = [(t, v) for t, v in zip(times, values) if t >= min(WARMUP_S, times[-1] / 2)]
    if len(points) < 3:
        return 0.0
    t, v = np.array(points).T
    return float(np.polyfit(t / 60, v, 1)[0])


def soak(minutes: float, every: float, rate: float, window: tuple[int, int], codec: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp, SimServer(size=window, log_path=Path(tmp) / "server.log") as server:
        out = Path(tmp) / "raw"
        log = open(Path(tmp) / "recorder.log", "wb")
        recorder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "capture.record",
                "--host",
                server.host,
                "--autopilot",
                "--no-status",
                "--rate",
                str(rate),
                "--video-codec",
                codec,
                "--out",
                str(out),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started = time.monotonic()
        series: list[dict] = []
        deadline = started + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(min(every, max(0.0, deadline - time.monotonic())))  # the first sample after start-up
            if recorder.poll() is not None:
                break
            series.append(
                {
                    "t_s": round(time.monotonic() - started, 1),
                    "recorder_rss_mib": rss_mib(recorder.pid),
                    "server_rss_mib": rss_mib(server.process.pid),
                    "episodes": len(list_episodes(out)) if out.exists() else 0,
                }
            )
        if recorder.poll() is not None:
            log.close()
            raise RuntimeError(
                f"the recorder exited early ({recorder.returncode}):\n{(Path(tmp) / 'recorder.log').read_text()}"
            )
        recorder.send_signal(signal.SIGINT)  # quit: the episode in progress is saved as 'stopped'
        code = recorder.wait(timeout=60)
        log.close()
        episodes = [read_episode(p, frames=False) for p in list_episodes(out)]
        disk_mb = sum(p.stat().st_size + p.with_suffix(".mkv").stat().st_size for p in list_episodes(out)) / 1e6
    stats = [json.loads(e.attrs["stats"]) for e in episodes]
    times = [row["t_s"] for row in series]
    return {
        "minutes": minutes,
        "window": f"{window[0]}x{window[1]}",
        "video_codec": codec,
        "target_hz": rate,
        "recorder_exit_code": code,
        "episodes": len(episodes),
        "outcomes": {
            o: sum(e.attrs["outcome"] == o for e in episodes) for o in sorted({e.attrs["outcome"] for e in episodes})
        },
        "samples": sum(len(e) for e in episodes),
        "late_samples": sum(s.get("late_samples", 0) for s in stats),
        "dropped_samples": sum(s.get("dropped_samples", 0) for s in stats),
        "repeated_frames": sum(s.get("repeated_frames", 0) for s in stats),
        "achieved_hz_min": min((s["achieved_rate_hz"] for s in stats if s.get("achieved_rate_hz")), default=0.0),
        "disk_mb": disk_mb,
        "recorder_rss_slope_mib_per_min": slope_mib_per_min(times, [r["recorder_rss_mib"] for r in series]),
        "server_rss_slope_mib_per_min": slope_mib_per_min(times, [r["server_rss_mib"] for r in series]),
        "series": series,
    }


def print_report(result: dict) -> None:
    print(f"Machine: {describe()}\n")
    print(
        f"{result['minutes']:g} min at {result['target_hz']:g} Hz from a {result['window']} server window, "
        f"video {result['video_codec']}; recorder exit code {result['recorder_exit_code']}\n"
    )
    print("| time | recorder RSS (MiB) | server RSS (MiB) | episodes saved |\n|---:|---:|---:|---:|")
    series = result["series"]
    step = max(1, len(series) // 15)
    for row in series[::step] + ([series[-1]] if (len(series) - 1) % step else []):
        print(
            f"| {row['t_s'] / 60:.1f} min | {row['recorder_rss_mib']:.1f} | {row['server_rss_mib']:.1f} | {row['episodes']} |"
        )
    print(
        f"\nRSS growth after the first minute: recorder {result['recorder_rss_slope_mib_per_min']:+.2f} MiB/min, "
        f"server {result['server_rss_slope_mib_per_min']:+.2f} MiB/min"
    )
    print(
        f"{result['episodes']} episodes ({', '.join(f'{k} {v}' for k, v in result['outcomes'].items())}), "
        f"{result['samples']} samples, {result['late_samples']} late, {result['dropped_samples']} dropped, "
        f"{result['repeated_frames']} frames repeated, "
        f"lowest episode rate {result['achieved_hz_min']:.2f} Hz, {result['disk_mb']:.1f} MB on disk"
    )


@dataclass(frozen=True)
class SoakArgs:
    """How long ``python -m benchmarks.bench_soak`` records and how often it samples memory: each field
    its flag (the recorder's rate and video codec are its own, ``RecordSettings``'s, passed to it as flags)."""

    minutes: float = checked(30.0, number(0, 24 * 60, above=True), "how long to record")
    every: float = checked(5.0, number(0, 3600, above=True), "seconds between memory samples")

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: SoakArgs, recording: RecordSettings, out: JsonOut) -> None:
    result = soak(args.minutes, args.every, recording.rate, (1280, 720), recording.video_codec)
    print_report(result)
    if out.json:
        out.json.write_text(json.dumps({"machine": describe(), **result}, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
