"""The duel itself: a fixed 60 Hz, seeded, deterministic boss fight, the boss read from its data.

``World.tick`` takes the buttons held, pressed and released since the previous tick and advances
exactly 1/60 s. Same seed and same inputs at the same ticks give the same fight, bit for bit: the
only randomness is the boss's ``random.Random(seed)``, and nothing reads the wall clock.

Presses and releases are passed as events, not just the held set, so a tap that starts and ends
between two ticks still counts (a dodge tap is a roll even if it never spans a tick).

Around the fight runs the game's own life cycle (``Phase``), because a client that only ever
sees the fight never learns what the game does at its ends: the player's death plays out
("YOU DIED", a loading screen during which the player's and the boss's memory cannot be read,
a respawn at the Site of Grace outside the fog wall with the boss back at full HP and out of
reach), a boss kill is for good (the boss is gone from the save, the arena opens), and a fight
starts only when the player walks into the fog wall and presses the event action. None of this
touches a fight before someone's HP reaches 0, and ``restart`` puts the world back into a fresh
fight from any phase, so the in-place restart that training relies on is unchanged.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from enum import IntEnum

from env.common.fields import check_fields, checked, number
from env.sim import TICK_HZ, seconds_to_ticks
from env.sim.boss import BossSpec, load_boss
from env.sim.controls import Button
from env.sim.geometry import (
    GATE,
    PLAYER_RADIUS,
    clamp_to_arena,
    clamp_to_corridor,
    clamp_to_open_arena,
    turn_towards,
    wrap_angle,
)
from env.sim.moves import (
    BACKSTEP,
    BUFFER_TICKS,
    DODGE_TAP_TICKS,
    HEAL_AMOUNT,
    HEAL_AT,
    HEAL_TICKS,
    HIT_TICKS,
    JUMP_HEIGHT,
    JUMP_TICKS,
    KNOCKDOWN_DAMAGE,
    KNOCKDOWN_IFRAMES,
    KNOCKDOWN_TICKS,
    PLAYER_ATTACKS,
    ROLL,
    BossAnim,
    BossMove,
    Dodge,
    PlayerAnim,
    Strike,
)

DT = 1.0 / TICK_HZ

PLAYER_MAX_HP = 1100
PLAYER_MAX_FP = 80
PLAYER_MAX_SP = 120
PLAYER_FLASKS = 3
PLAYER_START = (0.0, -6.0)

WALK_SPEED = 3.2
SPRINT_SPEED = 5.6
CROUCH_SPEED = 1.6
HEAL_MOVE_SPEED = 1.0
SPRINT_DRAIN = 14.0  # stamina per second
STAMINA_REGEN = 50.0  # per second, after the delay below
STAMINA_REGEN_DELAY = 24  # ticks after spending stamina
CAMERA_TURN = 10.0  # rad/s while locked on
MOUSE_YAW_PER_PIXEL = 0.0025  # rad per mouse count while not locked on
LOCK_ON_RANGE = 20.0
LUNGE_STOPS_SHORT = 1.4  # metres: a lunge or leap ends this far from where the player stood
PULL_REACH = 8.0  # metres: a whirlwind draws in a player this close
FREE_ANIMS = (PlayerAnim.IDLE, PlayerAnim.WALK, PlayerAnim.SPRINT, PlayerAnim.CROUCH)

SENTRY_NPC_ID = 43100010
SENTRY_START = (1.6, -15.0)
SENTRY_MAX_HP = 420
NOTICE_RANGE = 15.0  # metres: in an open field, a boss notices a player this close, and the fight begins
FOG_REACH = 1.5  # metres from the gate within which the event action walks through the fog
FOG_INSIDE = (0.0, -8.8)  # where walking through the fog wall ends, inside the arena


class Phase(IntEnum):
    """Where the game is in its life cycle (read as the simulator's ``SimPhase``)."""

    FIGHT = 0  # behind the fog wall with the boss, both alive (or the blow that ends it just fell)
    DYING = 1  # the player's HP reached 0: the death animation, then "YOU DIED"
    LOADING = 2  # the loading screen after a death (or a restored save): no pointer chain resolves
    OUTSIDE = 3  # at the Site of Grace outside the fog wall (or, in an open field, beyond the boss's notice); it waits
    ENTERING = 4  # walking through the fog wall after the event action
    FELLED = 5  # the boss's HP reached 0: it dissolves
    CLEARED = 6  # the boss is gone from this save for good; the fog wall is gone


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """How long the game's own sequences last, in seconds of game time. The defaults are the
    game's as seen in play (unverified by measurement): the death animation with "YOU DIED"
    for about 6 s, then a loading screen of several seconds (8 s here; it depends on the disk),
    the boss dissolving for 4 s. Tests shorten them."""

    you_died: float = 1.5  # after HP 0, when "YOU DIED" appears
    death_screen: float = checked(
        6.0, number(0, 600), "from HP 0 to the loading screen", flag_name="death-screen-s"
    )  # after HP 0, when the loading screen begins
    loading: float = checked(8.0, number(0, 600), "the loading screen", flag_name="loading-s")
    boss_fade: float = 4.0  # after the boss's HP 0, when it is gone
    felled_banner: float = 1.5  # after the boss's HP 0, when "GREAT ENEMY FELLED" appears
    entry: float = 1.5  # walking through the fog wall

    def __post_init__(self) -> None:
        check_fields(self)

    def ticks(self, name: str) -> int:
        return seconds_to_ticks(getattr(self, name))


class Player:
    __slots__ = (
        "x",
        "y",
        "z",
        "angle",
        "hp",
        "max_hp",
        "fp",
        "max_fp",
        "sp",
        "max_sp",
        "flasks",
        "anim",
        "anim_t",
        "anim_len",
        "action",
        "dir_x",
        "dir_y",
        "hit_done",
        "healed",
        "dodge_down_at",
        "sprinting",
        "crouching",
        "locked_on",
        "buffered",
        "regen_wait",
        "no_gravity",
        "hit_flash",
        "iframes_until",
    )

    def __init__(self) -> None:
        self.restore()

    def restore(self) -> None:
        self.x, self.y = PLAYER_START
        self.z = 0.0
        self.angle = math.pi / 2
        self.hp = self.max_hp = PLAYER_MAX_HP
        self.fp = self.max_fp = PLAYER_MAX_FP
        self.sp = float(PLAYER_MAX_SP)
        self.max_sp = PLAYER_MAX_SP
        self.flasks = PLAYER_FLASKS
        self.anim = PlayerAnim.IDLE
        self.anim_t = 0
        self.anim_len = TICK_HZ
        self.action: object = None  # the PlayerAttack / Dodge being performed, if any
        self.dir_x = self.dir_y = 0.0
        self.hit_done = False
        self.healed = False
        self.dodge_down_at = -1
        self.sprinting = False
        self.crouching = False
        self.locked_on = True  # fights start locked on to the boss, as a player does at the fog
        self.buffered = 0
        self.regen_wait = 0
        self.no_gravity = False
        self.hit_flash = 0
        self.iframes_until = -1

    @property
    def dead(self) -> bool:
        return self.hp <= 0

    @property
    def free(self) -> bool:
        return self.anim in FREE_ANIMS

    @property
    def invulnerable(self) -> bool:
        if self.anim_t < self.iframes_until:
            return True
        action = self.action
        return isinstance(action, Dodge) and action.iframe_start <= self.anim_t < action.iframe_end

    def start(self, anim: PlayerAnim, length: int, action: object = None) -> None:
        self.anim = anim
        self.anim_t = 0
        self.anim_len = length
        self.action = action
        self.hit_done = False
        self.healed = False
        self.iframes_until = -1
        self.sprinting = False


class Boss:
    """The boss of ``spec``: its ids, HP, body and moves are the spec's (``env.sim.boss``)."""

    __slots__ = (
        "spec",
        "x",
        "y",
        "angle",
        "hp",
        "max_hp",
        "phase",
        "move",
        "move_t",
        "decide_in",
        "anim",
        "anim_len",
        "strikes_hit",
        "travel_dx",
        "travel_dy",
        "last_move",
        "hit_flash",
        "moving",
    )

    def __init__(self, spec: BossSpec) -> None:
        self.spec = spec
        self.restore()

    @property
    def npc_id(self) -> int:
        return self.spec.npc_id

    @property
    def npc_param_id(self) -> int:
        return self.spec.npc_param_id

    def restore(self) -> None:
        self.x, self.y = self.spec.start
        self.angle = -math.pi / 2
        self.hp = self.max_hp = self.spec.max_hp
        self.phase = 1
        self.move: BossMove | None = None
        self.move_t = 0
        self.decide_in = 40
        self.anim = BossAnim.IDLE
        self.anim_len = TICK_HZ
        self.strikes_hit = 0  # bit i set: strike i already hit the player
        self.travel_dx = self.travel_dy = 0.0
        self.last_move = ""
        self.hit_flash = 0
        self.moving = False

    @property
    def dead(self) -> bool:
        return self.hp <= 0

    def cancel_move(self) -> None:
        """Drop whatever the boss was doing (a teleport by memory write does this)."""
        if self.dead:
            return
        self.move = None
        self.move_t = 0
        self.anim = BossAnim.IDLE
        self.anim_len = TICK_HZ
        self.decide_in = 30


class Sentry:
    """An ordinary soldier standing guard in the way in, outside the fog wall. It never fights;
    it is there because Siphon's NPC attributes follow whatever the player targeted last, and in
    the game that is not always the boss."""

    npc_id = npc_param_id = SENTRY_NPC_ID
    __slots__ = ("x", "y", "angle", "hp", "max_hp", "anim", "anim_len")

    def __init__(self) -> None:
        self.restore()

    def restore(self) -> None:
        self.x, self.y = SENTRY_START
        self.angle = math.pi
        self.hp = self.max_hp = SENTRY_MAX_HP
        self.anim = 0
        self.anim_len = TICK_HZ

    @property
    def dead(self) -> bool:
        return self.hp <= 0

    def cancel_move(self) -> None:
        """It has no moves to cancel (a teleport by memory write calls this on any NPC)."""


Npc = Boss | Sentry


@dataclass(slots=True)
class Dagger:
    x: float
    y: float
    vx: float
    vy: float
    travelled: float
    damage: int


class World:
    """The whole game state plus ``tick``. Attribute reads and writes go through ``memory``."""

    def __init__(self, seed: int = 0, lifecycle: Lifecycle = Lifecycle(), boss: BossSpec | None = None) -> None:
        self.spec = boss or load_boss("margit")
        self.body_gap = PLAYER_RADIUS + self.spec.radius  # the fighters' bodies do not overlap
        self.player = Player()
        self.boss = Boss(self.spec)
        self.sentry = Sentry()
        self.daggers: list[Dagger] = []
        self.tick_count = 0
        # Bumped by every change a frame could show (a tick, a memory write, a restart), so a
        # frame cache keys on it: a paused world keeps its tick while writes move things.
        self.revision = 0
        self.memory_writes = 0  # writes of game memory (not of the Sim* controls) since the world began
        # The last ticks that saw a button pressed and released: when input reached the game, on
        # its own clock (what a live client cannot see from its side of the wire)
        self.press_tick = -1
        self.release_tick = -1
        self.camera_yaw = math.pi / 2
        self.seed = seed
        self.rng = random.Random(seed)
        # The game-speed pair of the game's memory: the value applies only while the flag is set.
        self.game_speed_flag = False
        self.game_speed_val = 1.0
        self.lifecycle = lifecycle
        self._set_phase(Phase.FIGHT)
        self.focus: Npc = self.boss  # what the player is locked on to, while locked on
        self.last_targeted: Npc | None = self.boss  # what the game last reported as targeted
        self._entry_from = GATE

    @property
    def speed(self) -> float:
        """How fast game time runs against real time (0: paused). Real-time clocks read this."""
        return self.game_speed_val if self.game_speed_flag else 1.0

    # ----------------------------------------------------------------------------------- setup
    def restart(self, seed: int | None = None) -> None:
        """Restart the fight in place: HP, stamina, FP, flasks, positions and the boss restored,
        no reload, as a reset by memory writes does in the game. ``seed`` reseeds the boss."""
        self._restore_everyone(Phase.FIGHT)
        self.focus = self.last_targeted = self.boss
        if seed is not None:
            self.seed = seed
            self.rng = random.Random(seed)

    def respawn(self) -> None:
        """Come back at the Site of Grace outside the fog wall, as after a death: full HP, FP,
        stamina and flasks, nothing targeted, the boss restored behind the fog and waiting (in
        an open field, in sight, until the player comes within ``NOTICE_RANGE``). The boss's
        random stream goes on where it was (only ``restart`` reseeds it)."""
        self._restore_everyone(Phase.OUTSIDE)
        p = self.player
        p.x, p.y = self.spec.arena.grace
        p.locked_on = False
        self.last_targeted = None

    def _restore_everyone(self, phase: Phase) -> None:
        """Everyone as the map loads them (the player at the fight's start), in ``phase``."""
        self.player.restore()
        self.boss.restore()
        self.sentry.restore()
        self.daggers.clear()
        self.camera_yaw = math.pi / 2
        self._set_phase(phase)

    def restore_save(self) -> None:
        """Load the backup save (on the game a manual step at the title screen): a loading
        screen, then the Site of Grace with the boss alive again, whatever happened before."""
        self._begin_loading()

    def _set_phase(self, phase: Phase) -> None:
        self.phase = phase
        self.phase_t = 0  # ticks since the phase began
        self.revision += 1

    def _begin_loading(self) -> None:
        self._set_phase(Phase.LOADING)
        self.daggers.clear()
        self.player.locked_on = False
        self.last_targeted = None  # the NPC objects are freed with the map

    @property
    def loading(self) -> bool:
        """True on the loading screen, when the game's pointer chains lead nowhere."""
        return self.phase is Phase.LOADING

    def gone(self, npc: Npc) -> bool:
        """True for an NPC that no longer exists: the boss once killed for good."""
        return npc is self.boss and self.phase is Phase.CLEARED

    @property
    def outside(self) -> bool:
        """True while the player is on the near side of a fog wall that is still up."""
        return self.phase in (Phase.OUTSIDE, Phase.ENTERING)

    @property
    def time(self) -> float:
        """Game time in seconds since the world was created."""
        return self.tick_count / TICK_HZ

    @property
    def over(self) -> bool:
        return self.player.dead or self.boss.dead

    def distance(self) -> float:
        return math.hypot(self.boss.x - self.player.x, self.boss.y - self.player.y)

    # ------------------------------------------------------------------------------------ tick
    def tick(self, held: int = 0, pressed: int = 0, released: int = 0, mouse_dx: float = 0.0) -> None:
        """Advance one tick with the buttons ``held`` now and those ``pressed``/``released`` since
        the previous tick (bit masks of ``Button``), and ``mouse_dx`` counts of camera turn."""
        if pressed:
            self.press_tick = self.tick_count
        if released:
            self.release_tick = self.tick_count
        self._update_camera(mouse_dx)
        self._update_player(held, pressed, released)
        self._update_boss()
        self._update_daggers()
        self._update_lifecycle()
        self.tick_count += 1
        self.revision += 1

    # ------------------------------------------------------------------------------- lifecycle
    def _update_lifecycle(self) -> None:
        phase = self.phase
        self.phase_t += 1
        timings = self.lifecycle
        if phase is Phase.OUTSIDE and not self.spec.arena.walled and self.distance() <= NOTICE_RANGE:
            self._set_phase(Phase.FIGHT)  # no fog wall to walk through: the boss has seen the player
        elif phase in (Phase.FIGHT, Phase.OUTSIDE, Phase.ENTERING):
            if self.player.dead:
                self._set_phase(Phase.DYING)
            elif self.boss.dead:
                self._set_phase(Phase.FELLED)
        elif phase is Phase.DYING and self.phase_t >= timings.ticks("death_screen"):
            self._begin_loading()
        elif phase is Phase.LOADING and self.phase_t >= timings.ticks("loading"):
            self.respawn()
        elif phase is Phase.FELLED and self.phase_t >= timings.ticks("boss_fade"):
            self._set_phase(Phase.CLEARED)
            if self.focus is self.boss:
                self.player.locked_on = False

    def _at_gate(self) -> bool:
        p = self.player
        return math.hypot(p.x - GATE[0], p.y - GATE[1]) <= FOG_REACH

    def _walk_through_fog(self) -> None:
        """The fog wall's own animation: the player is carried through, then the fight begins,
        with nothing targeted (the player locks on, as in the game)."""
        p = self.player
        p.anim_t += 1
        s = min(1.0, p.anim_t / p.anim_len)
        (x0, y0), (x1, y1) = self._entry_from, FOG_INSIDE
        p.x, p.y = x0 + (x1 - x0) * s, y0 + (y1 - y0) * s
        p.angle = math.atan2(y1 - y0, x1 - x0)
        if p.anim_t >= p.anim_len:
            p.start(PlayerAnim.IDLE, TICK_HZ)
            p.locked_on = False
            self._set_phase(Phase.FIGHT)

    def _in_sight(self) -> Npc | None:
        """The NPC a lock-on would pick: the fog wall hides the boss from outside and everything
        outside from within."""
        if self.phase is Phase.LOADING:
            return None
        if not self.spec.arena.walled:  # nothing hides anything in an open field
            return None if self.phase is Phase.CLEARED else self.boss
        if self.outside or (self.phase is Phase.CLEARED and self.player.y < GATE[1]):
            return self.sentry
        return None if self.phase is Phase.CLEARED else self.boss

    def _angle_to(self, npc: Npc) -> float:
        return math.atan2(npc.y - self.player.y, npc.x - self.player.x)

    def _confine(self, x: float, y: float) -> tuple[float, float]:
        """Keep the player where the fog walls allow: the arena, the way in, or both once open."""
        if not self.spec.arena.walled:
            return self.clamp(x, y, PLAYER_RADIUS)
        if self.outside:
            return clamp_to_corridor(x, y, PLAYER_RADIUS)
        if self.phase is Phase.CLEARED:
            return clamp_to_open_arena(x, y, PLAYER_RADIUS)
        return self.clamp(x, y, PLAYER_RADIUS)

    def clamp(self, x: float, y: float, radius: float) -> tuple[float, float]:
        """Keep a body of ``radius`` within the fight's ground: the arena's wall, or the field's edge."""
        return clamp_to_arena(x, y, radius, self.spec.arena.radius)

    # ---------------------------------------------------------------------------------- camera
    def _update_camera(self, mouse_dx: float) -> None:
        p = self.player
        if p.locked_on and not self.focus.dead:
            self.camera_yaw = turn_towards(self.camera_yaw, self._angle_to(self.focus), CAMERA_TURN * DT)
        else:
            p.locked_on = False
            if mouse_dx:
                self.camera_yaw = wrap_angle(self.camera_yaw - mouse_dx * MOUSE_YAW_PER_PIXEL)

    # ---------------------------------------------------------------------------------- player
    def _update_player(self, held: int, pressed: int, released: int) -> None:
        p = self.player
        if p.hit_flash:
            p.hit_flash -= 1
        if self.phase is Phase.ENTERING:
            self._walk_through_fog()
            return
        if p.dead or self.phase in (Phase.DYING, Phase.LOADING):
            self._advance_anim(p)
            return
        if pressed & Button.LOCK_ON:
            self._toggle_lock_on()
        if (
            self.phase is Phase.OUTSIDE
            and pressed & Button.EVENT_ACTION
            and p.free
            and self._at_gate()
            and self.spec.arena.walled
        ):
            self._entry_from = (p.x, p.y)
            p.start(PlayerAnim.FOG_ENTRY, self.lifecycle.ticks("entry"))
            p.locked_on = False
            self._set_phase(Phase.ENTERING)
            return
        if pressed & Button.CROUCH:
            p.crouching = not p.crouching
        request = self._requested_action(held, pressed, released)

        if p.free:
            if not request and p.buffered:
                request, p.buffered = p.buffered, 0
            if request:
                self._begin_action(request, held)
        elif request and p.anim_len - p.anim_t <= BUFFER_TICKS:
            p.buffered = request

        if p.free:
            self._walk(held)
        else:
            self._act(held)
        self._regen_stamina()

    def _toggle_lock_on(self) -> None:
        p = self.player
        npc = self._in_sight()
        if npc is None or npc.dead or math.hypot(npc.x - p.x, npc.y - p.y) > LOCK_ON_RANGE:
            return
        p.locked_on = not p.locked_on
        if p.locked_on:
            self.focus = self.last_targeted = npc

    def _requested_action(self, held: int, pressed: int, released: int) -> int:
        """The one action this tick's button events ask for, highest priority first."""
        p = self.player
        roll = False
        if pressed & Button.DODGE:
            p.dodge_down_at = self.tick_count
        if released & Button.DODGE and p.dodge_down_at >= 0:
            roll = self.tick_count - p.dodge_down_at <= DODGE_TAP_TICKS
            p.dodge_down_at = -1
        if roll:
            return Button.DODGE
        for button in (Button.ATTACK, Button.STRONG_ATTACK, Button.SKILL, Button.USE_ITEM, Button.JUMP):
            if pressed & button:
                return button
        return 0

    def _move_vector(self, held: int) -> tuple[float, float]:
        """The held movement keys as a unit vector in the world, relative to the camera."""
        fwd = bool(held & Button.MOVE_FORWARD) - bool(held & Button.MOVE_BACK)
        right = bool(held & Button.MOVE_RIGHT) - bool(held & Button.MOVE_LEFT)
        if not fwd and not right:
            return 0.0, 0.0
        c, s = math.cos(self.camera_yaw), math.sin(self.camera_yaw)
        x = fwd * c + right * s
        y = fwd * s - right * c
        n = math.hypot(x, y)
        return x / n, y / n

    def _begin_action(self, request: int, held: int) -> None:
        p = self.player
        if request == Button.DODGE:
            if p.sp <= 0:
                return
            mx, my = self._move_vector(held)
            dodge = ROLL
            if not mx and not my:  # no direction: a backstep away from where the player faces
                dodge = BACKSTEP
                mx, my = -math.cos(p.angle), -math.sin(p.angle)
            else:
                p.angle = math.atan2(my, mx)
            p.start(dodge.anim, dodge.length, dodge)
            p.dir_x, p.dir_y = mx, my
            self._spend_stamina(dodge.stamina)
        elif request in (Button.ATTACK, Button.STRONG_ATTACK, Button.SKILL):
            anim = {
                Button.ATTACK: PlayerAnim.LIGHT_ATTACK,
                Button.STRONG_ATTACK: PlayerAnim.HEAVY_ATTACK,
                Button.SKILL: PlayerAnim.SKILL,
            }[request]
            attack = PLAYER_ATTACKS[anim]
            if p.sp <= 0 or p.fp < attack.fp:
                return
            if p.locked_on:
                p.angle = self._angle_to(self.focus)
            p.start(anim, attack.length, attack)
            p.fp -= attack.fp
            self._spend_stamina(attack.stamina)
        elif request == Button.USE_ITEM:
            if p.flasks <= 0:
                return
            p.flasks -= 1
            p.start(PlayerAnim.HEAL, HEAL_TICKS)
        elif request == Button.JUMP:
            if p.sp <= 0:
                return
            p.start(PlayerAnim.JUMP, JUMP_TICKS)
            p.dir_x, p.dir_y = self._move_vector(held)
            self._spend_stamina(10)

    def _walk(self, held: int) -> None:
        p = self.player
        mx, my = self._move_vector(held)
        moving = bool(mx or my)
        p.sprinting = (
            moving
            and bool(held & Button.DODGE)
            and p.dodge_down_at >= 0
            and self.tick_count - p.dodge_down_at > DODGE_TAP_TICKS
            and p.sp > 0
        )
        if p.sprinting:
            speed, anim = SPRINT_SPEED, PlayerAnim.SPRINT
            self._spend_stamina(SPRINT_DRAIN * DT)
        elif p.crouching:
            speed, anim = CROUCH_SPEED, PlayerAnim.CROUCH
        else:
            speed, anim = WALK_SPEED, PlayerAnim.WALK
        if not moving:
            anim = PlayerAnim.CROUCH if p.crouching else PlayerAnim.IDLE
        if anim != p.anim:
            p.start(anim, TICK_HZ)
        else:
            self._advance_anim(p)
        if moving:
            self._slide(p, mx * speed * DT, my * speed * DT)
        if p.locked_on:
            p.angle = self._angle_to(self.focus)
        elif moving:
            p.angle = math.atan2(my, mx)
        self._fall(p)

    def _act(self, held: int) -> None:
        """Advance a committed action: a dodge, an attack, a heal, a jump or a stagger."""
        p = self.player
        action, t = p.action, p.anim_t
        if isinstance(action, Dodge):
            if t < action.move_ticks:
                v = 2.0 * action.distance / action.move_ticks * (1.0 - (t + 0.5) / action.move_ticks)
                self._slide(p, p.dir_x * v, p.dir_y * v)
        elif p.anim in PLAYER_ATTACKS:
            attack = PLAYER_ATTACKS[p.anim]
            if t < attack.hit_start and attack.lunge:
                step = attack.lunge / attack.hit_start
                self._slide(p, math.cos(p.angle) * step, math.sin(p.angle) * step)
            if (
                not p.hit_done
                and attack.hit_start <= t < attack.hit_start + attack.hit_ticks
                and attack.hitbox.hits(p.x, p.y, p.angle, self.boss.x, self.boss.y, 0.0, self.spec.radius)
                and not self.boss.dead
            ):
                p.hit_done = True
                self._damage_boss(attack.damage)
        elif p.anim == PlayerAnim.HEAL:
            if t == HEAL_AT:
                p.hp = min(p.max_hp, p.hp + HEAL_AMOUNT)
            mx, my = self._move_vector(held)
            self._slide(p, mx * HEAL_MOVE_SPEED * DT, my * HEAL_MOVE_SPEED * DT)
        elif p.anim == PlayerAnim.JUMP:
            s = (t + 1) / JUMP_TICKS
            p.z = 4.0 * JUMP_HEIGHT * s * (1.0 - s)
            self._slide(p, p.dir_x * WALK_SPEED * DT, p.dir_y * WALK_SPEED * DT)
        elif p.anim in (PlayerAnim.HIT, PlayerAnim.KNOCKDOWN):
            if t < 10:
                self._slide(p, p.dir_x * 0.08, p.dir_y * 0.08)
        self._advance_anim(p)

    def _advance_anim(self, p: Player) -> None:
        p.anim_t += 1
        if p.anim_t >= p.anim_len:
            if p.dead:
                p.anim_t = p.anim_len
                return
            if not p.free:
                if p.anim == PlayerAnim.JUMP and not p.no_gravity:
                    p.z = 0.0
                p.start(PlayerAnim.IDLE, TICK_HZ)
            else:
                p.anim_t = 0

    def _fall(self, p: Player) -> None:
        if p.z > 0.0 and not p.no_gravity:
            p.z = max(0.0, p.z - 9.0 * DT)

    def _slide(self, p: Player, dx: float, dy: float) -> None:
        """Move the player, kept inside the arena and outside the boss's body."""
        x, y = self._confine(p.x + dx, p.y + dy)
        b = self.boss
        ox, oy = x - b.x, y - b.y
        d2 = ox * ox + oy * oy
        gap = self.body_gap
        if d2 < gap * gap and not b.dead:
            d = math.sqrt(d2) or 1e-6
            x, y = self._confine(b.x + ox / d * gap, b.y + oy / d * gap)
        p.x, p.y = x, y

    def _spend_stamina(self, amount: float) -> None:
        p = self.player
        p.sp = max(0.0, p.sp - amount)
        p.regen_wait = STAMINA_REGEN_DELAY

    def _regen_stamina(self) -> None:
        p = self.player
        if p.regen_wait > 0:
            p.regen_wait -= 1
        elif p.sp < p.max_sp:
            p.sp = min(float(p.max_sp), p.sp + STAMINA_REGEN * DT)

    def _hurt_player(self, damage: int, from_x: float, from_y: float) -> None:
        p = self.player
        p.hp = max(0, p.hp - damage)
        p.hit_flash = 8
        dx, dy = p.x - from_x, p.y - from_y
        n = math.hypot(dx, dy) or 1.0
        p.buffered = 0
        if p.hp <= 0:
            p.start(PlayerAnim.DEATH, 3 * TICK_HZ)
            p.z = 0.0
            p.locked_on = False
            return
        knockdown = damage >= KNOCKDOWN_DAMAGE
        p.start(PlayerAnim.KNOCKDOWN if knockdown else PlayerAnim.HIT, KNOCKDOWN_TICKS if knockdown else HIT_TICKS)
        if knockdown:
            p.iframes_until = KNOCKDOWN_IFRAMES
        p.dir_x, p.dir_y = dx / n, dy / n
        p.z = 0.0

    def _damage_boss(self, damage: int) -> None:
        b = self.boss
        b.hp = max(0, b.hp - damage)
        b.hit_flash = 8
        if b.hp <= 0:
            b.move = None
            b.anim = BossAnim.DEATH
            b.anim_len = 4 * TICK_HZ
            self.daggers.clear()

    # ------------------------------------------------------------------------------------ boss
    def _update_boss(self) -> None:
        b, p = self.boss, self.player
        if b.hit_flash:
            b.hit_flash -= 1
        if b.dead or self.phase not in (Phase.FIGHT, Phase.DYING):
            return
        if b.move is None:
            self._boss_between_moves()
            return
        move, t = b.move, b.move_t
        first = move.strikes[0].start
        if t < first - move.track_stop:
            b.angle = turn_towards(b.angle, self._angle_to_player(), move.track_rate * DT)
        if move.pull and t < first and p.free and not p.dead:
            self._pull(move.pull)
        if move.travel_ticks and move.travel_start <= t < move.travel_start + move.travel_ticks:
            if t == move.travel_start:
                dx, dy = self.travel(move)
                b.travel_dx = dx / move.travel_ticks
                b.travel_dy = dy / move.travel_ticks
            b.x, b.y = self.clamp(b.x + b.travel_dx, b.y + b.travel_dy, self.spec.radius)
        for i, strike in enumerate(move.strikes):
            if strike.start <= t < strike.end:
                if t == strike.start:
                    self._begin_strike(strike)
                if not b.strikes_hit & (1 << i) and strike.hitbox is not None and not p.dead:
                    age = t - strike.start
                    if not p.invulnerable and strike.hitbox.hits(
                        b.x, b.y, b.angle, p.x, p.y, p.z, PLAYER_RADIUS, age * DT, age / strike.active
                    ):
                        b.strikes_hit |= 1 << i
                        self._hurt_player(strike.damage, b.x, b.y)
        b.move_t += 1
        if b.move_t >= move.length:
            b.last_move = move.name
            b.move = None
            b.anim = BossAnim.IDLE
            b.anim_len = TICK_HZ
            b.decide_in = self.rng.randint(*self.spec.decide_ticks[b.phase])

    def travel(self, move: BossMove) -> tuple[float, float]:
        """How far a lunge, leap or charge taking off now carries the boss (x, y): towards the
        player's spot, stopping short of it (a charge runs on past it), never beyond its reach.
        The ground's edge stops it on the way (``clamp``)."""
        b, p = self.boss, self.player
        dx, dy = p.x - b.x, p.y - b.y
        dist = math.hypot(dx, dy) or 1.0
        reach = min(move.travel_max, max(0.0, dist - LUNGE_STOPS_SHORT + move.overshoot))
        return dx / dist * reach, dy / dist * reach

    def _pull(self, speed: float) -> None:
        """Draw a player within reach towards the boss (a whirlwind's wind-up): walking away
        only holds the ground, a roll breaks free."""
        p, b = self.player, self.boss
        dx, dy = b.x - p.x, b.y - p.y
        dist = math.hypot(dx, dy)
        if self.body_gap < dist <= PULL_REACH:
            step = min(speed * DT, dist - self.body_gap)
            self._slide(p, dx / dist * step, dy / dist * step)

    def _begin_strike(self, strike: Strike) -> None:
        b = self.boss
        fx, fy = math.cos(b.angle), math.sin(b.angle)
        if strike.step:
            ahead = (self.player.x - b.x) * fx + (self.player.y - b.y) * fy
            step = strike.step if ahead <= 0 else min(strike.step, max(0.0, self.distance() - self.body_gap))
            b.x, b.y = self.clamp(b.x + fx * step, b.y + fy * step, self.spec.radius)
        for k in range(strike.projectiles):
            a = b.angle + (k - (strike.projectiles - 1) / 2) * strike.spread
            speed = self.spec.projectiles.speed
            vx, vy = math.cos(a) * speed * DT, math.sin(a) * speed * DT
            r = self.spec.radius
            self.daggers.append(Dagger(b.x + fx * r, b.y + fy * r, vx, vy, 0.0, strike.damage))

    def _angle_to_player(self) -> float:
        return math.atan2(self.player.y - self.boss.y, self.player.x - self.boss.x)

    def _boss_between_moves(self) -> None:
        b, p = self.boss, self.player
        spec = self.spec
        if b.phase == 1 and b.hp <= spec.phase_two_below * b.max_hp:
            b.phase = 2
            b.move = spec.phase_shift
            b.move_t = 0
            b.anim = BossAnim.PHASE_SHIFT
            b.anim_len = spec.phase_shift.length
            b.strikes_hit = 0
            return
        b.angle = turn_towards(b.angle, self._angle_to_player(), spec.turn * DT)
        dist = self.distance()
        b.moving = dist > spec.keep_distance and not p.dead
        running = dist > spec.run_beyond
        if b.moving:
            step = min((spec.run if running else spec.walk) * DT, dist - spec.keep_distance)
            b.x, b.y = self.clamp(b.x + math.cos(b.angle) * step, b.y + math.sin(b.angle) * step, spec.radius)
        b.anim = (BossAnim.RUN if running else BossAnim.WALK) if b.moving else BossAnim.IDLE
        if b.decide_in > 0:
            b.decide_in -= 1
            return
        if p.dead:
            return
        choices = [m for m in spec.moves_by_phase[b.phase] if m.min_range <= dist <= m.max_range]
        if not choices:
            return
        weights = [m.weight * (0.35 if m.name == b.last_move else 1.0) for m in choices]
        move = self.rng.choices(choices, weights)[0]
        b.move = move
        b.move_t = 0
        b.anim = move.anim_id
        b.anim_len = move.length
        b.strikes_hit = 0
        b.moving = False

    # --------------------------------------------------------------------------------- daggers
    def _update_daggers(self) -> None:
        if not self.daggers:
            return
        p = self.player
        keep = []
        projectiles = self.spec.projectiles
        reach = (PLAYER_RADIUS + projectiles.radius) ** 2
        for d in self.daggers:
            d.x += d.vx
            d.y += d.vy
            d.travelled += projectiles.speed * DT
            if not p.dead and (d.x - p.x) ** 2 + (d.y - p.y) ** 2 <= reach:
                if not p.invulnerable:
                    self._hurt_player(d.damage, d.x - d.vx, d.y - d.vy)
                    continue
            if d.travelled < projectiles.range:
                keep.append(d)
        self.daggers = keep
