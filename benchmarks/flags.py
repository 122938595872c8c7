"""The rule of the game speeds the live benchmarks take (their ``--json`` is
``env.common.cli.JsonOut``, their held-out fights ``elden_il.evaluation.fight_loop.HeldOutFights``)."""

from __future__ import annotations

from env.common.fields import number
from env.config import MAX_GAME_SPEED

GAME_SPEED = number(1, MAX_GAME_SPEED)
"""A game speed a benchmark may ask for: what an env takes (``EnvConfig.game_speed``, and so
fine-tuning's and the evaluation's ``game_speed``)."""
