"""Drawing the duel with OpenCV, at any resolution, only when a frame is asked for.

A frame is all a policy sees, so everything it must react to has to survive being drawn at
84x84: where the fighters stand and which way they face, and above all *when* the boss's next
blow lands. That is why each upcoming blow's hit area is painted on the floor from the first tick
of its wind-up, with a fill that grows out of the boss and brightens as the wind-up runs: the
timing is in the pixels, not only in ``NpcAnimId``. A blow that lunges or leaps is announced
where it will land, since that is where the player must not be. Low sweeps (jump them) are cyan,
other blows orange, a blow in its active window solid red.

The camera chases the player from above with its heading pointing up and the player low in the
frame, so the screen shows more of what is ahead, as the game's third-person camera does; the
floor is seamed so that turning and moving show in the frame. The HUD mirrors Elden Ring's, so
frames from the simulator and from the game read alike. Line widths, sizes and fonts follow the
image size. Nothing here reads a clock or draws a random number: the same world gives the same
pixels, which recorded demonstrations and tests rely on.

The frames also show what the game shows around a fight, since that is what a capture gets:
"YOU DIED" over a dead player, a loading screen, the way in outside the fog wall (the fog hides
the arena, and there is no boss bar before the fight), "GREAT ENEMY FELLED" and an open arena
once the boss is gone. The fog is opaque from both sides, so in a fight nothing beyond the wall
is drawn.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from env.sim.geometry import (
    ARENA_RADIUS,
    CORRIDOR_END,
    CORRIDOR_HALF_WIDTH,
    GATE,
    GRACE,
    PLAYER_RADIUS,
    Hitbox,
    Shape,
)
from env.sim.moves import JUMP_HEIGHT, PLAYER_ATTACKS, BossMove, Strike
from env.sim.world import DT, PLAYER_FLASKS, Boss, Phase, Player, World

Colour = tuple[int, int, int]  # BGR, as OpenCV draws

BACKGROUND: Colour = (14, 11, 10)
FLOOR: Colour = (54, 58, 64)
FLOOR_SEAM: Colour = (43, 46, 51)
FOG_WALL: Colour = (125, 170, 190)
SHADOW: Colour = (24, 24, 26)
PLAYER: Colour = (225, 232, 238)
PLAYER_IFRAMES: Colour = (255, 210, 120)
PLAYER_HURT: Colour = (70, 70, 255)
DEAD: Colour = (110, 110, 110)
BOSS_HURT: Colour = (255, 255, 255)
GOLD: Colour = (40, 200, 250)
TELEGRAPH: Colour = (0, 140, 255)
TELEGRAPH_LOW: Colour = (240, 220, 0)
ACTIVE: Colour = (0, 0, 255)
DAGGER: Colour = (70, 215, 255)
SLASH: Colour = (255, 255, 255)
LOCK_ON: Colour = (255, 255, 255)
HP_BAR: Colour = (40, 40, 195)
FP_BAR: Colour = (190, 85, 40)
SP_BAR: Colour = (55, 155, 60)
BAR_BACK: Colour = (18, 18, 18)
BAR_EDGE: Colour = (70, 95, 110)
FLASK: Colour = (50, 90, 220)
TEXT: Colour = (215, 225, 230)
FOG: Colour = (150, 160, 165)
ARENA_EDGE: Colour = (70, 76, 84)
SENTRY: Colour = (90, 120, 150)
YOU_DIED: Colour = (30, 30, 175)
LOADING_TEXT: Colour = (120, 120, 120)

PLAYER_ROW = 0.65  # the player's height in the frame, as a fraction from the top
VIEW_AHEAD = 11.0  # metres of arena shown above the player ...
MIN_VIEW_WIDTH = 12.0  # ... unless that would show fewer metres across (portrait frames)
LEAP_HEIGHT = 2.0  # metres the boss rises at the top of a leap, for drawing only
DAGGER_STREAK = 6  # ticks of flight drawn behind each dagger

SEAM_RING = 0.45 * ARENA_RADIUS
SEAM_ENDS = np.array(
    [
        [(r * math.cos(a), r * math.sin(a)) for r in (SEAM_RING, ARENA_RADIUS)]
        for a in np.linspace(0.0, 2.0 * math.pi, 12, endpoint=False)
    ]
)
"""The floor's radial joints as (12, 2 ends, x y) metres: without them a turn of the camera would
not show on a plain disc. Static, so all are transformed in one go."""


def _mix(base: Colour, colour: Colour, amount: float) -> Colour:
    """``amount`` of ``colour`` over ``base``: translucency for the price of one solid fill."""
    return (
        round(base[0] + (colour[0] - base[0]) * amount),
        round(base[1] + (colour[1] - base[1]) * amount),
        round(base[2] + (colour[2] - base[2]) * amount),
    )


class _Camera:
    """World metres to pixels for one frame: the player at ``anchor``, the camera heading up."""

    __slots__ = ("ppm", "_sp", "_cp", "_ox", "_oy", "_yaw_degrees", "_linear", "_offset")

    def __init__(self, world: World, anchor: tuple[float, float], ppm: float) -> None:
        self.ppm = ppm
        yaw, px, py = world.camera_yaw, world.player.x, world.player.y
        # Screen right is the heading turned clockwise, (sin, -cos); screen up is the heading.
        self._sp, self._cp = math.sin(yaw) * ppm, math.cos(yaw) * ppm
        self._ox = anchor[0] - (px * self._sp - py * self._cp)
        self._oy = anchor[1] + (px * self._cp + py * self._sp)
        self._yaw_degrees = math.degrees(yaw)
        self._linear = np.array([[self._sp, -self._cp], [-self._cp, -self._sp]])
        self._offset = np.array([self._ox, self._oy])

    def point(self, x: float, y: float) -> tuple[int, int]:
        return (
            round(self._ox + x * self._sp - y * self._cp),
            round(self._oy - x * self._cp - y * self._sp),
        )

    def points(self, xy: np.ndarray) -> np.ndarray:
        """``point`` over an array of (x, y) pairs of any leading shape, as int32 pixels."""
        return np.rint(xy @ self._linear + self._offset).astype(np.int32)

    def degrees(self, heading: float) -> float:
        """A world heading as OpenCV draws angles: degrees clockwise from the image's +x."""
        return self._yaw_degrees - math.degrees(heading) - 90.0

    def pixels(self, metres: float) -> int:
        return max(1, round(metres * self.ppm))


class Renderer:
    """Draws a ``World`` as a new (height, width, 3) uint8 BGR image per call.

    Meant for 64x64 up to 3840x2160 (84x84 is the training size); anything down to 16x16 is
    accepted so that tiny test observations work, legible or not.
    """

    def __init__(self, width: int, height: int) -> None:
        if width < 16 or height < 16:
            raise ValueError(f"frames must be at least 16x16 pixels, got {width}x{height}")
        self.width, self.height = width, height
        short = min(width, height)
        self._ppm = min(PLAYER_ROW * height / VIEW_AHEAD, width / MIN_VIEW_WIDTH)
        self._anchor = (width / 2.0, PLAYER_ROW * height)
        # Anti-aliasing smears 2-pixel bodies at training sizes; above them it is worth its cost.
        self._line_type = cv2.LINE_AA if short >= 200 else cv2.LINE_8
        self._thin = max(1, round(short / 360))
        self._thick = max(2, round(short / 180))
        self._background = np.full((height, width, 3), BACKGROUND, np.uint8)
        self._layout_hud(width, height)
        self._loading_screen = self._draw_loading_screen(width, height)

    def _layout_hud(self, width: int, height: int) -> None:
        """Place the HUD once: Elden Ring's bars at the top left, the boss's at the bottom."""
        bar = max(2, round(height / 60))
        gap = max(1, round(bar / 3))
        x, y = max(2, round(width * 0.025)), max(2, round(height * 0.03))
        self._bar_height = bar
        self._framed = bar >= 6  # a gilt edge only where it can be seen
        self._hp_bar = (x, y, round(width * 0.30))
        self._fp_bar = (x, y + bar + gap, round(width * 0.20))
        self._sp_bar = (x, y + 2 * (bar + gap), round(width * 0.25))
        self._flask_origin = (x, y + 3 * (bar + gap) + gap)
        self._flask_size = (max(2, round(bar * 0.8)), max(3, round(bar * 1.2)))
        self._flask_step = self._flask_size[0] + gap
        length = round(width * 0.56)
        bottom = height - max(3, round(height * 0.06)) - bar
        self._boss_bar = ((width - length) // 2, bottom, length)
        self._name_style: tuple[tuple[int, int], float, int] | None = None  # origin, scale, width
        if width >= 320:
            (_, text_height), _ = cv2.getTextSize("M", cv2.FONT_HERSHEY_TRIPLEX, 1.0, 1)  # a capital: any name
            origin = (self._boss_bar[0], self._boss_bar[1] - 2 * gap - 1)
            scale = max(7, 0.022 * height) / text_height  # about 24 px tall at 1080p
            self._name_style = origin, scale, max(1, round(height / 700))

    # ----------------------------------------------------------------------------------- frame
    def render_bgr(self, world: World) -> np.ndarray:
        phase = world.phase
        if phase is Phase.LOADING:
            return self._loading_screen.copy()
        img = self._background.copy()
        cam = _Camera(world, self._anchor, self._ppm)
        lt = self._line_type
        wall = self._arena_edge(cam, world.spec.arena.radius)
        walled = world.spec.arena.walled
        if world.outside and walled:
            self._draw_way_in(img, cam, world)
            cv2.fillPoly(img, [wall], FOG, lt)  # the fog hides the arena and the boss in it
            cv2.polylines(img, [wall], True, FOG_WALL, self._thick, lt)
            self._draw_player(img, cam, world.player)
            self._draw_hud(img, world.player, None)
            return img
        cleared = phase is Phase.CLEARED
        if cleared and walled:
            self._draw_way_in(img, cam, world)
        cv2.fillPoly(img, [wall], FLOOR, lt)
        cv2.circle(img, cam.point(0.0, 0.0), cam.pixels(SEAM_RING), FLOOR_SEAM, self._thin, lt)
        cv2.polylines(img, cam.points(SEAM_ENDS), False, FLOOR_SEAM, self._thin, lt)
        if world.boss.move is not None and not world.boss.dead:
            self._draw_telegraphs(img, cam, world)
        if walled:  # an open field has an edge the boss keeps to, and no wall to show it
            cv2.polylines(img, [wall], True, ARENA_EDGE if cleared else FOG_WALL, self._thick, lt)
        for d in world.daggers:
            tail = cam.point(d.x - DAGGER_STREAK * d.vx, d.y - DAGGER_STREAK * d.vy)
            cv2.line(img, tail, cam.point(d.x, d.y), DAGGER, self._thick, lt)
        if not cleared:
            self._draw_boss(img, cam, world.boss, world.player.locked_on)
        self._draw_player(img, cam, world.player)
        self._draw_hud(img, world.player, None if cleared or world.outside else world.boss)
        timings = world.lifecycle
        if phase is Phase.DYING and world.phase_t >= timings.ticks("you_died"):
            self._draw_banner(img, "YOU DIED", YOU_DIED)
        elif phase is Phase.FELLED and world.phase_t >= timings.ticks("felled_banner"):
            self._draw_banner(img, "GREAT ENEMY FELLED", GOLD)
        return img

    # ------------------------------------------------------------------ around the fight
    def _draw_way_in(self, img: np.ndarray, cam: _Camera, world: World) -> None:
        """The way in south of the arena: its floor, the Site of Grace and the sentry."""
        w = CORRIDOR_HALF_WIDTH
        top = GATE[1] + 1.0  # under the arena's edge, so no gap shows at the gate
        corners = np.array([(-w, top), (w, top), (w, CORRIDOR_END), (-w, CORRIDOR_END)])
        cv2.fillConvexPoly(img, cam.points(corners), FLOOR, self._line_type)
        grace = cam.point(*GRACE)
        cv2.circle(img, grace, cam.pixels(0.6), _mix(FLOOR, GOLD, 0.35), -1, self._line_type)
        cv2.circle(img, grace, cam.pixels(0.2), GOLD, -1, self._line_type)
        sentry = world.sentry
        if not sentry.dead:
            self._draw_body(img, cam, sentry.x, sentry.y, PLAYER_RADIUS, sentry.angle, SENTRY, 0.0)
            if world.player.locked_on and world.focus is sentry:
                cv2.circle(img, cam.point(sentry.x, sentry.y), cam.pixels(0.15), LOCK_ON, -1, self._line_type)

    def _draw_banner(self, img: np.ndarray, text: str, colour: Colour) -> None:
        """The game's big message across the middle of the screen, over a darkened band."""
        height, width = img.shape[:2]
        font = cv2.FONT_HERSHEY_TRIPLEX
        thickness = max(1, round(height / 300))
        (text_width, text_height), _ = cv2.getTextSize(text, font, 1.0, thickness)
        scale = 0.6 * width / text_width
        band = max(2, round(2.2 * text_height * scale))
        top = (height - band) // 2
        img[top : top + band] //= 3
        origin = ((width - round(text_width * scale)) // 2, top + (band + round(text_height * scale)) // 2)
        cv2.putText(img, text, origin, font, scale, colour, thickness, cv2.LINE_AA)

    @staticmethod
    def _draw_loading_screen(width: int, height: int) -> np.ndarray:
        """A dark screen with a line of text at the bottom right, as the game's loading screen."""
        img = np.zeros((height, width, 3), np.uint8)
        text = "Now loading"
        font = cv2.FONT_HERSHEY_SIMPLEX
        (text_width, text_height), _ = cv2.getTextSize(text, font, 1.0, 1)
        scale = 0.2 * width / text_width
        origin = (round(width * 0.95 - text_width * scale), round(height * 0.93))
        cv2.putText(img, text, origin, font, scale, LOADING_TEXT, 1, cv2.LINE_AA)
        return img

    @staticmethod
    def _arena_edge(cam: _Camera, metres: float) -> np.ndarray:
        """The fog wall (or an open field's edge) as a polygon within half a pixel of a circle:
        OpenCV's own anti-aliased circles are 5-degree polygons, whose facets show at 4K."""
        radius = cam.pixels(metres)
        step = max(1, min(5, int(2.0 * math.degrees(math.acos(1.0 - 0.5 / radius)))))
        return cv2.ellipse2Poly(cam.point(0.0, 0.0), (radius, radius), 0, 0, 360, step)

    # ------------------------------------------------------------------------------ telegraphs
    def _draw_telegraphs(self, img: np.ndarray, cam: _Camera, world: World) -> None:
        """Every blow of the boss's move that has not ended, the next one last (on top)."""
        boss = world.boss
        move: BossMove = boss.move
        t, facing = boss.move_t, boss.angle
        fx, fy = math.cos(facing), math.sin(facing)
        x, y = _landing(world, move, t)
        anchors = []
        for strike in move.strikes:  # a strike's step is taken as it begins: add those to come
            if strike.step and strike.start >= t:
                x, y = world.clamp(x + fx * strike.step, y + fy * strike.step, world.spec.radius)
            anchors.append((x, y))
        for i in reversed(range(len(move.strikes))):
            strike = move.strikes[i]
            if t >= strike.end:
                continue
            ax, ay = anchors[i]
            hitbox = strike.hitbox
            if hitbox is not None and t >= strike.start:
                age = t - strike.start
                if hitbox.shape is Shape.RING:  # the shockwave where it has travelled to
                    front = min(hitbox.reach, hitbox.speed * age * DT)
                    width = max(self._thick, cam.pixels(2.0 * hitbox.half_width))
                    cv2.circle(img, cam.point(ax, ay), cam.pixels(front), ACTIVE, width, self._line_type)
                else:
                    aim = hitbox.facing_at(facing, age / strike.active)
                    self._draw_hitbox(img, cam, ax, ay, aim, hitbox, 1.0, ACTIVE, -1)
            elif hitbox is not None:
                colour = TELEGRAPH_LOW if hitbox.low else TELEGRAPH
                progress = _windup_progress(move, i, t)
                fill = _mix(FLOOR, colour, 0.3 + 0.5 * progress)
                extent = 0.2 + 0.8 * progress  # from the first tick, not hidden under the boss
                self._draw_hitbox(img, cam, ax, ay, facing, hitbox, extent, fill, -1)
                self._draw_hitbox(img, cam, ax, ay, facing, hitbox, 1.0, colour, self._thin)
            elif t < strike.start:
                progress = _windup_progress(move, i, t)
                if strike.projectiles:
                    self._draw_volley_windup(img, cam, boss, strike, progress)
                else:  # the phase-shift roar: a golden ring swelling around the boss
                    r = cam.pixels(world.spec.radius * (1.3 + 2.0 * progress))
                    centre = cam.point(boss.x, boss.y)
                    cv2.circle(img, centre, r, GOLD, self._thick, self._line_type)

    def _draw_hitbox(
        self,
        img: np.ndarray,
        cam: _Camera,
        x: float,
        y: float,
        facing: float,
        hitbox: Hitbox,
        extent: float,
        colour: Colour,
        thickness: int,
    ) -> None:
        """``hitbox`` held at (x, y) facing ``facing``, grown to ``extent`` of its size away from
        its holder; ``thickness`` -1 fills it, as everywhere in OpenCV."""
        lt = self._line_type
        fx, fy = math.cos(facing), math.sin(facing)
        if hitbox.shape is Shape.RING:  # the ground the shockwave will cross, to its full reach
            cv2.circle(img, cam.point(x, y), cam.pixels(hitbox.reach * extent), colour, thickness, lt)
        elif hitbox.shape is Shape.SECTOR and hitbox.sweep and thickness < 0:  # all the ground it sweeps
            swept = Hitbox(Shape.SECTOR, hitbox.reach, hitbox.half_angle + hitbox.sweep / 2)
            self._draw_hitbox(img, cam, x, y, facing, swept, extent, colour, thickness)
        elif hitbox.shape is Shape.CIRCLE:
            centre = cam.point(x + fx * hitbox.offset, y + fy * hitbox.offset)
            cv2.circle(img, centre, cam.pixels(hitbox.reach * extent), colour, thickness, lt)
        elif hitbox.shape is Shape.SECTOR:
            centre = cam.point(x, y)
            r = cam.pixels(hitbox.reach * extent)
            mid, half = cam.degrees(facing), math.degrees(hitbox.half_angle)
            if thickness < 0:
                cv2.ellipse(img, centre, (r, r), 0.0, mid - half, mid + half, colour, -1, lt)
            else:
                arc = cv2.ellipse2Poly(centre, (r, r), 0, round(mid - half), round(mid + half), 5)
                outline = np.vstack((np.array([centre], np.int32), arc))
                cv2.polylines(img, [outline], True, colour, thickness, lt)
        else:
            sx, sy = -fy * hitbox.half_width, fx * hitbox.half_width
            ex, ey = x + fx * hitbox.reach * extent, y + fy * hitbox.reach * extent
            corners = np.array(
                [
                    cam.point(x + sx, y + sy),
                    cam.point(ex + sx, ey + sy),
                    cam.point(ex - sx, ey - sy),
                    cam.point(x - sx, y - sy),
                ],
                np.int32,
            )
            if thickness < 0:
                cv2.fillConvexPoly(img, corners, colour, lt)
            else:
                cv2.polylines(img, [corners], True, colour, thickness, lt)

    def _draw_volley_windup(self, img: np.ndarray, cam: _Camera, boss: Boss, strike: Strike, progress: float) -> None:
        """Gold gathering in the boss's hand and the fan the daggers will fly along, lengthening
        and brightening as the throw nears."""
        hx = boss.x + math.cos(boss.angle) * boss.spec.radius
        hy = boss.y + math.sin(boss.angle) * boss.spec.radius
        hand = cam.point(hx, hy)
        colour = _mix(FLOOR, DAGGER, 0.35 + 0.65 * progress)
        length = 1.0 + 5.0 * progress
        count = strike.projectiles
        for k in range(count):  # the angles World._begin_strike throws them at
            a = boss.angle + (k - (count - 1) / 2) * strike.spread
            end = cam.point(hx + math.cos(a) * length, hy + math.sin(a) * length)
            cv2.line(img, hand, end, colour, self._thin, self._line_type)
        cv2.circle(img, hand, cam.pixels(0.15 + 0.35 * progress), DAGGER, -1, self._line_type)

    # -------------------------------------------------------------------------------- fighters
    def _draw_body(
        self,
        img: np.ndarray,
        cam: _Camera,
        x: float,
        y: float,
        radius: float,
        facing: float,
        colour: Colour,
        height: float,
    ) -> None:
        """A round body drawn as a teardrop pointing towards ``facing``. ``height`` metres off
        the floor, it is drawn larger, over a shadow cast down and to the right."""
        cx, cy = cam.point(x, y)
        r = cam.pixels(radius)
        if height > 0.0:
            shift = round(0.6 * height * cam.ppm)
            cv2.circle(img, (cx + shift, cy + shift), r, SHADOW, -1, self._line_type)
            r = cam.pixels(radius * (1.0 + 0.25 * height))
        cv2.circle(img, (cx, cy), r, colour, -1, self._line_type)
        a = math.radians(cam.degrees(facing))
        tip = max(r + 2, 1.8 * r)
        point = np.array(
            [
                (cx + round(tip * math.cos(a)), cy + round(tip * math.sin(a))),
                (cx + round(r * math.cos(a - 1.1)), cy + round(r * math.sin(a - 1.1))),
                (cx + round(r * math.cos(a + 1.1)), cy + round(r * math.sin(a + 1.1))),
            ],
            np.int32,
        )
        cv2.fillConvexPoly(img, point, colour, self._line_type)

    def _draw_boss(self, img: np.ndarray, cam: _Camera, boss: Boss, locked_on: bool) -> None:
        radius = boss.spec.radius
        if boss.dead:
            self._draw_body(img, cam, boss.x, boss.y, radius, boss.angle, DEAD, 0.0)
            return
        height = 0.0
        move = boss.move
        if move is not None and move.airborne:
            s = (boss.move_t - move.travel_start) / max(1, move.travel_ticks)
            if 0.0 <= s < 1.0:
                height = LEAP_HEIGHT * 4.0 * s * (1.0 - s)
        centre = cam.point(boss.x, boss.y)
        if boss.phase == 2:
            aura = cam.pixels(radius * (1.3 + 0.25 * height))
            cv2.circle(img, centre, aura, GOLD, self._thick, self._line_type)
        colour = BOSS_HURT if boss.hit_flash > 0 else boss.spec.colour
        self._draw_body(img, cam, boss.x, boss.y, radius, boss.angle, colour, height)
        if locked_on:
            cv2.circle(img, centre, cam.pixels(0.15), LOCK_ON, -1, self._line_type)

    def _draw_player(self, img: np.ndarray, cam: _Camera, player: Player) -> None:
        if player.dead:
            colour = DEAD
        elif player.hit_flash > 0:
            colour = PLAYER_HURT
        elif player.invulnerable:
            colour = PLAYER_IFRAMES
        else:
            colour = PLAYER
        attack = PLAYER_ATTACKS.get(player.anim)
        if attack is not None and 0 <= player.anim_t - attack.hit_start < attack.hit_ticks:
            self._draw_slash(img, cam, player, attack.hitbox)
        height = min(player.z, 2.0 * JUMP_HEIGHT)
        self._draw_body(img, cam, player.x, player.y, PLAYER_RADIUS, player.angle, colour, height)

    def _draw_slash(self, img: np.ndarray, cam: _Camera, player: Player, hitbox: Hitbox) -> None:
        """The player's blade as it cuts: an arc across a swing, a line along a thrust."""
        lt = self._line_type
        if hitbox.shape is Shape.SECTOR:
            r = cam.pixels(0.8 * hitbox.reach)
            mid, half = cam.degrees(player.angle), math.degrees(hitbox.half_angle)
            centre = cam.point(player.x, player.y)
            cv2.ellipse(img, centre, (r, r), 0.0, mid - half, mid + half, SLASH, self._thick, lt)
        else:
            c, s = math.cos(player.angle), math.sin(player.angle)
            start = cam.point(player.x + c * PLAYER_RADIUS, player.y + s * PLAYER_RADIUS)
            end = cam.point(player.x + c * hitbox.reach, player.y + s * hitbox.reach)
            cv2.line(img, start, end, SLASH, self._thick, lt)

    # ------------------------------------------------------------------------------------- HUD
    def _draw_hud(self, img: np.ndarray, player: Player, boss: Boss | None) -> None:
        """Elden Ring's HUD; the boss's bar and name only while a boss fight is on (``boss``)."""
        self._draw_bar(img, self._hp_bar, player.hp / max(1, player.max_hp), HP_BAR)
        self._draw_bar(img, self._fp_bar, player.fp / max(1, player.max_fp), FP_BAR)
        self._draw_bar(img, self._sp_bar, player.sp / max(1, player.max_sp), SP_BAR)
        x, y = self._flask_origin
        w, h = self._flask_size
        for i in range(max(PLAYER_FLASKS, player.flasks)):  # full flasks lit, drunk ones dark
            left = x + i * self._flask_step
            colour = FLASK if i < player.flasks else BAR_BACK
            cv2.rectangle(img, (left, y), (left + w - 1, y + h - 1), colour, -1)
        if boss is None:
            return
        self._draw_bar(img, self._boss_bar, boss.hp / max(1, boss.max_hp), boss.spec.bar_colour)
        if self._name_style is not None:
            origin, scale, thickness = self._name_style
            font, lt = cv2.FONT_HERSHEY_TRIPLEX, cv2.LINE_AA
            cv2.putText(img, boss.spec.name, origin, font, scale, TEXT, thickness, lt)

    def _draw_bar(self, img: np.ndarray, bar: tuple[int, int, int], fraction: float, colour: Colour) -> None:
        x, y, length = bar
        bottom = y + self._bar_height - 1
        if self._framed:
            cv2.rectangle(img, (x - 1, y - 1), (x + length, bottom + 1), BAR_EDGE, 1)
        cv2.rectangle(img, (x, y), (x + length - 1, bottom), BAR_BACK, -1)
        filled = round(length * min(1.0, max(0.0, fraction)))
        if filled > 0:
            cv2.rectangle(img, (x, y), (x + filled - 1, bottom), colour, -1)


def _windup_progress(move: BossMove, index: int, t: int) -> float:
    """How far strike ``index``'s wind-up has run, 0 to 1: from the start of the move for the
    first strike, from the end of the previous one for the rest of a combo."""
    begin = move.strikes[index - 1].end if index else 0
    if begin > move.strikes[index].start:  # a strike that falls with the one before it
        begin = 0
    length = max(1, move.strikes[index].start - begin)
    return min(1.0, max(0.0, (t - begin) / length))


def _landing(world: World, move: BossMove, t: int) -> tuple[float, float]:
    """Where the boss will stand when the move's blows fall. Before a lunge or leap takes off it
    is aimed at the player's current spot, exactly as ``World`` aims it at take-off."""
    b, radius = world.boss, world.spec.radius
    if not move.travel_ticks or t >= move.travel_start + move.travel_ticks:
        return b.x, b.y
    if t >= move.travel_start:
        left = move.travel_start + move.travel_ticks - t
        return world.clamp(b.x + b.travel_dx * left, b.y + b.travel_dy * left, radius)
    dx, dy = world.travel(move)
    return world.clamp(b.x + dx, b.y + dy, radius)
