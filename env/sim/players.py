"""Who plays the simulator when no person does: one interface, and one registry of its players.

A ``Player`` reads game state and names an action of the profile's discrete table
(``"roll_left"``). Two loops ask it what to press, each on its own clock:

- the recorder's autopilot (``capture.autopilot.Autopilot``) shows it every sample (30 a second)
  and asks for an action when its decision clock falls due (once per env step of game time) or
  when ``observe`` says that what it just saw calls for one (a person's reaction to a boss move);
  each tap lasts the player's ``tap_ms``;
- the env's fight loop (``elden_il.evaluation.fight_loop.PlayerActor``) asks at every env step, as
  evaluation asks a policy, and taps for the env's own ``tap_ms``.

The same player wins at different rates on the two clocks where it reacts between steps or taps
for its own length (the person-like player); ``python -m elden_il.duel --clock`` plays either.
Each player is written once here, and every command that names one (``capture.record --player``,
params.yaml's ``demos.record.player``, ``elden_il.duel --policy``, the results table's teacher
row) reads this registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from env.sim.expert import ScriptedExpert
from env.sim.person import PersonLikeExpert


class Player(Protocol):
    """What both loops ask of a player. ``reset`` at every fight's start; ``observe`` at every
    moment the game is watched between decisions (True: decide now); ``act`` names the action
    to press at a decision; ``tap_ms`` is how long its next tap is held (None: the env's)."""

    def reset(self) -> None: ...

    def observe(self, state: Mapping[str, float]) -> bool: ...

    def act(self, state: Mapping[str, float]) -> str: ...

    def tap_ms(self) -> int | None: ...


class AttackEveryStep:
    """Presses attack at every decision, whatever the boss does: the difficulty check's floor."""

    def reset(self) -> None:
        pass

    def observe(self, state: Mapping[str, float]) -> bool:
        return False

    def act(self, state: Mapping[str, float]) -> str:
        return "attack"

    def tap_ms(self) -> int | None:
        return None


MakePlayer = Callable[[float, float, int], Player]
"""Makes a player deciding every ``step_seconds`` that taps for ``tap_seconds`` (where its taps
are the env's), its own draws seeded by ``seed``."""


@dataclass(frozen=True)
class PlayerKind:
    """A registered player: who it is, in words (as the results table names it), and its maker."""

    words: str
    make: MakePlayer


PLAYERS: dict[str, PlayerKind] = {
    "expert": PlayerKind(
        "the scripted expert", lambda step_seconds, tap_seconds, seed: ScriptedExpert(step_seconds, tap_seconds)
    ),
    # its taps are a person's own length, drawn from its seed
    "person": PlayerKind(
        "the person-like player", lambda step_seconds, tap_seconds, seed: PersonLikeExpert(step_seconds, seed=seed)
    ),
    "attack": PlayerKind("attack every step", lambda step_seconds, tap_seconds, seed: AttackEveryStep()),
}
"""Every player the simulator has, by the name commands and params.yaml take: the scripted
expert (``env.sim.expert``), the same expert with a person's reaction times, lapses and taps
(``env.sim.person``), and one that attacks at every decision."""


def make_player(name: str, step_seconds: float, tap_seconds: float, seed: int = 0) -> Player:
    """The player ``name`` (a key of ``PLAYERS``) deciding every ``step_seconds``."""
    return PLAYERS[name].make(step_seconds, tap_seconds, seed)
