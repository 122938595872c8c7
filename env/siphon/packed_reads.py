"""Packed reads: several attributes that sit side by side in game memory, fetched by one
``GetAttribute`` of a Siphon ``array`` attribute and unpacked here.

Why: the real Siphon server answers every ``GetAttribute`` under one server-wide mutex and
rescans the game module for the AOB pattern each time, and every gRPC call costs a few hundred
microseconds of Python on both ends. In Elden Ring the values an observation needs come in small
groups at neighbouring offsets of one object (``HeroHp`` at +0x138 and ``HeroMaxHp`` at +0x13C,
``HeroLocalPosX/Z/Y`` at +0x70/74/78...), so reading each group as one array of bytes cuts the
env's attribute calls from 10 to 6 and the recorder's from 36 to 15, with no change to the config
a user writes: the groups are found from the config's own patterns and pointer chains.

Two attributes share an object when their pattern, method and every pointer-chain offset but the
last are equal; the last offset is the field's place in that object. ``plan_blocks`` groups such
fields into arrays spanning at most ``MAX_SPAN`` bytes. The same layout rule lets the simulator
answer an array read from the scalar attributes a config places inside it (``fields_in``).
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

from env.attribute_config import AttributeSpec

SIZES = {"int": 4, "float": 4, "bool": 1}
FORMATS = {"int": "i", "float": "f", "bool": "?"}  # little-endian, as x86-64 game memory is
MAX_SPAN = 128
"""Largest array read: enough for the player's HP/FP/stamina block (36 bytes), small enough that a
read never strays far past the fields it was made for."""


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str
    offset: int  # bytes from the start of the array


@dataclass(frozen=True)
class Block:
    """An array attribute and the scalar attributes it carries."""

    spec: AttributeSpec
    fields: tuple[Field, ...]

    @property
    def name(self) -> str:
        return self.spec.name

    @cached_property
    def _struct(self) -> struct.Struct:
        fmt, at = "<", 0
        for f in self.fields:  # sorted by offset, never overlapping
            fmt += f"{f.offset - at}x{FORMATS[f.type]}"
            at = f.offset + SIZES[f.type]
        return struct.Struct(fmt + f"{self.spec.length - at}x")

    def unpack(self, data: bytes) -> dict[str, int | float | bool]:
        """The carried attributes' values from the array's bytes (int32, float32, 1-byte bool)."""
        return dict(zip((f.name for f in self.fields), self._struct.unpack(data)))

    def pack(self, values: Mapping[str, int | float | bool]) -> bytes:
        """The array's bytes holding ``values`` (gap bytes are zero): the simulator's read."""
        return self._struct.pack(*(values[f.name] for f in self.fields))


def object_key(spec: AttributeSpec) -> tuple | None:
    """What identifies the object an attribute lives in, or None when it has no pointer chain."""
    if not spec.offsets or not spec.pattern:
        return None
    return (spec.pattern, spec.method or "aobscan", spec.offsets[:-1])


def fields_in(array: AttributeSpec, attributes: Iterable[AttributeSpec]) -> tuple[Field, ...]:
    """The scalar ``attributes`` lying wholly inside ``array``'s bytes, by offset."""
    key, start = object_key(array), array.offsets[-1] if array.offsets else 0
    found = [
        Field(a.name, a.type, a.offsets[-1] - start)
        for a in attributes
        if a.type in SIZES
        and key is not None
        and object_key(a) == key
        and 0 <= a.offsets[-1] - start <= array.length - SIZES[a.type]
    ]
    found.sort(key=lambda f: f.offset)
    for before, after in pairwise(found):
        if before.offset + SIZES[before.type] > after.offset:
            raise ValueError(f"attributes {before.name} and {after.name} overlap in memory: check their offsets")
    return tuple(found)


class ObjectIndex:
    """Scalar attributes by the object they live in, sorted by offset: the attributes an array
    holds are found by two bisections in its object's list, not by trying every attribute
    against every array: that grows with the product of the two counts, and a config of thousands
    of each held the simulator's workers (``tests/test_faults.py``)."""

    def __init__(self, attributes: Iterable[AttributeSpec]) -> None:
        groups: dict[tuple, list[AttributeSpec]] = defaultdict(list)
        for spec in attributes:
            if spec.type in SIZES and (key := object_key(spec)) is not None:
                groups[key].append(spec)
        self._groups = {}
        for key, members in groups.items():
            members.sort(key=lambda a: a.offsets[-1])
            self._groups[key] = ([a.offsets[-1] for a in members], members)

    def _candidates(self, array: AttributeSpec) -> tuple[list[AttributeSpec], int, int]:
        key = object_key(array)
        offsets, members = self._groups.get(key, ([], [])) if key is not None else ([], [])
        start = array.offsets[-1] if array.offsets else 0
        return members, bisect_left(offsets, start), bisect_right(offsets, start + array.length - 1)

    def count_in(self, array: AttributeSpec) -> int:
        """How many attributes start inside ``array``'s bytes (at least as many as it holds)."""
        _, low, high = self._candidates(array)
        return high - low

    def fields_in(self, array: AttributeSpec) -> tuple[Field, ...]:
        """``fields_in(array, ...)`` over the attributes this index holds."""
        members, low, high = self._candidates(array)
        return fields_in(array, members[low:high])


def plan_blocks(attributes: Mapping[str, AttributeSpec], max_span: int = MAX_SPAN) -> tuple[Block, ...]:
    """Arrays covering every group of two or more scalar attributes of one object whose bytes fit
    in ``max_span``; an attribute alone in its object or too far from the others stays scalar."""
    by_object: dict[tuple, list[AttributeSpec]] = defaultdict(list)
    for spec in attributes.values():
        if spec.type in SIZES and (key := object_key(spec)) is not None:
            by_object[key].append(spec)
    blocks: list[Block] = []
    for members in by_object.values():
        members.sort(key=lambda a: a.offsets[-1])
        group: list[AttributeSpec] = []
        for spec in members:
            if group and spec.offsets[-1] + SIZES[spec.type] - group[0].offsets[-1] > max_span:
                blocks.extend(_block(group))
                group = []
            group.append(spec)
        blocks.extend(_block(group))
    return tuple(blocks)


def _block(group: Sequence[AttributeSpec]) -> list[Block]:
    """The array over ``group`` (sorted by offset), if it holds two or more attributes and none
    of them overlap (a flag byte inside an int, say: those stay scalar reads)."""
    if len(group) < 2:
        return []
    first, last = group[0], group[-1]
    spec = AttributeSpec(
        name=f"{first.name}..{last.name}",
        type="array",
        pattern=first.pattern,
        offsets=first.offsets,
        length=last.offsets[-1] + SIZES[last.type] - first.offsets[-1],
        method=first.method,
    )
    try:
        return [Block(spec, fields_in(spec, group))]
    except ValueError:
        return []


@dataclass(frozen=True)
class ReadPlan:
    """How to read a set of names: the attributes to request (arrays and scalars) and the arrays
    among them. An array is used only where it carries two or more of the names."""

    requests: tuple[str, ...]
    blocks: dict[str, Block]

    @classmethod
    def for_names(cls, names: Sequence[str], blocks: Iterable[Block]) -> ReadPlan:
        wanted, used, requests = set(names), {}, []
        covered: set[str] = set()
        for block in blocks:  # blocks never share an attribute
            carried = wanted & {f.name for f in block.fields}
            if len(carried) > 1:
                used[block.name] = block
                requests.append(block.name)
                covered |= carried
        requests.extend(n for n in dict.fromkeys(names) if n not in covered)
        return cls(tuple(requests), used)

    def label(self, request: str) -> str:
        """A request as errors name it: an array says which attributes it carries."""
        block = self.blocks.get(request)
        return f"{request} (read as one array: {', '.join(f.name for f in block.fields)})" if block else request
