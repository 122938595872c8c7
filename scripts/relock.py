"""``python scripts/relock.py``: bring dvc.lock up to date with a change of code that does not
change what the learning stages write (a module moved or renamed, an import, a docstring), in
minutes instead of a whole ``dvc repro``.

The stages whose bytes every machine writes alike (``demos``, ``dataset``) are run again, as
``.ci/run`` runs them in a clean clone: their outputs and the dataset's code digest are what the
committed code writes. The stages after them (``bc``, ``finetune``, ``evaluate``) write floats
that differ between CPUs, so rerunning them here would write this machine's policies over the
committed ones; instead their code dependencies' hashes are taken afresh and their outputs kept
as locked, and their dependency on an upstream output takes that output's locked hash.

Use it only where the change keeps what those stages write: run the pipeline with small params
before and after (tests/test_pipeline.py's TINY) and compare the policies' bytes. A stage whose
params changed is refused: a new setting is a new result, and ``dvc repro`` makes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
REPRODUCIBLE = ("dataset",)
"""Stages run again: their outputs are the same bytes on every machine (``dvc repro`` runs
``demos`` first where it is stale)."""
KEPT = ("bc", "finetune", "evaluate")
"""Stages whose outputs are kept as locked: only their dependencies' hashes are refreshed."""


def rerun(stages: tuple[str, ...]) -> None:
    """``dvc repro`` of ``stages`` (and what they need), with the project's own venv first on PATH."""
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(["dvc", "repro", *stages], cwd=CHECKOUT, env=env, check=True)


def relock_kept(names: tuple[str, ...]) -> list[str]:
    """Refresh the dependency hashes of ``names`` in dvc.lock, keeping their outputs' hashes; the
    names of the stages refused because a param they read changed."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    repo = Repo(str(CHECKOUT))
    produced = {out.def_path: out for stage in repo.index.stages for out in stage.outs}
    refused = []
    with repo.lock:
        for name in names:
            (stage,) = repo.stage.collect(name)
            if any(isinstance(dep, ParamsDependency) and dep.status() for dep in stage.deps):
                refused.append(name)
                continue
            for dep in stage.deps:
                upstream = produced.get(dep.def_path)
                if upstream is not None:
                    dep.hash_info, dep.meta = upstream.hash_info, upstream.meta
                else:
                    dep.save()
            stage.dump(update_pipeline=False)
    return refused


def main() -> int:
    from env.common.cli import command_parser

    command_parser("python scripts/relock.py", __doc__).parse_args()
    rerun(REPRODUCIBLE)
    refused = relock_kept(KEPT)
    if refused:
        print(
            f"error: params read by {', '.join(refused)} changed: their outputs are not what the lock says; "
            f"run `dvc repro {' '.join(refused)}` instead",
            file=sys.stderr,
        )
        return 2
    print("dvc.lock is up to date: commit it with datasets/reports/dataset.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
