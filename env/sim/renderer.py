"""Drawing the duel with OpenCV, at any resolution, only when a frame is asked for.

A frame is what a policy learns from, so what matters must be readable at 84x84: the fighters
and which way they face, and above all the boss's wind-ups. Each upcoming blow's hit area is
drawn on the floor: its outline from the first tick of the wind-up, and a fill that grows from
the boss outwards as the wind-up runs, so *when* the blow lands is visible in the pixels (how
far the fill has grown), not only *what* is coming. Low sweeps you can jump are drawn cyan,
other blows orange; a blow in its active window is solid red.

The view is a chase camera from above: the camera's heading points up, the player sits low in
the frame so more of what is ahead is shown. The HUD is Elden Ring's: HP, FP and stamina bars at
the top left, the boss's name and bar at the bottom. Same world, same pixels: nothing here reads
a clock or a random number.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from env.sim.geometry import ARENA_RADIUS, BOSS_RADIUS, PLAYER_RADIUS, Hitbox, Shape
from env.sim.moves import PLAYER_ATTACKS, BossMove
from env.sim.world import World

# BGR colours
BACKGROUND = (12, 10, 10)
FLOOR = (48, 52, 58)
FLOOR_RING = (62, 68, 76)
FOG_WALL = (120, 170, 190)
PLAYER = (215, 225, 235)
PLAYER_DODGING = (240, 210, 120)
PLAYER_DEAD = (90, 90, 90)
FLASH = (255, 255, 255)
BOSS = (40, 40, 150)
BOSS_DEAD = (60, 60, 70)
PHASE_TWO = (60, 200, 240)
TELEGRAPH = (0, 140, 255)
TELEGRAPH_LOW = (230, 210, 0)
ACTIVE = (0, 0, 255)
DAGGER = (80, 215, 255)
SLASH = (250, 250, 250)
HP_BAR = (40, 40, 200)
FP_BAR = (200, 90, 40)
SP_BAR = (60, 170, 60)
BOSS_BAR = (20, 20, 150)
BAR_FRAME = (25, 25, 25)
TEXT = (225, 225, 225)

VIEW_AHEAD_M = 11.0  # metres shown above the player
PLAYER_ROW = 0.65  # the player's height in the frame, as a fraction from the top
BOSS_NAME = "Margit, the Fell Omen"


class Renderer:
    """Renders a ``World`` into a new (height, width, 3) uint8 BGR image per call."""

    def __init__(self, width: int, height: int) -> None:
        if width < 16 or height < 16:
            raise ValueError(f"frames must be at least 16x16, got {width}x{height}")
        self.width, self.height = width, height
        self.scale = PLAYER_ROW * height / VIEW_AHEAD_M  # pixels per metre
        self.origin = (width / 2.0, PLAYER_ROW * height)
        self.small = min(width, height) < 160
        self.line = 1 if self.small else max(1, round(min(width, height) / 240))
        self.antialias = cv2.LINE_8 if self.small else cv2.LINE_AA
        self._background = np.empty((height, width, 3), np.uint8)
        self._background[:] = BACKGROUND
        self._font_scale = max(0.35, height / 1800)

    # ------------------------------------------------------------------------------ geometry
    def _view(self, world: World) -> tuple[float, float, float, float]:
        c = world.camera_yaw
        return world.player.x, world.player.y, math.cos(c), math.sin(c)

    def _to_screen(self, view: tuple[float, float, float, float], x: float, y: float) -> tuple[float, float]:
        px, py, c, s = view
        dx, dy = x - px, y - py
        forward = dx * c + dy * s
        right = dx * s - dy * c
        return self.origin[0] + right * self.scale, self.origin[1] - forward * self.scale

    def _screen_angle(self, view: tuple[float, float, float, float], angle: float) -> float:
        """A world heading as an OpenCV angle (degrees, clockwise from screen +x)."""
        _, _, c, s = view
        fx, fy = math.cos(angle), math.sin(angle)
        forward = fx * c + fy * s
        right = fx * s - fy * c
        return math.degrees(math.atan2(-forward, right))

    @staticmethod
    def _pt(p: tuple[float, float]) -> tuple[int, int]:
        return int(round(p[0])), int(round(p[1]))

    def _px(self, metres: float) -> int:
        return max(1, int(round(metres * self.scale)))

    # -------------------------------------------------------------------------------- render
    def render_bgr(self, world: World) -> np.ndarray:
        img = self._background.copy()
        view = self._view(world)
        self._draw_arena(img, view)
        self._draw_telegraphs(img, view, world)
        self._draw_daggers(img, view, world)
        self._draw_boss(img, view, world)
        self._draw_player(img, view, world)
        self._draw_hud(img, world)
        return img

    def _draw_arena(self, img: np.ndarray, view) -> None:
        centre = self._pt(self._to_screen(view, 0.0, 0.0))
        cv2.circle(img, centre, self._px(ARENA_RADIUS), FLOOR, -1, self.antialias)
        cv2.circle(img, centre, self._px(ARENA_RADIUS / 2), FLOOR_RING, self.line, self.antialias)
        cv2.circle(img, centre, self._px(ARENA_RADIUS), FOG_WALL, self.line + 1, self.antialias)

    def _draw_telegraphs(self, img: np.ndarray, view, world: World) -> None:
        boss = world.boss
        move: BossMove | None = boss.move
        if move is None or boss.dead:
            return
        t = boss.move_t
        facing = self._screen_angle(view, boss.angle)
        ox, oy = self._landing(world, move, t)
        for strike in move.strikes:
            if t >= strike.end:
                continue
            if strike.hitbox is None:  # a volley: golden sparks gathering at the boss's hand
                if t < strike.start:
                    progress = t / max(1, strike.start)
                    tip = (boss.x + math.cos(boss.angle) * BOSS_RADIUS * 1.6, boss.y + math.sin(boss.angle) * BOSS_RADIUS * 1.6)
                    cv2.circle(img, self._pt(self._to_screen(view, *tip)), self._px(0.25 + 0.45 * progress), DAGGER, -1, self.antialias)
                continue
            colour = TELEGRAPH_LOW if strike.hitbox.low else TELEGRAPH
            if t >= strike.start:
                self._shape(img, view, ox, oy, facing, boss.angle, strike.hitbox, 1.0, ACTIVE, -1)
            else:
                progress = t / max(1, strike.start)
                fill = tuple(int(f + (c - f) * (0.35 + 0.4 * progress)) for f, c in zip(FLOOR, colour))
                self._shape(img, view, ox, oy, facing, boss.angle, strike.hitbox, max(0.05, progress), fill, -1)
                self._shape(img, view, ox, oy, facing, boss.angle, strike.hitbox, 1.0, colour, self.line)
            break  # only the next blow is announced

    @staticmethod
    def _landing(world: World, move: BossMove, t: int) -> tuple[float, float]:
        """Where the boss will stand when the blow falls: lunges and leaps are announced where
        they will land, which while the boss still tracks is towards the player."""
        b, p = world.boss, world.player
        if not move.travel_ticks or t >= move.travel_start + move.travel_ticks:
            return b.x, b.y
        if t >= move.travel_start:
            remaining = move.travel_start + move.travel_ticks - t
            return b.x + b.travel_dx * remaining, b.y + b.travel_dy * remaining
        dx, dy = p.x - b.x, p.y - b.y
        dist = math.hypot(dx, dy) or 1.0
        reach = min(move.travel_max, max(0.0, dist - 1.4))
        return b.x + dx / dist * reach, b.y + dy / dist * reach

    def _shape(self, img, view, ox, oy, facing_deg, facing, hitbox: Hitbox, extent: float, colour, thickness) -> None:
        """Draw ``hitbox`` held at (ox, oy); ``extent`` < 1 draws it grown that far from the owner."""
        if hitbox.shape is Shape.SECTOR:
            half = math.degrees(hitbox.half_angle)
            centre = self._pt(self._to_screen(view, ox, oy))
            radius = self._px(hitbox.reach * extent)
            cv2.ellipse(img, centre, (radius, radius), 0.0, facing_deg - half, facing_deg + half, colour, thickness, self.antialias)
            if thickness > 0:
                for side in (-half, half):
                    a = math.radians(facing_deg + side)
                    end = (centre[0] + radius * math.cos(a), centre[1] + radius * math.sin(a))
                    cv2.line(img, centre, self._pt(end), colour, thickness, self.antialias)
        elif hitbox.shape is Shape.CIRCLE:
            cx = ox + math.cos(facing) * hitbox.offset
            cy = oy + math.sin(facing) * hitbox.offset
            cv2.circle(img, self._pt(self._to_screen(view, cx, cy)), self._px(hitbox.reach * extent), colour, thickness, self.antialias)
        else:
            fx, fy = math.cos(facing), math.sin(facing)
            sx, sy = -fy * hitbox.half_width, fx * hitbox.half_width
            length = hitbox.reach * extent
            corners = [
                (ox + sx, oy + sy), (ox + sx + fx * length, oy + sy + fy * length),
                (ox - sx + fx * length, oy - sy + fy * length), (ox - sx, oy - sy),
            ]
            poly = np.array([self._pt(self._to_screen(view, *c)) for c in corners], np.int32)
            if thickness < 0:
                cv2.fillConvexPoly(img, poly, colour, self.antialias)
            else:
                cv2.polylines(img, [poly], True, colour, thickness, self.antialias)

    def _draw_daggers(self, img: np.ndarray, view, world: World) -> None:
        for d in world.daggers:
            head = self._to_screen(view, d.x, d.y)
            tail = self._to_screen(view, d.x - d.vx * 8, d.y - d.vy * 8)
            cv2.line(img, self._pt(tail), self._pt(head), DAGGER, self.line + 1, self.antialias)

    def _draw_body(self, img, view, x, y, radius_m, angle, colour, lift: float = 0.0) -> None:
        centre = self._to_screen(view, x, y)
        if lift > 0:  # airborne: a shadow stays on the floor, the body rises towards the viewer
            cv2.circle(img, self._pt(centre), self._px(radius_m), BACKGROUND, -1, self.antialias)
        radius = self._px(radius_m * (1.0 + 0.35 * lift))
        cv2.circle(img, self._pt(centre), radius, colour, -1, self.antialias)
        nose = self._to_screen(view, x + math.cos(angle) * radius_m * 1.5, y + math.sin(angle) * radius_m * 1.5)
        cv2.line(img, self._pt(centre), self._pt(nose), colour, max(1, self.line + (0 if self.small else 1)), self.antialias)

    def _draw_boss(self, img: np.ndarray, view, world: World) -> None:
        b = world.boss
        colour = BOSS_DEAD if b.dead else (FLASH if b.hit_flash else BOSS)
        move = b.move
        lift = 0.0
        if move is not None and move.airborne and move.travel_start <= b.move_t < move.travel_start + move.travel_ticks:
            s = (b.move_t - move.travel_start) / move.travel_ticks
            lift = 4.0 * s * (1.0 - s)
        if b.phase == 2 and not b.dead:
            cv2.circle(img, self._pt(self._to_screen(view, b.x, b.y)), self._px(BOSS_RADIUS * (1.25 + 0.35 * lift)), PHASE_TWO, self.line, self.antialias)
        self._draw_body(img, view, b.x, b.y, BOSS_RADIUS, b.angle, colour, lift)
        if world.player.locked_on and not b.dead:
            cv2.circle(img, self._pt(self._to_screen(view, b.x, b.y)), max(1, self._px(0.15)), FLASH, -1, self.antialias)

    def _draw_player(self, img: np.ndarray, view, world: World) -> None:
        p = world.player
        if p.dead:
            colour = PLAYER_DEAD
        elif p.hit_flash:
            colour = FLASH
        elif p.invulnerable:
            colour = PLAYER_DODGING
        else:
            colour = PLAYER
        attack = PLAYER_ATTACKS.get(p.anim)
        if attack is not None and attack.hit_start <= p.anim_t < attack.hit_start + attack.hit_ticks:
            self._shape(img, view, p.x, p.y, self._screen_angle(view, p.angle), p.angle, attack.hitbox, 1.0, SLASH, self.line)
        self._draw_body(img, view, p.x, p.y, PLAYER_RADIUS, p.angle, colour, lift=p.z / 0.9)

    # ----------------------------------------------------------------------------------- HUD
    def _bar(self, img: np.ndarray, x: int, y: int, width: int, height: int, fraction: float, colour) -> None:
        cv2.rectangle(img, (x, y), (x + width, y + height - 1), BAR_FRAME, -1)
        filled = int(round(width * min(1.0, max(0.0, fraction))))
        if filled > 0:
            cv2.rectangle(img, (x, y), (x + filled - 1, y + height - 1), colour, -1)

    def _draw_hud(self, img: np.ndarray, world: World) -> None:
        w, h = self.width, self.height
        p, b = world.player, world.boss
        bar_h = max(2, round(h / 42))
        gap = max(1, bar_h // 2)
        x0, y0 = max(1, round(w / 40)), max(1, round(h / 40))
        length = round(w * 0.32)
        self._bar(img, x0, y0, length, bar_h, p.hp / p.max_hp, HP_BAR)
        self._bar(img, x0, y0 + bar_h + gap, round(length * 0.7), bar_h, p.fp / max(1, p.max_fp), FP_BAR)
        self._bar(img, x0, y0 + 2 * (bar_h + gap), round(length * 0.8), bar_h, p.sp / max(1, p.max_sp), SP_BAR)
        flask = max(2, bar_h)
        fy = y0 + 3 * (bar_h + gap)
        for i in range(p.flasks):
            fx = x0 + i * (flask + gap)
            cv2.rectangle(img, (fx, fy), (fx + flask - 1, fy + flask - 1), DAGGER, -1)

        boss_len = round(w * 0.6)
        bx = (w - boss_len) // 2
        by = h - max(2, round(h / 16))
        self._bar(img, bx, by, boss_len, bar_h, b.hp / b.max_hp, BOSS_BAR)
        if w >= 320:
            cv2.putText(img, BOSS_NAME, (bx, by - gap * 2), cv2.FONT_HERSHEY_SIMPLEX, self._font_scale, TEXT, 1, cv2.LINE_AA)
