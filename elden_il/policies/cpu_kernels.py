"""Which kernels torch computes a policy's floats with on this CPU.

Behaviour cloning and every stage after it write the same bytes run after run on one machine, but
not from one machine to another: torch, MKL and oneDNN pick their kernels by the CPU's vendor and
vector unit, and each kernel sums in its own order. Holding them to one instruction set on every
machine costs more than half as much time again (BENCHMARKS.md, the default pipeline's time), so
instead each training stage records the kernels it ran on, and a second machine's run can tell a
changed CPU from a changed result (``python -m elden_il.pipeline compare``).
"""

from __future__ import annotations

import torch

from env.common.machine import cpu_vendor


def cpu_kernels() -> str:
    """The vector unit torch's kernels use here (``ATEN_CPU_CAPABILITY`` included) and the CPU's
    vendor (MKL's kernels follow it): 'AVX512 on AuthenticAMD'."""
    return f"{torch.backends.cpu.get_cpu_capability()} on {cpu_vendor()}"
