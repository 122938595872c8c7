"""Files on disk: publishing them on Windows too, and reading only plain files.

A rename that waits out another process's brief hold: on Windows, replacing or renaming a file that another process has just opened (an antivirus
scanner, the search indexer, a backup tool: they open every new file for a moment) fails with a
PermissionError until that process lets go. A recorder that gave up there would leave a finished
episode unpublished, so publishing retries for a few seconds before it reports the error.

A file a recording is read from must be a plain file in its own folder: reading a FIFO waits
for a writer forever (a build hung on one named like a video), a device never ends, and a
symbolic link out of the folder reads whatever it points to. ``plain_file_problem`` says what
such a path is before anything opens it.

A small file shared with the project (a policy's description, an env config, params.yaml) is
read within a bound: ``read_text`` and ``read_json`` never block on a FIFO, never read a device
or a huge file into memory, and say in one line what a file in another encoding or nested
without end is, where the standard library raises a traceback or exhausts memory.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from pathlib import Path
from typing import Any

from env.common.errors import DataError

log = logging.getLogger(__name__)

RETRY_FOR_S = 5.0
RETRY_EVERY_S = 0.05


def replace(source: Path, target: Path, retry_for_s: float = RETRY_FOR_S) -> None:
    """``os.replace(source, target)``, retried while another process holds either file."""
    deadline = time.monotonic() + retry_for_s
    while True:
        try:
            os.replace(source, target)
            return
        except PermissionError:
            if time.monotonic() > deadline:
                raise
            log.debug("%s is held by another process: retrying the rename", source)
            time.sleep(RETRY_EVERY_S)


class NotPlainFile(DataError):
    """A path that must be a plain file (or folder) of the project's and is something else: a
    FIFO, a device, a symbolic link out of its folder. The message names it and what to do."""


def plain_file_problem(path: Path) -> str | None:
    """Why ``path`` is not to be read as a recording's file, or None: it must be a regular file,
    or a symbolic link to one inside its own folder (a copy's folder of links is fine, a link out
    of it is not). Checked without opening it, so a FIFO never blocks."""
    try:
        if path.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(path.parent.resolve()):
                return f"a symbolic link out of its folder (to {target})"
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None  # said by whoever opens it, with what to do
    except (OSError, RuntimeError) as e:  # RuntimeError: a symbolic link loop
        return f"not readable ({getattr(e, 'strerror', None) or e})"
    if stat.S_ISFIFO(mode):
        return "a FIFO (a named pipe), not a file: reading it would wait for a writer forever"
    if not stat.S_ISREG(mode):
        return "a device or other special file, not a plain file"
    return None


class UnreadableFile(DataError):
    """A small file (a description, a config, a params file) that cannot be read as the text it
    should be: not a plain file, larger than any of its kind, not UTF-8, or JSON that is not.
    ``reason`` says which, for a caller to name the file and the fix in its own words."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


def regular_file_problem(path: Path) -> str | None:
    """Why ``path`` (followed through any symbolic link: DVC's cache may link a file in) is no
    regular file to read, or None; checked without opening it, so a FIFO never blocks."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "is missing"
    except (OSError, RuntimeError) as e:
        return f"is not readable ({getattr(e, 'strerror', None) or e})"
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (a named pipe), not a file: reading it would wait for a writer forever"
    if not stat.S_ISREG(mode):
        return "is a device or other special file, not a plain file"
    return None


def read_text(path: Path, limit: int) -> str:
    """``path``'s text: a regular file of at most ``limit`` bytes, in UTF-8 (a byte-order mark
    allowed). Never blocks on a FIFO, never reads past ``limit`` from a device or a file that
    grows, and raises ``UnreadableFile`` saying which of these it was."""
    problem = regular_file_problem(path)
    if problem is not None:
        raise UnreadableFile(path, problem)
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise UnreadableFile(path, f"is not readable ({e.strerror or e})") from None
    if len(data) > limit:
        raise UnreadableFile(path, f"is larger than any file of its kind ({limit:,} bytes at most)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise UnreadableFile(
            path,
            f"is not UTF-8 text: byte 0x{data[e.start]:02x} on line {line} (the file was saved in another "
            'encoding, such as Windows Notepad\'s "ANSI"): save it as UTF-8',
        ) from None


MAX_JSON_DEPTH = 64
"""The deepest nesting a JSON file of this project has is a handful of levels."""


def read_json(path: Path, limit: int) -> Any:
    """``path``'s JSON (``read_text``), nested at most ``MAX_JSON_DEPTH`` deep; numbers as Python
    reads them within its limits. ``UnreadableFile`` for anything else."""
    text = read_text(path, limit)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UnreadableFile(path, f"is not valid JSON ({e})") from None
    except RecursionError:
        raise UnreadableFile(path, "is JSON nested deeper than any file of its kind") from None
    except ValueError as e:  # an integer of thousands of digits
        raise UnreadableFile(path, f"holds a number no file of its kind holds ({str(e).split(';')[0]})") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise UnreadableFile(path, f"is JSON nested deeper than any file of its kind ({MAX_JSON_DEPTH} levels at most)")
    return value


def _depth(value: Any) -> int:
    """How deep ``value`` nests (a flat value is 0), walked without recursion."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            pending.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            pending.extend((v, depth + 1) for v in item)
    return deepest
