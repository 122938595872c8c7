"""A trained policy playing the game inside the recorder (``python -m capture.record --policy``).

At each env step (``DecisionClock``) the pilot builds the observation the env would give the
policy, with the env's own ``ObservationBuilder`` (the policy's saved ``EnvConfig``: its frame
preprocessing, stack and action history), from the sample's game state and full-size frame,
asks the policy for an action, and sends it as keys (``KeyDriver``), logged like the autopilot's.
The action pushed into the observation's history is the one the dataset builder will label
for the step that just ended (``capture.labels`` over its samples), whoever played it, so the
policy sees what it would see in the env and the dataset what the policy saw.

While the person has control (``capture.takeover``) the pilot still watches and decides (so a
scripted human can compare) but sends nothing, and lets go of any key it held.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from env.config import EnvConfig
from env.game import Game, GameState
from env.observations import ObservationBuilder

from capture.autopilot import DecisionClock, KeyDriver
from capture.episode import Sample
from capture.labels import StepLabeler
from capture.takeover import ScriptedHuman, Takeover

log = logging.getLogger(__name__)


def policy_file(path: Path) -> Path:
    """A saved policy given as its folder (``datasets/models/bc``) or its ``policy.zip``, checked
    before the game starts (``elden_il.policy.policy_path``)."""
    from elden_il.policy import policy_path  # torch: only when a policy plays

    return policy_path(path)


class PolicyPilot:
    def __init__(self, game: Game, takeover: Takeover, path: Path, config: EnvConfig,
                 human: ScriptedHuman | None = None) -> None:
        import torch

        from elden_il.policy import load_policy  # torch: only when a policy plays

        # the one loader: either of SB3's zips (BC's, the fine-tuned PPO's), checked against its env config
        self.policy = load_policy(path, device="cpu").policy
        # One observation at a time: intra-op threads only contend (one decision took 190 ms
        # with 2 threads, 6 ms with 1, on a busy 2-core machine). Restored by ``close``.
        self._threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.config = config
        self.takeover = takeover
        self.human = human
        self.clock = DecisionClock(config.timestep_ms / 1000.0)
        self.driver = KeyDriver(game, takeover.inputs, config.tap_ms)
        self.actions = config.actions(game.profile)
        self.builder = ObservationBuilder(config, self.actions)
        self.labeler = StepLabeler(self.actions, takeover.inputs.key_names)
        self._step: list[Sample] = []  # the samples since the last decision
        self._started = False
        self.decisions = 0

    def new_fight(self) -> None:
        self.clock.reset()
        self._step = []
        self._started = False
        if self.human is not None:
            self.human.new_fight()

    def on_sample(self, sample: Sample, state: GameState, frame: np.ndarray) -> Any:
        """Feed every sample of a fight with its state and full-size frame; returns the policy's
        action when a decision fell due (sent unless the person has control), else None."""
        self._step.append(sample)
        if self.takeover.in_control(sample.t) and self.driver.holding:
            self.driver.release(keep_logged=self.takeover.held())
        if not self.clock.due(state.timestamp):
            return None
        obs = self._observe(state, frame)
        action, _ = self.policy.predict({k: np.asarray(v)[None] for k, v in obs.items()}, deterministic=True)
        action = action[0]
        self.decisions += 1
        if self.human is not None:
            self.human.decide(state, action)
        if not self.takeover.in_control(sample.t):
            self.driver.play(self.actions.command(action))
        return action

    def _observe(self, state: GameState, frame: np.ndarray) -> dict:
        if not self._started:
            self._started = True
            self._step = []
            return self.builder.reset(state, frame)
        # the step's samples: those after the previous decision, up to this one (as the dataset's)
        step, self._step = self._step, []
        held = np.stack([s.held for s in step]) if step else np.zeros((0, len(self.labeler.columns)), bool)
        pressed = np.stack([s.pressed for s in step]) if step else held
        return self.builder.step(state, frame, self.labeler.label(held, pressed))

    def release(self) -> None:
        if self.human is not None:
            self.human.release()
        self.driver.release(keep_logged=self.takeover.held())

    def close(self) -> None:
        import torch

        self.release()
        torch.set_num_threads(self._threads)
