"""The one base class of every error this project raises on purpose.

Bad input (a profile with a typo, a malformed params file, a corrupt dataset), a missing server,
a game that does not answer: each raises a subclass of ``EldenILError`` whose message says what
was wrong and how to fix it. Command lines catch exactly this class and print the message in one
line; anything else escaping them is a bug, and keeps its traceback.
"""

from __future__ import annotations


class EldenILError(Exception):
    """Something the user can fix; the message says what and how."""
