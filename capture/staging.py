"""Rebuild a Minari dataset without ever being left with none.

``build_dataset --force`` (and the pipeline's ``dataset`` stage, which always forces) used to
delete the old dataset first, so a rebuild that failed half-way (a corrupt episode, a full disk)
left no dataset at all. Instead the new one is built with Minari's own writer into a hidden
staging root inside the datasets root (hidden folders are not datasets to Minari; the same
filesystem, so moving is a rename), and swapped in only once it is complete: the old one is
renamed aside, the new one renamed in, the old one deleted. A failure before the swap leaves the
old dataset exactly as it was; a crash between the two renames leaves it in the staging folder,
``ROOT/.building-*/replaced``. ``staged_folder`` does the same for any one folder (a policy's).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from capture import files

log = logging.getLogger(__name__)

NAMESPACE_METADATA = "namespace_metadata.json"  # minari.namespace's file name


@contextmanager
def staged(root: Path, dataset_id: str) -> Iterator[Path]:
    """Point Minari at a fresh staging root for the ``with`` body, which builds ``dataset_id``
    there; on a clean exit it replaces ``root / dataset_id``. The staging root is removed either
    way."""
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        os.environ["MINARI_DATASETS_PATH"] = str(staging)
        try:
            yield staging
        finally:
            os.environ["MINARI_DATASETS_PATH"] = str(root)
        _copy_namespaces(staging, root)
        _swap(staging / dataset_id, root / dataset_id, staging / "replaced")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A fresh hidden sibling folder of ``target`` to write into for the ``with`` body; on a clean
    exit it replaces ``target`` whole. So a run stopped half-way (Ctrl-C, a crash) leaves the old
    folder as it was, or none, never a half-written one (a policy's env config without the
    policy). The staging folder is removed either way."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".building-{target.name}-", dir=target.parent))
    try:
        built = staging / target.name
        built.mkdir()
        yield built
        _swap(built, target, staging / "replaced")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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
    try:
        files.replace(built, target)
    except OSError:
        if aside.exists():
            files.replace(aside, target)  # put the old dataset back before reporting the failure
        raise
    log.debug("swapped in %s", target)
