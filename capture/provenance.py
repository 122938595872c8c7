"""Which code built a dataset: the digest of that code, and, for people, the commit it is at.

A dataset must say which code built it, so that its preprocessing (crop, resize, step grid,
labels) can be read and rerun; and what the ``dataset`` stage writes must follow from what
``dvc.yaml`` says it depends on, and from nothing else, or a fresh clone's ``dvc repro`` writes
other bytes than the committed ``dvc.lock`` records. So the dataset carries ``code_digest()``:
SHA-256 over the path and bytes of each file that stage depends on, read from ``dvc.yaml``
itself (``stage_code``), where the list is declared once. It changes when, and only when, one of
those files does, and then DVC reruns the stage anyway; the same code gives the same digest in
any checkout, at any commit, on any machine.

The git commit the checkout is at, and whether that code differs from it (``provenance()``),
follow from git's history, not from those files: a commit that changes nothing the stage reads
would change them. They never enter the dataset; the pipeline writes them into its untracked run
report (``datasets/reports/dataset.run.json``), for people.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from env.common.errors import DataError

log = logging.getLogger(__name__)

REPOSITORY = "https://github.com/elden-il/elden-il"
CHECKOUT = Path(__file__).resolve().parent.parent
STAGE = "dataset"
"""The ``dvc.yaml`` stage that builds a dataset."""


def stage_code(checkout: Path = CHECKOUT) -> tuple[str, ...]:
    """What builds a dataset, relative to the checkout: the ``dataset`` stage's code dependencies
    as ``dvc.yaml`` declares them, its one list (every dependency outside ``datasets/``)."""
    pipeline = checkout / "dvc.yaml"
    try:
        stages = yaml.safe_load(pipeline.read_text())["stages"]
        deps = stages[STAGE]["deps"]
    except FileNotFoundError:
        raise DataError(
            f"{pipeline} is missing: a dataset carries the digest of the code dvc.yaml's {STAGE} stage names, "
            "so it is built from a checkout of the repository (`pip install -e .` in a clone)"
        ) from None
    except (yaml.YAMLError, KeyError, TypeError) as e:
        raise DataError(f"{pipeline} names no {STAGE} stage with deps ({e}): restore it from git") from None
    return tuple(dep for dep in deps if not dep.startswith("datasets/"))


IGNORED = "__pycache__"
"""Folders under ``stage_code`` that Python writes and nothing reads as code: left out of the digest,
as the project's ``.dvcignore`` leaves them out of DVC's hashes."""


def code_digest(checkout: Path = CHECKOUT) -> str:
    """``sha256:<hex>`` over each file of ``stage_code`` (the files of a folder, sorted), its path
    relative to ``checkout`` and its bytes: what a dataset built by that code carries."""
    digest = hashlib.sha256()
    for name in stage_code(checkout):
        path = checkout / name
        files = (
            sorted(p for p in path.rglob("*") if p.is_file() and IGNORED not in p.parts) if path.is_dir() else [path]
        )
        for file in files:
            relative = file.relative_to(checkout).as_posix().encode()
            content = file.read_bytes()
            digest.update(b"%d:%s%d:" % (len(relative), relative, len(content)))
            digest.update(content)
    return f"sha256:{digest.hexdigest()}"


@dataclass(frozen=True)
class Provenance:
    """Where the checkout is in git: for people reading a run's report, never for a dataset."""

    commit: str | None  # None outside a git checkout
    dirty: bool  # the code of stage_code differs from the commit

    @property
    def permalink(self) -> str:
        if self.commit is None:
            return REPOSITORY
        link = f"{REPOSITORY}/tree/{self.commit}"
        return f"{link} (plus uncommitted changes)" if self.dirty else link

    def to_dict(self) -> dict:
        return {"commit": self.commit, "dirty": self.dirty, "permalink": self.permalink}


def provenance(checkout: Path = CHECKOUT) -> Provenance:
    """The commit ``checkout`` is at and whether ``stage_code`` has uncommitted changes; no commit
    when it is not a git checkout or git is missing."""
    try:
        commit = _git(checkout, "rev-parse", "HEAD") or None
        dirty = bool(_git(checkout, "status", "--porcelain", "--untracked-files=no", "--", *stage_code(checkout)))
    except (OSError, subprocess.SubprocessError):
        log.debug("%s is not a git checkout: no commit", checkout)
        return Provenance(None, False)
    return Provenance(commit, dirty)


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout.strip()
