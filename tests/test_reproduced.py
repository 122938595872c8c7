"""Telling a changed CPU from a changed result: a pipeline run in a git checkout against the run
committed there (``python -m elden_il.pipeline compare``), on real git repositories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from env.common.errors import DataError

from elden_il.evaluation.reproduced import compare

pytestmark = pytest.mark.quick

COMMITTED_KERNELS = "AVX512 on AuthenticAMD"
RATES = {"random": (0.0, (0.0, 0.04)), "bc": (0.59, (0.49, 0.68)), "finetuned": (0.98, (0.93, 0.99))}


def write_run(root: Path, digests: dict[str, str], kernels: str, rates: dict[str, float]) -> None:
    """A pipeline run's files as ``dvc repro`` leaves them: the policies' digests in dvc.lock,
    the training stages' reports with their kernels, and the evaluation."""
    lock = {
        "schema": "2.0",
        "stages": {
            "bc": {"outs": [{"path": "datasets/models/bc", "md5": digests["bc"] + ".dir"}]},
            "finetune": {"outs": [{"path": "datasets/models/finetuned", "md5": digests["finetune"] + ".dir"}]},
        },
    }
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))
    reports = root / "datasets" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    for stage in ("bc", "finetune"):
        (reports / f"{stage}.json").write_text(json.dumps({"episodes": 40, "cpu_kernels": kernels}))
    policies = {
        name: {"fights": 100, "win_rate": rates.get(name, rate), "win_rate_ci95": list(interval)}
        for name, (rate, interval) in RATES.items()
    }
    (reports / "eval.json").write_text(json.dumps({"backend": "sim", "fights": 100, "policies": policies}))


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout whose HEAD holds a pipeline run made on an AVX-512 AMD CPU."""
    git(tmp_path, "init", "-q")
    write_run(tmp_path, {"bc": "b0", "finetune": "f0"}, COMMITTED_KERNELS, {})
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a run")
    return tmp_path


def test_a_run_that_wrote_the_committed_policies_is_the_same_bytes(checkout: Path) -> None:
    comparison = compare(root=checkout)
    assert comparison.same_bytes and comparison.reproduced
    assert comparison.verdict().startswith("the same results as HEAD, byte for byte")


def test_other_kernels_with_every_rate_in_its_interval_is_a_changed_cpu(checkout: Path) -> None:
    write_run(checkout, {"bc": "b1", "finetune": "f1"}, "AVX2 on GenuineIntel", {"bc": 0.65, "finetuned": 0.95})
    comparison = compare(root=checkout)
    assert comparison.reproduced and not comparison.same_bytes
    verdict = comparison.verdict()
    assert verdict.startswith("a changed CPU, not a changed result")
    assert "AVX2 on GenuineIntel here, AVX512 on AuthenticAMD in HEAD" in verdict
    assert "bc 65% (committed 59%, 49%-68%)" in verdict


def test_other_policies_from_the_same_kernels_are_a_changed_result(checkout: Path) -> None:
    write_run(checkout, {"bc": "b0", "finetune": "f1"}, COMMITTED_KERNELS, {"finetuned": 0.96})
    comparison = compare(root=checkout)
    assert not comparison.reproduced
    assert comparison.changed_policies == ("finetune",)
    assert "datasets/models/finetuned differ from HEAD's on the same kernels" in comparison.verdict()


def test_a_rate_outside_the_committed_interval_is_a_changed_result_whatever_the_cpu(checkout: Path) -> None:
    write_run(checkout, {"bc": "b1", "finetune": "f1"}, "AVX2 on GenuineIntel", {"finetuned": 0.81})
    comparison = compare(root=checkout)
    assert not comparison.reproduced
    assert [rate.policy for rate in comparison.outside] == ["finetuned"]
    assert "outside the committed run's 95 % interval: finetuned 81% (committed 98%, 93%-99%)" in comparison.verdict()


def test_a_committed_run_that_names_no_kernels_cannot_vouch_for_a_changed_cpu(checkout: Path) -> None:
    for stage in ("bc", "finetune"):
        (checkout / "datasets" / "reports" / f"{stage}.json").write_text(json.dumps({"episodes": 40}))
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "reports of before")
    write_run(checkout, {"bc": "b1", "finetune": "f1"}, "AVX2 on GenuineIntel", {})
    comparison = compare(root=checkout)
    assert not comparison.reproduced
    assert "a changed CPU cannot be told from a changed result" in comparison.verdict()
    assert "bc: AVX2 on GenuineIntel here, not recorded in HEAD" in comparison.verdict()


def test_the_command_says_its_verdict_and_exits_by_it(checkout: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "elden_il.pipeline", "compare", *args]
        return subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=60)

    write_run(checkout, {"bc": "b1", "finetune": "f1"}, "AVX2 on GenuineIntel", {})
    reproduced = run()
    assert reproduced.returncode == 0, reproduced.stderr
    assert reproduced.stdout.startswith("a changed CPU, not a changed result")
    write_run(checkout, {"bc": "b1", "finetune": "f1"}, "AVX2 on GenuineIntel", {"bc": 0.2})
    changed = run()
    assert changed.returncode == 1 and changed.stdout.startswith("a changed result")
    missing = run("--against", "no-such-rev")
    assert missing.returncode == 2
    assert "cannot read dvc.lock as committed at 'no-such-rev'" in missing.stderr and "Traceback" not in missing.stderr


def test_a_checkout_with_no_run_says_to_run_the_pipeline(checkout: Path) -> None:
    (checkout / "datasets" / "reports" / "eval.json").unlink()
    with pytest.raises(DataError, match=r"eval.json is missing: run the pipeline first \(`dvc repro`\)"):
        compare(root=checkout)
