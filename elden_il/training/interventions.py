"""Taking over while fine-tuning learns: the steps a person plays instead of the policy.

HIL-SERL (Luo et al. 2024) learns real tasks in an hour or two of interaction partly because a
person corrects the policy while it trains, and those corrections join the demonstrations. Here
the person is the simulator's scripted human, the same one that corrects a policy in the pilot
(``capture.takeover.ScriptedHuman``: it plays the expert while a boss blow winds up and the
policy's choice differs from the expert's), deciding before each env step whether to play it.
"""

from __future__ import annotations

from env.actions import ActionTable, KeyCommand
from env.game import GameState

from capture.takeover import ScriptedHuman


class EnvPresses:
    """The scripted human's keyboard where the env presses the keys: its action is the step's
    action, so nothing is pressed here."""

    def play(self, command: KeyCommand) -> None:
        pass

    def release(self) -> None:
        pass


class ScriptedInterventions:
    """Before each env step, the scripted human's choice: the index of the action it plays
    instead of the actor's (in the env's discrete table), or None."""

    def __init__(self, table: ActionTable, step_seconds: float) -> None:
        self.human = ScriptedHuman(EnvPresses(), table, step_seconds)

    def new_fight(self) -> None:
        self.human.new_fight()

    def __call__(self, state: GameState, action: int) -> int | None:
        taken = self.human.takes_over(state, action)
        return None if taken is None else self.human.table.index(taken)
