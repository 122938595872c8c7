"""``EnvConfig``: the one description of the env a dataset and a policy belong to.

A recording is turned into a dataset for one env, a policy is trained for that env, and it is
fine-tuned and evaluated in that env again. ``EnvConfig`` is that env's settings in one frozen,
validated value: profile, action mode, timestep, the picture (the size the game's frame is
captured at, its crop and the frame size), frame stack, action history, episode length, and how
actions become keys. It is checked once where it enters (a
command line, ``params.yaml``, a dataset's metadata), written into every dataset and beside every
policy, and read back from them, so the stages never re-derive it from strings.

Its fields are exactly the keyword arguments of ``gymnasium.make("EldenIL/Margit-v0", ...)``, which
is how a Minari dataset's env spec rebuilds the env (``dataset.recover_environment()``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from env.actions import ActionTable
from env.errors import ConfigError, DataError
from env.fields import FieldError, is_int, is_number
from env.observations import FRAME_SIZE, FrameSpec, ObservationBuilder, observation_space

if TYPE_CHECKING:
    from gymnasium.spaces import Dict as DictSpace
    from gymnasium.spaces import Space

    from env.profile import Profile

ACTION_MODES = ("discrete", "multi_binary")
FILE = "env_config.json"
"""An ``EnvConfig`` saved in a folder (beside every saved policy: the env it was trained for)."""


MAX_TAP_MS = 10_000
MIN_SIM_SIDE = 16
"""The simulator renders nothing smaller; a smaller frame size (down to 8x8) is resized from it."""
MAX_CAPTURE_SIDE = 7680
"""An 8K window's width: no game window is captured larger."""


@dataclass(frozen=True)
class EnvConfig:
    """The settings that make two envs the same env. Every field is validated on construction."""

    profile: str | None = None
    """Profile name (``sim_margit``, ``eldenring_margit``) or folder; None: the backend's default."""
    action_mode: str = "discrete"
    """``discrete`` (the profile's action table) or ``multi_binary`` (one bit per keybind)."""
    timestep_ms: float = 200.0
    """Game time per env step."""
    frame_size: tuple[int, int] = FRAME_SIZE
    """Observation frame (width, height)."""
    frame_crop: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)
    """(left, top, right, bottom) fractions of the game's frame kept before resizing."""
    capture_size: tuple[int, int] | None = None
    """(width, height) the game's picture is captured at before crop and resize: the window the
    recordings were made from (a 1280x720 window shows the arena otherwise than an 84x84 render,
    even scaled down). None: the in-process simulator renders straight at ``frame_size`` (what
    lock-step recordings use), and a live game's window is taken at whatever size it has."""
    frame_stack: int | None = None
    """None, or how many recent frames the observation's ``frame_stack`` holds."""
    action_history: int | None = None
    """None, or how many past actions the observation's ``action_history`` holds."""
    max_steps: int = 900
    """Steps before an episode is truncated (900 x 200 ms = 3 minutes)."""
    action_persistence: bool = True
    """Keys stay held across steps (False: released at the end of every step)."""
    tap_ms: int = 50
    """How long a tapped key (a roll, an attack) is held down."""
    game_speed: float = 1.0
    """How fast a live game runs during a step, as a multiple of real time (written through the
    game's ``gameSpeedVal``): above 1, each step's ``timestep_ms`` of game time passes in less
    wall time, and the game is paused between steps, so the policy's thinking costs no game
    time. How the env is run, not what it is: a policy plays at any speed. The in-process
    simulator, lock-step, runs as fast as it can whatever this says."""

    def __post_init__(self) -> None:
        # YAML and JSON have lists, not tuples: accept them, store tuples (hashable, comparable)
        for name in ("frame_size", "frame_crop", "capture_size"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        _check(self)

    # ------------------------------------------------------------------------ reading, writing
    @classmethod
    def from_dict(cls, values: Any, where: str = "env config") -> EnvConfig:
        """A config from plain data (params.yaml, JSON); unknown keys are refused by name."""
        if not isinstance(values, dict):
            raise ConfigError(f"{where} must be a mapping of {', '.join(FIELD_NAMES)}, got {values!r}")
        unknown = sorted(set(values) - set(FIELD_NAMES))
        if unknown:
            raise ConfigError(f"{where}: unknown keys {unknown}; known: {', '.join(FIELD_NAMES)}")
        try:
            return cls(**values)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (lists for tuples): ``EnvConfig.from_dict(c.to_dict()) == c``.
        ``capture_size`` is written only when set, and ``game_speed`` only when not real time, so
        an env description without them reads and writes as before they existed (and older code
        still reads it)."""
        values = asdict(self)
        if values["capture_size"] is None:
            del values["capture_size"]
        if values["game_speed"] == 1.0:  # likewise: real time, as before the field existed
            del values["game_speed"]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

    def save(self, folder: Path) -> Path:
        """Write this config into ``folder`` (as ``FILE``); returns the file."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / FILE
        path.write_text(json.dumps(self.to_dict(), indent=2))
        return path

    @classmethod
    def load(cls, folder: Path) -> EnvConfig:
        """The config ``save`` wrote into ``folder``; a missing or damaged file is one line."""
        path = folder / FILE
        try:
            return cls.from_dict(json.loads(path.read_text()), str(path))
        except FileNotFoundError:
            raise DataError(
                f"{path} is missing: {folder} holds nothing trained by this project (run `dvc repro`)"
            ) from None
        except json.JSONDecodeError as e:
            raise DataError(f"{path} is not valid JSON ({e}): retrain the policy (`dvc repro`)") from None

    def replace(self, **changes: Any) -> EnvConfig:
        return replace(self, **changes)

    def differences(self, other: EnvConfig) -> list[str]:
        """The fields that make the two another env, as ``name: mine vs other`` lines (empty
        when it is the same env: ``RUN_ONLY`` fields may differ)."""
        return [
            f"{f.name}: {getattr(self, f.name)!r} vs {getattr(other, f.name)!r}"
            for f in fields(self)
            if f.name not in RUN_ONLY and getattr(self, f.name) != getattr(other, f.name)
        ]

    # ------------------------------------------------------------------- what it implies
    @cached_property
    def frame_spec(self) -> FrameSpec:
        return FrameSpec(self.frame_size, self.frame_crop)

    @property
    def picture_size(self) -> tuple[int, int]:
        """The (width, height) a simulator renders this env's picture at: ``capture_size``, or
        the frame size itself (at least 16x16) when there is none."""
        if self.capture_size is not None:
            return self.capture_size
        width, height = self.frame_size
        return max(width, MIN_SIM_SIDE), max(height, MIN_SIM_SIDE)

    def with_picture(self, window_size: tuple[int, int]) -> EnvConfig:
        """This config for frames captured from a ``window_size`` window (a recording's): no
        ``capture_size`` when that is the picture the simulator renders without one (a lock-step
        recording at the frame size), else that size."""
        window = (int(window_size[0]), int(window_size[1]))
        plain = self.replace(capture_size=None)
        return plain if window == plain.picture_size else self.replace(capture_size=window)

    def actions(self, profile: Profile) -> ActionTable:
        return ActionTable(profile, self.action_mode)

    def observation_builder(self, actions: ActionTable) -> ObservationBuilder:
        """What makes this env's observations from a game's states and frames, for ``actions``
        (its action table, whose idle action pads the action history)."""
        return ObservationBuilder(self.frame_spec, self.frame_stack, self.action_history, actions)

    def spaces(self, profile: Profile) -> tuple[DictSpace, Space]:
        """(observation space, action space) of the env, without building one."""
        action_space = self.actions(profile).space
        return observation_space(self.frame_spec, self.frame_stack, self.action_history, action_space), action_space


FIELD_NAMES = tuple(f.name for f in fields(EnvConfig))
RUN_ONLY = ("game_speed",)
"""Fields that say how the env is run, not which env it is: two configs that differ only there
describe the same env, for a dataset and a policy alike (``EnvConfig.differences``)."""
MAX_GAME_SPEED = 10.0
"""The fastest a live game is asked to run: SoulsGym trains Dark Souls III at 3x; past a few
times real time a game's own frame and physics steps grow coarse."""


def _check(config: EnvConfig) -> None:
    """Every field's type and range, with one message naming the field and what is allowed."""

    def fail(name: str, allowed: str) -> None:
        raise FieldError(name, getattr(config, name), allowed)

    if config.profile is not None and (not isinstance(config.profile, str) or not config.profile):
        fail("profile", "must be a profile name (sim_margit, eldenring_margit) or a folder, or null for the default")
    if config.action_mode not in ACTION_MODES:
        fail("action_mode", f"must be one of {', '.join(ACTION_MODES)}")
    if not is_number(config.timestep_ms) or not 0 <= config.timestep_ms <= 60_000:
        fail("timestep_ms", "must be a number of milliseconds from 0 to 60000")
    size, crop = config.frame_size, config.frame_crop
    if not (isinstance(size, tuple) and len(size) == 2 and all(is_int(v) for v in size)):
        fail("frame_size", "must be [width, height] in pixels")
    if not (isinstance(crop, tuple) and len(crop) == 4 and all(is_number(v) for v in crop)):
        fail("frame_crop", "must be [left, top, right, bottom] fractions of the frame")
    config.frame_spec  # noqa: B018 - FrameSpec checks the size's range and the crop's order
    capture = config.capture_size
    if capture is not None and not (
        isinstance(capture, tuple)
        and len(capture) == 2
        and all(is_int(v) and MIN_SIM_SIDE <= v <= MAX_CAPTURE_SIDE for v in capture)
    ):
        fail(
            "capture_size",
            f"must be null (the simulator renders at frame_size) or [width, height] of the "
            f"game's window in pixels, each from {MIN_SIM_SIDE} to {MAX_CAPTURE_SIDE}",
        )
    for name in ("frame_stack", "action_history"):
        value = getattr(config, name)
        if value is not None and not (is_int(value) and 1 <= value <= 64):
            fail(name, "must be null (off) or a whole number from 1 to 64")
    if not (is_int(config.max_steps) and config.max_steps >= 1):
        fail("max_steps", "must be a whole number of steps, at least 1")
    if not isinstance(config.action_persistence, bool):
        fail("action_persistence", "must be true or false")
    if not (is_int(config.tap_ms) and 1 <= config.tap_ms <= MAX_TAP_MS):
        fail("tap_ms", f"must be a whole number of milliseconds from 1 to {MAX_TAP_MS}")
    if not (is_number(config.game_speed) and 1.0 <= config.game_speed <= MAX_GAME_SPEED):
        fail("game_speed", f"must be a multiple of real time from 1 to {MAX_GAME_SPEED:g}")
