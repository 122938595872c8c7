"""One description of the machine a benchmark or a study ran on, so every result in BENCHMARKS.md and elden_il/studies/STUDIES.md says it."""

from __future__ import annotations

import os
import platform
import sys


def _cpuinfo(field: str) -> str | None:
    """The first value of ``field`` in /proc/cpuinfo (Linux), or None."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or "unknown CPU"


def cpu_vendor() -> str:
    """'AuthenticAMD', 'GenuineIntel', ... (Linux), else the platform's processor name."""
    return _cpuinfo("vendor_id") or platform.processor() or "unknown vendor"


def describe() -> str:
    return (
        f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {sys.version.split()[0]}"
    )
