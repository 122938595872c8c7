"""The flags several benchmarks share, each a settings field declared once (``env.common.cli``),
and the rule of the game speeds they take: a benchmark adds them with ``add_flags`` beside its
own, so ``--json`` or ``--fights`` means the same and defaults the same in every benchmark that
takes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from env.common.cli import flag
from env.common.fields import FIGHTS, SEED, check_fields, checked, number
from env.config import MAX_GAME_SPEED

from elden_il.params import FIRST_HELD_OUT_SEED

GAME_SPEED = number(1, MAX_GAME_SPEED)
"""A game speed a benchmark may ask for: what an env takes (``EnvConfig.game_speed``, and so
fine-tuning's and the evaluation's ``game_speed``)."""


@dataclass(frozen=True)
class JsonOut:
    """Where a benchmark also writes what it measured, for a later comparison (the table it
    prints is for reading)."""

    json: Path | None = field(default=None, metadata=flag("also write the results here", type=Path))


@dataclass(frozen=True)
class HeldOutFights:
    """The held-out fights a policy plays, as the evaluate stage plays them: fights from seeds no
    recording or training used, so that a benchmark's win rate is comparable with the pipeline's."""

    fights: int = checked(100, FIGHTS, "held-out fights per policy")
    first_seed: int = checked(
        FIRST_HELD_OUT_SEED, SEED, "seed of the first fight (held out: the pipeline's evaluation seeds)"
    )

    def __post_init__(self) -> None:
        check_fields(self)
