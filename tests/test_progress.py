"""Progress off a terminal: the bar a terminal would draw, as log lines."""

from __future__ import annotations

import logging

import pytest

from env.common.progress import progress

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds


def test_off_a_terminal_a_bar_is_logged_from_its_start_to_its_end(caplog):
    with caplog.at_level(logging.INFO, logger="env.common.progress"):
        for _ in progress(range(3), desc="evaluation", unit="fight", every_s=0):
            pass
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0].startswith("evaluation:   0%") and lines[-1].startswith("evaluation: 100%")
    assert all("\r" not in line for line in lines) and "3/3" in lines[-1]


def test_a_bar_its_caller_hides_is_silent_everywhere(caplog):
    with caplog.at_level(logging.INFO, logger="env.common.progress"):
        assert list(progress(range(3), shown=False, desc="fine-tuning", every_s=0)) == [0, 1, 2]
    assert not caplog.records


def test_off_a_terminal_a_slow_bar_never_logs_a_count_it_already_logged(caplog, monkeypatch):
    """tqdm's monitor thread redraws a bar that has not drawn for ``maxinterval`` seconds; a bar
    over an iterable counts its steps only when it draws, so the redraw repeated the last count
    with a later time (fine-tuning's log had every line twice, twenty seconds apart)."""
    import time

    from tqdm import tqdm

    if tqdm.monitor is not None:  # started by an earlier bar with tqdm's own 10 s interval
        tqdm.monitor.exit()
        tqdm.monitor = None
    monkeypatch.setattr(tqdm, "monitor_interval", 0.05)
    with caplog.at_level(logging.INFO, logger="env.common.progress"):
        for _ in progress(range(12), desc="fine-tuning", every_s=0.3, maxinterval=0.1):
            time.sleep(0.05)
    counts = [record.getMessage().split("|")[2].split()[0] for record in caplog.records]
    drawn = counts[:-1]  # the last line is the bar's close, which draws its end once more
    assert len(drawn) >= 3 and len(set(drawn)) == len(drawn) and counts[-1] == "12/12", counts


def test_off_a_terminal_a_bar_beside_another_open_bar_logs_only_its_counts(caplog):
    """tqdm places a second bar of a process one row down and draws cursor moves around it; a log
    line has no rows, and those moves came out as lines of their own ("[A")."""
    from tqdm import tqdm

    with tqdm(total=1, disable=False, file=_Discard()), caplog.at_level(logging.INFO, logger="env.common.progress"):
        for _ in progress(range(3), desc="evaluation", unit="fight", every_s=0):
            pass
    lines = [record.getMessage() for record in caplog.records]
    assert lines and all(line.startswith("evaluation:") for line in lines), lines


class _Discard:
    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass
