"""A demonstrator with a person's limits: the scripted expert's knowledge, a person's reactions.

The scripted expert (``env.sim.expert``) sees a boss move the step it starts and never misses
one; nobody plays like that, so guidance measured on it ("how many fights do I need?") flatters
every real recording. ``PersonLikeExpert`` keeps the expert's knowledge of the moves and adds what
published figures say a person brings to a screen:

- **Reaction time.** A new boss move is noticed only a reaction time after it starts, drawn per
  move from an ex-Gaussian (a normal body and an exponential slow tail, the shape reaction-time
  distributions are fitted with since Hohle, 1965). Its mean is the simple visual reaction time
  Woods et al. measured on 1,469 adults with calibrated hardware: 231 ms (Front. Hum. Neurosci.
  9:131, 2015). A move whose blow lands sooner cannot be dodged: the expert's own rule then
  takes the hit rather than waste a roll.
- **Timing spread.** Once noticed, the person judges from the wind-up when the move began, with
  a normal error of tens of milliseconds: the spread of taps synchronised to a seen or heard
  beat (Repp, Psychon. Bull. Rev. 12:969, 2005).
- **Missed telegraphs.** Some moves are not noticed at all: a lapse, as in the lapse rates
  psychophysics allows for (a few per cent: Wichmann & Hill, Percept. Psychophys. 63:1293, 2001).
- **Taps of a person's length.** A key is held about a tenth of a second, with spread, where the
  expert's taps are exact; the order of the key-hold times of everyday typing (Dhakal et al.,
  CHI 2018, 136 million keystrokes).
- **A button habit.** After a roll or an attack, a person sometimes presses it once more where
  the expert would wait. Its rate is a choice, not a published figure.

Every draw comes from one seeded generator, so a recording with it is reproducible byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from env.game import GameState
from env.sim.expert import ScriptedExpert


@dataclass(frozen=True)
class HumanLimits:
    """What a person brings to the screen; the defaults are the published figures the module
    docstring cites (the habit's rate excepted)."""

    reaction_mu_s: float = 0.180
    """The ex-Gaussian's normal body: its mean, in seconds."""
    reaction_sigma_s: float = 0.025
    """The normal body's spread."""
    reaction_tau_s: float = 0.051
    """The exponential tail's mean: with ``reaction_mu_s``, a mean reaction of 231 ms."""
    timing_sd_s: float = 0.030
    """Spread of the person's judgement of when a noticed move began."""
    lapse: float = 0.05
    """Chance that a boss move goes unnoticed."""
    tap_s: float = 0.100
    """Mean time a tapped key is held."""
    tap_sd_s: float = 0.025
    """Its spread (never shorter than ``MIN_TAP_S``)."""
    repeat: float = 0.15
    """Chance that a roll or an attack is pressed once more at the next decision."""

    @property
    def mean_reaction_s(self) -> float:
        return self.reaction_mu_s + self.reaction_tau_s


MIN_TAP_S = 0.03
"""The shortest key press a finger makes; keeps the normal's lower tail physical."""
REPEATED = ("roll_left", "roll_right", "roll_back", "attack")
"""The taps a person's habit repeats."""


class PersonLikeExpert(ScriptedExpert):
    """``ScriptedExpert`` with a person's reactions. ``observe`` every sample (the person watches
    the screen all the time), ``act`` at each decision; ``tap_ms`` for each tap it sends."""

    def __init__(self, step_seconds: float = 0.2, limits: HumanLimits = HumanLimits(), seed: int = 0) -> None:
        self.limits = limits
        self.rng = np.random.default_rng(seed)
        self.lead_s = 0.0
        """How much earlier than what it sees the person presses: a practised player's allowance for
        the lag between a press and the game showing it (0 in lock-step, where there is none)."""
        super().__init__(step_seconds, limits.tap_s)  # a player times a dodge for their own way of tapping

    def reset(self) -> None:
        super().reset()
        self._seen_anim = -1  # the boss's move as the screen shows it
        self._noticed_anim = -1  # the move as the person knows it
        self._pending: tuple[int, float, float] | None = None  # (move, noticed at, believed start); None: missed
        self._believed_start = 0.0
        self._last_action = "idle"

    def observe(self, state: Mapping[str, float]) -> bool:
        """Watch one frame: a move that starts now will be noticed a reaction time later, or
        never. True when a move is noticed at this frame: the person acts on it at once."""
        anim, now = int(state["NpcAnimId"]), float(state.timestamp)
        if anim != self._seen_anim:
            self._seen_anim = anim
            self._pending = None if self.rng.random() < self.limits.lapse else self._notice(anim, now)
        return self._pending is not None and now >= self._pending[1]

    def _notice(self, anim: int, now: float) -> tuple[int, float, float]:
        """A move that starts ``now``: when the person notices it, and when they judge it began."""
        limits = self.limits
        reaction = self.rng.normal(limits.reaction_mu_s, limits.reaction_sigma_s) + self.rng.exponential(
            limits.reaction_tau_s
        )
        return anim, now + max(0.0, reaction), now + self.rng.normal(0.0, limits.timing_sd_s)

    def act(self, state: Mapping[str, float]) -> str:
        self.observe(state)
        now = float(state.timestamp)
        if self._pending is not None and now >= self._pending[1]:
            self._noticed_anim, _, self._believed_start = self._pending
            self._pending = None
        seen = GameState({**state, "NpcAnimId": self._noticed_anim}, now + self.lead_s)  # as the press will land
        action = super().act(seen)
        if action == "idle" and self._last_action in REPEATED and self.rng.random() < self.limits.repeat:
            action = self._last_action
        self._last_action = action
        return action

    def _onset(self, now: float) -> float:
        return self._since_fight_start(self._believed_start)  # on the expert's clock: from the fight's start

    def tap_ms(self) -> int:
        """How long the person holds the next tapped key, in milliseconds: a draw."""
        limits = self.limits
        return round(1000 * max(MIN_TAP_S, self.rng.normal(limits.tap_s, limits.tap_sd_s)))
