"""Dataset ids that always name a folder inside the datasets root.

Minari turns an id into a path (``root/namespace/name-vN``), so an id like ``../../escape``
would build (and with ``--force`` delete) a folder outside the root. Ids are therefore held to
Minari's own form, ``namespace/name-vN``, with letters, digits, ``_`` and ``-`` only: no dots,
no absolute paths, nothing that can climb out of the root.
"""

from __future__ import annotations

import re
from typing import Any

from env.common.fields import Rule

_ID = re.compile(r"([A-Za-z0-9_-]{2,}(/[A-Za-z0-9_-]+)*/)?[A-Za-z0-9_-]+-v[0-9]+")
"""Minari's own form, less what it refuses after the build (a one-letter namespace: ``a/x-v0``)."""

DATASET_ID = Rule(
    lambda v: isinstance(v, str) and _ID.fullmatch(v) is not None,
    "must look like namespace/name-vN (letters, digits, _ and -, a namespace of two or more, e.g. eldenil/margit-v0)",
)


def check_dataset_id(value: Any) -> None:
    """Raise ``FieldError`` (an ``EldenILError``) unless ``value`` is a safe dataset id."""
    DATASET_ID.check("dataset id", value)
