"""Small argparse helpers the project's command lines share."""

from __future__ import annotations

import argparse

from env.observations import check_frame_size
from env.siphon_config import ConfigError


def parse_size(text: str) -> tuple[int, int]:
    """``"1280x720"`` -> ``(1280, 720)``, or an argparse error that shows the expected form."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 84x84 or 1280x720 (WIDTHxHEIGHT), got {text!r}") from None
    try:
        check_frame_size((width, height))
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return width, height
