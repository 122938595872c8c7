"""The simulator's real-time clock: ticks the world at 60 Hz of game time, game time running at
``world.speed`` times real time (0 pauses), on absolute deadlines so no drift accumulates.

Whenever the game resumes or changes speed, the schedule restarts with its first tick *half* a
tick after that moment. A client that unpauses, sleeps exactly N/60 s and pauses again thus gets
exactly N ticks even with several milliseconds of RPC jitter either side: the live path can be
stepped as exactly as the in-process one.
"""

from __future__ import annotations

import threading
import time

from env.sim import TICK_HZ
from env.sim.inputs import InputLatch
from env.sim.world import World


class RealtimeClock:
    def __init__(self, world: World, latch: InputLatch, lock: threading.Lock) -> None:
        self.world = world
        self.latch = latch
        self.lock = lock
        self.ticked = threading.Condition(lock)  # notified after every tick, under the world lock
        self.last_tick_at = time.monotonic()
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="sim-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout=2)

    def poke(self) -> None:
        """The speed may have changed: re-read it now rather than at the next deadline."""
        self._wake.set()

    def _run(self) -> None:
        deadline: float | None = None
        speed = 0.0
        while not self._stopped:
            with self.lock:
                current = self.world.speed
            if current <= 0:
                deadline = None
                self._wake.wait(0.1)
                self._wake.clear()
                continue
            if deadline is None or current != speed:
                speed = current
                deadline = time.monotonic() + 0.5 / (TICK_HZ * speed)
            remaining = deadline - time.monotonic()
            if remaining > 0:
                if self._wake.wait(remaining):
                    self._wake.clear()
                    continue  # woken early: re-read the speed before ticking
            with self.lock:
                if self.world.speed != speed:
                    continue
                self.world.tick(*self.latch.drain())
                self.last_tick_at = time.monotonic()
                self.ticked.notify_all()
            deadline += 1.0 / (TICK_HZ * speed)
            if time.monotonic() - deadline > 0.25:  # fell far behind (a stall): do not burst
                deadline = time.monotonic()
