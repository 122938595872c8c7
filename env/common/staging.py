"""Outputs built aside and swapped in whole, so nothing stopped half-way replaces what was there.

``build_dataset --force`` (and the pipeline's ``dataset`` stage, which always forces) used to
delete the old dataset first, so a rebuild that failed half-way (a corrupt episode, a full disk)
left no dataset at all; fine-tuning wrote straight into its policy folder (a kill mid-save left a
0-byte policy beside a new config), and the evaluation deleted the old recordings before it
made new ones. Instead every output is written into a hidden staging folder beside it (the same
filesystem, so moving is a rename) and swapped in only once it is complete: the old one renamed
aside, the new one renamed in, the old one deleted. A failure or an interrupt before the swap
leaves the old output exactly as it was.

The swap checks for an interrupt first (``env.common.interrupts.check``: one that a library swallowed
too), and holds signals back while it renames (``env.common.interrupts.deferred``), so Ctrl-C cannot
cut it in half. Only a crash or SIGKILL can leave a staging folder behind (``.building-*``): it
holds an OS lock while its run lives, so the next run writing beside it knows it is abandoned,
puts back an old output a crash left renamed aside in it, and removes it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from env.common import files, interrupts
from env.common.lock import FileLock

log = logging.getLogger(__name__)

NAMESPACE_METADATA = "namespace_metadata.json"  # minari.namespace's file name
PREFIX = ".building-"
"""Staging folders' names start so: hidden, and never a Minari dataset."""
MARKER = ".staging.json"
"""In each staging folder: the output it replaces; its OS lock is held while the run lives."""
ASIDE = "replaced"
"""In a staging folder: the old output, renamed aside during the swap."""


@contextmanager
def staged(root: Path, dataset_id: str) -> Iterator[Path]:
    """A fresh staging root for the ``with`` body, which builds ``dataset_id`` there; on a clean
    exit it replaces ``root / dataset_id``. The staging root is removed either way."""
    target = root / dataset_id
    with _staging(root, target, PREFIX) as staging:
        yield staging
        _copy_namespaces(staging, root)
        publish([(staging / dataset_id, target, staging / ASIDE)])


@contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A fresh empty folder to write ``target``'s new contents into for the ``with`` body; on a
    clean exit it replaces ``target`` whole. So a run stopped half-way (Ctrl-C, a crash) leaves
    the old folder as it was, or none, never a half-written one (a policy's env config without
    the policy)."""
    with staged_paths(target) as (built,):
        built.mkdir()
        yield built


@contextmanager
def staged_paths(*targets: Path) -> Iterator[tuple[Path, ...]]:
    """A path to build each of ``targets`` at (a file or a folder; nothing is made there) for the
    ``with`` body; on a clean exit each replaces its target, all in one go. A target the body
    built nothing for is removed: it belongs to an earlier run."""
    with ExitStack() as stack:
        stagings = [stack.enter_context(_staging(t.parent, t, f"{PREFIX}{t.name}-")) for t in targets]
        built = tuple(staging / target.name for staging, target in zip(stagings, targets))
        yield built
        publish([(b, t, s / ASIDE) for b, t, s in zip(built, targets, stagings)])


def publish(swaps: list[tuple[Path, Path, Path]]) -> None:
    """Each ``(built, target, aside)``: the old target renamed aside, the built one renamed in.
    Never after an interrupt (even one a library swallowed), and never cut in half by one."""
    interrupts.check()
    with interrupts.deferred():
        for built, target, aside in swaps:
            _swap(built, target, aside)


@contextmanager
def _staging(parent: Path, target: Path, prefix: str) -> Iterator[Path]:
    """A fresh staging folder in ``parent`` for ``target``, locked while the ``with`` body runs
    and removed afterwards; leftovers of runs that died are cleared first."""
    if target.is_symlink():
        raise files.NotPlainFile(
            f"{target} is a symbolic link (to {os.readlink(target)}): an output is replaced whole, and the link "
            "with it; remove the link (what it points to is left alone) or point the setting at that folder itself"
        )
    parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(parent)
    staging: Path | None = None
    lock: FileLock | None = None
    try:
        # made, locked and marked as one step: a signal landing between them would strand the folder
        with interrupts.deferred():
            staging = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
            lock = FileLock(staging / MARKER)
            lock.acquire(create=True)
            (staging / MARKER).write_text(json.dumps({"target": str(target.absolute())}))
        yield staging
    finally:
        with interrupts.deferred():  # a second Ctrl-C waits for the folder to be gone
            if lock is not None:
                lock.release()
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)


def remove_leftovers(parent: Path) -> None:
    """Remove the staging folders in ``parent`` that no live run holds (a crash or SIGKILL left
    them), first putting back an old output a crash between the swap's two renames left aside."""
    for staging in sorted(parent.glob(f"{PREFIX}*")):
        if not staging.is_dir() or staging.is_symlink():
            continue
        lock = FileLock(staging / MARKER)
        try:
            if not lock.acquire():
                continue  # a run writing there right now
        except FileNotFoundError:
            pass  # made before the marker existed, or its marker never written: nobody holds it
        try:
            _restore(staging)
            size = sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())
            shutil.rmtree(staging, ignore_errors=True)
            log.info("removed %s, %.1f MB an interrupted run left", staging, size / 1e6)
        finally:
            lock.release()


def _restore(staging: Path) -> None:
    """An old output left aside in ``staging`` goes back to its place if that place is empty."""
    aside = staging / ASIDE
    try:
        target = Path(json.loads((staging / MARKER).read_text())["target"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if aside.exists() and not target.exists():
        files.replace(aside, target)
        log.warning("put %s back from %s, where a run that died while swapping had left it", target, staging)


def _copy_namespaces(staging: Path, root: Path) -> None:
    """Minari describes each namespace in a file of its own; the new dataset's namespace may be
    new to the root."""
    for source in staging.rglob(NAMESPACE_METADATA):
        target = root / source.relative_to(staging)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _swap(built: Path, target: Path, aside: Path) -> None:
    if target.exists():
        files.replace(target, aside)
    if not built.exists():  # nothing made this time: the old output goes with its staging folder
        return
    try:
        files.replace(built, target)
    except OSError:
        if aside.exists():
            files.replace(aside, target)  # put the old dataset back before reporting the failure
        raise
    log.debug("swapped in %s", target)
