"""``SiphonGame``: the Game interface over a Siphon server, the real game or ``python -m env.sim``.

The game runs on its own clock, so this backend's clock is ``time.monotonic()`` and waiting is
sleeping until a deadline. Keys held are tracked here and released on ``close()``, at
interpreter exit, and before a fight restarts: nothing on the server releases keys when a
client dies, and a key left down keeps the character running into a wall.

Connecting does what a first evening with the game needs done before any episode: the config is
sent and memory initialised; the game taken back from whatever the last client left (real time,
every bound key up: ``_take_back_speed``, ``_let_go_of_every_key``) before anything waits on it;
input and capture initialised; Siphon's NPC hook is put in place by one read with a long
deadline (the real server blocks every other call until the player locks on, so the user is told
to, every few seconds); and the first frame is waited for (Siphon answers 0 bytes until the
window has presented one). A frame that stays the same while the game runs (a
minimised window: Siphon returns its last frame forever) is an error, not an observation.
Restarting a fight recovers from what memory writes cannot undo (``env.siphon.arena``).

Frames come one ``CaptureFrame`` per frame, or, with the profile's ``frame_source = "stream"``,
from Siphon's ``StreamFrames`` (``env.siphon.stream``): the newest frame pushed, so an observation
costs one attribute round and its frame is as old as the stream makes it (``Frame.timestamp``).
"""

from __future__ import annotations

import atexit
import itertools
import logging
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager

import grpc
import numpy as np

from env import fight_rules
from env.common import interrupts
from env.common.errors import GameError
from env.game import TAP_WHILE_PAUSED, AttributeValue, Frame, GameState, PausedTap, scaled
from env.keys import is_mouse_button, normalize_key
from env.profile import Profile, load_profile
from env.siphon.arena import back_into_the_fight
from env.siphon.client import NoFrame, NotConfigured, SiphonClient
from env.siphon.stream import FrameStream, StreamedFrame

log = logging.getLogger(__name__)

FIRST_FRAME_TIMEOUT_S = 5.0
SPEED_ATTRIBUTES = ("gameSpeedFlag", "gameSpeedVal")


class SiphonGame:
    realtime = True

    def __init__(
        self,
        host: str = "127.0.0.1:50051",
        profile: Profile | str = "sim_margit",
        timeout: float = 2.0,
        reset_timeout: float = 10.0,
        hook_timeout: float = 60.0,
        recovery_timeout: float = 60.0,
        stale_after_s: float = 15.0,
    ) -> None:
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        self.reset_timeout = reset_timeout
        self.recovery_timeout = recovery_timeout
        self.hook_timeout = hook_timeout
        self.client = SiphonClient(host, timeout=timeout)
        self._stream: FrameStream | None = None
        self._held: set[str] = set()
        self._taps: list[grpc.Future] = []
        self._speed = 1.0
        self._speed_flag_set = False
        self._configure()
        self._holds_sigterm = interrupts.hold_sigterm()  # a script's ``with`` or ``finally`` hands it back
        self._frames = FrameWatch(stale_after_s)
        self.boss_seen_dead = False  # a read showed NpcHp 0: the boss may be gone from the save
        self._names = self.profile.attribute_names
        self._frame_numbers = itertools.count(1)  # thread-safe: the recorder observes from several threads
        self._closed = False
        atexit.register(self.close)

    def _configure(self) -> None:
        """Config and memory; the game taken back; input and capture; then the NPC hook and the
        first frame."""
        self.client.configure_memory(self.profile.siphon, packed_reads=self.profile.packed_reads)
        self._take_back_speed()
        self.client.initialize_io(self.profile.siphon)
        self._let_go_of_every_key()
        self.client.wait_for_hook(self.profile.siphon, self.hook_timeout)
        if self.profile.frame_source == "stream":
            if self._stream is not None:
                self._stream.close()
            self._stream = FrameStream(self.client, self.profile.stream_quality, silence_s=self.client.timeout)
            self._stream.wait_for_first(FIRST_FRAME_TIMEOUT_S)
        else:
            self.client.wait_for_first_frame(FIRST_FRAME_TIMEOUT_S)

    # ---------------------------------------------------------------------------- the protocol
    def now(self) -> float:
        return time.monotonic()

    def read_state(self, names: Sequence[str] | None = None) -> GameState:
        start = time.monotonic()
        values = self.client.read(names or self._names)
        return self._state(values, (start + time.monotonic()) / 2)

    def capture_frame(self) -> Frame:
        if self._stream is not None:
            return self._streamed(self._stream.latest())
        start = time.monotonic()
        rgb = self.client.capture_rgb()
        return self._frame(rgb, (start + time.monotonic()) / 2)

    def picture(self, frame: Frame, size: tuple[int, int]) -> np.ndarray:
        return scaled(frame.rgb, size)  # the captured frame itself: no second capture over the network

    def observe(self, names: Sequence[str] | None = None) -> tuple[GameState, Frame]:
        start = time.monotonic()
        if self._stream is not None:
            values = self.client.read(names or self._names)
            return self._state(values, (start + time.monotonic()) / 2), self._streamed(self._stream.latest(), values)
        values, rgb = self.client.read_and_capture(names or self._names)
        taken = (start + time.monotonic()) / 2
        return self._state(values, taken), self._frame(rgb, taken, values)

    def _state(self, values: dict[str, AttributeValue], taken: float) -> GameState:
        if {"NpcHp", "NpcMaxHp"} <= values.keys() and fight_rules.AT_DEATH.boss_down(values):
            self.boss_seen_dead = True
        return GameState(values, taken)

    def _frame(self, rgb: np.ndarray, taken: float, values: dict[str, AttributeValue] | None = None) -> Frame:
        self._frames.check(rgb, taken, running=self._speed > 0, state=values)
        return Frame(rgb, taken, next(self._frame_numbers))

    def _streamed(self, frame: StreamedFrame, values: dict[str, AttributeValue] | None = None) -> Frame:
        """A streamed frame keeps its own capture time and the server's number: its age shows."""
        self._frames.check(frame.rgb, frame.taken, running=self._speed > 0, state=values)
        return Frame(frame.rgb, frame.taken, frame.number)

    def write(self, name: str, value: AttributeValue) -> None:
        self.client.write(name, value)

    def hold_keys(self, keys: Collection[str]) -> None:
        wanted = {normalize_key(k) for k in keys}
        self._finish_taps()
        for key in sorted(self._held - wanted):
            self.client.toggle_key(key, False)
            self._held.discard(key)
        for key in sorted(wanted - self._held):
            self.client.toggle_key(key, True)
            self._held.add(key)

    def tap_keys(self, keys: Collection[str], hold_ms: int = 50) -> None:
        """Start a tap without waiting for it. Siphon holds the keys ``hold_ms`` of the wall's
        time, so at a game speed the hold asked for is that much shorter: the game holds them
        ``hold_ms`` of its own time, as in-process."""
        if self._speed <= 0:
            raise PausedTap(TAP_WHILE_PAUSED)
        self._taps.append(self.client.tap_keys(keys, max(1, round(hold_ms / self._speed))))

    def wait_until(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)

    def set_speed(self, speed: float) -> None:
        if speed < 0:
            raise ValueError(f"game speed must be >= 0 (0 pauses), got {speed}")
        if not self._speed_flag_set:
            self.client.write("gameSpeedFlag", True)
            self._speed_flag_set = True
        self.client.write("gameSpeedVal", float(speed))
        self._speed = speed

    @contextmanager
    def running(self) -> Iterator[None]:
        """The game running while the block lasts: at real time if it was paused, paused again
        after (what must play out in game time, a loading screen or a walk, does not play paused)."""
        paused = self._speed <= 0
        if paused:
            self.set_speed(1.0)
        try:
            yield
        finally:
            if paused:
                self.set_speed(0.0)

    def reset_fight(self, seed: int | None = None) -> GameState:
        """Restart the fight with the profile's reset writes, then read memory until the fight is
        back at full HP on both sides, or fail with what was read. On a profile that names a
        fog wall (the real game), first get back into the fight from a real death (``env.siphon.arena``);
        a server that restarted since (it forgot the config) is configured again. A profile that has
        not measured a place the reset teleports to is refused first, saying how to measure it."""
        self.profile.check_reset_measured()
        try:
            return self._restart(seed)
        except NotConfigured:
            log.warning("Siphon at %s forgot this client's config (restarted?): configuring it again", self.client.host)
            self._configure()
            return self._restart(seed)

    def _restart(self, seed: int | None) -> GameState:
        self.hold_keys(())
        if self.profile.fog_wall is not None:
            back_into_the_fight(self, self.recovery_timeout)
        for name, value in self.profile.reset_writes:
            self.client.write(name, self._resolve(value, seed))
        if self.profile.start_position is not None:
            self.teleport(self.profile.start_position)
        state = self._wait_for_fresh_fight()
        self.boss_seen_dead = False
        return state

    def _wait_for_fresh_fight(self) -> GameState:
        deadline = time.monotonic() + self.reset_timeout
        while True:
            state = self.read_state()
            if fight_rules.fresh(state):
                return state
            if time.monotonic() > deadline:
                raise GameError(
                    f"the fight did not restart within {self.reset_timeout:g} s: HeroHp "
                    f"{state['HeroHp']}/{state['HeroMaxHp']}, NpcHp {state['NpcHp']}/{state['NpcMaxHp']}. "
                    "Is the character in the boss arena with the boss targeted (lock on)?"
                )
            time.sleep(0.05)

    def _resolve(self, value: object, seed: int | None) -> object:
        """A reset value: a number, ``"{seed}"``, or the name of an attribute to copy."""
        if value == "{seed}":
            return 0 if seed is None else int(seed)
        if isinstance(value, str):
            return self.client.read([value])[value]
        return value

    def teleport(self, target: tuple[float, float, float]) -> None:
        """Put the player at a global position the way the game allows it: the local position is
        writable, so shift it by how far the global position is from the target."""
        names = [f"Hero{kind}Pos{axis}" for kind in ("Local", "Global") for axis in "XYZ"]
        now = self.client.read(names)
        for axis, goal in zip("XYZ", target):
            local, world = now[f"HeroLocalPos{axis}"], now[f"HeroGlobalPos{axis}"]
            self.client.write(f"HeroLocalPos{axis}", local + (goal - world))

    def _take_back_speed(self) -> None:
        """A fresh game runs at real time: one left at another speed, by a client killed before
        it handed the game back (paused between an env's steps, or at 3x within one), is taken
        back to real time in one warning line, before anything waits on it (a paused game cannot
        be locked on to, and a fast one would play a 1x env's steps at its own speed). An env at
        another ``game_speed`` sets its own from there, step by step."""
        if not set(SPEED_ATTRIBUTES) <= self.profile.siphon.attributes.keys():
            return
        found = self.client.read(SPEED_ATTRIBUTES)
        self._speed_flag_set = bool(found["gameSpeedFlag"])
        self._speed = float(found["gameSpeedVal"]) if self._speed_flag_set else 1.0
        if self._speed != 1.0:
            log.warning(
                "the game at %s was left %s (gameSpeedVal %g) by a client that did not hand it back (killed?): "
                "taking it back to real time",
                self.client.host,
                "paused" if self._speed <= 0 else f"at {self._speed:g}x",
                self._speed,
            )
            self.set_speed(1.0)

    def _let_go_of_every_key(self) -> None:
        """Let go of every key the profile binds: a client that died holding one left it down, and
        the hero walks on by itself. Siphon has no call that reads a key's state, so each is let
        go blind (letting go of a key that is up does nothing) and nothing can be said of which."""
        for key in sorted({normalize_key(k) for binding in self.profile.keybinds.values() for k in binding}):
            if not is_mouse_button(key):  # Siphon only taps them: none is left down
                self.client.toggle_key(key, False)
        self._held.clear()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            self.hold_keys(())
            if self._speed_flag_set and self._speed != 1.0:
                self.set_speed(1.0)  # handed back at real time: never left paused or fast
        except GameError as e:
            log.warning("could not release keys or restore the game's speed on close: %s", e)
        finally:
            if self._stream is not None:
                self._stream.close()
            self.client.close()
            if self._holds_sigterm:
                interrupts.release_sigterm()

    def _finish_taps(self) -> None:
        taps, self._taps = self._taps, []
        for future in taps:
            self.client.check_tap(future)


class FrameWatch:
    """Notices a game window that stopped presenting: Siphon then returns its last frame forever
    (a minimised window) while saying success. A cheap fingerprint (a grid of 64+ pixels a side) per frame;
    ``check`` raises ``NoFrame`` when it has not changed for ``stale_after_s`` of running game
    while the game state read with it did change (a still scene, the player idle at a grace, is
    the same frame for good reason). A frame captured without a state is never judged.
    Thread-safe: the recorder observes from several threads."""

    def __init__(self, stale_after_s: float) -> None:
        self.stale_after_s = stale_after_s
        self._lock = threading.Lock()
        self._fingerprint: bytes = b""
        self._since = 0.0
        self._state: Mapping[str, AttributeValue] = {}  # read with the frame that last changed
        self._game_moved = False  # the state changed since then

    def check(
        self, rgb: np.ndarray, taken: float, running: bool, state: Mapping[str, AttributeValue] | None = None
    ) -> None:
        step = max(1, min(rgb.shape[:2]) // 64)  # 1080p: every 16th pixel; a small window: all of them
        fingerprint = rgb[::step, ::step].tobytes()
        with self._lock:
            if fingerprint != self._fingerprint or not running:
                self._fingerprint, self._since, self._state, self._game_moved = fingerprint, taken, state or {}, False
                return
            if state is None:
                return
            self._game_moved = self._game_moved or any(
                self._state.get(name, value) != value for name, value in state.items()
            )
            self._state = {**self._state, **state}
            still = taken - self._since
        if self._game_moved and still > self.stale_after_s:
            raise NoFrame(
                f"the game window has shown the same frame for {still:.0f} s while the game runs: is it "
                "minimised or covered? Siphon keeps returning the last frame it captured; restore the window"
            )
