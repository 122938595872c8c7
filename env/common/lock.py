"""An exclusive OS lock that marks an episode file as being recorded right now.

``capture.recover`` and the dataset builder look in the recorder's own folder by default, and
a ``.h5.partial`` file looks the same whether a crash left it behind or a running recorder is
still writing it. Recovering a live file published it truncated and pulled it from under the
recorder. So the recorder holds an exclusive OS lock from before it creates the partial until it
is published: the OS drops the lock when the process ends, however it ends, so a lock that can be
taken means nobody is writing that file. Only the lock held says "being recorded", never a
file's existence: a user cleaning up after a crash may delete any leftover file.

On POSIX the lock (``fcntl.flock``) is on the partial file itself: it is advisory, so HDF5 reads
and writes the file as usual (with HDF5's own file locking off, which would take the same
lock), and a live recording has no second file whose deletion would make it look abandoned. On
Windows locks are mandatory (one on the partial would stop HDF5 writing it), so the lock is
``msvcrt.locking`` on ``<partial>.lock`` beside it; Windows cannot delete a file another process
holds open, so that file lasts as long as the recording. HDF5's own file locking cannot serve
either way: a SWMR writer releases it so that readers can open the file, and it is often disabled.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LOCK_SUFFIX = ".lock"


@dataclass(frozen=True)
class LockScheme:
    """How this OS marks a file as being written: with its own lock on the file (POSIX: advisory),
    or with a lock on a separate file beside it (Windows: its locks are mandatory). ``try_lock``
    takes the lock on an open file descriptor, raising ``OSError`` when another process holds it."""

    separate_file: bool
    try_lock: Callable[[int], None]
    unlock: Callable[[int], None]


if sys.platform == "win32":
    import msvcrt

    def _unlock_byte(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)  # Windows may release a lock left to close() only later
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    # byte 0; raises OSError when another process holds it
    SCHEME = LockScheme(True, lambda fd: msvcrt.locking(fd, msvcrt.LK_NBLCK, 1), _unlock_byte)
else:
    import fcntl

    # flock raises BlockingIOError (an OSError) when held
    SCHEME = LockScheme(
        False, lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), lambda fd: fcntl.flock(fd, fcntl.LOCK_UN)
    )


def lock_path(path: Path, scheme: LockScheme = SCHEME) -> Path:
    """The file whose lock marks ``path`` as being written: ``path`` itself, or on Windows a lock
    file beside it."""
    return path.with_name(path.name + LOCK_SUFFIX) if scheme.separate_file else path


class FileLock:
    """An exclusive, non-blocking lock marking ``path`` as being written, held until ``release``."""

    def __init__(self, path: Path, scheme: LockScheme = SCHEME) -> None:
        self.scheme = scheme
        self.path = lock_path(path, scheme)
        self._fd: int | None = None

    def acquire(self, create: bool = False) -> bool:
        """Take the lock; False when another process holds it. ``create``: the writer, before it
        creates ``path``; anyone else locks a file that exists (``FileNotFoundError`` if it is
        gone: its recording finished, or was discarded, meanwhile)."""
        flags = os.O_RDWR | (os.O_CREAT if create or self.scheme.separate_file else 0)
        fd = os.open(self.path, flags, 0o644)
        try:
            self.scheme.try_lock(fd)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Drop the lock (and remove a separate lock file, closed first: Windows cannot remove an
        open file)."""
        if self._fd is None:
            return
        self.scheme.unlock(self._fd)
        os.close(self._fd)
        self._fd = None
        if self.scheme.separate_file:
            self.path.unlink(missing_ok=True)


def is_being_written(path: Path, scheme: LockScheme = SCHEME) -> bool:
    """Whether a live process holds ``path``'s lock (a file a crash left behind does not count)."""
    lock = FileLock(path, scheme)
    try:
        if not lock.acquire():
            return True
    except FileNotFoundError:
        return False
    lock.release()
    return False
