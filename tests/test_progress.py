"""Progress off a terminal: the bar a terminal would draw, as log lines."""

from __future__ import annotations

import logging

from env.common.progress import progress


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
