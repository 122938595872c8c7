"""The simulator's real-time clock: ticks the world at 60 Hz of game time, game time running at
``world.speed`` times real time (0 pauses), on absolute deadlines so no drift accumulates.

Two rules make the live path as exact as the in-process one:

* Whenever the game resumes or changes speed, the schedule restarts with its first tick *half*
  a tick later. A client that unpauses, sleeps exactly N/60 s and pauses again gets exactly N
  ticks, with about 8 ms of slack for RPC jitter either side.
* Every RPC first ``settle()``s the clock: any tick whose deadline has passed runs before the
  request is served. The state a request sees is then a function of when requests arrive, not of
  when the OS happened to wake the clock's thread on a busy machine.

All methods except ``start``/``stop`` expect the world lock to be held by the caller.
"""

from __future__ import annotations

import threading
import time

from env.sim import TICK_HZ
from env.sim.buttons import InputLatch
from env.sim.world import World

MAX_BURST = 256
"""The most ticks one ``settle`` runs, holding the world lock (a tick's cost:
``benchmarks/bench_world.py``), before letting game time slip: a stall or a speed faster than the
machine then costs game time, never the world lock, so every RPC keeps being served."""
STALL_S = 0.25
"""A clock this far behind skips ahead instead of catching up in a burst (a suspended laptop)."""
MAX_SLEEP_S = 0.1
"""The longest the clock's thread sleeps between looks at the schedule. However far off the next
tick is (paused, or a speed so slow its tick lies beyond what a timeout can express), the thread
wakes, so it never dies of an unrepresentable wait and always sees a new speed."""


class RealtimeClock:
    def __init__(self, world: World, latch: InputLatch, lock: threading.Lock) -> None:
        self.world = world
        self.latch = latch
        self.lock = lock
        self.ticked = threading.Condition(lock)  # notified after every tick
        self._speed = 0.0
        self._deadline: float | None = None
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="sim-clock", daemon=True)
        with lock:
            self.reschedule()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout=2)

    def settle(self) -> None:
        """Run every tick that is due by now (lock held)."""
        now = time.monotonic()
        ticks = 0
        while self._deadline is not None and self._deadline <= now:
            self.world.tick(*self.latch.drain())
            self._deadline += 1.0 / (TICK_HZ * self._speed)
            ticks += 1
            if now - self._deadline > STALL_S or (ticks == MAX_BURST and self._deadline <= now):
                self._deadline = now + 1.0 / (TICK_HZ * self._speed)  # slip: skip ahead
        if ticks:
            self.ticked.notify_all()

    def reschedule(self) -> None:
        """Call after anything that may change the game speed (lock held)."""
        speed = self.world.speed
        if speed == self._speed and (self._deadline is not None or speed <= 0):
            return
        self._speed = speed
        self._deadline = time.monotonic() + 0.5 / (TICK_HZ * speed) if speed > 0 else None
        self._wake.set()

    def _run(self) -> None:
        while not self._stopped:
            with self.lock:
                self.settle()
                deadline = self._deadline
            timeout = MAX_SLEEP_S if deadline is None else min(MAX_SLEEP_S, max(0.0, deadline - time.monotonic()))
            if self._wake.wait(timeout):
                self._wake.clear()
