"""The teacher's row: who recorded a dataset's fights and how often they won, beside the
policies cloned from them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import h5py
import pytest
from conftest import judged

from env.config import EnvConfig

from capture.episode import list_episodes
from capture.episode_format import EpisodeError

from elden_il.evaluation.teacher import teacher_record, warn_if_far_below
from elden_il.evaluation.win_rate import wilson_interval
from elden_il.pipeline import markdown_summary

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short fights the autopilot recorded in-process, both cut by the time limit."""
    from capture.record import RecordSettings, record

    root = tmp_path_factory.mktemp("teacher")
    config = EnvConfig(frame_size=(64, 64))
    record(RecordSettings(env=config, backend="sim", autopilot=True, max_episodes=2, max_episode_seconds=3, out=root))
    return root


def names(folder: Path) -> list[str]:
    return [path.name for path in list_episodes(folder)]


def test_the_autopilots_fights_are_its_players_and_a_fight_cut_short_is_not_won(recorded: Path):
    teacher = teacher_record(recorded, names(recorded), "expert")
    assert teacher == {
        "who": "the scripted expert",
        "fights": 2,
        "win_rate": 0.0,
        "win_rate_ci95": list(wilson_interval(0, 2)),
    }
    assert teacher_record(recorded, names(recorded), "person")["who"] == "the person-like player"


def test_your_own_fights_make_you_the_teacher_at_the_share_you_won(recorded: Path, tmp_path: Path):
    for i, path in enumerate(list_episodes(recorded)):
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        with h5py.File(copy, "r+") as f:
            f.attrs["source"], f.attrs["outcome"] = "human", ("win" if i == 0 else "death")
    teacher = teacher_record(tmp_path, names(tmp_path), None)
    assert teacher == {"who": "you", "fights": 2, "win_rate": 0.5, "win_rate_ci95": list(wilson_interval(1, 2))}

    (tmp_path / "broken_human.h5").write_bytes(b"not an episode")
    with pytest.raises(EpisodeError, match="broken_human.h5 is not a readable episode file"):
        teacher_record(tmp_path, ["broken_human.h5"], None)


def test_the_results_table_shows_the_teacher_below_the_evaluations_policies(tmp_path: Path):
    result = judged(0.3)
    teacher = {"who": "you", "fights": 20, "win_rate": 0.35, "win_rate_ci95": list(wilson_interval(7, 20))}
    report = tmp_path / "eval.json"
    report.write_text(json.dumps({"backend": "sim", "fights": 10, "policies": {"bc": result}, "teacher": teacher}))
    table = markdown_summary(report).splitlines()
    assert table[-2].startswith("| behaviour cloning | 30% |")
    assert table[-1] == "| teacher: you, 20 recorded fights | 35% | 18%-57% |  |  |  |"


def test_behaviour_cloning_far_below_its_teacher_is_said(caplog):
    teacher = {"who": "you", "fights": 20, "win_rate": 0.35, "win_rate_ci95": [0.18, 0.57]}
    with caplog.at_level(logging.WARNING, logger="elden_il.evaluation.teacher"):
        warn_if_far_below({"win_rate": 0.2}, teacher)
        assert not caplog.records  # over half the teacher's rate
        warn_if_far_below({"win_rate": 0.0}, teacher)
    assert "behaviour cloning wins 0 % of the held-out fights, its teacher (you) 35 % of the 20 recorded" in caplog.text
    assert "bc.runs: 3" in caplog.text
