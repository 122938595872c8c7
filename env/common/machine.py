"""One description of the machine a benchmark or a study ran on, so every result in BENCHMARKS.md and elden_il/studies/STUDIES.md says it."""

from __future__ import annotations

import os
import platform
import sys


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def describe() -> str:
    return (
        f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {sys.version.split()[0]}"
    )
