"""Publishing files on Windows too: a rename that waits out another process's brief hold.

On Windows, replacing or renaming a file that another process has just opened (an antivirus
scanner, the search indexer, a backup tool: they open every new file for a moment) fails with a
PermissionError until that process lets go. A recorder that gave up there would leave a finished
episode unpublished, so publishing retries for a few seconds before it reports the error.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

RETRY_FOR_S = 5.0
RETRY_EVERY_S = 0.05


def replace(source: Path, target: Path, retry_for_s: float = RETRY_FOR_S) -> None:
    """``os.replace(source, target)``, retried while another process holds either file."""
    deadline = time.monotonic() + retry_for_s
    while True:
        try:
            os.replace(source, target)
            return
        except PermissionError:
            if time.monotonic() > deadline:
                raise
            log.debug("%s is held by another process: retrying the rename", source)
            time.sleep(RETRY_EVERY_S)
