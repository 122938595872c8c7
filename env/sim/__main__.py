"""``python -m env.sim``: the simulator as a Siphon server (and, with --window, a game to play)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass, field, replace

from env.common.cli import add_flags, command_parser, flag, from_flags, log_level_flag, ruled, run_command, size_within
from env.common.fields import Rule, check_fields, checked, is_number, whole
from env.config import PICTURE_SIZE
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

SPEED = Rule(lambda v: v is None or (is_number(v) and GAME_SPEED.holds(v)), f"must be {GAME_SPEED}")
"""What ``--speed`` takes: what a ``gameSpeedVal`` write takes."""


@dataclass(frozen=True)
class ServeOptions:
    """What ``python -m env.sim`` serves, and how: each field its flag, declared once."""

    host: str = field(
        default="127.0.0.1",
        metadata=flag("interface to listen on (anything but 127.0.0.1 is reachable from the network, unauthenticated)"),
    )
    port: int = checked(50051, whole(0, 65535), "port (0: any free port, logged)")
    seed: int = checked(0, whole(0, MAX_SEED), "seed of the boss's decisions")
    size: tuple[int, int] = checked(
        (1280, 720), PICTURE_SIZE, "window size WxH (default: 1280x720)", type=size_within(PICTURE_SIZE)
    )
    profile: str = field(default="sim_margit", metadata=flag("profile whose keybinds the simulator obeys"))
    speed: float | None = checked(None, SPEED, "initial game speed (0 starts paused)", type=ruled(float, SPEED))
    window: bool = field(
        default=False,
        metadata=flag(
            "open a window to play the fight with the keyboard and mouse, or a game controller, as the profile binds them"
        ),
    )
    log_level: str = log_level_flag()
    stop_with_stdin: bool = field(
        default=False,
        metadata=flag(
            "stop when standard input closes: how a program that starts the server (env.sim.launcher) "
            "ties the server's life to its own, so a starter that is killed leaves no server behind"
        ),
    )
    real_server: bool | None = field(
        default=None,
        metadata=flag(
            f"behave as the real Siphon server (default: on for the game's profiles, {REAL_BY_DEFAULT}*, off otherwise)",
            action=argparse.BooleanOptionalAction,
        ),
    )
    start: str | None = field(
        default=None,
        metadata=flag(
            "where the world starts (default: grace in real-server mode, fight otherwise)", choices=("grace", "fight")
        ),
    )

    def __post_init__(self) -> None:
        check_fields(self)


def main(argv: list[str] | None = None) -> int:
    server = ("host", "port", "seed", "size", "profile", "speed", "window", "log_level", "stop_with_stdin")
    parser = command_parser(
        "python -m env.sim",
        "A Margit-like boss fight that stands in for Elden Ring behind Siphon's gRPC service.",
        (ServeOptions, server),
        epilog=EXAMPLES,
    )
    real = parser.add_argument_group("real-server mode (timings: see RealServerTimings in env/sim/real_server.py)")
    add_flags(real, ServeOptions, ("real_server",))
    add_flags(real, RealServerTimings)
    add_flags(real, ServeOptions, ("start",))
    add_flags(parser.add_argument_group("the game's life cycle (seconds of game time)"), Lifecycle)
    args = parser.parse_args(argv)
    options = from_flags(ServeOptions, args)
    logging.basicConfig(level=options.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    life = from_flags(Lifecycle, args)
    life = replace(life, you_died=min(life.you_died, life.death_screen))  # "YOU DIED" within a shortened death
    return run_command(lambda: serve_until_stopped(options, from_flags(RealServerTimings, args), life))


def serve_until_stopped(options: ServeOptions, timings: RealServerTimings, life_timings: Lifecycle) -> None:
    """Serve as ``options`` ask (with the play window if asked) until SIGINT or SIGTERM."""
    running = serve(
        options.host,
        options.port,
        options.seed,
        options.size,
        options.profile,
        options.speed,
        options.real_server,
        timings,
        life_timings,
        None if options.start is None else options.start == "fight",
    )
    logging.getLogger("env.sim").info(
        "serving Siphon on %s (%dx%d, seed %d)", running.address, *options.size, options.seed
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if options.stop_with_stdin:
        threading.Thread(target=stop_at_end_of_input, args=(stop,), name="stdin-watch", daemon=True).start()
    try:
        if options.window:
            from env.profile import load_profile
            from env.sim.window import play

            play(running.process, stop, load_profile(options.profile))
        else:
            stop.wait()
    finally:
        running.stop()


def stop_at_end_of_input(stop: threading.Event) -> None:
    """Set ``stop`` once standard input closes: the starter holds the pipe's other end, and the
    kernel closes it however the starter ends (SIGKILL included), which no signal handler sees.
    Read from the descriptor, not ``sys.stdin``: a daemon thread blocked inside a buffered reader
    holds its lock, and the interpreter aborts at exit when it finds the lock held."""
    while os.read(sys.stdin.fileno(), 4096):
        pass
    logging.getLogger("env.sim").info("standard input closed: stopping")
    stop.set()


if __name__ == "__main__":
    raise SystemExit(main())
