"""``EldenRingEnv``: the Gymnasium env every policy is trained and judged in (the PRD, made exact).

One env over any ``Game``: the simulator in-process (lock-step, fast), or a Siphon server (the
real game, or ``python -m env.sim``) in real time. Each step applies an action as keys, lets
``timestep_ms`` of game time pass, then observes state and frame together.

Timing in real time is scheduled on absolute deadlines, so no drift accumulates; a step that
finds its deadline already past is an overrun, reported in ``info`` and never hidden, and the
schedule restarts from there rather than rushing to catch up. With ``pause_between_steps`` the
game is frozen while the agent thinks and runs only for the step itself, so a slow agent loses
no game time (and the live path becomes exactly reproducible).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from env.actions import DiscreteActions, KeyCommand
from env.game import Frame, Game, GameState
from env.observations import FrameSpec, ObservationBuilder
from env.profile import Profile
from env.rewards import BaseReward, RewardFn

log = logging.getLogger(__name__)

ACTION_MODES = ("discrete", "multi_binary")
BACKENDS = ("sim", "siphon")
DEFAULT_PROFILES = {"sim": "sim_margit", "siphon": "eldenring_margit"}


def make_game(
    backend: str = "sim",
    host: str = "127.0.0.1:50051",
    profile: Profile | str | None = None,
    seed: int = 0,
    window_size: tuple[int, int] = (84, 84),
) -> Game:
    """The game behind the env: ``"sim"`` in-process, or ``"siphon"`` at ``host`` (the real
    game by default; pass ``profile="sim_margit"`` for a ``python -m env.sim`` server)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: use 'sim' (in-process simulator) or 'siphon' (a Siphon server)")
    profile = profile or DEFAULT_PROFILES[backend]
    if backend == "sim":
        from env.sim.game import SimGame

        return SimGame(profile, seed=seed, window_size=window_size)
    from env.siphon_game import SiphonGame

    return SiphonGame(host, profile)


class EldenRingEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 5}

    def __init__(
        self,
        game_interface: Game | None = None,
        boss_name: str = "margit",
        action_mode: str = "discrete",
        action_persistence: bool = True,
        timestep_ms: float = 200,
        max_steps: int = 900,
        frame_size: tuple[int, int] = (84, 84),
        frame_crop: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0),
        frame_stack: int | None = None,
        action_history: int | None = None,
        reward_fn: RewardFn | None = None,
        pause_between_steps: bool = False,
        tap_ms: int = 50,
        state_attributes: tuple[str, ...] = (),
        render_mode: str | None = "rgb_array",
        backend: str = "sim",
        host: str = "127.0.0.1:50051",
        profile: Profile | str | None = None,
    ) -> None:
        super().__init__()
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
        if timestep_ms < 0 or max_steps < 1:
            raise ValueError(f"timestep_ms must be >= 0 and max_steps >= 1 (got {timestep_ms}, {max_steps})")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self._owns_game = game_interface is None
        self.game = game_interface or make_game(backend, host, profile, window_size=tuple(frame_size))
        self.profile: Profile = self.game.profile
        if boss_name.lower() not in self.profile.boss_name.lower():
            raise ValueError(
                f"boss_name {boss_name!r} does not match profile {self.profile.name!r} ({self.profile.boss_name})"
            )
        self.action_mode = action_mode
        self.action_persistence = action_persistence
        self.timestep = timestep_ms / 1000.0
        self.max_steps = max_steps
        self.pause_between_steps = pause_between_steps
        self.tap_ms = tap_ms
        self.render_mode = render_mode
        self.reward_fn: RewardFn = reward_fn or BaseReward()

        if action_mode == "discrete":
            self._discrete = DiscreteActions(self.profile)
            self.action_space: spaces.Space = spaces.Discrete(len(self._discrete))
            self._idle_action: Any = self._discrete.index("idle") if "idle" in self._discrete.names else 0
        else:
            self._buttons = tuple(self.profile.keybinds)
            self.action_space = spaces.MultiBinary(len(self._buttons))
            self._idle_action = np.zeros(len(self._buttons), np.int8)
        self._obs = ObservationBuilder(
            self.profile, FrameSpec(tuple(frame_size), tuple(frame_crop)), frame_stack, action_history, self.action_space
        )
        self.observation_space = self._obs.space
        unknown = [a for a in state_attributes if a not in self.profile.siphon.attributes]
        if unknown:
            raise ValueError(f"state_attributes {unknown} are not in profile {self.profile.name!r}")
        # read each step: what the observation and reward need, plus what the caller asked for
        self._names = tuple(dict.fromkeys((*self._obs.attributes, *state_attributes)))
        self._state: GameState | None = None
        self._frame: Frame | None = None
        self._deadline = 0.0
        self._steps = 0
        self._episode_reward = 0.0
        self._start_state: GameState | None = None
        self._start_frame = 0
        self._damage_taken = 0.0

    # --------------------------------------------------------------------------------- reset
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Restart the fight. ``options={"boss_hp": f}`` starts it with the boss at fraction ``f``
        of its HP (a memory write, as the game allows: curricula use it)."""
        super().reset(seed=seed)
        fight_seed = int(self.np_random.integers(2**31 - 1))
        boss_hp = (options or {}).get("boss_hp", 1.0)
        if not 0 < boss_hp <= 1:
            raise ValueError(f"options['boss_hp'] must be a fraction in (0, 1], got {boss_hp!r}")
        try:
            self.game.hold_keys(())
            if self.pause_between_steps:  # freeze first, so the restarted fight waits for step 1
                self.game.set_speed(0.0)
            state = self.game.reset_fight(fight_seed)
            if boss_hp < 1:
                self.game.write("NpcHp", max(1, round(state["NpcMaxHp"] * boss_hp)))
            self._state, self._frame = self.game.observe(self._names)
        except BaseException:
            self._release_keys()
            raise
        self._start_state = self._state
        self._start_frame = self._frame.number
        self._steps = 0
        self._episode_reward = 0.0
        self._damage_taken = 0.0
        self._deadline = self.game.now()
        obs = self._obs.reset(self._state, self._frame.rgb, self._idle_action)
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
        command = self._command(action)
        try:
            overrun = self._play(command)
            state, frame = self.game.observe(self._names)
        except BaseException:
            self._release_keys()
            raise
        before, self._state, self._frame = self._state, state, frame
        self._steps += 1
        reward = float(self.reward_fn(before, state))
        self._episode_reward += reward
        self._damage_taken += max(0, before["HeroHp"] - state["HeroHp"]) / max(1, state["HeroMaxHp"])
        terminated = state["HeroHp"] <= 0 or state["NpcHp"] <= 0
        truncated = not terminated and self._steps >= self.max_steps
        if terminated or truncated:
            self._release_keys()
        obs = self._obs.step(state, frame.rgb, action)
        timing = {}
        if self.game.realtime:  # in lock-step, wall time says nothing about the game
            timing = {
                "step_wall_ms": (time.perf_counter() - started) * 1000.0,
                "overrun_ms": overrun * 1000.0,
                "frame_age_ms": max(0.0, self.game.now() - frame.timestamp) * 1000.0,
            }
        return obs, reward, terminated, truncated, self._info(**timing)

    def _command(self, action: Any) -> KeyCommand:
        if self.action_mode == "discrete":
            return self._discrete.command(int(action))
        bits = np.asarray(action)
        return KeyCommand(frozenset(self.profile.keybinds[b] for b, on in zip(self._buttons, bits) if on))

    def _play(self, command: KeyCommand) -> float:
        """Apply the keys, let one timestep of game time pass; return how late the step was."""
        game = self.game
        game.hold_keys(command.hold)
        if command.tap:
            game.tap_keys(command.tap, self.tap_ms)
        if self.pause_between_steps:
            game.set_speed(1.0)
            self._deadline = game.now()
        self._deadline += self.timestep
        overrun = max(0.0, game.now() - self._deadline)
        if overrun > 0:
            self._deadline = game.now()  # restart the schedule: never rush to catch up
        game.wait_until(self._deadline)
        if self.pause_between_steps:
            game.set_speed(0.0)
        if not self.action_persistence:
            game.hold_keys(())
        return overrun

    # ---------------------------------------------------------------------------------- info
    def _info(self, **extra: float) -> dict:
        state, start = self._state, self._start_state
        assert state is not None and start is not None
        return {
            "episode_length": self._steps,
            "episode_reward": self._episode_reward,
            "win": bool(state["NpcHp"] <= 0 < state["HeroHp"]),
            "boss_damage_dealt": max(0.0, (start["NpcHp"] - state["NpcHp"]) / max(1, state["NpcMaxHp"])),
            "player_damage_taken": self._damage_taken,
            "frame_number": self._frame.number - self._start_frame,
            "game_time": round(state.timestamp - start.timestamp, 6),
            **extra,
        }

    # ------------------------------------------------------------------------ render / close
    def render(self) -> np.ndarray | None:
        """The last captured frame at full size (RGB), before any crop or resize."""
        if self.render_mode != "rgb_array" or self._frame is None:
            return None
        return self._frame.rgb

    def _release_keys(self) -> None:
        """Best effort: called while another error may be on its way up, which must win."""
        try:
            self.game.hold_keys(())
        except Exception as e:  # noqa: BLE001
            log.warning("could not release keys: %s", e)

    def close(self) -> None:
        self._release_keys()
        if self._owns_game:
            self.game.close()
        super().close()
