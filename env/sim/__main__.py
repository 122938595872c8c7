"""``python -m env.sim``: the simulator as a Siphon server (and, with --window, a game to play)."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from dataclasses import replace

from env.common.cli import ruled, run_command
from env.common.fields import Rule, is_number, number, whole
from env.observations import parse_size
from env.sim.memory import GAME_SPEED, MAX_SEED
from env.sim.real_server import RealServerTimings
from env.sim.server import REAL_BY_DEFAULT, serve
from env.sim.world import Lifecycle

EXAMPLES = """
It serves Siphon's gRPC service (the stubs shipped in pysiphon) on its own real-time clock,
scaled by the gameSpeedVal attribute (0 pauses), so everything that talks to the real game
talks to it unchanged; pysiphon's own CLI works:

  pysiphon --host 127.0.0.1:50051 init env/profiles/sim_margit/siphon.toml
  pysiphon --host 127.0.0.1:50051 get HeroHp
  pysiphon --host 127.0.0.1:50051 set gameSpeedFlag bool 1 && pysiphon set gameSpeedVal float 0
  pysiphon --host 127.0.0.1:50051 input w 200 0
  pysiphon --host 127.0.0.1:50051 capture arena.png

With --real-server (the default for --profile eldenring_margit) it behaves as the real Siphon
server does: one mutex for memory and config calls, a module scan per attribute call, the first
config sticks, the first NPC read blocks until the player locks on, capture answers empty or
stale frames; and the world starts at the Site of Grace outside the fog wall. docs/guide.md,
"How the simulator differs from the game", lists every behaviour, its timing and its source.

examples:
  python -m env.sim                       serve on 127.0.0.1:50051 at 1280x720
  python -m env.sim --window              ... and play it in a window (WASD, Shift, P, L, R, Space, B, E),
                                          or with a game controller (Elden Ring's layout)
  python -m env.sim --window --profile eldenring_margit   ... on the game's own keys and mouse
  python -m env.sim --port 50052 --seed 7 --size 84x84
  python -m env.sim --profile eldenring_margit            as unkind as the game and Siphon
  python -m env.sim --real-server --scan-ms 1 --hook-delay-s 0.2   ... with a test's timings
"""

SPEED = Rule(lambda v: is_number(v) and GAME_SPEED.holds(v), f"must be {GAME_SPEED}")
"""What ``--speed`` takes: what a ``gameSpeedVal`` write takes."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m env.sim",
        description="A Margit-like boss fight that stands in for Elden Ring behind Siphon's gRPC service.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to listen on (default: %(default)s; anything else is reachable from the network, unauthenticated)",
    )
    parser.add_argument(
        "--port",
        type=ruled(int, whole(0, 65535)),
        default=50051,
        help="port (default: %(default)s; 0: any free port, logged)",
    )
    parser.add_argument(
        "--seed",
        type=ruled(int, whole(0, MAX_SEED)),
        default=0,
        help="seed of the boss's decisions (default: %(default)s)",
    )
    parser.add_argument("--size", type=parse_size, default=(1280, 720), help="window size WxH (default: 1280x720)")
    parser.add_argument(
        "--profile", default="sim_margit", help="profile whose keybinds the simulator obeys (default: %(default)s)"
    )
    parser.add_argument("--speed", type=ruled(float, SPEED), help="initial game speed (0 starts paused)")
    parser.add_argument(
        "--window",
        action="store_true",
        help="open a window to play the fight with the keyboard and mouse, or a game controller, as the profile binds them",
    )
    parser.add_argument("--log-level", default="INFO")
    real = parser.add_argument_group("real-server mode (timings: see RealServerTimings in env/sim/real_server.py)")
    real.add_argument(
        "--real-server",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"behave as the real Siphon server (default: on for {', '.join(REAL_BY_DEFAULT)}, off otherwise)",
    )
    defaults = RealServerTimings()
    real.add_argument(
        "--scan-ms",
        type=float,
        default=defaults.scan_ms,
        help="cost of each attribute call's module scan (default: %(default)s)",
    )
    real.add_argument(
        "--hook-delay-s",
        type=float,
        default=defaults.hook_delay_s,
        help="NPC hook injection delay (default: %(default)s)",
    )
    real.add_argument(
        "--hook-poll-s",
        type=float,
        default=defaults.hook_poll_s,
        help="how often the hook checks for a target (default: %(default)s)",
    )
    real.add_argument(
        "--capture-init-ms",
        type=float,
        default=defaults.capture_init_ms,
        help="InitializeCapture's sleep (default: %(default)s)",
    )
    real.add_argument(
        "--first-frame-ms",
        type=float,
        default=defaults.first_frame_ms,
        help="after InitializeCapture, when the first frame arrives (default: %(default)s)",
    )
    real.add_argument(
        "--stream-fps",
        type=ruled(float, number(0, 240, above=True)),
        default=defaults.stream_fps,
        help="frames a second StreamFrames sends, whatever the client reads (default: %(default)s)",
    )
    real.add_argument(
        "--start",
        choices=("grace", "fight"),
        help="where the world starts (default: grace in real-server mode, fight otherwise)",
    )
    life = parser.add_argument_group("the game's life cycle (seconds of game time)")
    lifecycle = Lifecycle()
    life.add_argument(
        "--death-screen-s",
        type=float,
        default=lifecycle.death_screen,
        help="from HP 0 to the loading screen (default: %(default)s)",
    )
    life.add_argument(
        "--loading-s", type=float, default=lifecycle.loading, help="the loading screen (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    timings = RealServerTimings(
        args.scan_ms, args.hook_delay_s, args.hook_poll_s, args.capture_init_ms, args.first_frame_ms, args.stream_fps
    )
    life_timings = replace(
        lifecycle,
        death_screen=args.death_screen_s,
        loading=args.loading_s,
        you_died=min(lifecycle.you_died, args.death_screen_s),
    )
    return run_command(lambda: serve_until_stopped(args, timings, life_timings))


def serve_until_stopped(args: argparse.Namespace, timings: RealServerTimings, life_timings: Lifecycle) -> None:
    """Serve as ``args`` ask (with the play window if asked) until SIGINT or SIGTERM."""
    running = serve(
        args.host,
        args.port,
        args.seed,
        args.size,
        args.profile,
        args.speed,
        args.real_server,
        timings,
        life_timings,
        None if args.start is None else args.start == "fight",
    )
    logging.getLogger("env.sim").info("serving Siphon on %s (%dx%d, seed %d)", running.address, *args.size, args.seed)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if args.window:
            from env.profile import load_profile
            from env.sim.window import play

            play(running.process, stop, load_profile(args.profile))
        else:
            stop.wait()
    finally:
        running.stop()


if __name__ == "__main__":
    raise SystemExit(main())
