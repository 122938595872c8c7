"""The README's results table is the pipeline's own output, not a copy that drifts."""

from __future__ import annotations

from pathlib import Path

from elden_il.pipeline import markdown_summary

ROOT = Path(__file__).parents[1]


def test_the_readmes_results_table_is_the_last_evaluations():
    table = markdown_summary(ROOT / "datasets/reports/eval.json")
    assert table in (ROOT / "README.md").read_text(), (
        "README.md's results table differs from datasets/reports/eval.json: paste the output of "
        "`python -m elden_il.pipeline summary --markdown` into its Results section\n" + table
    )
