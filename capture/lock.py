"""An exclusive OS lock that marks an episode file as being recorded right now.

``capture.recover`` and the dataset builder look in the recorder's own folder by default, and
a ``.h5.partial`` file looks the same whether a crash left it behind or a running recorder is
still writing it. Recovering a live file published it truncated and pulled it from under the
recorder. So the recorder holds an exclusive lock on ``<partial>.lock`` from before it creates
the partial until it is published: the OS drops the lock when the process ends, however it
ends, so a lock that can be taken means nobody is writing that file. ``fcntl.flock`` on POSIX,
``msvcrt.locking`` on Windows. HDF5's own file locking cannot serve: a SWMR writer releases it
so that readers can open the file, and it is often disabled.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LOCK_SUFFIX = ".lock"


def lock_path(path: Path) -> Path:
    """The lock file that marks ``path`` as being written."""
    return path.with_name(path.name + LOCK_SUFFIX)


if sys.platform == "win32":
    import msvcrt

    def _try_lock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # byte 0; raises OSError when another process holds it

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)  # Windows may release a lock left to close() only later
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError when held

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class FileLock:
    """An exclusive, non-blocking lock on ``lock_path(path)``, held until ``release``."""

    def __init__(self, path: Path) -> None:
        self.path = lock_path(path)
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; False when another process holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _try_lock(fd)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Drop the lock and remove its file (closed first: Windows cannot remove an open file)."""
        if self._fd is None:
            return
        _unlock(self._fd)
        os.close(self._fd)
        self._fd = None
        self.path.unlink(missing_ok=True)


def is_being_written(path: Path) -> bool:
    """Whether a live process holds ``path``'s lock (a stale lock file from a crash does not count)."""
    lock = FileLock(path)
    if not lock.acquire():
        return True
    lock.release()
    return False
