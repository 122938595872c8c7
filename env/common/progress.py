"""Progress for whatever takes more than a few seconds: tqdm's bar where a terminal shows it,
and where none does (a log file, CI, a run under ``nohup``) the same bar as a log line now and
then, so that a long evaluation or fine-tuning run is never silent."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm

log = logging.getLogger(__name__)

LOG_EVERY_S = 60.0
"""Off a terminal, the seconds between two log lines of one bar."""


class _LogLines:
    """The file a bar off the terminal draws on: each bar it draws becomes one log line."""

    def write(self, text: str) -> None:
        line = text.strip()
        if line:
            log.info("%s", line)

    def flush(self) -> None:
        pass


def progress(
    iterable: Iterable | None = None, *, shown: bool = True, every_s: float = LOG_EVERY_S, **options: Any
) -> tqdm:
    """``tqdm(iterable, **options)`` on a terminal (stderr); elsewhere the same counts logged every
    ``every_s`` seconds, at the start and at the end. ``shown`` False: neither (a caller whose
    parent shows the progress)."""
    if not shown:
        return tqdm(iterable, disable=True, **options)
    if sys.stderr.isatty():
        return tqdm(iterable, **options)
    # miniters 1: the clock is looked at every step, so tqdm's monitor thread never redraws the
    # bar, which over an iterable holds the count it last drew and would log it again.
    # position 0: a log has no rows, and a bar tqdm placed below another open one would draw the
    # cursor moves that reach its row as lines of their own
    return tqdm(iterable, file=_LogLines(), mininterval=every_s, miniters=1, ascii=True, position=0, **options)
