"""The autopilot: the scripted expert plays the game through the Game interface's key input
while the recorder logs the very keys it sends as the actions, so demonstrations exist without
a human.

It decides once per step of the env config's ``timestep_ms`` (the env's timestep, so its demonstrations have the rhythm
the policies will act at), from the state of the sample that falls due, and mirrors every key
it holds or taps into the ``InputLog`` at the moment it sends it. Being driven by the sampling
loop rather than its own thread, it runs identically in real time and lock-step.
"""

from __future__ import annotations

import logging

from env.actions import ActionTable, send
from env.config import EnvConfig
from env.game import Game, GameError, GameState
from env.sim.expert import ScriptedExpert

from capture.inputs import InputLog

log = logging.getLogger(__name__)


class Autopilot:
    def __init__(self, game: Game, inputs: InputLog, config: EnvConfig) -> None:
        self.game = game
        self.inputs = inputs
        self.step_seconds = config.timestep_ms / 1000.0
        self.tap_ms = config.tap_ms
        self.actions = ActionTable(game.profile, "discrete")
        self.expert = ScriptedExpert(self.step_seconds)
        self._next_decision = float("-inf")

    def new_fight(self) -> None:
        self.expert.reset()
        self._next_decision = float("-inf")

    def maybe_act(self, state: GameState) -> str | None:
        """Act if a decision is due at this state's time; returns the action taken, if any."""
        if state.timestamp + 1e-6 < self._next_decision:
            return None
        self._next_decision = max(self._next_decision + self.step_seconds, state.timestamp)
        return self.act(state)

    def act(self, state: GameState) -> str:
        """Decide and send one action; log its keys as they are sent."""
        name = self.expert.act(state)
        command = self.actions.command(self.actions.index(name))
        before = self.inputs.held_names()
        send(self.game, command, self.tap_ms)
        for key in before - command.hold:
            self.inputs.key(key, False)
        for key in command.hold - before:
            self.inputs.key(key, True)
        if command.tap:
            self.inputs.tap(command.tap)
        return name

    def release(self) -> None:
        try:
            self.game.hold_keys(())
        except GameError as e:
            log.warning("autopilot could not release its keys: %s", e)
        for key in self.inputs.held_names():
            self.inputs.key(key, False)
