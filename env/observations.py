"""Observations: frame preprocessing and the observation Dict, shared by the env and the dataset
builder so that training data and live observations are produced by the very same code.

Frames are cropped (by fractions of the frame, so one setting fits any window size), resized
with OpenCV's area filter and stacked in time; game state becomes normalised scalars (HP as fractions of max HP, distance in metres capped at 20)
and animation ids mapped through the profile's vocabulary (unknown ids become 0); the player's
flask charges left only when asked for.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike

from env.common.cli import size_within
from env.common.errors import ConfigError
from env.common.fields import Rule, is_int, is_number

if TYPE_CHECKING:
    from env.actions import ActionTable
    from env.profile import Profile

MIN_FRAME_SIDE, MAX_FRAME_SIDE = 8, 4096
MAX_DISTANCE = 20.0
PLAYER_ANIMATIONS = 100
BOSS_ANIMATIONS = 200
FLASK_ATTRIBUTE = "HeroFlaskCharges"
"""The attribute that counts the player's flask charges left (``EnvConfig.observe_flasks``)."""
MAX_FLASKS = 14
"""The most flask charges the game gives (both flasks together, fully upgraded): the simulator's
HUD draws one icon per charge."""
FULL_FRAME = (0.0, 0.0, 1.0, 1.0)
"""The crop that keeps the whole frame."""
FRAME_SIZE = (84, 84)
"""The observation frame's (width, height) unless a config asks for another: the size Atari agents
learn from, small enough for a CNN on a CPU. The simulator's window defaults to it, so its frames
need no resizing."""


@dataclass(frozen=True, slots=True)
class FrameSpec:
    """How a captured frame becomes an observation frame.

    ``crop`` is (left, top, right, bottom) as fractions of the frame, e.g. (0, 0.1, 1, 1) drops
    the top tenth; ``size`` is (width, height) of the result.
    """

    size: tuple[int, int] = FRAME_SIZE
    crop: tuple[float, float, float, float] = FULL_FRAME

    def __post_init__(self) -> None:
        FRAME_SIZE_RULE.check("frame_size", self.size)
        FRAME_CROP_RULE.check("frame_crop", self.crop)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.size[1], self.size[0], 3)

    def __str__(self) -> str:
        """``84x84``, or ``84x84 cropped to 0,0.1,1,1``: how messages name it."""
        size, crop = self._texts()
        return size if crop is None else f"{size} cropped to {crop}"

    @property
    def flags(self) -> str:
        """The command-line flags that ask for it (``capture.build_dataset``'s)."""
        size, crop = self._texts()
        return f"--frame-size {size}" if crop is None else f"--frame-size {size} --frame-crop {crop}"

    def _texts(self) -> tuple[str, str | None]:
        """(size as WxH, crop as L,T,R,B or None for the whole frame), as the flags write them."""
        crop = None if self.crop == FULL_FRAME else ",".join(f"{v:g}" for v in self.crop)
        return f"{self.size[0]}x{self.size[1]}", crop

    def process(self, rgb: np.ndarray) -> np.ndarray:
        """Crop and resize one RGB uint8 frame (H, W, 3) -> ``shape``."""
        h, w = rgb.shape[:2]
        left, top, right, bottom = self.crop
        if self.crop != FULL_FRAME:
            rgb = rgb[round(top * h) : round(bottom * h), round(left * w) : round(right * w)]
        if rgb.shape[1] == self.size[0] and rgb.shape[0] == self.size[1]:
            return rgb.copy()  # observations are the caller's to keep: never alias the game's frame
        return cv2.resize(rgb, self.size, interpolation=cv2.INTER_AREA)


def _is_frame_size(size: Any) -> bool:
    return (
        isinstance(size, tuple)
        and len(size) == 2
        and all(is_int(side) and MIN_FRAME_SIDE <= side <= MAX_FRAME_SIDE for side in size)
    )


def _is_frame_crop(crop: Any) -> bool:
    if not (isinstance(crop, tuple) and len(crop) == 4 and all(is_number(v) for v in crop)):
        return False
    left, top, right, bottom = crop
    return 0 <= left < right <= 1 and 0 <= top < bottom <= 1


FRAME_SIZE_RULE = Rule(
    _is_frame_size, f"must be [width, height] in pixels, each side from {MIN_FRAME_SIDE} to {MAX_FRAME_SIDE}"
)
"""A frame size something can use: below 8 pixels a side the HUD and fighters vanish, above 4096
one frame alone takes tens of megabytes (a typo like 99999x99999 would ask for tens of gigabytes)."""
FRAME_CROP_RULE = Rule(
    _is_frame_crop,
    "must be [left, top, right, bottom] fractions with 0 <= left < right <= 1 and 0 <= top < bottom <= 1",
)
"""A crop that keeps something and reaches nowhere outside the frame."""


parse_size = size_within(FRAME_SIZE_RULE)
"""A frame size as a flag writes it, ``WIDTHxHEIGHT`` (an argparse ``type``)."""


def parse_crop(text: str) -> tuple[float, float, float, float]:
    """``"0,0.1,1,1"`` -> ``(0.0, 0.1, 1.0, 1.0)``: left, top, right, bottom as fractions of the frame."""
    try:
        crop = tuple(float(v) for v in text.split(","))
    except ValueError:
        crop = ()
    if len(crop) != 4:
        raise argparse.ArgumentTypeError(
            f"crop must look like 0,0.1,1,1 (LEFT,TOP,RIGHT,BOTTOM fractions), got {text!r}"
        )
    if not FRAME_CROP_RULE.accepts(crop):
        raise argparse.ArgumentTypeError(f"{text!r} {FRAME_CROP_RULE.allowed}")
    return crop


class AnimationVocabulary:
    """Raw animation id -> small index: the id at position i of the list becomes i + 1, any other
    id becomes 0, and ids that do not fit in ``size`` raise at construction. Takes one id (an
    env step) or an array of them (a recorded episode)."""

    def __init__(self, ids: Sequence[int], size: int) -> None:
        if len(ids) >= size:
            raise ConfigError(f"{len(ids)} animation ids do not fit Discrete({size}) (index 0 is 'unknown')")
        self._index = {int(a): i + 1 for i, a in enumerate(ids)}
        order = np.argsort(np.asarray(ids, np.int64), kind="stable")
        self._sorted_ids = np.asarray(ids, np.int64)[order]
        self._sorted_values = (order + 1).astype(np.int64)

    def __call__(self, anim_id: int | np.ndarray) -> int | np.ndarray:
        if np.ndim(anim_id) == 0:
            return self._index.get(int(anim_id), 0)
        ids = np.asarray(anim_id, np.int64)
        if not len(self._sorted_ids):
            return np.zeros(ids.shape, np.int64)
        at = np.minimum(np.searchsorted(self._sorted_ids, ids), len(self._sorted_ids) - 1)
        return np.where(self._sorted_ids[at] == ids, self._sorted_values[at], 0)


def observation_space(
    frame: FrameSpec,
    frame_stack: int | None = None,
    action_history: int | None = None,
    action_space: spaces.Space | None = None,
    flasks: bool = False,
) -> spaces.Dict:
    """The observation Dict for these settings: frame, HP, distance and both animations always, the
    frame stack, the action history and the flask charges left only when asked for; every space
    exists before any reset."""
    space = {
        "frame": spaces.Box(0, 255, frame.shape, np.uint8),
        "player_hp": spaces.Box(0.0, 1.0, (1,), np.float32),
        "boss_hp": spaces.Box(0.0, 1.0, (1,), np.float32),
        "distance": spaces.Box(0.0, MAX_DISTANCE, (1,), np.float32),
        "player_animation": spaces.Discrete(PLAYER_ANIMATIONS),
        "boss_animation": spaces.Discrete(BOSS_ANIMATIONS),
    }
    if flasks:
        space["flasks"] = spaces.Box(0.0, float(MAX_FLASKS), (1,), np.float32)
    if frame_stack:
        space["frame_stack"] = spaces.Box(0, 255, (frame_stack, *frame.shape), np.uint8)
    if action_history:
        if isinstance(action_space, spaces.Discrete):
            space["action_history"] = spaces.Box(0, int(action_space.n) - 1, (action_history,), np.int32)
        elif isinstance(action_space, spaces.MultiBinary):
            space["action_history"] = spaces.Box(0, 1, (action_history, int(np.prod(action_space.shape))), np.int32)
        else:
            raise ValueError("action_history needs a Discrete or MultiBinary action space")
    return spaces.Dict(space)


STATE_ATTRIBUTES = ("HeroHp", "HeroMaxHp", "NpcHp", "NpcMaxHp", "HeroAnimId", "NpcAnimId")


def observed_attributes(profile: Profile, flasks: bool = False) -> tuple[str, ...]:
    """The attributes an observation is made of: HP, animations, both fighters' positions, and
    the flask charges when ``flasks`` asks for them."""
    counted = (FLASK_ATTRIBUTE,) if flasks else ()
    names = tuple(dict.fromkeys((*STATE_ATTRIBUTES, *counted, *profile.player_position, *profile.boss_position)))
    unknown = [a for a in names if a not in profile.siphon.attributes]
    if FLASK_ATTRIBUTE in unknown:
        raise ConfigError(
            f"observe_flasks needs the profile to read {FLASK_ATTRIBUTE}, and profile {profile.name!r} does not "
            "(the simulator's does; no address for it is known in the game's yet): set observe_flasks to false, "
            f"or give the profile a {FLASK_ATTRIBUTE} attribute"
        )
    if unknown:
        raise ConfigError(f"profile {profile.name!r} lacks attributes the observation needs: {', '.join(unknown)}")
    return names


def window(values: np.ndarray, end: ArrayLike, start: ArrayLike, length: int, pad: Any = None) -> np.ndarray:
    """The history rule, written once for the env (one step) and for a dataset (a batch of rows):
    for each ``end``, the ``length`` rows of ``values`` just before row ``end``, oldest first, where
    a row before its episode's first row ``start`` is ``pad``, or (``pad`` None) that first row.
    ``end`` and ``start`` are one row number each, or arrays of them (one window per element)."""
    end, start = np.asarray(end)[..., None], np.asarray(start)[..., None]
    rows = end - length + np.arange(length)
    if pad is None:
        return values[np.maximum(rows, start)]
    out = np.empty(rows.shape + values.shape[1:], values.dtype)
    out[...] = pad
    kept = rows >= start
    out[kept] = values[rows[kept]]
    return out


def stack_window(frames: np.ndarray, at: ArrayLike, first: ArrayLike, length: int) -> np.ndarray:
    """The observation's ``frame_stack`` at row ``at`` of an episode whose first row is ``first``:
    the last ``length`` frames up to its own, padded with the episode's first frame."""
    return window(frames, np.asarray(at) + 1, first, length)


def history_window(actions: np.ndarray, at: ArrayLike, first: ArrayLike, length: int, idle: Any) -> np.ndarray:
    """The observation's ``action_history`` at row ``at`` (row ``k`` of ``actions`` is the action
    taken from observation ``k``): the last ``length`` actions that led to it, padded with the
    action table's ``idle`` action (whatever its index)."""
    return window(actions, at, first, length, idle).astype(np.int32)


@dataclass(frozen=True, slots=True)
class EpisodeMemory:
    """What an observation holds of its episode's past, each only when asked for: a stack of its
    last frames and its last actions. ``keys`` is the one rule that makes them, applied by the env
    to the rows it keeps of the episode so far and by a dataset to all its rows at once, so the
    two cannot differ."""

    frame_stack: int | None = None
    action_history: int | None = None
    idle: Any = 0
    """The action table's idle action: what the action history is padded with."""

    @property
    def rows(self) -> int:
        """How many of an episode's last frames ``keys`` ever looks at (and one action fewer)."""
        return max(self.frame_stack or 1, (self.action_history or 0) + 1)

    def keys(self, frames: np.ndarray, actions: np.ndarray, at: ArrayLike, first: ArrayLike) -> dict[str, np.ndarray]:
        """The memory's keys at row(s) ``at``, each row's episode starting at row ``first``: row k of
        ``frames`` is observation k's, row k of ``actions`` the action taken from it."""
        out = {}
        if self.frame_stack:
            out["frame_stack"] = stack_window(frames, at, first, self.frame_stack)
        if self.action_history:
            out["action_history"] = history_window(actions, at, first, self.action_history, self.idle)
        return out


class ObservationBuilder:
    """Builds the observation Dict from game state and frames; ``space`` exists from construction.

    What an observation holds of its episode's past is ``EpisodeMemory``'s rule, applied here to
    the episode's last rows (the first observation has a stack of its own frame and a history of
    idle actions; every step then adds its frame and the action that led to it).
    ``elden_il.data`` applies the same rule to a dataset's episodes, and a test replays recordings
    through the env to hold both to it.
    """

    def __init__(self, frame: FrameSpec, memory: EpisodeMemory, actions: ActionTable, flasks: bool = False) -> None:
        profile = actions.profile
        self.frame = frame
        self.memory = memory
        self.player_anims = AnimationVocabulary(profile.player_animations, PLAYER_ANIMATIONS)
        self.boss_anims = AnimationVocabulary(profile.boss_animations, BOSS_ANIMATIONS)
        self.player_xy, self.boss_xy = profile.player_position, profile.boss_position
        self.attributes = observed_attributes(profile, flasks)
        self.flasks = flasks

        self.space = observation_space(
            self.frame, memory.frame_stack, memory.action_history, actions.space, flasks=self.flasks
        )
        # this episode's last rows, at most what the memory looks at: while that needs padding they
        # still hold the whole episode, so their row 0 is its first
        self._frames: list[np.ndarray] = []
        self._actions: list[np.ndarray] = []

    def scalars(self, state: Mapping[str, Any]) -> dict[str, np.ndarray | int]:
        """The state keys of the observation, from one snapshot, or from columns of a whole
        episode (arrays of N values: each key then gets N rows)."""

        def fraction(hp: str, max_hp: str) -> np.ndarray:
            return np.clip(state[hp] / np.maximum(1, state[max_hp]), 0.0, 1.0).astype(np.float32)[..., None]

        dx = np.asarray(state[self.boss_xy[0]], np.float64) - state[self.player_xy[0]]
        dy = np.asarray(state[self.boss_xy[1]], np.float64) - state[self.player_xy[1]]
        scalars = {
            "player_hp": fraction("HeroHp", "HeroMaxHp"),
            "boss_hp": fraction("NpcHp", "NpcMaxHp"),
            "distance": np.minimum(MAX_DISTANCE, np.hypot(dx, dy)).astype(np.float32)[..., None],
            "player_animation": self.player_anims(state["HeroAnimId"]),
            "boss_animation": self.boss_anims(state["NpcAnimId"]),
        }
        if self.flasks:
            charges = np.clip(np.asarray(state[FLASK_ATTRIBUTE], np.float32), 0, MAX_FLASKS)
            scalars["flasks"] = charges[..., None]
        return scalars

    def reset(self, state: Mapping[str, float], frame: np.ndarray) -> dict:
        """The first observation of an episode."""
        self._frames, self._actions = [], []
        return self._build(state, frame)

    def step(self, state: Mapping[str, float], frame: np.ndarray, action: np.ndarray | int) -> dict:
        self._actions.append(np.asarray(action, np.int32))
        return self._build(state, frame)

    def _build(self, state: Mapping[str, float], frame: np.ndarray) -> dict:
        obs: dict = {"frame": self.frame.process(frame), **self.scalars(state)}
        self._frames = [*self._frames, obs["frame"]][-self.memory.rows :]
        self._actions = self._actions[len(self._actions) - (len(self._frames) - 1) :]  # row k: the action from frame k
        taken = np.array(self._actions, np.int32).reshape(len(self._actions), *np.shape(self.memory.idle))
        frames = np.stack(self._frames) if self.memory.frame_stack else np.empty((len(self._frames), 0))
        obs.update(self.memory.keys(frames, taken, len(self._frames) - 1, 0))
        return obs
