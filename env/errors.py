"""The one base class of every error this project raises on purpose.

Bad input (a profile with a typo, a malformed params file, a corrupt dataset), a missing server,
a game that does not answer: each raises a subclass of ``EldenILError`` whose message says what
was wrong and how to fix it. Command lines catch exactly this class and print the message in one
line; anything else escaping them is a bug, and keeps its traceback.
"""

from __future__ import annotations


class EldenILError(Exception):
    """Something the user can fix; the message says what and how."""


class Interrupted(EldenILError):
    """A run stopped by a signal (Ctrl-C, SIGTERM) before it did all it was asked. What it kept is
    whole, but a caller (a shell script, DVC) must not take the run as done: a command line exits
    with ``exit_code``, the shell's 128 + the signal's number (130 for Ctrl-C)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
