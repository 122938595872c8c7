"""The autopilot: a player of ``env.sim.players`` (the scripted expert, or the person-like player)
plays the game through the Game interface's key input while the recorder logs the very keys it
sends as the actions, so demonstrations exist without a human.

It decides once per step of the env config's ``timestep_ms`` (the env's timestep, so its demonstrations have the rhythm
the policies will act at), from the state of the sample that falls due, and mirrors every key
it holds or taps into the ``InputLog`` at the moment it sends it. Being driven by the sampling
loop rather than its own thread, it runs identically in real time and lock-step.

``DecisionClock`` and ``KeyDriver`` are those two halves (when to decide, how to press and log),
shared with the policy driver (``elden_il.pilot``) and the scripted human (``capture.takeover``).
"""

from __future__ import annotations

import logging

import numpy as np

from env.actions import ActionTable, KeyCommand, send
from env.common.errors import GameError
from env.config import EnvConfig
from env.game import Game, GameState
from env.sim.players import make_player

from capture.drivers import Driver, KeySink
from capture.episode_writer import Sample
from capture.inputs import InputLog

log = logging.getLogger(__name__)


class DecisionClock:
    """Once per env step of game time, from the first sample of a fight on."""

    def __init__(self, step_seconds: float) -> None:
        self.step_seconds = step_seconds
        self._next = float("-inf")

    def reset(self) -> None:
        self._next = float("-inf")

    def due(self, t: float) -> bool:
        """Whether a decision falls due at time ``t`` (and if so, schedule the next one)."""
        if t + 1e-6 < self._next:
            return False
        self._next = max(self._next + self.step_seconds, t)
        return True


class KeyDriver:
    """Sends key commands to the game and logs each key into ``sink`` as it is sent; remembers
    what it holds itself, so it releases only its own keys."""

    def __init__(self, game: Game, sink: KeySink, tap_ms: int) -> None:
        self.game = game
        self.sink = sink
        self.tap_ms = tap_ms
        self.holding: frozenset[str] = frozenset()

    def play(self, command: KeyCommand, tap_ms: int | None = None) -> None:
        """``tap_ms``: how long this command's tap is held (None: the driver's own)."""
        send(self.game, command, self.tap_ms if tap_ms is None else tap_ms)
        for key in self.holding - command.hold:
            self.sink.key(key, False)
        for key in command.hold - self.holding:
            self.sink.key(key, True)
        if command.tap:
            self.sink.tap(command.tap)
        self.holding = command.hold

    def release(self, keep_logged: frozenset[str] = frozenset()) -> None:
        """Let go of every key held; ``keep_logged``: keys someone else holds too, whose release
        is not logged (they are still down)."""
        try:
            self.game.hold_keys(())
        except GameError as e:
            log.warning("could not release the keys: %s", e)
        for key in self.holding - keep_logged:
            self.sink.key(key, False)
        self.holding = frozenset()


class Autopilot(Driver):
    """The recorder's driver when nobody is at the keys: a player of ``env.sim.players.PLAYERS``,
    shown every sample. ``seed`` seeds the player's own draws (the same seed, the same play)."""

    source = "autopilot"

    def __init__(self, game: Game, inputs: InputLog, config: EnvConfig, player: str = "expert", seed: int = 0) -> None:
        self.clock = DecisionClock(config.timestep_ms / 1000.0)
        self.driver = KeyDriver(game, inputs, config.tap_ms)
        self.actions = ActionTable(game.profile, "discrete")
        self.player = make_player(player, self.clock.step_seconds, config.tap_ms / 1000, seed)

    def new_fight(self) -> None:
        self.player.reset()
        self.clock.reset()

    def on_sample(
        self, sample: Sample, state: GameState, frame: np.ndarray, events: np.ndarray, recording: bool
    ) -> None:
        self.maybe_act(state)

    def episode_over(self) -> None:
        """It plays on, recorded or not, until the fight restarts (``release``), as a person does."""

    def maybe_act(self, state: GameState) -> str | None:
        """Act if a decision is due at this state's time, or the player has just noticed something
        in it that calls for one (the person-like player, a boss move); returns the action taken, if any."""
        if self.clock.due(state.timestamp) or self.player.observe(state):
            return self.act(state)
        return None

    def act(self, state: GameState) -> str:
        """Decide and send one action; log its keys as they are sent."""
        name = self.player.act(state)
        self.driver.play(self.actions.command(self.actions.index(name)), self.player.tap_ms())
        return name

    def release(self) -> None:
        self.driver.release()
