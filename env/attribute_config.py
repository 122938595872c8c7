"""Siphon's attribute config (TOML): which process and window, and each memory attribute's
pointer chain and type. The same file drives the real server and the simulator.

It sits beside the profile (``env.profile``), not in the Siphon backend: every profile holds
one, whichever backend plays it, and the backend itself reads profiles.

pysiphon's own parser swallows a malformed file into a failed dict; this one raises
``ConfigError`` naming the file, the line and what to fix.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from env.common.errors import ConfigError
from env.common.files import UnreadableFile, read_text

ATTRIBUTE_TYPES = ("int", "float", "bool", "array")


@dataclass(frozen=True, slots=True)
class AttributeSpec:
    name: str
    type: str
    pattern: str = ""
    offsets: tuple[int, ...] = ()
    length: int = 0
    method: str = ""


@dataclass(frozen=True, slots=True)
class SiphonConfig:
    path: Path
    process_name: str
    window_name: str
    attributes: dict[str, AttributeSpec] = field(default_factory=dict)


MAX_TOML_BYTES = 1_000_000
"""A profile's TOML is a few kilobytes; a larger one is not read."""


def read_toml(path: Path) -> dict:
    """Parse a TOML file, turning every failure into a ``ConfigError`` that names the file. A
    UTF-8 byte-order mark (what Windows Notepad writes as "UTF-8 with BOM") is accepted; another
    encoding (Notepad's "ANSI") is named with the line of its first byte that is not UTF-8; a
    FIFO, a device or a huge file is refused before it is read."""
    try:
        text = read_text(path, MAX_TOML_BYTES)
    except UnreadableFile as e:
        raise ConfigError(f"{path}: no such file" if e.reason == "is missing" else str(e)) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: malformed TOML: {e}. Fix the file and try again.") from None


def line_of(path: Path, value: object, after: str = "") -> str:
    """``, line N``: the first line of ``path`` (after the line ``after``) where ``value`` is
    written as TOML writes it, for a message about a parsed value (TOML keeps no positions); ''
    if it is not found."""
    needles = (f'"{value}"', f"'{value}'") if isinstance(value, str) else (str(value).lower(),)
    lines = path.read_bytes().decode("utf-8-sig").splitlines()
    start = next((n for n, line in enumerate(lines) if line.strip() == after), 0) if after else 0
    for n, line in enumerate(lines[start:], start + 1):
        if any(needle in line.split("#")[0] for needle in needles):
            return f", line {n}"
    return ""


def load_siphon_config(path: str | Path) -> SiphonConfig:
    path = Path(path)
    data = read_toml(path)
    info = data.get("process_info")
    if not isinstance(info, dict) or not info.get("name"):
        raise ConfigError(f'{path}: needs a [process_info] table with name = "<process.exe>"')
    attrs = data.get("attributes")
    if not isinstance(attrs, dict) or not attrs:
        raise ConfigError(f"{path}: needs at least one [attributes.<Name>] table")
    specs = {}
    for name, spec in attrs.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}: attributes.{name} must be a table, not {spec!r}")
        typ = spec.get("type")
        if typ not in ATTRIBUTE_TYPES:
            raise ConfigError(f"{path}: attributes.{name} has type {typ!r}; use one of {', '.join(ATTRIBUTE_TYPES)}")
        offsets = spec.get("offsets", [])
        if not isinstance(offsets, list) or not all(isinstance(o, int) and o >= 0 for o in offsets):
            raise ConfigError(f"{path}: attributes.{name}.offsets must be a list of non-negative ints")
        specs[name] = AttributeSpec(
            name=name,
            type=typ,
            pattern=str(spec.get("pattern", "")),
            offsets=tuple(offsets),
            length=int(spec.get("length", 0)),
            method=str(spec.get("method", "")),
        )
    return SiphonConfig(path, str(info["name"]), str(info.get("window_name", "")), specs)
