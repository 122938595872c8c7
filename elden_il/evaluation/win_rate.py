"""A win rate's 95 % interval, the one every table of this project gives beside a rate."""

from __future__ import annotations

import math


def wilson_interval(wins: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % confidence interval of a win rate (Wilson score: sane at 0 % and 100 %)."""
    if n == 0:
        return (0.0, 0.0)
    p = wins / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))
