"""A Siphon-compatible Margit-like duel that stands in for Elden Ring wherever the game is not.

``World`` is the deterministic 60 Hz game, ``render`` draws it, ``SimGame`` plays it in-process
lock-step, and ``python -m env.sim`` serves it over Siphon's gRPC service in real time.
"""

TICK_HZ = 60
"""The world advances in fixed ticks of 1/60 s, like the game's frames."""


def seconds_to_ticks(seconds: float) -> int:
    return round(seconds * TICK_HZ)
