"""Observations: frame preprocessing and the observation Dict, shared by the env and the dataset
builder so that training data and live observations are produced by the very same code.

Frames are cropped (by fractions of the frame, so one setting fits any window size), resized
with OpenCV's area filter and stacked in time; game state becomes the PRD's normalised scalars
and animation ids mapped through the profile's vocabulary (unknown ids become 0).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from gymnasium import spaces

from env.profile import Profile

MAX_DISTANCE = 20.0
PLAYER_ANIMATIONS = 100
BOSS_ANIMATIONS = 200


@dataclass(frozen=True, slots=True)
class FrameSpec:
    """How a captured frame becomes an observation frame.

    ``crop`` is (left, top, right, bottom) as fractions of the frame, e.g. (0, 0.1, 1, 1) drops
    the top tenth; ``size`` is (width, height) of the result.
    """

    size: tuple[int, int] = (84, 84)
    crop: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        left, top, right, bottom = self.crop
        if not (0 <= left < right <= 1 and 0 <= top < bottom <= 1):
            raise ValueError(f"crop {self.crop} must be (left, top, right, bottom) fractions with left < right, top < bottom")
        if min(self.size) < 8:
            raise ValueError(f"frame size {self.size} is too small (at least 8x8)")

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.size[1], self.size[0], 3)

    def process(self, rgb: np.ndarray) -> np.ndarray:
        """Crop and resize one RGB uint8 frame (H, W, 3) -> ``shape``."""
        h, w = rgb.shape[:2]
        left, top, right, bottom = self.crop
        if (left, top, right, bottom) != (0.0, 0.0, 1.0, 1.0):
            rgb = rgb[round(top * h) : round(bottom * h), round(left * w) : round(right * w)]
        if rgb.shape[1] == self.size[0] and rgb.shape[0] == self.size[1]:
            return rgb.copy()  # observations are the caller's to keep: never alias the game's frame
        return cv2.resize(rgb, self.size, interpolation=cv2.INTER_AREA)


class AnimationVocabulary:
    """Raw animation id -> small index: the id at position i of the list becomes i + 1, any other
    id becomes 0, and ids that do not fit in ``size`` raise at construction."""

    def __init__(self, ids: Sequence[int], size: int) -> None:
        if len(ids) >= size:
            raise ValueError(f"{len(ids)} animation ids do not fit Discrete({size}) (index 0 is 'unknown')")
        self._index = {int(a): i + 1 for i, a in enumerate(ids)}

    def __call__(self, anim_id: int) -> int:
        return self._index.get(int(anim_id), 0)


def observation_space(
    frame: FrameSpec,
    frame_stack: int | None = None,
    action_history: int | None = None,
    action_space: spaces.Space | None = None,
) -> spaces.Dict:
    """The PRD's observation Dict for these settings (the optional keys only when asked for)."""
    space = {
        "frame": spaces.Box(0, 255, frame.shape, np.uint8),
        "player_hp": spaces.Box(0.0, 1.0, (1,), np.float32),
        "boss_hp": spaces.Box(0.0, 1.0, (1,), np.float32),
        "distance": spaces.Box(0.0, MAX_DISTANCE, (1,), np.float32),
        "player_animation": spaces.Discrete(PLAYER_ANIMATIONS),
        "boss_animation": spaces.Discrete(BOSS_ANIMATIONS),
    }
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


class ObservationBuilder:
    """Builds the observation Dict from game state and frames; ``space`` exists from construction."""

    def __init__(
        self,
        profile: Profile,
        frame: FrameSpec = FrameSpec(),
        frame_stack: int | None = None,
        action_history: int | None = None,
        action_space: spaces.Space | None = None,
    ) -> None:
        self.frame = frame
        self.frame_stack = frame_stack
        self.action_history = action_history
        self.player_anims = AnimationVocabulary(profile.player_animations, PLAYER_ANIMATIONS)
        self.boss_anims = AnimationVocabulary(profile.boss_animations, BOSS_ANIMATIONS)
        self.player_xy, self.boss_xy = profile.player_position, profile.boss_position
        self.attributes = tuple(dict.fromkeys((*STATE_ATTRIBUTES, *self.player_xy, *self.boss_xy)))
        unknown = [a for a in self.attributes if a not in profile.siphon.attributes]
        if unknown:
            raise ValueError(f"profile {profile.name!r} lacks attributes the observation needs: {', '.join(unknown)}")

        self.space = observation_space(frame, frame_stack, action_history, action_space)
        self._frames: deque[np.ndarray] = deque(maxlen=frame_stack or 1)
        self._actions: deque[np.ndarray] = deque(maxlen=action_history or 1)

    def scalars(self, state: Mapping[str, float]) -> dict[str, np.ndarray | int]:
        hero_max = max(1, state["HeroMaxHp"])
        npc_max = max(1, state["NpcMaxHp"])
        dx = state[self.boss_xy[0]] - state[self.player_xy[0]]
        dy = state[self.boss_xy[1]] - state[self.player_xy[1]]
        return {
            "player_hp": np.array([min(1.0, max(0.0, state["HeroHp"] / hero_max))], np.float32),
            "boss_hp": np.array([min(1.0, max(0.0, state["NpcHp"] / npc_max))], np.float32),
            "distance": np.array([min(MAX_DISTANCE, math.hypot(dx, dy))], np.float32),
            "player_animation": self.player_anims(state["HeroAnimId"]),
            "boss_animation": self.boss_anims(state["NpcAnimId"]),
        }

    def reset(self, state: Mapping[str, float], frame: np.ndarray, no_action: np.ndarray | int) -> dict:
        """The first observation of an episode: stacks are filled with the first frame and
        ``no_action`` (the idle action)."""
        processed = self.frame.process(frame)
        self._frames.clear()
        self._frames.extend([processed] * self._frames.maxlen)
        self._actions.clear()
        self._actions.extend([np.asarray(no_action, np.int32)] * self._actions.maxlen)
        return self._build(state, processed)

    def step(self, state: Mapping[str, float], frame: np.ndarray, action: np.ndarray | int) -> dict:
        processed = self.frame.process(frame)
        self._frames.append(processed)
        self._actions.append(np.asarray(action, np.int32))
        return self._build(state, processed)

    def _build(self, state: Mapping[str, float], processed: np.ndarray) -> dict:
        obs: dict = {"frame": processed, **self.scalars(state)}
        if self.frame_stack:
            obs["frame_stack"] = np.stack(self._frames)
        if self.action_history:
            obs["action_history"] = np.stack(self._actions).astype(np.int32)
        return obs
