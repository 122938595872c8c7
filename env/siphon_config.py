"""Siphon's attribute config (TOML): which process and window, and each memory attribute's
pointer chain and type. The same file drives the real server and the simulator.

pysiphon's own parser swallows a malformed file into a failed dict; this one raises
``ConfigError`` naming the file, the line and what to fix.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from env.errors import EldenILError

ATTRIBUTE_TYPES = ("int", "float", "bool", "array")


class ConfigError(EldenILError):
    """A config or profile file that cannot be used; the message says where and why."""


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


def read_toml(path: Path) -> dict:
    """Parse a TOML file, turning every failure into a ``ConfigError`` that names the file."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: malformed TOML: {e}. Fix the file and try again.") from None


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
            raise ConfigError(
                f"{path}: attributes.{name} has type {typ!r}; use one of {', '.join(ATTRIBUTE_TYPES)}"
            )
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
