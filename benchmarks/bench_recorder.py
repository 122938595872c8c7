"""The recorder's hot path against ``python -m env.sim`` over loopback gRPC.

* Sustained sampling: frame capture, one concurrent memory snapshot, frame downscale and the
  episode writer, at 30 Hz from a 1280x720 window for two minutes: achieved rate, late and
  dropped samples, bytes on disk per minute.
* The highest sustainable rate from a 1920x1080 window (no drops over 20 s), trying 10 Hz up to 60 Hz.
* Alignment: a key pressed at a known time; the delay until the first sampled state and the
  first sampled frame that show its effect.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.machine import describe
from capture.episode import EpisodeMeta, EpisodeWriter
from capture.inputs import InputLog
from capture.sampler import Sampler
from env.game import GameError
from env.observations import FrameSpec
from env.siphon_game import SiphonGame
from env.sim.launcher import SimServer
from env.sim.moves import PlayerAnim


def sustained(
    size: tuple[int, int], rate: float, seconds: float, stored: tuple[int, int] = (160, 90),
    server_args: tuple[str, ...] = (),
) -> dict:
    with SimServer(size=size, extra_args=server_args) as server, tempfile.TemporaryDirectory() as tmp:
        game = SiphonGame(server.host, "sim_margit")
        game.read_state()  # a first read before the clock starts (on a real server: the NPC hook)
        keys = tuple(dict.fromkeys(game.profile.keybinds.values()))
        inputs = InputLog(keys)
        sampler = Sampler(game, inputs, FrameSpec(stored), rate)
        meta = EpisodeMeta("sim_margit", game.profile.attribute_names, keys, rate, sampler.frame, size, "human", None, server.host)
        writer = EpisodeWriter(Path(tmp), meta)
        sampler.restart_clock()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sample, *_ = sampler.next_sample()
            writer.append(sample)
        stats = sampler.stats
        sampler.close()
        path = writer.finish("stopped", {})
        size_bytes = path.stat().st_size
        game.close()
    return {
        "window": f"{size[0]}x{size[1]}", "stored": f"{stored[0]}x{stored[1]}", "target_hz": rate, "seconds": seconds,
        "achieved_hz": stats.achieved_rate_hz, "samples": stats.samples, "late": stats.late, "dropped": stats.dropped,
        "mb_per_minute": size_bytes / seconds * 60 / 1e6,
    }


def rate_search(size: tuple[int, int], rates: tuple[float, ...], seconds: float, server_args: tuple[str, ...] = ()) -> list[dict]:
    """``sustained`` at each rate, up until the first rate that drops samples or fails (then
    the run holds the error instead of figures)."""
    runs = []
    for rate in rates:
        try:
            runs.append(sustained(size, rate, seconds, server_args=server_args))
        except GameError as e:
            runs.append({"window": f"{size[0]}x{size[1]}", "target_hz": rate, "dropped": None, "error": str(e)})
        if runs[-1]["dropped"] != 0:
            break
    return runs


def highest_sustainable(runs: list[dict]) -> float | None:
    rates = [r["target_hz"] for r in runs if r["dropped"] == 0]
    return max(rates) if rates else None


def alignment(trials: int = 20, rate: float = 60.0) -> dict:
    """Press W (or S) at a known time; when do the sampled state and frame first change?"""
    with SimServer(size=(320, 180), extra_args=("--start", "grace")) as server:
        # a still world: at the Site of Grace the boss waits behind the fog, only the player moves
        game = SiphonGame(server.host, "sim_margit")
        inputs = InputLog(tuple(game.profile.keybinds.values()))
        sampler = Sampler(game, inputs, FrameSpec((320, 180)), rate)
        state_delays, frame_delays = [], []
        for i in range(trials):
            key = "W" if i % 2 == 0 else "S"
            game.hold_keys(())
            time.sleep(0.4)
            sampler.restart_clock()
            before, *_ = sampler.next_sample()
            pressed_at = time.monotonic()
            game.hold_keys({key})
            state_seen = frame_seen = None
            anim = list(game.profile.attribute_names).index("HeroAnimId")
            while (state_seen is None or frame_seen is None) and time.monotonic() - pressed_at < 1.0:
                s, *_ = sampler.next_sample()
                if state_seen is None and s.state[anim] == PlayerAnim.WALK:
                    state_seen = s.t - pressed_at
                if frame_seen is None and not np.array_equal(s.frame, before.frame):
                    frame_seen = s.frame_t - pressed_at
            state_delays.append(state_seen)
            frame_delays.append(frame_seen)
        sampler.close()
        game.close()
    return {
        "sample_rate_hz": rate, "trials": trials,
        "state_delay_ms": {"median": statistics.median(state_delays) * 1000, "max": max(state_delays) * 1000},
        "frame_delay_ms": {"median": statistics.median(frame_delays) * 1000, "max": max(frame_delays) * 1000},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="length of the sustained run (default: 120)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    results = {"machine": describe(), "sustained_720p_30hz": sustained((1280, 720), 30.0, args.seconds)}
    results["1080p"] = rate_search((1920, 1080), (10.0, 15.0, 20.0, 30.0, 45.0, 60.0), min(20.0, args.seconds))
    results["alignment"] = alignment()
    print(f"Machine: {results['machine']}\n")
    print("| window | stored | target Hz | seconds | achieved Hz | late | dropped | MB/minute |\n|---|---|---:|---:|---:|---:|---:|---:|")
    for r in [results["sustained_720p_30hz"], *results["1080p"]]:
        print(f"| {r['window']} | {r['stored']} | {r['target_hz']:g} | {r['seconds']:g} | {r['achieved_hz']:.2f} | {r['late']} | {r['dropped']} | {r['mb_per_minute']:.1f} |")
    print(f"\nhighest sustainable rate at 1920x1080: {highest_sustainable(results['1080p']) or 'below 10'} Hz")
    a = results["alignment"]
    print(f"alignment over {a['trials']} key presses at {a['sample_rate_hz']:g} Hz: state shows it after "
          f"{a['state_delay_ms']['median']:.1f} ms (max {a['state_delay_ms']['max']:.1f}), the frame after "
          f"{a['frame_delay_ms']['median']:.1f} ms (max {a['frame_delay_ms']['max']:.1f})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
