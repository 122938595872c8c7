"""A game controller -> the recorder: its buttons and sticks, on the recorder's one clock.

A thread of its own polls the first pad SDL reports (``env.gamepad``) ``POLL_HZ`` times a second
and logs what changed into the input log: a button down or up, an axis moved (a stick or a
trigger, once it has moved by ``AXIS_STEP``). Each change is stamped when it was read, on the
input log's clock, the clock of every sample; a sample takes everything logged before it, so a
press is in the first sample taken after the poll that saw it.

Pads come and go while a recording runs: one unplugged lets go of everything it held (the game
sees the same) and the recording goes on on the keyboard; plugged back in, it is heard again.
A second pad is named once and not heard; a pad SDL cannot name control by control is named
once, with how to add a mapping for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from env.common.errors import SetupError
from env.gamepad import Gamepad, PadNotice, describe

log = logging.getLogger(__name__)

POLL_HZ = 500.0
"""Reads a second: a press is heard within 2 ms, at a small share of one core (BENCHMARKS.md)."""
AXIS_STEP = 1 / 128
"""How far an axis moves (of its travel from rest to full) before the move is logged: finer
than any dead zone or threshold it is judged by, coarse enough to leave a resting stick's noise out."""


class PadSink(Protocol):
    """Where a pad's input is logged: an ``InputLog``, or a ``Takeover`` in front of one."""

    controller: str
    clock: Callable[[], float]

    def pad_button(self, index: int, down: bool, t: float | None = None) -> None: ...

    def pad_axis(self, index: int, value: float, t: float | None = None) -> None: ...

    def pad_gone(self, t: float | None = None) -> None: ...


class PadListener:
    """Feeds ``sink`` from the first game controller, on a thread of its own, until ``stop``."""

    def __init__(self, sink: PadSink, rate_hz: float = POLL_HZ) -> None:
        self.sink = sink
        self.period = 1.0 / rate_hz
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pad-listener", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        """Start hearing; returns once the first read is done (a pad already in hand is heard
        from the first sample on)."""
        self._thread.start()
        self._ready.wait(5.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        try:
            gamepad = Gamepad()  # SDL is read from this thread alone
        except SetupError as e:
            log.warning("controllers are not heard: %s", e)
            self._ready.set()
            return
        buttons = np.zeros(0, bool)
        axes = np.zeros(0, np.float32)
        deadline = time.monotonic()
        try:
            while not self._stop.is_set():
                state, notices = gamepad.read()
                t = self.sink.clock()
                for notice in notices:
                    self._tell(notice, t)
                if state is None:
                    buttons = axes = np.zeros(0)
                else:
                    if not len(buttons):  # just connected: everything it holds is news
                        buttons, axes = np.zeros_like(state.buttons), np.zeros_like(state.axes)
                    for index in np.flatnonzero(state.buttons != buttons):
                        self.sink.pad_button(int(index), bool(state.buttons[index]), t)
                    for index in np.flatnonzero(np.abs(state.axes - axes) >= AXIS_STEP):
                        self.sink.pad_axis(int(index), float(state.axes[index]), t)
                        axes[index] = state.axes[index]
                    buttons = state.buttons
                self._ready.set()
                deadline += self.period
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._stop.wait(wait)
                else:
                    deadline = time.monotonic()  # behind (a busy machine): read again at once, never in a burst
        except BaseException as e:  # the recording goes on without the pad; the reason is logged
            self.error = e
            log.error("the controller is no longer heard: %r", e)
        finally:
            gamepad.close()
            self._ready.set()

    def _tell(self, notice: PadNotice, t: float) -> None:
        if notice.kind == "connected":
            self.sink.controller = notice.name
            log.info("controller %r connected: its buttons and sticks are recorded", notice.name)
        elif notice.kind == "unplugged":
            self.sink.pad_gone(t)
            self.sink.controller = ""
            log.warning(
                "controller %r unplugged: the episode goes on (nothing it held stays held), and the controller "
                "is heard again once it is back",
                notice.name,
            )
        else:
            log.warning(describe(notice))
