"""The README's results table is the pipeline's own output, not a copy that drifts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import committed, judged

from env.common.errors import EldenILError

from elden_il.pipeline import main, markdown_summary

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

ROOT = Path(__file__).parents[1]
EXPERIMENTS = {"128x128 frames": Path("datasets/studies/frame_size_128/eval.json")}
"""The experiments the README's table shows beside the pipeline's run: a label and the
``eval.json`` its ``dvc exp run`` wrote, kept in git."""


REPORT = Path("datasets/reports/eval.json")
"""The pipeline's evaluation, kept in git."""
LIVE: Path | None = None
"""The last ``evaluate_live`` report of the same policies over the live path, kept in git, where
the README shows it beside them: None while the evaluation's policies have not been played live
(the summary refuses live columns of others)."""
LIVE_STUDY = (Path("datasets/studies/live_path/in_process.json"), Path("datasets/studies/live_path/eval.json"))
"""The policies last played over the live path: their in-process evaluation (the pipeline's
``eval.json`` of the run they came from) and their ``evaluate_live`` report, kept together in git;
the README shows them as one table, in-process and live side by side."""


def committed_copy(relative: Path, folder: Path) -> Path:
    """The committed evaluation at ``relative``, copied under ``folder``."""
    copy = folder / relative
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(committed(str(relative)))
    return copy


def test_the_readmes_results_table_is_the_last_evaluations(tmp_path: Path):
    """The README's table is the project's evaluations as git holds them: a user's own run
    (``dvc repro`` on their recordings) rewrites ``eval.json`` in the work tree, and this test
    still checks the project's."""
    experiments = {k: committed_copy(v, tmp_path) for k, v in EXPERIMENTS.items()}
    live = committed_copy(LIVE, tmp_path) if LIVE else None
    table = markdown_summary(committed_copy(REPORT, tmp_path), experiments, live)
    command = (
        "python -m elden_il.pipeline summary --markdown "
        + " ".join(f"--experiment '{label}={path}'" for label, path in EXPERIMENTS.items())
        + (f" --live {LIVE}" if LIVE else "")
    )
    assert table in (ROOT / "README.md").read_text(), (
        f"README.md's results table differs from the evaluations git holds: paste the output of `{command}` "
        f"into its Results section, and `git add` the evaluations with it ({REPORT}{f', {LIVE}' if LIVE else ''})\n"
        + table
    )


def test_the_readmes_live_table_is_the_live_studys_policies_in_process_and_live(tmp_path: Path):
    in_process, live = (committed_copy(path, tmp_path) for path in LIVE_STUDY)
    table = markdown_summary(in_process, live=live)
    assert table in (ROOT / "README.md").read_text(), (
        "README.md's live table differs from the live study git holds: paste the output of `python -m "
        f"elden_il.pipeline summary --markdown --report {LIVE_STUDY[0]} --live {LIVE_STUDY[1]}`\n" + table
    )


BOSS_REPORTS = {boss: Path(f"datasets/studies/bosses/{boss}/eval.json") for boss in ("godrick", "tree_sentinel")}
"""Each other boss's run of the default recipe (``dvc repro`` with ``demos.boss`` its key): its
``datasets/reports/eval.json``, kept in git, whose table the README shows under the boss's name."""


@pytest.mark.parametrize("boss", sorted(BOSS_REPORTS))
def test_the_readmes_table_per_boss_is_that_bosss_evaluation(tmp_path: Path, boss: str):
    table = markdown_summary(committed_copy(BOSS_REPORTS[boss], tmp_path))
    assert table in (ROOT / "README.md").read_text(), (
        f"README.md's table for {boss} differs from its evaluation: paste the output of `python -m "
        f"elden_il.pipeline summary --markdown --report {BOSS_REPORTS[boss]}` under its name\n" + table
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


RESULT = judged(0.9)


def test_the_fine_tuned_row_says_how_it_was_made_and_stands_beside_live_results_of_that_policy_alone(tmp_path: Path):
    one_env = {"method": "awac", "env_steps": 26_000, "envs": 1}
    report = tmp_path / "eval.json"
    report.write_text(
        json.dumps({"backend": "sim", "fights": 10, "policies": {"finetuned": RESULT}, "finetuned_by": one_env})
    )
    older = tmp_path / "older.json"  # an experiment evaluated before the method was recorded
    older.write_text(json.dumps({"backend": "sim", "fights": 10, "policies": {"finetuned": RESULT}}))
    rows = markdown_summary(report, {"128x128 frames": older}).splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| fine-tuned (AWAC, 26,000 steps of 1 env)",
        "| fine-tuned, 128x128 frames",
    ]
    with pytest.raises(EldenILError, match=r"judged a fine-tuned policy made otherwise \(not recorded\)"):
        markdown_summary(report, live=older)  # the live columns of other policies than the row's

    ppo = {"method": "ppo", "env_steps": 122_880, "envs": 8}
    report.write_text(
        json.dumps({"backend": "sim", "fights": 10, "policies": {"finetuned": RESULT}, "finetuned_by": ppo})
    )
    assert "| fine-tuned (PPO + KL to BC, 122,880 steps of 8 envs) | 90% |" in markdown_summary(report)

    report.write_text(
        json.dumps(
            {"backend": "sim", "fights": 10, "policies": {"finetuned": RESULT}, "finetuned_by": {"method": "sac"}}
        )
    )
    with pytest.raises(EldenILError, match="a finetuned_by without method, env_steps, envs"):
        markdown_summary(report)


def test_an_evaluation_records_how_its_policy_was_fine_tuned_only_where_the_stage_said(tmp_path: Path):
    from elden_il.pipeline import Workspace, fine_tuning

    ws = Workspace(tmp_path)
    assert fine_tuning(ws) == {}  # no finetune stage ran here (a study's policies from elsewhere)
    report = ws.report("finetune")[0]
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"timesteps": 64, "episodes": 1}))  # a report from before it said how
    assert fine_tuning(ws) == {}
    report.write_text(json.dumps({"method": "awac", "timesteps": 64, "env_steps": 64, "envs": 1}))
    assert fine_tuning(ws) == {"finetuned_by": {"method": "awac", "env_steps": 64, "envs": 1}}
