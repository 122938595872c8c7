"""Time to render one frame, on one thread, at the training size and at two screen sizes
(targets: 84x84 within 0.2 ms, 1920x1080 within 8 ms, medians); then what a whole in-process env
step costs when the env draws its recordings' picture (``capture_size`` 1280x720, cropped and
resized to 84x84) against the default, drawn straight at 84x84, side by side.

Rendering is paid on every observation of training and on every frame the server streams, so it
must stay well below a world tick's budget. The frames come from a fight in progress (a seeded
world played with random buttons, kept every few ticks) so that wind-ups, strikes, rolls, daggers
and hits are all in the mix, not one easy frame drawn over and over. The env steps are random
actions over 200 ms steps (12 ticks each), timed in alternating rounds so that a busy machine
slows both alike.

    python benchmarks/bench_render.py [--seconds 2] [--json results.json]
"""

from __future__ import annotations

import copy
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from env.common.cli import (  # noqa: E402
    JsonOut,  # noqa: E402
    parse_settings,
    run_command,
)
from env.common.fields import check_fields, checked, number  # noqa: E402
from env.common.machine import describe  # noqa: E402
from env.config import EnvConfig  # noqa: E402
from env.factory import make_env  # noqa: E402
from env.sim.renderer import Renderer  # noqa: E402
from env.sim.world import World  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args, out = parse_settings("python -m benchmarks.bench_render", __doc__, RenderArgs, JsonOut, argv=argv)
    return run_command(lambda: benchmark(args, out))


SIZES = ((84, 84), (1280, 720), (1920, 1080))
TARGET_MS = {(84, 84): 0.2, (1920, 1080): 8.0}
WARM_UP = 30
PICTURES = {"84x84 (default)": None, "1280x720 -> 84x84": (1280, 720)}
"""The env step's two pictures: ``capture_size`` of each."""
ROUND_STEPS = 50


def fight_frames(count: int = 240, every: int = 4, seed: int = 0) -> list[World]:
    """``count`` copies of a world mid-fight, ``every`` ticks apart; fights restart when over."""
    world, rng = World(seed), random.Random(seed)
    held, frames, tick = 0, [], 0
    while len(frames) < count:
        if world.over:
            world.restart(tick)
        buttons = rng.getrandbits(13) if tick % 7 == 0 else held
        world.tick(buttons, buttons & ~held, held & ~buttons, 0.0)
        held, tick = buttons, tick + 1
        if tick % every == 0:
            frames.append(copy.deepcopy(world))
    return frames


def time_size(width: int, height: int, frames: list[World], seconds: float) -> dict[str, float]:
    """Per-frame times in ms over ``seconds`` (at least a full pass over ``frames``)."""
    renderer = Renderer(width, height)
    for world in frames[:WARM_UP]:
        renderer.render_bgr(world)
    times: list[int] = []
    deadline = time.perf_counter() + seconds
    while len(times) < len(frames) or time.perf_counter() < deadline:
        world = frames[len(times) % len(frames)]
        start = time.perf_counter_ns()
        renderer.render_bgr(world)
        times.append(time.perf_counter_ns() - start)
    ms = np.array(times) / 1e6
    return {
        "median_ms": float(np.median(ms)),
        "p90_ms": float(np.percentile(ms, 90)),
        "frames": len(ms),
    }


def time_env_steps(seconds: float, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per-step times in ms of an in-process env for each of ``PICTURES``, over ``seconds`` in
    all, in alternating rounds of ``ROUND_STEPS`` random actions (a fight that ends restarts)."""
    envs = {name: make_env(EnvConfig(capture_size=size)) for name, size in PICTURES.items()}
    times: dict[str, list[int]] = {name: [] for name in envs}
    rng = np.random.default_rng(seed)
    try:
        for env in envs.values():
            env.reset(seed=seed)
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline or not all(times.values()):
            actions = rng.integers(envs[next(iter(envs))].action_space.n, size=ROUND_STEPS)
            for name, env in envs.items():
                for action in actions:
                    start = time.perf_counter_ns()
                    _, _, terminated, truncated, _ = env.step(int(action))
                    times[name].append(time.perf_counter_ns() - start)
                    if terminated or truncated:
                        env.reset()
    finally:
        for env in envs.values():
            env.close()
    results = {}
    for name, ns in times.items():
        ms = np.array(ns) / 1e6
        results[name] = {"median_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90)), "steps": len(ms)}
    return results


@dataclass(frozen=True)
class RenderArgs:
    """How long ``python -m benchmarks.bench_render`` times each size: each field its flag."""

    seconds: float = checked(
        2.0, number(0, 600, above=True), "timing budget per size (the env steps get four times as long)"
    )

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: RenderArgs, out: JsonOut) -> None:
    cv2.setNumThreads(1)
    frames = fight_frames()
    in_windup = sum(f.boss.move is not None for f in frames) / len(frames)
    results = {f"{w}x{h}": time_size(w, h, frames, args.seconds) for w, h in SIZES}
    machine = f"{describe()}, OpenCV {cv2.__version__}, NumPy {np.__version__}, 1 OpenCV thread"
    print(f"Machine: {machine}")
    print(f"Frames: {len(frames)} from a fight, {in_windup:.0%} with a boss move under way\n")
    print("| size | median ms | p90 ms | frames/s (median) | target |")
    print("|---|---:|---:|---:|---|")
    for (w, h), (name, r) in zip(SIZES, results.items()):
        median, target = r["median_ms"], TARGET_MS.get((w, h))
        verdict = "-"
        if target is not None:
            verdict = f"<= {target} ms: " + ("met" if median <= target else "MISSED")
        print(f"| {name} | {median:.3f} | {r['p90_ms']:.3f} | {1e3 / median:,.0f} | {verdict} |")
    steps = time_env_steps(4 * args.seconds)
    base = steps[next(iter(PICTURES))]["median_ms"]
    print("\nIn-process env step (200 ms of game time, random actions), by the picture it draws:\n")
    print("| picture | median ms | p90 ms | steps/s (median) | x default |")
    print("|---|---:|---:|---:|---:|")
    for name, r in steps.items():
        median = r["median_ms"]
        print(f"| {name} | {median:.3f} | {r['p90_ms']:.3f} | {1e3 / median:,.0f} | {median / base:.1f} |")
    if out.json:
        out.json.write_text(json.dumps({"machine": machine, "render": results, "env_step": steps}, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
