"""The episode's video (``capture/video.py``): what each codec setting costs and keeps, side by side
in one run, and how fast a dataset's frames are decoded from it.

The frames are a fight in progress: the autopilot recorded lock-step against the in-process
simulator (``capture.record``) with the lossless setting, at the in-process master size and at a
1280x720 capture. Each setting tried then encodes those very frames through ``EpisodeVideo`` (the
recorder's own writer), one frame at a time, and is measured for:

* encode CPU per frame: the process's CPU time over encoding the fight, less that of decoding
  the reference alone (so encoders with threads of their own, SVT-AV1's, count whole);
* MiB per minute of play at 30 Hz, against format 1's 84x84 frames in HDF5 (gzip-1, a chunk a
  frame: what every episode stored before);
* PSNR of the decoded picture against the captured one, and of the 84x84 training frame made
  from each (the env's ``FrameSpec``) against the one made from the captured picture;
* build throughput: frames decoded and made into 84x84 training frames per second
  (``capture.footage.frames_at``, what ``capture.build_dataset`` runs).
"""

from __future__ import annotations

import json
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from env.common.cli import JsonOut, parse_settings, run_command
from env.common.fields import check_fields, checked, number
from env.common.machine import describe
from env.config import EnvConfig
from env.observations import FrameSpec

from capture.episode import list_episodes, read_episode
from capture.footage import decoded, frames_at
from capture.record import MASTER_SIZE, RecordSettings, record
from capture.video import CODECS, EpisodeVideo, VideoCodec, psnr


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_video", __doc__, VideoArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


RATE = 30.0
TRAINING = FrameSpec((84, 84))
_X264 = (("preset", "ultrafast"), ("bf", "0"), ("threads", "1"))
TRIED = [
    CODECS["h264"],
    CODECS["lossless"],
    VideoCodec("ffv1", "ffv1", "bgr0", (("threads", "1"),), True, "FFV1 (lossless)"),
    VideoCodec(
        "h264 4:2:0 crf20 veryfast",
        "libx264",
        "yuv420p",
        (("preset", "veryfast"), ("bf", "0"), ("threads", "1"), ("crf", "20")),
        False,
        "H.264 4:2:0 CRF 20 (Siphon's recorder's CRF)",
    ),
    VideoCodec(
        "av1 crf30 preset10",
        "libsvtav1",
        "yuv420p",
        (("preset", "10"), ("crf", "30")),
        False,
        "SVT-AV1 4:2:0 CRF 30 (LeRobot's default CRF)",
    ),
]


def captured(folder: Path, size: tuple[int, int], seconds: float) -> Path:
    """A lossless video of one fight at ``size``: the picture as captured, bit for bit."""
    record(
        RecordSettings(
            env=EnvConfig(profile="sim_margit"),
            backend="sim",
            autopilot=True,
            max_episodes=1,
            max_episode_seconds=seconds,
            out=folder,
            master_size=size,
            video_codec="lossless",
            reproducible=True,
        )
    )
    (path,) = list_episodes(folder)
    return read_episode(path).video


def cpu_s() -> float:
    """CPU seconds this process (every thread of it) has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def try_setting(reference: Path, setting: VideoCodec, size: tuple[int, int], folder: Path) -> dict:
    out = folder / f"{setting.name.replace(' ', '_')}.mkv"
    started = cpu_s()
    for _ in decoded(reference):
        pass
    decoding = cpu_s() - started
    started = cpu_s()
    video = EpisodeVideo(out, size, RATE, setting, wait=True)
    n = 0
    for n, rgb in enumerate(decoded(reference), start=1):
        video.add(n / RATE, rgb)
    video.close()
    encoding = cpu_s() - started - decoding
    errors = {"picture": 0.0, "training": 0.0}
    values = {"picture": 0, "training": 0}
    for original, got in zip(decoded(reference), decoded(out), strict=True):
        for name, (a, b) in (
            ("picture", (original, got)),
            ("training", (TRAINING.process(original), TRAINING.process(got))),
        ):
            errors[name] += float(np.sum((a.astype(np.int32) - b) ** 2))
            values[name] += a.size
    started = time.perf_counter()
    frames_at(out, n, np.arange(n), TRAINING)
    build_s = time.perf_counter() - started
    return {
        "setting": setting.name,
        "size": f"{size[0]}x{size[1]}",
        "frames": n,
        "encode_cpu_ms": 1000 * encoding / n,
        "mib_per_minute": out.stat().st_size / (n / RATE) * 60 / 2**20,
        "psnr_picture_db": psnr(errors["picture"], values["picture"]),
        "psnr_84x84_db": psnr(errors["training"], values["training"]),
        "build_frames_per_s": n / build_s,
    }


def format_1_frames(reference: Path, folder: Path) -> dict:
    """Format 1's storage of the same fight: 84x84 frames, gzip-1, a chunk a frame."""
    frames = np.stack([TRAINING.process(rgb) for rgb in decoded(reference)])
    path = folder / "format1.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("frames", data=frames, chunks=(1, *TRAINING.shape), compression="gzip", compression_opts=1)
    return {
        "setting": "format 1: 84x84 frames, HDF5 gzip-1",
        "frames": len(frames),
        "mib_per_minute": path.stat().st_size / (len(frames) / RATE) * 60 / 2**20,
    }


@dataclass(frozen=True)
class VideoArgs:
    """How long a fight ``python -m benchmarks.bench_video`` records: each field its flag."""

    seconds: float = checked(20.0, number(0, 3600, above=True), "length of the fight recorded")

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: VideoArgs, out: JsonOut) -> None:
    results: dict = {"machine": describe(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for size in (MASTER_SIZE, (1280, 720)):
            folder = Path(tmp) / f"{size[0]}x{size[1]}"
            reference = captured(folder, size, args.seconds)
            if size == MASTER_SIZE:
                results["format_1"] = format_1_frames(reference, folder)
            for setting in TRIED:
                results["runs"].append(try_setting(reference, setting, size, folder))
    print(f"Machine: {results['machine']}\n")
    print("| setting | picture | encode CPU ms/frame | MiB/minute | PSNR picture dB | PSNR 84x84 dB | build frames/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in results["runs"]:
        print(
            f"| {r['setting']} | {r['size']} | {r['encode_cpu_ms']:.2f} | {r['mib_per_minute']:.2f} | "
            f"{r['psnr_picture_db']:.1f} | {r['psnr_84x84_db']:.1f} | {r['build_frames_per_s']:.0f} |"
        )
    f1 = results["format_1"]
    print(f"| {f1['setting']} | 84x84 | - | {f1['mib_per_minute']:.2f} | - | - | - |")
    if out.json:
        out.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
