"""Files on disk: publishing them on Windows too, and reading only plain files.

A rename that waits out another process's brief hold: on Windows, replacing or renaming a file that another process has just opened (an antivirus
scanner, the search indexer, a backup tool: they open every new file for a moment) fails with a
PermissionError until that process lets go. A recorder that gave up there would leave a finished
episode unpublished, so publishing retries for a few seconds before it reports the error.

A file a recording is read from must be a plain file in its own folder: reading a FIFO waits
for a writer forever (a build hung on one named like a video), a device never ends, and a
symbolic link out of the folder reads whatever it points to. ``plain_file_problem`` says what
such a path is before anything opens it.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path

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
