"""``SimGame``: the Game interface over the simulator in-process, lock-step.

Waiting advances simulated ticks, so a step costs only the world's arithmetic and, when a frame
is asked for, one render: no sockets, no sleeping. This is what fast RL training and most tests
use. Everything goes through the same world, memory map, input latch and renderer that
``python -m env.sim`` serves over gRPC, so the two backends play the same game.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Collection, Sequence

import cv2
import numpy as np

from env import fight_rules
from env.common.errors import GameError
from env.game import TAP_WHILE_PAUSED, AttributeValue, Frame, GameState, PausedTap, Unreadable
from env.keys import normalize_key
from env.observations import FRAME_SIZE
from env.profile import Profile, load_profile
from env.sim import TICK_HZ, memory
from env.sim.boss import load_boss
from env.sim.buttons import InputLatch
from env.sim.renderer import Renderer
from env.sim.world import World


class SimGame:
    """The simulator as a ``Game``. ``window_size`` is the size frames are rendered at, like the
    game's window; render straight at the observation size for speed, or at the server's size to
    mirror the live path pixel for pixel."""

    realtime = False

    def __init__(
        self,
        profile: Profile | str = "sim_margit",
        seed: int = 0,
        window_size: tuple[int, int] = FRAME_SIZE,
    ) -> None:
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        unknown = [n for n in self.profile.attribute_names if n not in memory.ATTRIBUTES]
        if unknown:
            raise GameError(
                f"profile {self.profile.name!r} asks for attributes the simulator does not have: {', '.join(unknown)}"
            )
        self.world = World(seed, boss=load_boss(self.profile.boss))
        self._latch = InputLatch(self.profile.keybinds)
        self._renderer = Renderer(*window_size)
        self._picture_renderers: dict[tuple[int, int], Renderer] = {}
        self._releases: list[tuple[int, int, str]] = []  # (tick, order, key) min-heap
        self._order = itertools.count()
        self._frame: Frame | None = None
        self._frame_revision = -1  # the world revision self._frame shows

    # ---------------------------------------------------------------------------- the protocol
    def now(self) -> float:
        return self.world.time

    def read_state(self, names: Sequence[str] | None = None) -> GameState:
        """Every attribute now, or ``Unreadable`` where the game has none to read (the loading
        screen after a death, a boss killed for good), as the served game answers then."""
        world = self.world
        try:
            values = {name: memory.read(world, name) for name in names or self.profile.attribute_names}
        except memory.MemoryAccessError as e:
            raise Unreadable(f"reading game memory failed: {e}") from None
        return GameState(values, world.time)

    def capture_frame(self) -> Frame:
        world = self.world
        if self._frame_revision != world.revision:
            rgb = cv2.cvtColor(self._renderer.render_bgr(world), cv2.COLOR_BGR2RGB)
            self._frame = Frame(rgb, world.time, world.tick_count)
            self._frame_revision = world.revision
        return self._frame

    def picture(self, frame: Frame, size: tuple[int, int]) -> np.ndarray:
        """The world drawn again at ``size`` (sharp at any size, where scaling a small training
        frame up would blur it); ``frame`` itself when it already has that size."""
        size = (int(size[0]), int(size[1]))
        if frame.rgb.shape[1::-1] == size:
            return frame.rgb
        renderer = self._picture_renderers.get(size)
        if renderer is None:
            renderer = self._picture_renderers[size] = Renderer(*size)
        return cv2.cvtColor(renderer.render_bgr(self.world), cv2.COLOR_BGR2RGB)

    def observe(self, names: Sequence[str] | None = None) -> tuple[GameState, Frame]:
        return self.read_state(names), self.capture_frame()

    def write(self, name: str, value: AttributeValue) -> None:
        try:
            memory.write(self.world, name, value)
        except memory.MemoryAccessError as e:
            raise GameError(str(e)) from None

    def hold_keys(self, keys: Collection[str]) -> None:
        self._latch.set_held(set(keys))

    def tap_keys(self, keys: Collection[str], hold_ms: int = 50) -> None:
        """Press now; release after ``hold_ms`` of game time (at least one tick later)."""
        if self.world.speed <= 0:
            raise PausedTap(TAP_WHILE_PAUSED)
        release_tick = self.world.tick_count + max(1, math.ceil(hold_ms * TICK_HZ / 1000 - 1e-9))
        for key in keys:
            key = normalize_key(key)
            self._latch.press(key)
            heapq.heappush(self._releases, (release_tick, next(self._order), key))

    def wait_until(self, deadline: float) -> None:
        """Advance whole ticks until game time reaches ``deadline``. While the game is paused
        (speed 0) no game time passes, so this returns at once."""
        world = self.world
        if world.speed <= 0:
            return
        target = math.ceil(deadline * TICK_HZ - 1e-6)
        while world.tick_count < target:
            self.step()

    def step(self) -> None:
        """Advance exactly one tick, first releasing any tapped keys that are due."""
        world = self.world
        releases = self._releases
        while releases and releases[0][0] <= world.tick_count:
            self._latch.release(heapq.heappop(releases)[2])
        world.tick(*self._latch.drain())

    def set_speed(self, speed: float) -> None:
        if speed < 0:
            raise ValueError(f"game speed must be >= 0 (0 pauses), got {speed}")
        self.world.game_speed_flag = True
        self.world.game_speed_val = float(speed)

    def reset_fight(self, seed: int | None = None) -> GameState:
        """Restart the fight in place (the simulator's equivalent of the game's reset writes),
        with every key released, then check that it really restarted."""
        self._latch.release_all()
        self._releases.clear()
        self._latch.drain()
        self.world.restart(seed)
        state = self.read_state()
        if not fight_rules.fresh(state):
            raise GameError("the simulator did not restart the fight (HP not full after restart)")
        return state

    def close(self) -> None:
        self._latch.release_all()
        self._releases.clear()
