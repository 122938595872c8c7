"""Which code built a dataset: a ``code_permalink`` pinned to the git commit.

A dataset's Minari ``code_permalink`` should lead to the exact code that built it, so that the
preprocessing (crop, resize, step grid, labels) can be read and rerun. In a git checkout that is
the repository URL at ``HEAD``'s commit, marked when tracked files have uncommitted changes (the
commit alone then does not say what built it); outside one (an installed wheel, a tarball) it is
the repository URL alone.
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

REPOSITORY = "https://github.com/elden-il/elden-il"
CHECKOUT = Path(__file__).resolve().parent.parent


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
    """The commit ``checkout`` is at and whether its tracked files are changed; no commit when
    it is not a git checkout or git is missing."""
    try:
        commit = _git(checkout, "rev-parse", "HEAD")
        dirty = bool(_git(checkout, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        log.debug("%s is not a git checkout: the permalink has no commit", checkout)
        return Provenance(None, False)
    return Provenance(commit, dirty)


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(checkout), *args], check=True, capture_output=True, text=True,
                          timeout=30).stdout.strip()
