"""``python -m env.doctor``: check a gaming PC (or a simulator server) before the first evening.

Run it first, with the game in Margit's arena. In about a minute it says, check by check, what
works and what to fix: the server is reachable; the config is accepted; memory reads; Siphon's NPC
hook goes in (it asks you to lock on); capture gives frames of the right size that are neither
black nor frozen; every keybind of the profile makes the game react (an animation, a movement, a
stamina or FP change; lock-on by how the character faces while it strafes), naming each binding
that does not (a dead player, a paused game, a loading screen or an empty flask is told apart
from a wrong binding, with what to do); and what this link to the server
costs: read, snapshot and frame latencies, the env steps per second they allow, and the highest
recording rate it sustains without dropping a sample; and whether the profile's game clock
(``[clock]``) counts the game's time (still while paused, the wall's pace at 1x). It never writes
HP or teleports.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from env.common.cli import flag, parse_settings, run_command
from env.common.errors import EldenILError, GameError
from env.common.fields import check_fields, checked, number
from env.factory import DEFAULT_HOST
from env.profile import BOSS_IDS, Profile, load_profile
from env.siphon.client import ReadRefused
from env.siphon.game import SiphonGame

log = logging.getLogger("env.doctor")

EPILOG = (
    "Run it with the game in the boss arena. Example: python -m env.doctor --host 192.168.1.20:50051 "
    "--profile eldenring_margit"
)

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


DIED = (
    "the player died during the key check (HP 0: something hit them while the keys were tried), so no "
    "binding can be judged and none is to blame: restart the fight, or stand somewhere safe (outside the fog "
    "wall, at the grace) and run the doctor again"
)
PAUSED = (
    "the game is paused (game speed 0: gameSpeedFlag on, gameSpeedVal 0), so nothing reacts to any key and no "
    "binding is to blame: unpause it (pysiphon set gameSpeedVal float 1) and run the doctor again"
)
LOADING = (
    "the game is on a loading screen or a menu: memory finds no player ({error}), so no binding can be judged "
    "and none is to blame: stand in the arena and run the doctor again"
)
NO_FLASKS = "no flask charges left: rest at a grace to refill them, or the heal check is skipped"
CLOCK_PROBE_S = 0.5
"""How long the clock check holds the game paused, then lets it run at 1x."""
CLOCK_TOLERANCE = 0.2
"""The share of the wall's time a game clock may differ by while the game runs at 1x: the wire's
delays on both calls, a frame's rounding."""


class GameNotReady(GameError):
    """The game cannot show any key's effect now (the player died, it is paused, or on a
    loading screen or menu): the key check stops, blaming no binding, and says what to do."""


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
        self._last_hp: int | None = None  # the player's HP at the last read of the key check
        self._hurt = False  # hit during the key check (a loading screen after that is a death's)

    def run(self) -> list[Check]:
        steps: list[Callable[[], None]] = [self.connect, self.memory, self.capture, self.keys, self.speed, self.clock]
        try:
            for step in steps:
                step()
        except GameNotReady as e:
            self.say("game state", False, str(e))
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
        print(
            f"connecting to {self.host} with profile {self.profile.name!r}; if Siphon puts its NPC hook in "
            "place now, lock on to the boss when asked",
            flush=True,
        )
        self.game = SiphonGame(self.host, self.profile, hook_timeout=self.hook_timeout)
        status = self.game.client.status()
        self.say(
            "server",
            True,
            f"reachable, config accepted, memory/input/capture initialised, NPC hook in place "
            f"({time.monotonic() - started:.1f} s; process {status.process_name!r})",
        )

    def memory(self) -> None:
        state = self.game.read_state()
        ids = ", ".join(f"{name} {state[name]}" for name in ("NpcId", "NpcParamId") if name in state)
        self.say(
            "memory",
            True,
            f"all {len(state)} attributes read: HeroHp {state['HeroHp']}/{state['HeroMaxHp']}, "
            f"NpcHp {state['NpcHp']}/{state['NpcMaxHp']}, {ids or 'no NpcId'}",
        )
        checked = [(name, key) for name, key in BOSS_IDS if name in self.profile.boss_id_attributes]
        if not checked:
            return
        other = self.profile.not_the_boss(state)
        if other is None:
            read = " and ".join(f"{name} {state[name]}" for name, _ in checked)
            keys = " and ".join(key for _, key in checked)
            self.say("boss", True, f"{self.profile.boss_name} targeted ({read}, the profile's {keys})")
        else:
            self.say(
                "boss",
                False,
                f"the targeted NPC is {other.read}, not the profile's {other.key} {other.wanted}: lock on to "
                f"the boss (or, if this is the boss, set fight.{other.key} = {other.read})",
            )

    def capture(self) -> None:
        rgb = self.game.capture_frame().rgb
        height, width = rgb.shape[:2]
        dark = rgb.mean() < 8
        self.say(
            "capture",
            not dark,
            f"{width}x{height}"
            + (": almost black (a loading screen, or the capture of another window?)" if dark else ", not black"),
        )

    def keys(self) -> None:
        """Press every binding and look for the game's reaction in memory; while the character
        moves, check that the frames move too (a minimised window keeps returning its last one).
        A game that cannot react to any key (the player dead, the game paused or loading) stops
        the check with ``GameNotReady``: that is no binding's fault."""
        self.check_paused()
        silent, dead, frozen = [], [], False
        for action, binding in self.profile.keybinds.items():
            key = "+".join(binding)
            self.read(["HeroHp"])  # dead or loading since the last key: say so before judging this one
            if action == "lock_on":
                toggles = self.lock_on_toggles(binding)
                if toggles is None:
                    silent.append(
                        f"lock_on ({key}: the character moved freely both times; nothing in sight to lock on to?)"
                    )
                elif not toggles:
                    dead.append(f"{action} ({key})")
            elif action == "use_item" and self.flasks() == 0:
                silent.append(f"{action} ({key}: {NO_FLASKS})")
            elif action in NEEDS_SOMETHING:
                if not self.reacts(action, binding):
                    silent.append(f"{action} ({key}: {NEEDS_SOMETHING[action]})")
            else:
                frame_before, at_before = self.game.capture_frame().rgb, self.read(WATCHED)
                if not self.reacts(action, binding):
                    dead.append(f"{action} ({key})")
                elif action.startswith("move_") and moved(at_before, self.read(WATCHED)) > MOVED_M:
                    frozen = frozen or np.array_equal(frame_before, self.game.capture_frame().rgb)
            self.game.wait_until(self.game.now() + SETTLE_S)  # let the move finish before the next key
        if silent:
            self.say("keys not judged", None, ", ".join(silent))
        self.say(
            "keybinds",
            not dead,
            f"all {len(self.profile.keybinds) - len(silent)} bindings make the game react"
            if not dead
            else "no reaction to " + ", ".join(dead) + ": bind these keys in the game's key configuration as the "
            "profile says (docs/guide.md, section 3.2), then run the doctor again",
        )
        if frozen:
            self.say(
                "frames",
                False,
                "the character moved but the captured frame did not change: is the game window "
                "minimised or covered? Siphon keeps returning the last frame it captured",
            )

    def read(self, names: list[str] | tuple[str, ...]) -> dict:
        """``names`` read during the key check, or ``GameNotReady`` where the game cannot react:
        the player at HP 0 (dead), or no player in memory (after a death, the loading screen;
        else a loading screen or a menu)."""
        try:
            values = self.game.client.read(list(dict.fromkeys([*names, "HeroHp"])))
        except ReadRefused as e:
            raise GameNotReady(DIED if self._hurt else LOADING.format(error=e)) from None
        if values["HeroHp"] <= 0:
            raise GameNotReady(DIED)
        if self._last_hp is not None and values["HeroHp"] < self._last_hp:
            self._hurt = True
        self._last_hp = values["HeroHp"]
        return values

    def check_paused(self) -> None:
        """``GameNotReady`` where the game is paused by its speed flag (where the profile reads it)."""
        if not {"gameSpeedFlag", "gameSpeedVal"} <= self.profile.siphon.attributes.keys():
            return
        speed = self.read(["gameSpeedFlag", "gameSpeedVal"])
        if speed["gameSpeedFlag"] and speed["gameSpeedVal"] == 0:
            raise GameNotReady(PAUSED)

    def flasks(self) -> int | None:
        """Flask charges left, where the profile reads them (the game's profile cannot)."""
        if "HeroFlaskCharges" not in self.profile.siphon.attributes:
            return None
        return self.read(["HeroFlaskCharges"])["HeroFlaskCharges"]

    def reacts(self, action: str, binding: tuple[str, ...]) -> bool:
        """Whether pressing ``binding`` (a key or a chord) visibly does something, watched for ``REACTION_S``. A window in
        which the character was hit (by the boss, not by the key) proves nothing: tried again."""
        game = self.game
        for _ in range(TRIES):
            before = self.read(WATCHED)
            if action.startswith("move_"):
                game.hold_keys(set(binding))
            else:
                game.tap_keys(list(binding), 50)
            end, seen, hit = game.now() + REACTION_S, False, False
            while game.now() < end and not seen:
                after = self.read(WATCHED)
                hit = after["HeroHp"] < before["HeroHp"]
                seen = not hit and reacted(before, after)
            game.hold_keys(())
            if not hit:
                return seen
        return False

    def lock_on_toggles(self, binding: tuple[str, ...]) -> bool | None:
        """Whether ``binding`` toggles the lock-on, seen in how the character faces while it strafes
        (``strafe_turn``), before and after one tap of ``key``; a second tap leaves the lock as
        it was. False: locked on both times (the tap did not release it); None: free both times
        (nothing in sight to lock on to, or a key that does nothing: no telling which)."""
        game, bound = self.game, self.profile.keybinds
        if not {"move_left", "move_right"} <= bound.keys() or "HeroAngle" not in self.profile.siphon.attributes:
            return None
        locked = []
        for _ in range(2):
            locked.append(self.strafe_turn() < FREE_TURN)
            game.tap_keys(list(binding), 50)
            game.wait_until(game.now() + SETTLE_S)
        return True if locked[0] != locked[1] else (False if locked[0] else None)

    def strafe_turn(self) -> float:
        """How far the character turns (radians) between a step left and a step right: about
        half a turn when free (it faces the way it walks), little when locked on (it faces the
        target). A window in which the character was hit is tried again."""
        game = self.game
        for _ in range(TRIES):
            hp = self.read(["HeroHp"])["HeroHp"]
            angles = []
            for side in ("move_left", "move_right"):
                game.hold_keys(set(self.profile.keys_for(side)))
                game.wait_until(game.now() + STRAFE_S)
                angles.append(self.read(["HeroAngle"])["HeroAngle"])
            game.hold_keys(())
            if self.read(["HeroHp"])["HeroHp"] >= hp:
                break
        return abs(math.remainder(angles[1] - angles[0], math.tau))

    def speed(self) -> None:
        """What this link costs, and what it allows."""
        game = self.game
        one = timed(lambda: game.client.read(["HeroHp"]))
        snapshot = timed(game.read_state)
        frame = timed(game.capture_frame)
        observe = timed(lambda: game.observe(self.profile.attribute_names))
        self.say(
            "latency",
            True,
            f"one attribute {one * 1000:.1f} ms, a snapshot of {len(self.profile.attribute_names)} "
            f"{snapshot * 1000:.1f} ms, a frame {frame * 1000:.1f} ms, both together {observe * 1000:.1f} ms "
            f"(medians): an env step observes in {observe * 1000:.0f} ms, so at most {1 / observe:.0f} steps/s",
        )
        capacity = observe_capacity(game, self.profile.attribute_names)
        rate = next((r for r in RATES_HZ if r <= HEADROOM * capacity), None)
        self.say(
            "recording",
            rate is not None,
            f"{capacity:.0f} observations/s with {IN_FLIGHT} in flight (as the recorder samples): records at "
            f"{rate} Hz with room to spare"
            if rate
            else f"only {capacity:.1f} observations/s: record at a lower rate, a smaller window, or nearer the server",
        )

    def clock(self) -> None:
        """Whether the profile's game clock (``[clock]``) counts the game's time: it must stand
        still while the game is paused through its speed, and count about the wall's time while
        it runs at 1x. A paused env stamps every step with it, so a counter that does neither
        would misreport every step."""
        clock = self.profile.game_clock
        if clock is None:
            self.say(
                "game clock",
                None,
                "the profile names none ([clock]): an env paused between steps measures each step on the wall's "
                "clock, from this side of the wire (a few ms off a step)",
            )
            return
        game = self.game
        game.set_speed(0.0)
        try:
            start = clock.seconds(self.read([clock.attribute]))
            time.sleep(CLOCK_PROBE_S)
            paused = clock.seconds(self.read([clock.attribute])) - start
            game.set_speed(1.0)
            resumed = time.monotonic()
            time.sleep(CLOCK_PROBE_S)
            game.set_speed(0.0)
            wall = time.monotonic() - resumed
            ran = clock.seconds(self.read([clock.attribute])) - start - paused
        finally:
            game.set_speed(1.0)
        ok = counts_game_time(paused, ran, wall)
        self.say(
            "game clock",
            ok,
            f"{clock.attribute} counted {paused * 1000:.0f} ms while the game stood paused {CLOCK_PROBE_S:.1f} s "
            f"and {ran * 1000:.0f} ms while it ran {wall * 1000:.0f} ms at 1x"
            + ("" if ok else ": it does not count the game's time; remove [clock] from the profile"),
        )


def counts_game_time(paused: float, ran: float, wall: float) -> bool:
    """Whether a clock that counted ``paused`` seconds while the game stood still and ``ran``
    while it ran ``wall`` seconds of the wall's time at 1x counts the game's time."""
    return paused == 0 and abs(ran - wall) <= CLOCK_TOLERANCE * wall


def moved(before, after) -> float:
    """How far the character went (metres, horizontally)."""
    return float(
        np.hypot(after["HeroLocalPosX"] - before["HeroLocalPosX"], after["HeroLocalPosY"] - before["HeroLocalPosY"])
    )


def reacted(before, after) -> bool:
    """The game visibly did something: an animation, a step, stamina or FP spent."""
    return bool(
        after["HeroAnimId"] != before["HeroAnimId"]
        or moved(before, after) > 0.05
        or after["HeroSp"] < before["HeroSp"]
        or after["HeroFp"] < before["HeroFp"]
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


@dataclass(frozen=True)
class DoctorArgs:
    """Which game ``python -m env.doctor`` checks: each field its flag."""

    host: str = field(default=DEFAULT_HOST, metadata=flag("Siphon server host:port"))
    profile: str = field(default="eldenring_margit", metadata=flag("profile name or folder"))
    hook_timeout: float = checked(
        60.0, number(0, 3600, above=True), "seconds to wait for you to lock on while Siphon's NPC hook goes in"
    )

    def __post_init__(self) -> None:
        check_fields(self)


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m env.doctor", __doc__, DoctorArgs, argv=argv, epilog=EPILOG)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    return run_command(lambda: examine(args.host, args.profile, args.hook_timeout))


def examine(host: str, profile_name: str, hook_timeout: float) -> int:
    """Run every check and print the verdict; the exit status is 1 when a check failed (a result,
    not an error: the checks' own lines say what to fix)."""
    started = time.monotonic()
    checks = Doctor(host, load_profile(profile_name), hook_timeout).run()
    failed = [c.name for c in checks if c.ok is False]
    print(
        f"\n{len(checks) - len(failed)} checks passed, {len(failed)} failed ({time.monotonic() - started:.0f} s)"
        + (f": fix {', '.join(failed)} first" if failed else ": ready to record and train")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
