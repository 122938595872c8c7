"""``EldenRingEnv``: the Gymnasium env every policy is trained and judged in.

One env over any ``Game``: the simulator in-process (lock-step, fast), or a Siphon server (the
real game, or ``python -m env.sim``) in real time. Each step applies an action as keys, lets
``timestep_ms`` of game time pass, then observes state and frame together.

Timing in real time is scheduled on absolute deadlines, so no drift accumulates; a step that
finds its deadline already past is an overrun, reported in ``info`` and never hidden, and the
schedule restarts from there rather than rushing to catch up. With ``pause_between_steps`` the
game is frozen while the agent thinks and runs only for the step itself, so a slow agent loses
no game time (and the live path becomes exactly reproducible); a snapshot's timestamp is then the
game's time, not the machine's (a policy that times the boss's moves, as the scripted expert does,
would otherwise count the pauses): the game's own count where its profile names one
(``[clock]``), read with every observation, or else the wall's time between the resume's answer
and the pause's, which the wire's delays blur. A config's ``game_speed`` above 1
runs each step that many times faster than real time (the game paused between steps): a step is
still ``timestep_ms`` of game time, in a fraction of the wall time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from env import fight_rules
from env.actions import KeyCommand, send
from env.common.errors import ConfigError
from env.common.fields import is_int
from env.config import EnvConfig
from env.game import Frame, Game, GameState
from env.hp_floors import FloorWatch
from env.keys import pygame_key
from env.profile import load_profile
from env.rewards import BaseReward, RewardFn
from env.step_timing import LIVE

PAUSE_LAG_WEIGHT = 0.2
"""How much of a paused step's error (the game time it ran past its timestep) the next step's
pause is asked earlier by."""
DEFAULT_RENDER_SIZE = (640, 360)
"""``render()``'s picture (width, height): a third of the game's 1920x1080 capture, whatever
size the observation is (84x84 for training)."""
MAX_RENDER_SIZE = (7680, 4320)
NO_KEYS = KeyCommand(frozenset())
"""What the env presses in a step a person has taken over (``share_keys``)."""
TIMING_STREAM = 0x5717
"""Mixed into a fight's seed for its steps' timing draws: a stream apart from the boss's."""

log = logging.getLogger(__name__)


class SharedKeys(Protocol):
    """A person at the live game's keys beside the env (``EldenRingEnv.share_keys``), who may take
    them over at any step: the env then presses nothing, and the step is theirs."""

    def takes_over(self) -> bool:
        """At a step's start: whether the person has control of it."""

    def played(self) -> Any:
        """At the end of a step they had: the action they played in it (the env's action space)."""


class EldenRingEnv(gym.Env):
    """The env over ``game_interface``, for the env ``config`` describes, with the env's own behaviour.

    Which game (the in-process simulator, a simulator server, the real game) is the caller's
    choice: ``env.factory.make_env`` builds both from one ``EnvConfig`` and a backend name, and
    is what ``gymnasium.make("EldenIL/Margit-v0", ...)`` calls. The config (its profile is the
    game's) is kept as ``self.config``, the value datasets and policies record; the keyword
    arguments are what a dataset or a policy does not depend on (the reward, pausing between
    steps, extra attributes to read, rendering).

    The episode limit is the config's ``max_steps``, enforced here (the env must release the
    game's keys when it ends an episode) and shown as ``env.spec.max_episode_steps``; so
    ``gymnasium.make`` adds no ``TimeLimit`` of its own unless asked (``max_episode_steps=``).
    Rendering (``render_mode="rgb_array"``) is a picture at ``render_size`` for people and videos,
    drawn apart from the observation's frame. A config with a ``capture_size`` (the window its
    dataset was recorded from) plays only a game whose frames have that size: another is refused
    at ``reset()`` and ``step()``, in one line naming both.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 5}
    _spec: gym.envs.registration.EnvSpec | None = None

    def __init__(
        self,
        game_interface: Game,
        config: EnvConfig = EnvConfig(),
        *,
        boss_name: str | None = None,
        reward_fn: RewardFn | None = None,
        pause_between_steps: bool = False,
        state_attributes: tuple[str, ...] = (),
        render_mode: str | None = None,
        render_size: tuple[int, int] = DEFAULT_RENDER_SIZE,
    ) -> None:
        super().__init__()
        game = self.game = game_interface  # the PRD's name for it: EldenRingEnv(game_interface=game, boss_name=...)
        self.profile = game.profile
        if config.profile is not None and load_profile(config.profile).name != self.profile.name:
            raise ConfigError(
                f"the config is for profile {config.profile!r}, the game plays {self.profile.name!r}: "
                "build both from one config (env.factory.make_env)"
            )
        self.config = config.replace(profile=self.profile.ref)
        if boss_name is not None and not self._fights(boss_name):
            raise ConfigError(
                f"boss_name {boss_name!r} does not match profile {self.profile.name!r} ({self.profile.boss_name}, "
                f"boss key {self.profile.boss!r}): give the profile of that boss, or leave boss_name out"
            )
        if render_mode not in (None, "rgb_array"):
            raise ConfigError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        size = tuple(render_size)  # a list from JSON or YAML is fine
        if not (len(size) == 2 and all(is_int(v) and 16 <= v <= m for v, m in zip(size, MAX_RENDER_SIZE))):
            raise ConfigError(
                f"render_size must be [width, height] in pixels, from 16x16 to 7680x4320, got {render_size!r}"
            )
        self.render_size: tuple[int, int] = (int(size[0]), int(size[1]))
        if config.timestep_ms > 0:  # videos and play() run at the game's pace: one picture per step
            self.metadata = {**self.metadata, "render_fps": max(1, round(1000 / config.timestep_ms))}
        # faster than real time only step by step: paused between steps, as the game cannot catch
        # up on a policy's thinking at 3x; a lock-step game runs only within steps anyway
        self.pause_between_steps = game.realtime and (pause_between_steps or config.game_speed != 1.0)
        self.speed = config.game_speed if game.realtime else 1.0
        # lock-step, each step drawn as a live one falls (env.step_timing), seeded by its fight
        self._timing = LIVE if not game.realtime and config.step_timing == "live" else None
        self._timing_rng = np.random.default_rng()
        self.rules = self.profile.fight_rules
        self._floors = FloorWatch(self.rules, self.profile.name)
        self.reward_fn: RewardFn = reward_fn or BaseReward(rules=self.rules)
        self.timestep = self.config.timestep_ms / 1000.0

        self.actions = self.config.actions(self.profile)
        self.action_space = self.actions.space
        self._obs = self.config.observation_builder(self.actions)
        self.observation_space = self._obs.space
        unknown = [a for a in state_attributes if a not in self.profile.siphon.attributes]
        if unknown:
            raise ConfigError(f"state_attributes {unknown} are not in profile {self.profile.name!r}")
        # a paused step's game time, from the game's own count where the profile has one
        self._clock = self.profile.game_clock if self.pause_between_steps else None
        clock = (self._clock.attribute,) if self._clock is not None else ()
        # read each step: what the observation and reward need, plus what the caller asked for
        self._names = tuple(dict.fromkeys((*self._obs.attributes, *state_attributes, *clock)))
        self._state: GameState | None = None
        self._frame: Frame | None = None
        self._deadline = 0.0
        self._pause_lag = 0.0  # how much earlier than its end a step's pause is asked for (live)
        self._steps = 0
        self._previous_action: Any = None
        self._episode_reward = 0.0
        self._start_state: GameState | None = None
        self._start_frame = 0
        self._damage_taken = 0.0
        self._shared: SharedKeys | None = None

    def _fights(self, boss_name: str) -> bool:
        """Whether the profile's boss is ``boss_name``: its key (``"tree_sentinel"``) or a part of
        its name (``"margit"`` of "Margit, the Fell Omen")."""
        wanted = boss_name.strip().lower()
        return wanted.replace(" ", "_") == self.profile.boss or wanted in self.profile.boss_name.lower()

    @property
    def action_mode(self) -> str:
        return self.config.action_mode

    @property
    def max_steps(self) -> int:
        return self.config.max_steps

    @property
    def spec(self) -> gym.envs.registration.EnvSpec | None:
        """The spec ``gymnasium.make`` gave this env, with ``max_episode_steps`` saying where
        this env truncates (``make`` records None there for the env itself)."""
        return self._spec

    @spec.setter
    def spec(self, spec: gym.envs.registration.EnvSpec | None) -> None:
        if spec is not None and spec.max_episode_steps is None:
            spec = replace(spec, max_episode_steps=self.max_steps)
        self._spec = spec

    # --------------------------------------------------------------------------------- reset
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Restart the fight. ``options={"boss_hp": f}`` starts it with the boss at fraction ``f``
        of its HP (a memory write, as the game allows: curricula use it);
        ``options={"fight_seed": s}`` restarts the simulator's fight ``s`` itself (the seed a
        recorded episode names as ``sim_seed``), to replay it; otherwise ``seed`` picks one.
        ``options={"timing_draw": k}`` (lock-step, ``step_timing: live``) plays the fight under
        its ``k``-th independent draw of the live spread (0 by default): one fight played under
        several is how likely a policy is to win it, where a live game plays each fight once."""
        super().reset(seed=seed)
        options = options or {}
        fight_seed = int(options.get("fight_seed", self.np_random.integers(2**31 - 1)))
        boss_hp = options.get("boss_hp", 1.0)
        if not 0 < boss_hp <= 1:
            raise ValueError(f"options['boss_hp'] must be a fraction in (0, 1], got {boss_hp!r}")
        try:
            self.game.hold_keys(())
            if self.pause_between_steps:  # freeze first, so the restarted fight waits for step 1
                self.game.set_speed(0.0)
                if not self._pause_lag:  # a first guess: how long a pause takes to answer
                    asked = self.game.now()
                    self.game.set_speed(0.0)
                    self._pause_lag = self.game.now() - asked
            state = self.game.reset_fight(fight_seed)
            if boss_hp < 1:
                self.game.write("NpcHp", max(1, round(state["NpcMaxHp"] * boss_hp)))
            state, self._frame = self.game.observe(self._names)
            self._check_picture(self._frame)
        except BaseException:
            self._release_keys()
            raise
        self._state = state if self._clock is None else self._on_game_clock(state)
        self._start_state = self._state
        self._start_frame = self._frame.number
        self._steps = 0
        self._previous_action = None  # a multi_binary mouse bit taps only as it turns on
        self._episode_reward = 0.0
        self._damage_taken = 0.0
        self._deadline = self.game.now()
        draw = int(options.get("timing_draw", 0))
        self._timing_rng = np.random.default_rng([TIMING_STREAM, fight_seed, *([draw] if draw else [])])
        obs = self._obs.reset(self._state, self._frame.rgb)
        return obs, self._info(fight_seed=fight_seed)

    @property
    def state(self) -> GameState | None:
        """The last game-state snapshot (every attribute the observation and reward read)."""
        return self._state

    # ---------------------------------------------------------------------------------- step
    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action!r} for action space {self.action_space}")
        action = int(action) if self.action_mode == "discrete" else np.asarray(action, np.int8)
        started = time.perf_counter()
        taken_over = self._shared is not None and self._shared.takes_over()
        if taken_over:  # the person's keys alone: the env's are let go, and it presses none
            command = NO_KEYS
        else:
            command = self.actions.command(action, self._previous_action if self.config.action_persistence else None)
        try:
            overrun, ran = self._play_paused(command) if self.pause_between_steps else (self._play(command), None)
            state, frame = self.game.observe(self._names)
            self._check_picture(frame)
            if taken_over:
                action = self._shared.played()
            if ran is not None:
                # the game time it ran between the resume and the pause: the game's own count where
                # it has one, else the wall's measure; the next pause is asked earlier or later by it
                if self._clock is not None:
                    state = self._on_game_clock(state)
                    ran = state.timestamp - self._state.timestamp
                else:
                    state = GameState(state.attributes, self._state.timestamp + ran)
                self._pause_lag += PAUSE_LAG_WEIGHT * (ran - self.timestep) / self.speed
        except BaseException:
            self._release_keys()
            raise
        before, self._state, self._frame = self._state, state, frame
        self._previous_action = action
        self._steps += 1
        reward = float(self.reward_fn(before, state))
        self._episode_reward += reward
        self._damage_taken += float(fight_rules.damage_taken(before, state))
        terminated = bool(self.rules.is_over(state))
        truncated = not terminated and self._steps >= self.max_steps
        self._floors.update(before, state)
        if terminated or truncated:
            self._release_keys()
            self._revive(state)
        obs = self._obs.step(state, frame.rgb, action)
        timing = {"step_game_ms": round((state.timestamp - before.timestamp) * 1000.0, 3)}
        if self.game.realtime:  # in lock-step, wall time says nothing about the game
            timing |= {
                "step_wall_ms": (time.perf_counter() - started) * 1000.0,
                "overrun_ms": overrun * 1000.0,
                "frame_age_ms": max(0.0, self.game.now() - frame.timestamp) * 1000.0,
            }
        if self._shared is not None:
            timing |= {"taken_over": taken_over, "action": action}
        return obs, reward, terminated, truncated, self._info(**timing)

    def share_keys(self, person: SharedKeys | None) -> None:
        """Let ``person`` take the game's keys at any step, as a person at the gaming PC can while
        a policy plays and learns (None: the env alone plays). A step they take runs as any other
        (paused after it where steps are), but the env presses nothing in it and lets go of what
        it held; the step's action is theirs, ``person.played()``: in the observation's action
        history, and in ``info["action"]`` with ``info["taken_over"]`` (both in every step's info
        while keys are shared). A live game only: lock-step, nobody plays between two calls."""
        if person is not None and not self.game.realtime:
            raise ConfigError(
                "a person can take over a live game only (a simulator server, or the real game over Siphon): the "
                "in-process simulator runs lock-step, between the env's calls, where nobody can press a key"
            )
        self._shared = person

    def _play(self, command: KeyCommand) -> float:
        """Apply the keys and let one timestep of game time pass; return how late the step was."""
        game = self.game
        if self._timing is not None:
            self._play_drawn(command)
            return 0.0
        send(game, command, self.config.tap_ms)
        self._deadline += self.timestep
        overrun = max(0.0, game.now() - self._deadline)
        if overrun > 0:
            self._deadline = game.now()  # restart the schedule: never rush to catch up
        game.wait_until(self._deadline)
        if not self.config.action_persistence:
            game.hold_keys(())
        return overrun

    def _play_drawn(self, command: KeyCommand) -> None:
        """A lock-step step played as a live one falls (``env.step_timing``): the keys held at its
        start, its taps pressed when a live one would reach the game and held as long, and the
        step as long as a live pause lets it run, each drawn. Every step counts from its own start,
        as a live step counts from its resume."""
        game = self.game
        drawn = self._timing.draw(self._timing_rng)
        start = game.now()
        game.hold_keys(command.hold)
        if command.tap:
            game.wait_until(start + drawn.tap_delay_ms / 1000.0)
            game.tap_keys(command.tap, self.config.tap_ms + drawn.tap_hold_ms)
        game.wait_until(start + self.timestep + drawn.length_ms / 1000.0)
        if not self.config.action_persistence:
            game.hold_keys(())

    def _play_paused(self, command: KeyCommand) -> tuple[float, float]:
        """One step of a game paused between steps: the keys held from the step's first tick, the
        taps pressed and released while it runs (a press and its release sent to a paused game
        both land before its next tick, or on the real game perhaps never), then paused again.
        A live pause lands when the server has scanned for the speed's address, so it is asked
        for ``_pause_lag`` early, the lag kept (``step``) so that the steps' game time averages
        the timestep. Returns how late the pause was asked and the game time the step ran as the
        wall measures it: the time between the resume's answer and the pause's, times the speed
        (each lands just before its answer leaves)."""
        game = self.game
        game.hold_keys(command.hold)  # paused: down from the first tick the step runs
        game.set_speed(self.speed)
        resumed = game.now()
        if command.tap:
            game.tap_keys(command.tap, self.config.tap_ms)
        deadline = resumed + self.timestep / self.speed  # the game's clock runs ``speed`` times the env's
        game.wait_until(deadline - self._pause_lag)
        overrun = max(0.0, game.now() - (deadline - self._pause_lag))
        game.set_speed(0.0)
        ran = (game.now() - resumed) * self.speed
        if not self.config.action_persistence:
            game.hold_keys(())
        return overrun, ran

    def _on_game_clock(self, state: GameState) -> GameState:
        """``state`` stamped with the game's own count (the profile's ``[clock]``), in seconds."""
        return GameState(state.attributes, self._clock.seconds(state))

    def _check_picture(self, frame: Frame) -> None:
        """Refuse a game whose window is not the size the config's picture is captured at: a
        policy trained on one framing of the arena sees another in a window of another size,
        even once cropped and resized to the same frame size, and would fail without a word."""
        wanted = self.config.capture_size
        got = (frame.rgb.shape[1], frame.rgb.shape[0])
        if wanted is not None and got != wanted:
            raise ConfigError(
                f"the game's window is {got[0]}x{got[1]}, but this env's frames are captured at {wanted[0]}x{wanted[1]} "
                f"(capture_size: the window its recordings were made from): set the game window to "
                f"{wanted[0]}x{wanted[1]}, or record again at {got[0]}x{got[1]} and train on those recordings"
            )

    def _revive(self, state: GameState) -> None:
        """At an episode's end on a profile with HP floors (the real game's), give each fighter
        still alive its HP back at once: the one down at its floor before the next blow makes the
        game register a death or a kill that no memory write can undo, and the other too, since
        the fight goes on until ``reset()`` (a win leaves a player who may be one blow from a real
        death). At floor 0 (an episode ends at HP 0) a downed fighter is dead and nothing is written."""
        rules = self.rules
        for floor, hp, max_hp in ((rules.player_floor, "HeroHp", "HeroMaxHp"), (rules.boss_floor, "NpcHp", "NpcMaxHp")):
            if floor > 0 and 0 < state[hp] < state[max_hp]:
                self.game.write(hp, state[max_hp])

    # ---------------------------------------------------------------------------------- info
    def _info(self, **extra: float) -> dict:
        state, start = self._state, self._start_state
        assert state is not None and start is not None
        return {
            "episode_length": self._steps,
            "episode_reward": self._episode_reward,
            "win": bool(self.rules.won(state)),
            "boss_damage_dealt": float(fight_rules.damage_dealt(start, state)),
            "player_damage_taken": self._damage_taken,
            "frame_number": self._frame.number - self._start_frame,
            "game_time": round(state.timestamp - start.timestamp, 6),
            **extra,
        }

    # ------------------------------------------------------------------------ render / close
    def render(self) -> np.ndarray | None:
        """The last captured frame as RGB at ``render_size``, uncropped (None unless
        ``render_mode="rgb_array"``, or before the first reset)."""
        if self.render_mode != "rgb_array" or self._frame is None:
            return None
        return self.game.picture(self._frame, self.render_size)

    def get_keys_to_action(self) -> dict[tuple[int, ...], Any]:
        """pygame key combinations -> actions, from the profile's keybinds, so that
        ``gymnasium.utils.play.play(env)`` plays this env from the keyboard: each action of the
        action table is the keys it holds and taps (``W`` + ``LEFT_SHIFT`` is roll_forward)."""
        commands = (
            self.actions.commands
            if self.action_mode == "discrete"
            else [KeyCommand(frozenset(binding)) for binding in self.actions.bindings]
        )
        mapping: dict[tuple[int, ...], Any] = {}
        for index, command in enumerate(commands):
            keys = sorted({*command.hold, *command.tap})
            codes = [pygame_key(k) for k in keys]
            if not keys or None in codes:
                continue  # idle is play()'s noop; a mouse button cannot be pressed on a keyboard
            action = (
                index if self.action_mode == "discrete" else self.actions.bits(frozenset([self.actions.names[index]]))
            )
            mapping.setdefault(tuple(sorted(codes)), action)
        return mapping

    def _release_keys(self) -> None:
        """Best effort: called while another error may be on its way up, which must win."""
        try:
            self.game.hold_keys(())
        except Exception as e:  # noqa: BLE001
            log.warning("could not release keys: %s", e)

    def close(self) -> None:
        """Release every key and close the game (the env owns the game it was given)."""
        self._release_keys()
        self.game.close()
        super().close()
