"""The recorder's hot path against ``python -m env.sim`` over loopback gRPC.

* Sustained sampling: frame capture, one concurrent memory snapshot and the episode writer with
  its video at the window's size (the default codec setting), at 30 Hz (``--rate``) from a
  1280x720 window for two minutes (``--seconds``): achieved rate, late and dropped samples,
  frames the encoder could not take in time (repeated), bytes on disk per minute (state and
  video), where the CPU goes (the recorder process, its encoder thread alone, the server) and
  the recorder's memory every 10 s.
* The highest sustainable rate from a 1920x1080 window (no drops over 20 s), trying 10 Hz up to 60 Hz.
* Alignment: a key pressed at a known time; the delay until the first sampled state and the
  first sampled frame that show its effect.
* With ``--controller PAIRS``: the recorder's CPU without a game controller and with one being
  played (a virtual pad, heard as one plugged in), in turn, and how long a controller change
  takes to reach a sample.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from env.common.cli import JsonOut, flag, parse_settings, ruled, run_command
from env.common.errors import GameError
from env.common.fields import check_fields, checked, number, optional, whole
from env.common.machine import describe
from env.game import Unreadable
from env.profile import Profile
from env.sim.launcher import SimServer
from env.sim.moves import PlayerAnim
from env.siphon.game import SiphonGame

from capture.episode import read_episode
from capture.episode_writer import EpisodeMeta, EpisodeWriter
from capture.inputs import PAD_AXIS, PAD_DOWN, PAD_UP, InputLog
from capture.pad_listener import PadListener
from capture.record import RecordSettings
from capture.sampler import Sampler, SamplerStats
from capture.video import CODECS, DEFAULT_CODEC


def main(argv: list[str] | None = None) -> int:
    args, recording, out = parse_settings(
        "python -m benchmarks.bench_recorder", __doc__, RecorderArgs, (RecordSettings, ("rate",)), JsonOut, argv=argv
    )
    return run_command(lambda: benchmark(args, recording, out))


def rss_mb() -> float:
    """This process's resident memory now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def cpu_s(pid: int) -> float:
    """User and system CPU seconds a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def add_up(total: SamplerStats, part: SamplerStats) -> SamplerStats:
    """``part``'s counts added into ``total`` (the sampler counts afresh after each pause)."""
    total.samples += part.samples
    total.late += part.late
    total.dropped += part.dropped
    return total


def sustained(size: tuple[int, int], rate: float, seconds: float, server_args: tuple[str, ...] = ()) -> dict:
    """The recorder against a fresh ``size`` server on loopback, for ``seconds`` at ``rate``."""
    with SimServer(size=size, extra_args=server_args) as server:
        return record_from(server, size, rate, seconds)


class Thumb(threading.Thread):
    """A person's thumb on a game controller (a virtual pad): the stick swept round and a button
    tapped, ``changes_hz`` times a second in all, each change's time kept (``time.monotonic``)."""

    def __init__(self, changes_hz: float) -> None:
        super().__init__(daemon=True)
        from env.sim.virtual_pad import VirtualPad

        self.pad = VirtualPad()
        self.period = 1 / changes_hz
        self.changes: list[float] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopping.wait(self.period):
            self.changes.append(time.monotonic())
            if i % 4 == 3:
                self.pad.button("rightshoulder", i % 8 == 3)
            else:
                angle = i * 0.7
                self.pad.axis("leftx", float(np.cos(angle)))
                self.pad.axis("lefty", float(np.sin(angle)))
            i += 1

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        self.pad.detach()


def record_from(
    server: SimServer,
    size: tuple[int, int],
    rate: float,
    seconds: float,
    profile: Profile | str = "sim_margit",
    host: str | None = None,
    pad_changes_hz: float | None = None,
) -> dict:
    """The recorder's loop (sampler, episode writer, video) against ``server`` (its window
    ``size``; reached at ``host``, by default its own address) for ``seconds`` at ``rate``:
    rates, drops, bytes, CPU and memory. With ``pad_changes_hz``, a game controller is attached
    and heard as the recorder hears one (``capture.pad_listener``), played ``pad_changes_hz``
    changes a second; then also how long a change takes to reach a sample."""
    with tempfile.TemporaryDirectory() as tmp:
        game = SiphonGame(host or server.host, profile)
        game.read_state()  # a first read before the clock starts (on a real server: the NPC hook)
        keys = game.profile.bound_keys
        inputs = InputLog(keys)
        thumb = listener = None
        if pad_changes_hz:
            thumb = Thumb(pad_changes_hz)
            listener = PadListener(inputs)
            listener.start()
            thumb.start()
        sampler = Sampler(game, inputs, rate)
        meta = EpisodeMeta(
            "sim_margit",
            game.profile.attribute_names,
            keys,
            rate,
            CODECS[DEFAULT_CODEC],
            size,
            "human",
            None,
            host or server.host,
        )
        writer = EpisodeWriter(Path(tmp), meta)
        sampler.restart_clock()
        rss, cpu_0, server_0 = [rss_mb()], resource.getrusage(resource.RUSAGE_SELF), cpu_s(server.process.pid)
        started = time.monotonic()
        end, next_rss = started + seconds, started + 10
        counted = SamplerStats(started_at=0.0)  # over the fights: nobody plays, so the boss wins now and then
        paused_s = 0.0  # a death's loading screen, when nothing can be read: not sampling time
        while time.monotonic() < end:
            try:
                sample, _, _, events = sampler.next_sample()
            except Unreadable:
                # the idle player died: back into the fight, as the recorder restarts it
                # (restart_when_recording), or the rest of the run would sample a loading screen
                add_up(counted, sampler.stats)
                paused = time.monotonic()
                game.reset_fight()
                paused_s += time.monotonic() - paused
                sampler.restart_clock()
                continue
            writer.append(sample)
            writer.append_events(events)
            if time.monotonic() >= next_rss:
                rss.append(rss_mb())
                next_rss += 10
        stats = add_up(counted, sampler.stats)
        sampler.close()
        cpu_1, server_1 = resource.getrusage(resource.RUSAGE_SELF), cpu_s(server.process.pid)
        if thumb is not None:
            thumb.stop()
            listener.stop()
        encode_s = writer.encode_cpu_s
        repeated = writer.repeated_frames
        path = writer.finish("stopped", {})
        size_bytes = path.stat().st_size + path.with_suffix(".mkv").stat().st_size
        latency = pad_to_sample(read_episode(path, frames=False), thumb.changes) if thumb is not None else None
        game.close()
    recorder_s = cpu_1.ru_utime + cpu_1.ru_stime - cpu_0.ru_utime - cpu_0.ru_stime
    n = stats.samples
    return {
        "window": f"{size[0]}x{size[1]}",
        "target_hz": rate,
        "seconds": seconds,
        "achieved_hz": n / (seconds - paused_s),
        "samples": n,
        "unreadable_s": paused_s,
        "late": stats.late,
        "dropped": stats.dropped,
        "repeated_frames": repeated,
        "mb_per_minute": size_bytes / seconds * 60 / 1e6,
        "controller": latency,
        "cpu_ms_per_sample": {
            "recorder": 1000 * recorder_s / n,
            "of_it_encoder": 1000 * encode_s / n,
            "server": 1000 * (server_1 - server_0) / n,
        },
        # every 10 s: flat memory is the second value (a minute in, the queues full) against the last
        "rss_mb": {
            "first": rss[0],
            "at_1_min": rss[min(6, len(rss) - 1)],
            "last": rss[-1],
            "max": max(rss),
            "every_10_s": rss,
        },
    }


def pad_to_sample(episode, changes: list[float]) -> dict:
    """From a controller change to the first sample whose input holds it (the listener logs the
    change at its next poll; the next sample takes what was logged): median and 99th percentile."""
    pad = np.sort(episode.events["t"][np.isin(episode.events["kind"], (PAD_DOWN, PAD_UP, PAD_AXIS))])
    changed = np.asarray(changes)
    changed = changed[(changed >= episode.t[0]) & (changed <= pad[-1])] if len(pad) else changed[:0]
    logged = pad[np.searchsorted(pad, changed)]
    sample = np.searchsorted(episode.t, logged)
    seen = sample < len(episode.t)
    delays = 1000 * (episode.t[sample[seen]] - changed[seen])
    return {
        "changes": int(seen.sum()),
        "poll_ms_median": float(np.median(1000 * (logged - changed))) if len(changed) else None,
        "to_sample_ms_median": float(np.median(delays)) if len(delays) else None,
        "to_sample_ms_p99": float(np.percentile(delays, 99)) if len(delays) else None,
    }


def controller_cost(size: tuple[int, int], rate: float, seconds: float, pairs: int, changes_hz: float) -> dict:
    """The recorder without a controller and with one played ``changes_hz`` changes a second,
    in turn (A B A B ...: the machine's drift falls on both), ``pairs`` times, each run
    ``seconds`` long against one server; and one SDL read of a pad, timed alone."""
    from env.gamepad import Gamepad
    from env.sim.virtual_pad import VirtualPad

    pad, gamepad = VirtualPad(), Gamepad()
    gamepad.read()
    started = time.perf_counter()
    for _ in range(2000):
        gamepad.read()
    read_us = (time.perf_counter() - started) / 2000 * 1e6
    gamepad.close()
    pad.detach()
    runs: dict[str, list[dict]] = {"without": [], "with": []}
    with SimServer(size=size) as server:
        for _ in range(pairs):
            runs["without"].append(record_from(server, size, rate, seconds))
            runs["with"].append(record_from(server, size, rate, seconds, pad_changes_hz=changes_hz))
    per_sample = {name: [r["cpu_ms_per_sample"]["recorder"] for r in rs] for name, rs in runs.items()}
    return {
        "window": f"{size[0]}x{size[1]}",
        "rate_hz": rate,
        "seconds_each": seconds,
        "pairs": pairs,
        "pad_changes_hz": changes_hz,
        "sdl_read_us": read_us,
        "recorder_cpu_ms_per_sample": per_sample,
        "ratio_with_to_without": [w / o for w, o in zip(per_sample["with"], per_sample["without"])],
        "dropped": {name: [r["dropped"] for r in rs] for name, rs in runs.items()},
        "controller": [r["controller"] for r in runs["with"]],
    }


def rate_search(
    size: tuple[int, int], rates: tuple[float, ...], seconds: float, server_args: tuple[str, ...] = ()
) -> list[dict]:
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
        inputs = InputLog(game.profile.bound_keys)
        sampler = Sampler(game, inputs, rate)
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
        "sample_rate_hz": rate,
        "trials": trials,
        "state_delay_ms": {"median": statistics.median(state_delays) * 1000, "max": max(state_delays) * 1000},
        "frame_delay_ms": {"median": statistics.median(frame_delays) * 1000, "max": max(frame_delays) * 1000},
    }


PAIRS = whole(1, 1000)
"""The controller runs' pairs (one without a controller, one with): at least one to compare."""


@dataclass(frozen=True)
class RecorderArgs:
    """What ``python -m benchmarks.bench_recorder`` runs, and for how long: each field its flag (the
    sampling rate is the recorder's own, ``RecordSettings.rate``)."""

    seconds: float = checked(120.0, number(0, 86_400, above=True), "length of the sustained run")
    no_alignment: bool = field(default=False, metadata=flag("skip the key-press alignment trials"))
    controller: int | None = checked(
        None,
        optional(PAIRS),
        "only this: the recorder at 640x360 without a game controller and with one being played, "
        "PAIRS runs of --seconds each, in turn; its CPU both ways and a change's delay to its sample",
        type=ruled(int, PAIRS),
        metavar="PAIRS",
    )

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: RecorderArgs, recording: RecordSettings, out: JsonOut) -> None:
    if args.controller:
        results = {
            "machine": describe(),
            "controller": controller_cost((640, 360), recording.rate, args.seconds, args.controller, 20.0),
        }
        print(json.dumps(results, indent=1))
        if out.json:
            out.json.write_text(json.dumps(results, indent=2))
        return
    results = {"machine": describe(), "sustained_720p": sustained((1280, 720), recording.rate, args.seconds)}
    results["1080p"] = rate_search((1920, 1080), (10.0, 15.0, 20.0, 30.0, 45.0, 60.0), min(20.0, args.seconds))
    if not args.no_alignment:
        results["alignment"] = alignment()
    print(f"Machine: {results['machine']}\n")
    print(
        "| window | target Hz | seconds | achieved Hz | late | dropped | repeated frames | MB/minute | CPU ms/sample: "
        "recorder (encoder) / server | recorder RSS MB first / at 1 min / last / max |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
    )
    for r in [results["sustained_720p"], *results["1080p"]]:
        if "error" in r:
            print(f"| {r['window']} | {r['target_hz']:g} | failed: {r['error']} |")
            continue
        cpu, rss = r["cpu_ms_per_sample"], r["rss_mb"]
        print(
            f"| {r['window']} | {r['target_hz']:g} | {r['seconds']:g} | {r['achieved_hz']:.2f} | {r['late']} | "
            f"{r['dropped']} | {r['repeated_frames']} | {r['mb_per_minute']:.1f} | {cpu['recorder']:.1f} "
            f"({cpu['of_it_encoder']:.1f}) / {cpu['server']:.1f} | {rss['first']:.0f} / {rss['at_1_min']:.0f} / "
            f"{rss['last']:.0f} / {rss['max']:.0f} |"
        )
    print(f"\nhighest sustainable rate at 1920x1080: {highest_sustainable(results['1080p']) or 'below 10'} Hz")
    a = results.get("alignment")
    if a:
        print(
            f"alignment over {a['trials']} key presses at {a['sample_rate_hz']:g} Hz: state shows it after "
            f"{a['state_delay_ms']['median']:.1f} ms (max {a['state_delay_ms']['max']:.1f}), the frame after "
            f"{a['frame_delay_ms']['median']:.1f} ms (max {a['frame_delay_ms']['max']:.1f})"
        )
    if out.json:
        out.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
