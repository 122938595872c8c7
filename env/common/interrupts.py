"""Ctrl-C and SIGTERM as interrupts that cannot be lost.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens to be.
Where that is a callback Python calls on its own (a weakref's, a ``__del__``, a C library's log
hook), the exception cannot propagate: Python prints "Exception ignored ... KeyboardInterrupt"
and goes on, and a dataset build stopped that way once finished and exited 0. SIGTERM, by
default, ends the process on the spot, its staging folders left behind and no line said.

So every command (``env.common.cli.run_command``) runs under ``watched()``: both signals raise
``KeyboardInterrupt`` and are also *recorded* (and Python's "Exception ignored" traceback for
one that could not propagate is left out: the command says it in its one line). What publishes an output (``env.common.staging``)
calls ``check()`` first, and the runner calls it again once the work returns: an interrupt
whose exception was swallowed still stops the swap and still ends the command with the
shell's 128 + signal. ``deferred()`` holds signals back for the few instructions that must not
be cut in half (the two renames of a swap).

Outside a command, in a user's own script, SIGTERM would still end the process on the spot, with
a live game's keys down and its speed wherever the env left it; ``hold_sigterm()`` raises it as
Ctrl-C is raised while such a game is open, so the script's ``with`` or ``finally`` hands it back.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGBREAK = 21
"""Windows' Ctrl+Break (``signal.SIGBREAK``, which Python defines there alone): a console's
second interrupt, beside Ctrl+C."""


def interrupt_signals(platform: str = sys.platform) -> tuple[int, ...]:
    """The signals that interrupt a command on ``platform``: Ctrl-C and SIGTERM, and on Windows
    Ctrl+Break too (SIGTERM can be handled there, though only the process itself raises it)."""
    signals = (signal.SIGINT, signal.SIGTERM)
    return (*signals, getattr(signal, "SIGBREAK", SIGBREAK)) if platform == "win32" else signals


SIGNALS = interrupt_signals()


class Watch:
    """The signals received while a command runs; the first decides its exit status."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.stopping = False

    def handler(self, signum: int, _frame: object) -> None:
        if self.received is None:
            self.received = signum
        if not self.stopping:  # once the command is on its way out, its cleanup is let finish
            raise KeyboardInterrupt

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if a signal came, even one whose exception was swallowed."""
        if self.received is not None and not self.stopping:
            raise KeyboardInterrupt


_current: Watch | None = None


@contextmanager
def watched() -> Iterator[Watch | None]:
    """SIGINT and SIGTERM recorded and raised as ``KeyboardInterrupt`` for the ``with`` body;
    the handlers found are back afterwards. Outside the main thread (where Python allows no
    handler) nothing changes and the body gets None."""
    global _current
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    watch, outer, hook = Watch(), _current, sys.unraisablehook
    previous = {sig: signal.signal(sig, watch.handler) for sig in SIGNALS}
    _current = watch

    def unraisable(info: Any) -> None:
        if not (isinstance(info.exc_value, KeyboardInterrupt) and watch.received is not None):
            hook(info)

    sys.unraisablehook = unraisable
    try:
        yield watch
    finally:
        _current = outer
        sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if watch.received is not None:
            _forget_unhandled_interrupt()


def _forget_unhandled_interrupt() -> None:
    """Clear CPython's note that a ``KeyboardInterrupt`` went unhandled, which ``python -m`` acts
    on at exit by killing itself with SIGINT, whatever status the command returned. Code run from
    a string (``exec``, and so every ``dataclass`` being built) sets the note when the interrupt
    is raised inside it, even though the command then catches it; running a string resets it."""
    exec("")


def check() -> None:
    """Raise ``KeyboardInterrupt`` if the running command was sent a signal (see ``Watch.check``);
    nothing outside a command."""
    if _current is not None:
        _current.check()


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back for the ``with`` body and delivered after it, to whatever
    handles them then. By swapping the handlers for ones that only note the signal: masking the
    signal in this thread is not enough, as another thread of the process may take it, and
    Python then runs the handler in this thread all the same. Off the main thread (where Python
    allows no handler) the body runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: held.append(signum)) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


_sigterm_holders = 0
"""How many open things (live games) asked for SIGTERM to be raised (``hold_sigterm``)."""


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def hold_sigterm() -> bool:
    """While something that must be handed back is open (a live game: its keys, its speed),
    SIGTERM raised as ``KeyboardInterrupt``, as Ctrl-C is, where it would otherwise end the
    process on the spot (its handler the default): a script's ``with`` block or ``finally`` then
    runs on either. A handler of the program's own (a command's ``watched()``) is left alone, and
    off the main thread (where Python allows no handler) nothing changes. Returns whether it held:
    each hold is given back by ``release_sigterm()``, and the last one puts the default back."""
    global _sigterm_holders
    if threading.current_thread() is not threading.main_thread():
        return False
    if _sigterm_holders == 0:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False
        signal.signal(signal.SIGTERM, _raise_interrupt)
    _sigterm_holders += 1
    return True


def release_sigterm() -> None:
    """Give back one ``hold_sigterm()`` that held; after the last, SIGTERM ends the process again."""
    global _sigterm_holders
    _sigterm_holders -= 1
    if (
        _sigterm_holders == 0
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is _raise_interrupt
    ):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
