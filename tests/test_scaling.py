"""The data-scaling study (``python -m elden_il.studies.scaling``): BC on the first N recorded fights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from env.config import EnvConfig

from capture.build_dataset import build_dataset
from capture.record import RecordSettings, record

from elden_il.data import DatasetError, demonstrations, open_dataset

ROOT = Path(__file__).parents[1]
CONFIG = EnvConfig(profile="sim_margit", action_history=2)


def test_the_first_episodes_are_exactly_those_episodes(tmp_path: Path):
    record(
        RecordSettings(
            env=CONFIG,
            backend="sim",
            autopilot=True,
            max_episodes=3,
            max_episode_seconds=6,
            seed=0,
            out=tmp_path / "raw",
        )
    )
    build_dataset(tmp_path / "raw", "test/three-v0", CONFIG, root=tmp_path / "minari")
    everything = demonstrations(open_dataset("test/three-v0", tmp_path / "minari"))
    two = everything.first_episodes(2)
    rows = np.flatnonzero(everything.episode < 2)
    assert len(two) == len(rows) < len(everything) and two.source_episodes == 2
    assert set(np.unique(two.episode)) == {0, 1}
    index = np.arange(len(two))
    for key, value in two.batch(index).items():  # stacks and histories rebuilt as from the whole
        np.testing.assert_array_equal(value, everything.batch(rows)[key])
    np.testing.assert_array_equal(two.rewards, everything.rewards[rows])
    with pytest.raises(DatasetError, match="record more fights"):
        everything.first_episodes(4)


@pytest.mark.slow
def test_the_scaling_study_runs_end_to_end(tmp_path: Path):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    # the study's rows, plot and table, not how well BC learns: one epoch, held-out fights cut at 60 steps
    params["bc"]["epochs"] = 1
    params["env"]["max_steps"] = 60
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "elden_il.studies.scaling",
            "--fights",
            "1",
            "2",
            "--seeds",
            "0",
            "1",
            "--eval-fights",
            "3",
            "--params",
            str(tmp_path / "params.yaml"),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert [r["fights"] for r in results["rows"]] == [1, 2]
    first, second = results["rows"]
    assert first["samples"] < second["samples"] and first["eval_fights"] == second["eval_fights"] == 6
    assert (
        len(first["win_rate_by_seed"]) == 2
        and 0 <= first["win_rate_ci95"][0] <= first["win_rate"] <= first["win_rate_ci95"][1]
    )
    assert (tmp_path / "scaling.png").stat().st_size > 10_000
    assert "| fights recorded |" in result.stdout and "| 2 |" in result.stdout
