"""Hitbox shapes and the arena, in the arena's local frame (X, Y horizontal, Z up, metres).

Angles are radians counter-clockwise from +X. A hitbox is anchored at its owner and oriented by
the owner's facing when it is tested, so one shape serves every position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

ARENA_RADIUS = 10.0
"""A walled arena is a disc; fighters are kept inside it (the fog wall). A boss fought in the open
(``Arena.walled`` false) keeps them within its own, larger field instead."""

GATE = (0.0, -ARENA_RADIUS)
"""Where the way in meets the arena: the fog wall a player walks through to start the fight."""
CORRIDOR_HALF_WIDTH = 2.5
CORRIDOR_END = -22.0
"""The way in, south of the arena: x within the half width, y from here up to the gate."""
GRACE = (0.0, -19.0)
"""The Site of Grace in the way in, where a dead player comes back."""

PLAYER_RADIUS = 0.4


class Shape(Enum):
    SECTOR = "sector"  # a pie slice in front: reach, half_angle (swept by `sweep` over the strike)
    CIRCLE = "circle"  # a disc centred `offset` ahead: radius = reach
    LINE = "line"  # a rectangle ahead: length = reach, half_width
    RING = "ring"  # a shockwave: a band `half_width` either side of a circle growing at `speed` up to `reach`


@dataclass(frozen=True, slots=True)
class Hitbox:
    shape: Shape
    reach: float
    half_angle: float = 0.0  # SECTOR: radians either side of facing
    half_width: float = 0.0  # LINE
    offset: float = 0.0  # CIRCLE: centre distance ahead of the owner
    low: bool = False  # only hits a target on the ground (a jump clears it)
    speed: float = 0.0  # RING: metres a second its circle grows from the owner
    sweep: float = 0.0  # SECTOR: radians its middle turns through over the strike, right to left

    def travel_seconds(self, distance: float) -> float:
        """When a ring reaches a target ``distance`` metres from its owner, from the strike's
        start (0 for every other shape: they are there at once)."""
        return distance / self.speed if self.shape is Shape.RING else 0.0

    def facing_at(self, facing: float, progress: float) -> float:
        """Where a sweeping sector points ``progress`` (0 to 1) through its strike."""
        return facing + self.sweep * (progress - 0.5) if self.sweep else facing

    def hits(
        self,
        ox: float,
        oy: float,
        facing: float,
        tx: float,
        ty: float,
        tz: float,
        radius: float,
        age: float = 0.0,
        progress: float = 0.0,
    ) -> bool:
        """Does this hitbox, held by an owner at (ox, oy) facing ``facing``, touch a round target
        of ``radius`` standing at (tx, ty) with feet at height ``tz``, ``age`` seconds and
        ``progress`` (0 to 1) into its strike (what a ring or a sweep depends on)?"""
        if self.low and tz > 0.3:
            return False
        dx, dy = tx - ox, ty - oy
        if self.shape is Shape.RING:
            front = min(self.reach, self.speed * age)
            return abs(math.hypot(dx, dy) - front) <= self.half_width + radius
        facing = self.facing_at(facing, progress)
        fx, fy = math.cos(facing), math.sin(facing)
        if self.shape is Shape.CIRCLE:
            cx, cy = dx - fx * self.offset, dy - fy * self.offset
            return cx * cx + cy * cy <= (self.reach + radius) ** 2
        along = dx * fx + dy * fy
        if self.shape is Shape.LINE:
            across = abs(dy * fx - dx * fy)
            return -radius <= along <= self.reach + radius and across <= self.half_width + radius
        dist = math.hypot(dx, dy)
        if dist > self.reach + radius:
            return False
        if dist <= radius:
            return True
        return along >= dist * math.cos(self.half_angle)


def clamp_to_arena(x: float, y: float, radius: float, arena_radius: float = ARENA_RADIUS) -> tuple[float, float]:
    limit = arena_radius - radius
    d2 = x * x + y * y
    if d2 <= limit * limit:
        return x, y
    scale = limit / math.sqrt(d2)
    return x * scale, y * scale


def clamp_to_corridor(x: float, y: float, radius: float) -> tuple[float, float]:
    """Keep a body of ``radius`` inside the way in, the fog wall closing its north end."""
    limit = CORRIDOR_HALF_WIDTH - radius
    return min(limit, max(-limit, x)), min(GATE[1] - radius, max(CORRIDOR_END + radius, y))


def clamp_to_open_arena(x: float, y: float, radius: float) -> tuple[float, float]:
    """Keep a body inside the arena or the way in, once the fog wall is gone (the boss is dead)."""
    limit = CORRIDOR_HALF_WIDTH - radius
    if abs(x) <= limit and CORRIDOR_END + radius <= y <= GATE[1] + 2.0:  # the gap, into the arena
        return x, y
    if x * x + y * y <= (ARENA_RADIUS - radius) ** 2:
        return x, y
    options = (clamp_to_arena(x, y, radius), clamp_to_corridor(x, y, radius))
    return min(options, key=lambda q: (q[0] - x) ** 2 + (q[1] - y) ** 2)


def wrap_angle(a: float) -> float:
    """Map an angle to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def turn_towards(current: float, target: float, max_step: float) -> float:
    diff = wrap_angle(target - current)
    if diff > max_step:
        diff = max_step
    elif diff < -max_step:
        diff = -max_step
    return wrap_angle(current + diff)
