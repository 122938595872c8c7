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
from env.common.cli import ruled
from env.common.errors import ConfigError, DataError
from env.common.fields import FLAG, STEP_MS, Rule, check_fields, checked, is_int, number, one_of
from env.common.files import UnreadableFile, read_json
from env.observations import (
    FRAME_CROP_RULE,
    FRAME_SIZE,
    FRAME_SIZE_RULE,
    FULL_FRAME,
    EpisodeMemory,
    FrameSpec,
    ObservationBuilder,
    observation_space,
    observed_attributes,
    parse_crop,
    parse_size,
)

if TYPE_CHECKING:
    from gymnasium.spaces import Dict as DictSpace
    from gymnasium.spaces import Space

    from env.profile import Profile

ACTION_MODES = ("discrete", "multi_binary")
STEP_TIMINGS = ("live", "exact")
FILE = "env_config.json"
"""An ``EnvConfig`` saved in a folder (beside every saved policy: the env it was trained for)."""
MAX_CONFIG_BYTES = 64_000
"""An env_config.json is a few hundred bytes; a larger one is not read."""


MAX_TAP_MS = 10_000
MIN_SIM_SIDE = 16
"""The simulator renders nothing smaller; a smaller frame size (down to 8x8) is resized from it."""
MAX_CAPTURE_SIDE = 7680
"""An 8K window's width: no game window is captured larger."""


def _optional_whole(text: str) -> int | None:
    """A flag's text as a whole number, or None for ``none``/``null`` (the field's off switch)."""
    return None if text.lower() in ("none", "null") else int(text)


OPTIONAL_COUNT = Rule(
    lambda v: v is None or (is_int(v) and 1 <= v <= 64), "must be null (off) or a whole number from 1 to 64"
)
PICTURE_SIZE = Rule(
    lambda v: (
        isinstance(v, tuple) and len(v) == 2 and all(is_int(x) and MIN_SIM_SIDE <= x <= MAX_CAPTURE_SIDE for x in v)
    ),
    f"must be [width, height] in pixels, each from {MIN_SIM_SIDE} to {MAX_CAPTURE_SIDE}",
)
"""A picture a game is captured at, or the simulator draws and keeps as a recording's video."""
CAPTURE_SIZE = Rule(
    lambda v: v is None or PICTURE_SIZE.accepts(v),
    f"must be null (the simulator renders at frame_size) or [width, height] of the game's window in pixels, "
    f"each from {MIN_SIM_SIDE} to {MAX_CAPTURE_SIDE}",
)
MAX_GAME_SPEED = 10.0
"""The fastest a live game is asked to run: SoulsGym trains Dark Souls III at 3x; past a few
times real time a game's own frame and physics steps grow coarse."""


@dataclass(frozen=True)
class EnvConfig:
    """The settings that make two envs the same env. Every field is validated on construction
    (its rule, ``env.common.fields``), and those a command line sets declare their flag here, once."""

    profile: str | None = checked(
        None,
        Rule(lambda v: v is None or (isinstance(v, str) and bool(v)), "must be a profile name or folder, or null"),
        "the game's profile: sim_margit, eldenring_margit, or a profile folder",
        type=str,
    )
    """Profile name (``sim_margit``, ``eldenring_margit``) or folder; None: the backend's default
    (``env.factory``), or for a dataset the recordings' own. A saved policy always names one."""
    action_mode: str = checked(
        "discrete",
        one_of(*ACTION_MODES),
        "one action of the profile's table per step, or each key held or not",
        type=str,
        choices=ACTION_MODES,
    )
    """``discrete`` (the profile's action table) or ``multi_binary`` (one bit per keybind)."""
    timestep_ms: float = checked(
        200.0,
        Rule(number(0, 60_000).accepts, "must be a number of milliseconds from 0 to 60000"),
        "game time per env step, in milliseconds",
        type=ruled(float, STEP_MS),  # a command line steps a recording or decides: a step needs a length
    )
    """Game time per env step (0, only in code: no pacing at all, as the live benchmarks time it)."""
    frame_size: tuple[int, int] = checked(FRAME_SIZE, FRAME_SIZE_RULE, "observation frame WxH", type=parse_size)
    """Observation frame (width, height)."""
    frame_crop: tuple[float, float, float, float] = checked(
        FULL_FRAME,
        FRAME_CROP_RULE,
        "LEFT,TOP,RIGHT,BOTTOM fractions of the game's picture kept before resizing",
        type=parse_crop,
    )
    """(left, top, right, bottom) fractions of the game's frame kept before resizing."""
    capture_size: tuple[int, int] | None = checked(None, CAPTURE_SIZE)
    """(width, height) the game's picture is captured at before crop and resize: the window the
    recordings were made from (a 1280x720 window shows the arena otherwise than an 84x84 render,
    even scaled down). None: the in-process simulator renders straight at ``frame_size`` (what
    lock-step recordings use), and a live game's window is taken at whatever size it has."""
    frame_stack: int | None = checked(
        None, OPTIONAL_COUNT, "how many recent frames the observation stacks; none: off", type=_optional_whole
    )
    """None, or how many recent frames the observation's ``frame_stack`` holds."""
    action_history: int | None = checked(
        4, OPTIONAL_COUNT, "how many past actions the observation holds; none: off", type=_optional_whole
    )
    """None, or how many past actions the observation's ``action_history`` holds: a policy that
    sees what it just did keeps a combo going and does not spam a roll."""
    observe_flasks: bool = checked(False, FLAG)
    """The observation's ``flasks``: the player's flask charges left (the profile must read
    ``HeroFlaskCharges``: the simulator's does). The HP bar shows a flask drunk, not how many are
    left: without the count a policy cannot tell a heal to come from a press that does nothing."""
    max_steps: int = checked(
        900,
        Rule(lambda v: is_int(v) and v >= 1, "must be a whole number of steps, at least 1"),
        "steps before a fight is cut",
    )
    """Steps before an episode is truncated (900 x 200 ms = 3 minutes)."""
    action_persistence: bool = checked(True, FLAG)
    """Keys stay held across steps (False: released at the end of every step)."""
    tap_ms: int = checked(
        50,
        Rule(
            lambda v: is_int(v) and 1 <= v <= MAX_TAP_MS,
            f"must be a whole number of milliseconds from 1 to {MAX_TAP_MS}",
        ),
    )
    """How long a tapped key (a roll, an attack) is held down."""
    game_speed: float = checked(
        1.0, Rule(number(1, MAX_GAME_SPEED).accepts, f"must be a multiple of real time from 1 to {MAX_GAME_SPEED:g}")
    )
    """How fast a live game runs during a step, as a multiple of real time (written through the
    game's ``gameSpeedVal``): above 1, each step's ``timestep_ms`` of game time passes in less
    wall time, and the game is paused between steps, so the policy's thinking costs no game
    time. How the env is run, not what it is: a policy plays at any speed. The in-process
    simulator, lock-step, runs as fast as it can whatever this says."""

    step_timing: str = checked(
        "live",
        one_of(*STEP_TIMINGS),
        "in-process: draw each step's timing as a live game's falls (live), or keep it exact",
        type=str,
        choices=STEP_TIMINGS,
    )
    """The in-process simulator's steps: ``live`` draws what a live step cannot make exact (when
    a tap reaches the game, how long it is held, when the pause lands: ``env.step_timing``), so
    a policy trained and judged in-process meets the game it will fight; ``exact``: every step
    exactly its timestep. How the env is run, not which env: a live game's steps are what they
    are, whatever this says."""

    def __post_init__(self) -> None:
        # YAML and JSON have lists, not tuples: accept them, store tuples (hashable, comparable)
        for name in ("frame_size", "frame_crop", "capture_size"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        check_fields(self)

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
        ``capture_size`` is written only when set, ``game_speed`` only when not real time,
        ``observe_flasks`` only when on and ``step_timing`` only when exact, so an env description
        without them reads and writes as before they existed (and older code still reads it)."""
        values = asdict(self)
        if values["capture_size"] is None:
            del values["capture_size"]
        if values["game_speed"] == 1.0:  # likewise: real time, as before the field existed
            del values["game_speed"]
        if not values["observe_flasks"]:  # likewise
            del values["observe_flasks"]
        if values["step_timing"] == "live":  # likewise
            del values["step_timing"]
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
        if not path.exists() and not path.is_symlink():
            raise DataError(f"{path} is missing: {folder} holds nothing trained by this project (run `dvc repro`)")
        try:
            values = read_json(path, MAX_CONFIG_BYTES)
        except UnreadableFile as e:
            raise DataError(f"{e}: it is no env config this project wrote; retrain the policy (`dvc repro`)") from None
        return cls.from_dict(values, str(path))

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
        return ObservationBuilder(self.frame_spec, self.memory(actions.idle), actions, self.observe_flasks)

    def memory(self, idle: Any) -> EpisodeMemory:
        """What this env's observations hold of the episode's past; ``idle``: the action table's
        idle action, which pads the action history."""
        return EpisodeMemory(self.frame_stack, self.action_history, idle)

    def spaces(self, profile: Profile) -> tuple[DictSpace, Space]:
        """(observation space, action space) of the env, without building one."""
        action_space = self.actions(profile).space
        observed_attributes(profile, self.observe_flasks)  # refuses a profile that cannot give them
        space = observation_space(
            self.frame_spec, self.frame_stack, self.action_history, action_space, flasks=self.observe_flasks
        )
        return space, action_space


FIELD_NAMES = tuple(f.name for f in fields(EnvConfig))
RUN_ONLY = ("game_speed", "step_timing")
"""Fields that say how the env is run, not which env it is: two configs that differ only there
describe the same env, for a dataset and a policy alike (``EnvConfig.differences``)."""
