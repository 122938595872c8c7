"""The autopilot: a player of ``env.sim.players`` (the scripted expert, or the person-like player)
plays the game through the Game interface's key input while the recorder logs the very keys it
sends as the actions, so demonstrations exist without a human.

It decides once per step of the env config's ``timestep_ms`` (the env's timestep, so its demonstrations have the rhythm
the policies will act at), from the state of the sample that falls due, and mirrors every key
it holds or taps into the ``InputLog`` at the moment it sends it. Being driven by the sampling
loop rather than its own thread, it runs identically in real time and lock-step.

The two halves it plays by, when to decide and how to press and log (``DecisionClock``,
``KeyDriver``), are every key-sending driver's and live beside them in ``capture.drivers``.
"""

from __future__ import annotations

import logging

import numpy as np

from env.actions import ActionTable
from env.config import EnvConfig
from env.game import Game, GameState
from env.sim.players import make_player

from capture.drivers import DecisionClock, Driver, KeyDriver
from capture.episode_writer import Sample
from capture.inputs import InputLog

log = logging.getLogger(__name__)


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
