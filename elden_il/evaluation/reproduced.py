"""Whether a pipeline run reproduced the committed one: the same bytes, a changed CPU, or a
changed result.

The demonstrations and the dataset are the same bytes on every machine; behaviour cloning and
every stage after it are the same bytes only on a CPU whose kernels sum in the same order
(``elden_il.policies.cpu_kernels``). So after ``dvc repro`` on a second machine ``git status``
shows ``dvc.lock`` and the reports modified, and that alone cannot say whether the results moved.
This compares the run in the working tree with the one committed at a git revision: the policies'
digests in ``dvc.lock``, the kernels each training stage recorded, and every policy's win rate
against the committed run's 95 % interval.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from env.common.errors import DataError, SetupError

LOCK = Path("dvc.lock")
TRAINED = {"bc": Path("datasets/models/bc"), "finetune": Path("datasets/models/finetuned")}
"""Each training stage and the policy it writes (an output in ``dvc.lock``)."""
REPORTS = Path("datasets/reports")


@dataclass(frozen=True)
class RateCompared:
    """One policy's win rate in this run against the committed run's rate and interval."""

    policy: str
    rate: float
    committed_rate: float
    committed_interval: tuple[float, float]

    @property
    def within(self) -> bool:
        low, high = self.committed_interval
        return low <= self.rate <= high

    def __str__(self) -> str:
        low, high = self.committed_interval
        return f"{self.policy} {self.rate:.0%} (committed {self.committed_rate:.0%}, {low:.0%}-{high:.0%})"


@dataclass(frozen=True)
class Comparison:
    """What differs between the committed run and this one."""

    revision: str
    changed_policies: tuple[str, ...]
    """The training stages whose policy is not the committed bytes."""
    kernels: dict[str, tuple[str | None, str | None]]
    """Each training stage's kernels: (committed, this run); None where its report does not say."""
    rates: tuple[RateCompared, ...]

    @property
    def same_bytes(self) -> bool:
        return not self.changed_policies

    @property
    def unrecorded(self) -> bool:
        """Whether a policy that changed lacks the kernels of either run (a run from before the record)."""
        return any(None in self.kernels[stage] for stage in self.changed_policies)

    @property
    def other_kernels(self) -> bool:
        """Whether a policy that changed was trained on other kernels than the committed one."""
        return any(
            None not in self.kernels[stage] and self.kernels[stage][0] != self.kernels[stage][1]
            for stage in self.changed_policies
        )

    @property
    def outside(self) -> tuple[RateCompared, ...]:
        return tuple(rate for rate in self.rates if not rate.within)

    @property
    def reproduced(self) -> bool:
        """The same bytes, or only a changed CPU: other kernels, every rate within its interval."""
        return self.same_bytes or (self.other_kernels and not self.outside)

    def verdict(self) -> str:
        rates = "; ".join(str(rate) for rate in self.rates)
        if self.same_bytes:
            return f"the same results as {self.revision}, byte for byte: every policy is the committed one ({rates})"
        changed = ", ".join(str(TRAINED[stage]) for stage in self.changed_policies)
        kernels = "; ".join(
            f"{stage}: {ours or 'not recorded'} here, {theirs or 'not recorded'} in {self.revision}"
            for stage, (theirs, ours) in self.kernels.items()
            if stage in self.changed_policies
        )
        if self.reproduced:
            return (
                f"a changed CPU, not a changed result: {changed} differ from {self.revision}'s because this machine's "
                f"kernels sum in another order ({kernels}), and every policy's win rate lies within the committed "
                f"run's 95 % interval ({rates})"
            )
        why = []
        if self.unrecorded:
            why.append(
                f"{changed} differ from {self.revision}'s, and a run does not record which kernels trained it "
                f"({kernels}): a changed CPU cannot be told from a changed result"
            )
        elif not self.other_kernels:
            why.append(
                f"{changed} differ from {self.revision}'s on the same kernels ({kernels}): the code, the data or "
                "params.yaml changed"
            )
        if self.outside:
            why.append(
                "win rates outside the committed run's 95 % interval: "
                + "; ".join(str(rate) for rate in self.outside)
                + " (a run on another CPU falls outside now and then: rerun with more evaluate.fights to tell)"
            )
        else:
            why.append(f"every policy's win rate lies within the committed run's 95 % interval ({rates})")
        return "a changed result: " + "; and ".join(why)


def compare(revision: str = "HEAD", root: Path = Path(".")) -> Comparison:
    """The pipeline run in ``root``'s working tree against the one committed at ``revision``."""
    committed_lock, lock = yaml.safe_load(_committed(LOCK, revision, root)), _read_yaml(root / LOCK)
    changed = tuple(
        stage for stage, out in TRAINED.items() if _digest(committed_lock, stage, out) != _digest(lock, stage, out)
    )
    kernels = {
        stage: (
            json.loads(_committed(REPORTS / f"{stage}.json", revision, root)).get("cpu_kernels"),
            _read_json(root / REPORTS / f"{stage}.json").get("cpu_kernels"),
        )
        for stage in TRAINED
    }
    committed_eval = json.loads(_committed(REPORTS / "eval.json", revision, root))["policies"]
    evaluation = _read_json(root / REPORTS / "eval.json")["policies"]
    rates = tuple(
        RateCompared(name, evaluation[name]["win_rate"], theirs["win_rate"], tuple(theirs["win_rate_ci95"]))
        for name, theirs in committed_eval.items()
        if name in evaluation
    )
    return Comparison(revision, changed, kernels, rates)


def _committed(path: Path, revision: str, root: Path) -> str:
    """``path`` as committed at ``revision`` (``git show``)."""
    try:
        shown = subprocess.run(
            ["git", "show", f"{revision}:{path.as_posix()}"], cwd=root, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise SetupError("git is not installed: compare reads the committed run with `git show`") from None
    if shown.returncode:
        raise DataError(
            f"cannot read {path} as committed at {revision!r} ({shown.stderr.strip()}): compare a git checkout's "
            "run against a revision that holds a pipeline run (--against)"
        )
    return shown.stdout


def _read_yaml(path: Path) -> Any:
    return yaml.safe_load(_read(path))


def _read_json(path: Path) -> dict:
    return json.loads(_read(path))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise DataError(f"{path} is missing: run the pipeline first (`dvc repro`)") from None


def _digest(lock: dict, stage: str, out: Path) -> str | None:
    for entry in lock.get("stages", {}).get(stage, {}).get("outs", []):
        if entry.get("path") == out.as_posix():
            return entry.get("md5")
    return None
