"""A person taking over a live game while fine-tuning plays it (``finetune.interventions: person``):
their control as the pilot's, each of their steps labelled with what they pressed, the env
pressing nothing in those steps. Against the real simulator server over gRPC; the whole run, with
real key events on Xvfb, is ``tests/test_finetune.py``'s."""

from __future__ import annotations

import pytest

from env.common.errors import ConfigError
from env.common.fields import FieldError
from env.config import EnvConfig
from env.factory import make_env
from env.profile import load_profile
from env.sim.launcher import SimServer
from env.sim.moves import PlayerAnim

from capture.live_takeover import PersonAtTheKeys

from elden_il.params import FinetuneConfig

CONFIG = EnvConfig(profile="sim_margit", action_history=4, max_steps=20)
TABLE = CONFIG.actions(load_profile("sim_margit"))
ROLLING = (PlayerAnim.ROLL, PlayerAnim.BACKSTEP)


def person_on(clock: list[float], quiet_s: float = 0.6) -> PersonAtTheKeys:
    """A person whose keys the test presses (``person.sink``), on the test's clock."""
    return PersonAtTheKeys(TABLE, quiet_s, clock=lambda: clock[0], listen=False)


def test_a_persons_steps_are_labelled_with_what_they_pressed_until_they_let_go():
    now = [0.0]
    person = person_on(now)
    assert not person.takes_over()
    now[0] = 1.0
    person.sink.key("W", True, t=1.0)
    now[0] = 1.05
    assert person.takes_over()
    person.sink.key("LEFT_SHIFT", True, t=1.1)
    person.sink.key("LEFT_SHIFT", False, t=1.15)
    now[0] = 1.25
    assert TABLE.names[person.played()] == "roll_forward"  # W held, the dodge tapped
    assert person.takes_over()
    now[0] = 1.45
    assert TABLE.names[person.played()] == "move_forward"  # W held the whole step
    person.sink.key("W", False, t=1.5)
    now[0] = 1.6
    assert person.takes_over()  # let go, but not yet for the quiet time
    now[0] = 1.8
    assert TABLE.names[person.played()] == "idle"
    now[0] = 2.2
    assert not person.takes_over()  # 0.7 s with nothing held: the policy's again


def test_a_step_the_person_takes_presses_nothing_from_the_env_and_reports_their_action(
    sim_server: SimServer, player: None
):
    """On the simulator server in its ideal mode and in its real-server mode alike."""
    now = [0.0]
    person = person_on(now, quiet_s=0.0)
    roll = TABLE.names.index("roll_forward")
    env = make_env(CONFIG, backend="siphon", host=sim_server.host)
    try:
        env.reset(seed=3)
        env.unwrapped.share_keys(person)
        person.sink.key("A", True, t=0.0)  # the person holds left as the step starts
        obs, _, _, _, info = env.step(roll)
        assert info["taken_over"] and TABLE.names[info["action"]] == "move_left"
        assert obs["action_history"][-1] == info["action"]  # the policy will see what was played
        assert env.unwrapped.state["HeroAnimId"] not in ROLLING  # the env's roll was never pressed
        person.sink.key("A", False, t=0.0)
        now[0] = 1.0
        for _ in range(3):  # the env's own again: its roll is pressed and reported
            _, _, _, _, info = env.step(roll)
            assert not info["taken_over"] and info["action"] == roll
        assert env.unwrapped.state["HeroAnimId"] in ROLLING
    finally:
        env.close()


def test_only_a_live_game_can_be_taken_over():
    env = make_env(CONFIG, backend="sim")
    try:
        with pytest.raises(ConfigError, match="a person can take over a live game only"):
            env.unwrapped.share_keys(person_on([0.0]))
    finally:
        env.close()
    with pytest.raises(FieldError, match="needs a live game"):
        FinetuneConfig(method="awac", interventions="person")
