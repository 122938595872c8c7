"""Checked config fields: each field declares the values it accepts, next to its default.

A config that takes any value trains ``batch_size: -1`` to ``nan`` and publishes the policy, or
reads ``max_steps: true`` as 1. So every knob says, where it is declared, what it accepts::

    @dataclass(frozen=True)
    class BCConfig:
        epochs: int = checked(10, whole(1))

        def __post_init__(self) -> None:
            check_fields(self)

``check_fields`` refuses a value outside its rule with a ``FieldError`` naming the field and the
allowed values; each edge (a params.yaml section, a command-line flag) prefixes where the value
came from, so the user reads one line such as ``params.yaml bc.epochs = 0: must be a whole
number, at least 1``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from env.common.errors import ConfigError

RULE = "rule"
"""The ``dataclasses.field`` metadata key holding a field's ``Rule``."""


class FieldError(ConfigError):
    """One config field with a value that cannot be used; ``field`` names it, so an edge that
    knows where the field came from (a params.yaml section) can say so."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        super().__init__(f"{field} = {value!r}: {allowed}")
        self.field = field


@dataclass(frozen=True)
class Rule:
    """What a field accepts: a predicate, and the same in words (``must be ...``)."""

    accepts: Callable[[Any], bool]
    allowed: str

    def check(self, name: str, value: Any) -> None:
        if not self.accepts(value):
            raise FieldError(name, value, self.allowed)


def is_int(value: Any) -> bool:
    """A whole number, and not a bool (YAML's ``true`` is not 1 step)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite int or float, and not a bool."""
    return (is_int(value) or isinstance(value, float)) and math.isfinite(value)


def whole(low: int, high: int | None = None) -> Rule:
    """A whole number from ``low`` (to ``high``)."""
    words = f"from {low} to {high}" if high is not None else f"at least {low}"
    return Rule(lambda v: is_int(v) and low <= v and (high is None or v <= high), f"must be a whole number {words}")


def number(low: float, high: float | None = None, *, above: bool = False, below: bool = False) -> Rule:
    """A finite number in a range; ``above``/``below`` exclude the bound itself (a learning rate
    of 0 learns nothing; a discount of 0 sees no future)."""
    if high is not None and not (above or below):
        words = f"from {low:g} to {high:g}"
    else:
        words = f"above {low:g}" if above else f"at least {low:g}"
        words += "" if high is None else f" and {'below' if below else 'at most'} {high:g}"

    def accepts(v: Any) -> bool:
        return (
            is_number(v) and (v > low if above else v >= low) and (high is None or (v < high if below else v <= high))
        )

    return Rule(accepts, f"must be a number {words}")


def one_of(*choices: Any) -> Rule:
    return Rule(lambda v: isinstance(v, str) and v in choices, f"must be one of {', '.join(map(str, choices))}")


FLAG = Rule(lambda v: isinstance(v, bool), "must be true or false")
MAX_FIGHTS = 100_000
"""The most fights one evaluation, duel or demonstration run may ask for: days of fights, and a
list of seeds that fits in memory (10^9 was built whole before anything was played: docs/faults.md)."""
MAX_SEED = 2**32 - 1
"""The largest seed: NumPy's and the simulator's seeds are 32-bit."""
FIGHTS = whole(1, MAX_FIGHTS)
SEED = whole(0, MAX_SEED)
TEXT = Rule(lambda v: isinstance(v, str) and bool(v.strip()), "must be a non-empty string")
STEP_MS = Rule(
    number(0, 60_000, above=True).accepts,
    "must be a number of milliseconds above 0 and at most 60000 (a recording is cut into steps that long)",
)
"""The timesteps a recording can be stepped at. The live env takes 0 (no pacing at all), but a
dataset's step grid and a player's decisions need a step of some length."""


def optional(rule: Rule) -> Rule:
    """``rule``, or null."""
    return Rule(lambda v: v is None or rule.accepts(v), f"{rule.allowed}, or null")


def checked(default: Any, rule: Rule, flag: str | None = None, **flag_options: Any) -> Any:
    """A dataclass field with ``default`` that accepts what ``rule`` accepts; with ``flag``, also a
    command-line flag with that help and argparse's ``flag_options`` (``env.common.cli.add_flags``), held
    to the same rule (a ``type`` given converts the text, and may hold it to a narrower one). A
    mapping's default is copied for each instance (dataclasses refuse a shared mutable default)."""
    metadata = {RULE: rule, **({"flag": {"help": flag, **flag_options}} if flag else {})}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def check_fields(instance: Any) -> None:
    """Apply every declared rule of a dataclass instance; raises ``FieldError`` for the first
    field that breaks its rule."""
    for f in fields(instance):
        rule = f.metadata.get(RULE)
        if rule is not None:
            rule.check(f.name, getattr(instance, f.name))
