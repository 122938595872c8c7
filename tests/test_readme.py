"""The README's results table is the pipeline's own output, not a copy that drifts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from env.common.errors import EldenILError

from elden_il.pipeline import main, markdown_summary

ROOT = Path(__file__).parents[1]
EXPERIMENTS = {"128x128 frames": Path("datasets/studies/frame_size_128/eval.json")}
"""The experiments the README's table shows beside the pipeline's run: a label and the
``eval.json`` its ``dvc exp run`` wrote, kept in git."""


LIVE = Path("datasets/studies/live_path/eval.json")
"""The last ``evaluate_live`` report: the same policies over the live path, kept in git."""


def test_the_readmes_results_table_is_the_last_evaluations():
    experiments = {k: ROOT / v for k, v in EXPERIMENTS.items()}
    table = markdown_summary(ROOT / "datasets/reports/eval.json", experiments, ROOT / LIVE)
    command = (
        "python -m elden_il.pipeline summary --markdown "
        + " ".join(f"--experiment '{label}={path}'" for label, path in EXPERIMENTS.items())
        + f" --live {LIVE}"
    )
    assert table in (ROOT / "README.md").read_text(), (
        f"README.md's results table differs from the evaluations: paste the output of `{command}` "
        "into its Results section\n" + table
    )


def test_an_experiment_is_shown_only_beside_an_evaluation_of_the_same_fights(tmp_path: Path, capsys):
    report = json.loads((ROOT / "datasets/reports/eval.json").read_text())
    shorter = tmp_path / "eval.json"
    shorter.write_text(json.dumps({**report, "fights": 10}))
    with pytest.raises(EldenILError, match="one table compares evaluations of the same fights"):
        markdown_summary(ROOT / "datasets/reports/eval.json", {"10 fights": shorter})
    with pytest.raises(SystemExit):
        main(["summary", "--experiment", "no label"])
    assert "give a label and an eval.json" in capsys.readouterr().err
