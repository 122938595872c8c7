"""``python -m env.doctor``: check a gaming PC (or a simulator server) before the first evening.

Run it first, with the game in Margit's arena. In about a minute it says, check by check, what
works and what to fix: the server is reachable; the config is accepted; memory reads; Siphon's NPC
hook goes in (it asks you to lock on); capture gives frames of the right size that are neither
black nor frozen; every keybind of the profile makes the game react (an animation, a movement, a
stamina or FP change; lock-on by how the character faces while it strafes), naming each binding
that does not; and what this link to the server
costs: read, snapshot and frame latencies, the env steps per second they allow, and the highest
recording rate it sustains without dropping a sample. It never writes HP or teleports.
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from env.errors import EldenILError
from env.factory import DEFAULT_HOST
from env.profile import Profile, load_profile
from env.siphon_game import SiphonGame

log = logging.getLogger("env.doctor")

REACTION_S = 0.8
"""How long after a key the game's reaction is looked for (movement keys are held that long)."""
SETTLE_S = 0.8
"""The pause after each key, for its move to finish before the next."""
TRIES = 3
WATCHED = ("HeroHp", "HeroAnimId", "HeroLocalPosX", "HeroLocalPosY", "HeroSp", "HeroFp")
"""What a reaction shows in: an animation, a step, stamina or FP spent (and HP, to tell a hit)."""
NEEDS_SOMETHING = {"event_action": "no reaction here: it needs something to interact with (a fog wall, a grace)"}
"""Bindings whose effect memory shows only near something: judged where they react, else reported."""
STRAFE_S = 0.4
"""How long each side of the lock-on probe's strafe is held."""
FREE_TURN = 1.0
"""Radians: strafing left then right turns a free character about half a turn (it faces the way it
walks), a locked-on one barely (it keeps facing the target)."""
MOVED_M = 0.5
"""A walk this long must show in the frames (a step against a wall, only in the animation, need not)."""
RATES_HZ = (60, 30, 20, 10, 5)
IN_FLIGHT = 6  # as capture.sampler.LIVE_IN_FLIGHT
CAPACITY_TRIAL_S = 3.0
HEADROOM = 0.8
"""A recording rate is called sustainable below 80 % of the observations/s measured: the rest
absorbs slow rounds (the recorder drops a sample only when a whole period is missed)."""


@dataclass
class Check:
    name: str
    ok: bool | None  # None: not judged
    detail: str


class Doctor:
    def __init__(self, host: str, profile: Profile, hook_timeout: float) -> None:
        self.host = host
        self.profile = profile
        self.hook_timeout = hook_timeout
        self.checks: list[Check] = []
        self.game: SiphonGame | None = None

    def run(self) -> list[Check]:
        steps: list[Callable[[], None]] = [self.connect, self.memory, self.capture, self.keys, self.speed]
        try:
            for step in steps:
                step()
        except EldenILError as e:
            self.say(step.__name__, False, str(e))
        finally:
            if self.game is not None:
                self.game.close()
        return self.checks

    def say(self, name: str, ok: bool | None, detail: str) -> None:
        self.checks.append(Check(name, ok, detail))
        mark = {True: "ok  ", False: "FAIL", None: "--  "}[ok]
        print(f"[{mark}] {name}: {detail}", flush=True)

    # ---------------------------------------------------------------------------------- checks
    def connect(self) -> None:
        started = time.monotonic()
        print(f"connecting to {self.host} with profile {self.profile.name!r}; if Siphon puts its NPC hook in "
              "place now, lock on to the boss when asked", flush=True)
        self.game = SiphonGame(self.host, self.profile, hook_timeout=self.hook_timeout)
        status = self.game.client.status()
        self.say("server", True, f"reachable, config accepted, memory/input/capture initialised, NPC hook in place "
                 f"({time.monotonic() - started:.1f} s; process {status.process_name!r})")

    def memory(self) -> None:
        state = self.game.read_state()
        npc_id = state.get("NpcId")
        wanted = self.profile.boss_npc_id
        self.say("memory", True, f"all {len(state)} attributes read: HeroHp {state['HeroHp']}/{state['HeroMaxHp']}, "
                 f"NpcHp {state['NpcHp']}/{state['NpcMaxHp']}, NpcId {npc_id}")
        if wanted is not None and npc_id != wanted:
            self.say("boss", False, f"the targeted NPC is {npc_id}, not the profile's boss_npc_id {wanted}: lock on to "
                     "the boss (or, if this is the boss, set fight.boss_npc_id to it)")

    def capture(self) -> None:
        rgb = self.game.capture_frame().rgb
        height, width = rgb.shape[:2]
        dark = rgb.mean() < 8
        self.say("capture", not dark, f"{width}x{height}" + (
            ": almost black (a loading screen, or the capture of another window?)" if dark else ", not black"))

    def keys(self) -> None:
        """Press every binding and look for the game's reaction in memory; while the character
        moves, check that the frames move too (a minimised window keeps returning its last one)."""
        silent, dead, frozen = [], [], False
        for action, key in self.profile.keybinds.items():
            if action == "lock_on":
                toggles = self.lock_on_toggles(key)
                if toggles is None:
                    silent.append(f"lock_on ({key}: the character moved freely both times; nothing in sight to lock on to?)")
                elif not toggles:
                    dead.append(f"{action} ({key})")
            elif action in NEEDS_SOMETHING:
                if not self.reacts(action, key):
                    silent.append(f"{action} ({key}: {NEEDS_SOMETHING[action]})")
            else:
                frame_before, at_before = self.game.capture_frame().rgb, self.game.client.read(WATCHED)
                if not self.reacts(action, key):
                    dead.append(f"{action} ({key})")
                elif action.startswith("move_") and moved(at_before, self.game.client.read(WATCHED)) > MOVED_M:
                    frozen = frozen or np.array_equal(frame_before, self.game.capture_frame().rgb)
            self.game.wait_until(self.game.now() + SETTLE_S)  # let the move finish before the next key
        if silent:
            self.say("keys not judged", None, ", ".join(silent))
        self.say("keybinds", not dead,
                 f"all {len(self.profile.keybinds) - len(silent)} bindings make the game react" if not dead else
                 "no reaction to " + ", ".join(dead) + ": bind these keys in the game's key configuration as the "
                 "profile says (docs/guide.md, section 3.2), then run the doctor again")
        if frozen:
            self.say("frames", False, "the character moved but the captured frame did not change: is the game window "
                     "minimised or covered? Siphon keeps returning the last frame it captured")

    def reacts(self, action: str, key: str) -> bool:
        """Whether pressing ``key`` visibly does something, watched for ``REACTION_S``. A window in
        which the character was hit (by the boss, not by the key) proves nothing: tried again."""
        game = self.game
        for _ in range(TRIES):
            before = game.client.read(WATCHED)
            if action.startswith("move_"):
                game.hold_keys({key})
            else:
                game.tap_keys([key], 50)
            end, seen, hit = game.now() + REACTION_S, False, False
            while game.now() < end and not seen:
                after = game.client.read(WATCHED)
                hit = after["HeroHp"] < before["HeroHp"]
                seen = not hit and reacted(before, after)
            game.hold_keys(())
            if not hit:
                return seen
        return False

    def lock_on_toggles(self, key: str) -> bool | None:
        """Whether ``key`` toggles the lock-on, seen in how the character faces while it strafes
        (``strafe_turn``), before and after one tap of ``key``; a second tap leaves the lock as
        it was. False: locked on both times (the tap did not release it); None: free both times
        (nothing in sight to lock on to, or a key that does nothing: no telling which)."""
        game, bound = self.game, self.profile.keybinds
        if not {"move_left", "move_right"} <= bound.keys() or "HeroAngle" not in self.profile.siphon.attributes:
            return None
        locked = []
        for _ in range(2):
            locked.append(self.strafe_turn() < FREE_TURN)
            game.tap_keys([key], 50)
            game.wait_until(game.now() + SETTLE_S)
        return True if locked[0] != locked[1] else (False if locked[0] else None)

    def strafe_turn(self) -> float:
        """How far the character turns (radians) between a step left and a step right: about
        half a turn when free (it faces the way it walks), little when locked on (it faces the
        target). A window in which the character was hit is tried again."""
        game = self.game
        for _ in range(TRIES):
            hp = game.client.read(["HeroHp"])["HeroHp"]
            angles = []
            for side in ("move_left", "move_right"):
                game.hold_keys({self.profile.key_for(side)})
                game.wait_until(game.now() + STRAFE_S)
                angles.append(game.client.read(["HeroAngle"])["HeroAngle"])
            game.hold_keys(())
            if game.client.read(["HeroHp"])["HeroHp"] >= hp:
                break
        return abs(math.remainder(angles[1] - angles[0], math.tau))

    def speed(self) -> None:
        """What this link costs, and what it allows."""
        game = self.game
        one = timed(lambda: game.client.read(["HeroHp"]))
        snapshot = timed(game.read_state)
        frame = timed(game.capture_frame)
        observe = timed(lambda: game.observe(self.profile.attribute_names))
        self.say("latency", True, f"one attribute {one * 1000:.1f} ms, a snapshot of {len(self.profile.attribute_names)} "
                 f"{snapshot * 1000:.1f} ms, a frame {frame * 1000:.1f} ms, both together {observe * 1000:.1f} ms "
                 f"(medians): an env step observes in {observe * 1000:.0f} ms, so at most {1 / observe:.0f} steps/s")
        capacity = observe_capacity(game, self.profile.attribute_names)
        rate = next((r for r in RATES_HZ if r <= HEADROOM * capacity), None)
        self.say("recording", rate is not None,
                 f"{capacity:.0f} observations/s with {IN_FLIGHT} in flight (as the recorder samples): records at "
                 f"{rate} Hz with room to spare" if rate else
                 f"only {capacity:.1f} observations/s: record at a lower rate, a smaller window, or nearer the server")


def moved(before, after) -> float:
    """How far the character went (metres, horizontally)."""
    return float(np.hypot(after["HeroLocalPosX"] - before["HeroLocalPosX"], after["HeroLocalPosY"] - before["HeroLocalPosY"]))


def reacted(before, after) -> bool:
    """The game visibly did something: an animation, a step, stamina or FP spent."""
    return bool(
        after["HeroAnimId"] != before["HeroAnimId"] or moved(before, after) > 0.05
        or after["HeroSp"] < before["HeroSp"] or after["HeroFp"] < before["HeroFp"]
    )


def observe_capacity(game: SiphonGame, names: tuple[str, ...]) -> float:
    """Full observations (every attribute and a frame) per second this server gives with
    ``IN_FLIGHT`` requested at once, back to back for ``CAPACITY_TRIAL_S``."""
    from concurrent.futures import ThreadPoolExecutor

    end = time.monotonic() + CAPACITY_TRIAL_S

    def worker() -> int:
        done = 0
        while time.monotonic() < end:
            game.observe(names)
            done += 1
        return done

    started = time.monotonic()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        total = sum(f.result() for f in [pool.submit(worker) for _ in range(IN_FLIGHT)])
    return total / (time.monotonic() - started)


def timed(call: Callable[[], object], rounds: int = 15) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m env.doctor", description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        epilog="Run it with the game in the boss arena. Example: python -m env.doctor --host 192.168.1.20:50051 "
               "--profile eldenring_margit", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="Siphon server host:port (default: %(default)s)")
    parser.add_argument("--profile", default="eldenring_margit", help="profile name or folder (default: %(default)s)")
    parser.add_argument("--hook-timeout", type=float, default=60.0,
                        help="seconds to wait for you to lock on while Siphon's NPC hook goes in (default: %(default)s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    started = time.monotonic()
    try:
        profile = load_profile(args.profile)
    except EldenILError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    checks = Doctor(args.host, profile, args.hook_timeout).run()
    failed = [c.name for c in checks if c.ok is False]
    print(f"\n{len(checks) - len(failed)} checks passed, {len(failed)} failed ({time.monotonic() - started:.0f} s)"
          + (f": fix {', '.join(failed)} first" if failed else ": ready to record and train"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
