"""Torch on one intra-op thread while a loop works on one observation at a time.

A policy's decision and an off-policy learner's update are many small tensor operations. Spread
over threads they gain nothing, and on a machine that is busy anyway (a gaming PC runs the game;
a study runs beside other work) the threads wait on each other and on the cores, which makes
each operation several times slower than one thread is (BENCHMARKS.md, "Training cost and
the learner's throughput"; elden_il/studies/STUDIES.md, "Corrections or more demonstrations?").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch's intra-op threads set to one inside the block (or the call it decorates), and put back
    as they were after it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
