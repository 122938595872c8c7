"""``python -m env.sim``: the simulator as a Siphon server (and, with --window, a game to play)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from env.cli import parse_size
from env.siphon_config import ConfigError
from env.sim.server import serve

EXAMPLES = """
It serves Siphon's gRPC service (the stubs shipped in pysiphon) on its own real-time clock,
scaled by the gameSpeedVal attribute (0 pauses), so everything that talks to the real game
talks to it unchanged; pysiphon's own CLI works:

  pysiphon --host 127.0.0.1:50051 init env/profiles/sim_margit/siphon.toml
  pysiphon --host 127.0.0.1:50051 get HeroHp
  pysiphon --host 127.0.0.1:50051 set gameSpeedFlag bool 1 && pysiphon set gameSpeedVal float 0
  pysiphon --host 127.0.0.1:50051 input w 200 0
  pysiphon --host 127.0.0.1:50051 capture arena.png

examples:
  python -m env.sim                       serve on 127.0.0.1:50051 at 1280x720
  python -m env.sim --window              ... and play it in a window (WASD, Shift, P, L, R, Space, B)
  python -m env.sim --port 50052 --seed 7 --size 84x84
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m env.sim",
        description="A Margit-like boss fight that stands in for Elden Ring behind Siphon's gRPC service.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s; anything else is reachable from the network, unauthenticated)")
    parser.add_argument("--port", type=int, default=50051, help="port (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the boss's decisions (default: %(default)s)")
    parser.add_argument("--size", type=parse_size, default=(1280, 720), help="window size WxH (default: 1280x720)")
    parser.add_argument("--profile", default="sim_margit", help="profile whose keybinds the simulator obeys (default: %(default)s)")
    parser.add_argument("--speed", type=float, help="initial game speed (0 starts paused)")
    parser.add_argument("--window", action="store_true", help="open a window to play the fight with the keyboard")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    try:
        running = serve(args.host, args.port, args.seed, args.size, args.profile, args.speed)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logging.getLogger("env.sim").info("serving Siphon on %s (%dx%d, seed %d)", running.address, *args.size, args.seed)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if args.window:
            from env.sim.window import play

            play(running.process, stop)
        else:
            stop.wait()
    finally:
        running.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
