"""Which code built a dataset: a ``code_permalink`` pinned to the git commit.

A dataset's Minari ``code_permalink`` should lead to the exact code that built it, so that the
preprocessing (crop, resize, step grid, labels) can be read and rerun. In a git checkout that is
the repository URL at the newest commit that changed the code that builds datasets (``CODE``),
marked when that code has uncommitted changes (the commit alone then does not say what built
it); outside one (an installed wheel, a tarball) it is the repository URL alone.

That code's commit, not ``HEAD``'s: committing results (``dvc.lock``, reports) or changing
other code makes a new ``HEAD``, and a dataset rebuilt by unchanged code must stay
byte-identical, or every fresh ``dvc repro`` would retrain everything and leave the checkout
modified. ``CODE`` is exactly what the ``dataset`` stage of ``dvc.yaml`` depends on
(``tests/test_dvc.py`` holds them equal): when the permalink changes, DVC rebuilds anyway.
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

REPOSITORY = "https://github.com/elden-il/elden-il"
CHECKOUT = Path(__file__).resolve().parent.parent
CODE = (
    "elden_il/pipeline.py",
    "elden_il/params.py",
    "capture/build_dataset.py",
    "capture/labels.py",
    "capture/compression.py",
    "capture/provenance.py",
    "capture/episode.py",
    "capture/video.py",
    "capture/footage.py",
    "env/observations.py",
    "env/config.py",
    "env/fight.py",
    "env/actions.py",
    "env/rewards.py",
    "env/profiles",
)
"""What builds a dataset, relative to the checkout."""


@dataclass(frozen=True)
class Provenance:
    commit: str | None  # None outside a git checkout
    dirty: bool  # tracked files differ from the commit

    @property
    def permalink(self) -> str:
        if self.commit is None:
            return REPOSITORY
        link = f"{REPOSITORY}/tree/{self.commit}"
        return f"{link} (plus uncommitted changes)" if self.dirty else link

    def to_dict(self) -> dict:
        return {"commit": self.commit, "dirty": self.dirty, "permalink": self.permalink}


def provenance(checkout: Path = CHECKOUT) -> Provenance:
    """The newest commit that changed ``CODE`` in ``checkout`` and whether that code has
    uncommitted changes; no commit when it is not a git checkout or git is missing."""
    try:
        commit = _git(checkout, "log", "-1", "--format=%H", "--", *CODE) or None
        dirty = bool(_git(checkout, "status", "--porcelain", "--untracked-files=no", "--", *CODE))
    except (OSError, subprocess.SubprocessError):
        log.debug("%s is not a git checkout: the permalink has no commit", checkout)
        return Provenance(None, False)
    return Provenance(commit, dirty)


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout.strip()
