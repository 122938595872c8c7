"""Opening a 3-minute 720p fight in the Rerun viewer (``python -m elden_il.view``): how soon its
first picture is there, how long the whole ``.rrd`` takes, and the memory it takes.

The fight is the scripted expert's, recorded lock-step against the in-process simulator at a
1280x720 master picture (``capture.record``, the default h264 codec): the longest of a few seeds,
up to 3 minutes (no simulated fight lasts that long: they are decided sooner). Each measurement
runs in a fresh process (peak RSS is the process's own):

* ``--save``: from the start of ``elden_il.view.show_episode`` to the first picture logged (the
  video asset and the frame references that point into it: what a viewer needs to draw frame 0)
  and to the ``.rrd`` written whole, with peak RSS; also the remux of the Matroska video into the
  MP4 Rerun reads (``capture.footage.as_mp4``) alone;
* the viewer (where Xvfb is there): the native viewer opening that ``.rrd`` on a virtual display
  with Mesa's software Vulkan (lavapipe), its RSS a while after it opened, against what decoding
  every frame up front would hold (frames x 1280 x 720 x 3 bytes).

    nice -n 19 python -m benchmarks.bench_view [--seconds 180] [--out /tmp/bench_view]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from env.common.cli import flag, parse_settings, run_command
from env.common.fields import check_fields, checked, number
from env.common.machine import describe


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m benchmarks.bench_view", __doc__, ViewCostArgs, argv=argv)
    return run_command(lambda: benchmark(args))


MASTER = (1280, 720)


def record_fight(out: Path, seconds: float, tries: int = 4) -> Path:
    """The longest fight of the scripted expert over a few seeds, up to ``seconds``: its fights
    in the simulator end in one to two and a half minutes (a person's sooner, in a death more often)."""
    from env.config import EnvConfig

    from capture.episode import read_episode
    from capture.record import RecordSettings, record

    kept = sorted(out.glob("*.h5"))
    if kept:
        return kept[0]
    longest: tuple[float, Path] | None = None
    for seed in range(tries):
        settings = RecordSettings(
            env=EnvConfig(profile="sim_margit"),
            backend="sim",
            autopilot=True,
            max_episodes=1,
            max_episode_seconds=seconds,
            out=out / f"seed{seed}",
            master_size=MASTER,
            reproducible=True,
            seed=seed,
        )
        path = record(settings)[0]
        episode = read_episode(path, frames=False)
        length = float(episode.t[-1] - episode.t[0])
        print(f"seed {seed}: {length:.1f} s, {episode.attrs['outcome']}")
        if longest is None or length > longest[0]:
            longest = (length, path)
        if length >= seconds - 1:
            break
    for file in (longest[1], longest[1].with_suffix(".mkv")):
        file.rename(out / file.name)
    return out / longest[1].name


def measure_save(episode: Path, rrd: Path) -> dict:
    """In this (fresh) process: the times and peak RSS of ``show_episode(..., save=rrd)``."""
    from capture.footage import as_mp4

    from elden_il.view import episode as view_episode
    from elden_il.view.__main__ import show_episode

    marks: dict[str, float] = {}
    started = time.perf_counter()
    log_picture = view_episode._log_picture

    def timed(*args: object, **kwargs: object) -> None:
        log_picture(*args, **kwargs)
        marks["first_picture_s"] = time.perf_counter() - started

    view_episode._log_picture = timed
    show_episode(episode, save=rrd)
    marks["rrd_written_s"] = time.perf_counter() - started
    remux = time.perf_counter()
    mp4 = as_mp4(episode.with_suffix(".mkv"))
    marks["remux_s"] = time.perf_counter() - remux
    return {
        **marks,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "mp4_mib": len(mp4) / 2**20,
    }


def measure_viewer(rrd: Path, wait_s: float) -> dict | None:
    """The native viewer opening ``rrd`` on Xvfb with software Vulkan: its RSS after ``wait_s``."""
    if shutil.which("xvfb-run") is None:
        return None
    env = {**os.environ, "WGPU_BACKEND": "vulkan"}
    command = [
        "xvfb-run",
        "-a",
        "-s",
        "-screen 0 1600x1000x24",
        sys.executable,
        "-m",
        "rerun_cli",
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        str(rrd),
    ]
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(wait_s)
        found = subprocess.run(
            ["ps", "-o", "rss=,comm=", "--ppid", str(process.pid), "-g", str(process.pid)],
            check=False,
            capture_output=True,
            text=True,
        ).stdout.split("\n")
        viewer = [int(line.split()[0]) for line in found if line.strip().endswith("rerun")]
        return {"viewer_rss_mib": max(viewer) / 1024 if viewer else None, "after_s": wait_s}
    finally:
        os.killpg(process.pid, 15)
        process.wait()


@dataclass(frozen=True)
class ViewCostArgs:
    """How long a fight ``python -m benchmarks.bench_view`` records, where, and how long the viewer
    gets: each field its flag."""

    seconds: float = checked(
        180.0, number(0, 3600, above=True), "a fight's length at most, in seconds (the longest of a few seeds is kept)"
    )
    out: Path = field(
        default=Path("/tmp/bench_view"),
        metadata=flag("working folder: the recorded fight (a later run reuses it) and its .rrd", type=Path),
    )
    viewer_wait: float = checked(
        30.0, number(0, 3600), "seconds the viewer has to open the .rrd before its memory is read"
    )
    measure: Path | None = field(default=None, metadata=flag(argparse.SUPPRESS, type=Path))  # the fresh process's part

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: ViewCostArgs) -> None:
    if args.measure is not None:
        print(json.dumps(measure_save(args.measure, args.out / "fight.rrd")))
        return
    started = time.perf_counter()
    episode = record_fight(args.out / "raw", args.seconds)
    from capture.episode import read_episode

    fight = read_episode(episode, frames=False)
    print(
        f"recorded {episode.name} in {time.perf_counter() - started:.0f} s: {len(fight)} samples, "
        f"{fight.t[-1] - fight.t[0]:.1f} s, outcome {fight.attrs['outcome']}, "
        f"video {episode.with_suffix('.mkv').stat().st_size / 2**20:.1f} MiB"
    )
    runs = []
    for _ in range(3):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_view",
                "--out",
                str(args.out),
                "--measure",
                str(episode),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    viewer = measure_viewer(args.out / "fight.rrd", args.viewer_wait)
    result = {
        "machine": describe(),
        "load_avg": os.getloadavg(),
        "samples": len(fight),
        "duration_s": float(fight.t[-1] - fight.t[0]),
        "master": MASTER,
        "mkv_mib": episode.with_suffix(".mkv").stat().st_size / 2**20,
        "rrd_mib": (args.out / "fight.rrd").stat().st_size / 2**20,
        "decoded_all_gib": len(fight) * MASTER[0] * MASTER[1] * 3 / 2**30,
        "runs": runs,
        "viewer": viewer,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
