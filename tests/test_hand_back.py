"""A live game is handed back as it was found: an env that paused it between steps restores its
speed when it closes, and an env that finds it paused, or with a key a killed client left down,
says so and takes it back to a known state."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from pysiphon.generated import siphon_service_pb2 as pb2

from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.sim.launcher import SimServer
from env.siphon.game import SiphonGame


def speed_of(stub) -> tuple[bool, float]:
    flag = stub.GetAttribute(pb2.GetSiphonRequest(attributeName="gameSpeedFlag"), timeout=2).bool_value
    value = stub.GetAttribute(pb2.GetSiphonRequest(attributeName="gameSpeedVal"), timeout=2).float_value
    return flag, value


def env_over(server: SimServer, speed: float = 1.0) -> EldenRingEnv:
    return EldenRingEnv(
        SiphonGame(server.host, "sim_margit"),
        EnvConfig(profile="sim_margit", game_speed=speed),
        state_attributes=("SimTick", "HeroLocalPosX", "HeroLocalPosY"),
    )


def test_an_env_that_paused_the_game_hands_it_back_at_its_speed_when_it_closes(
    sim_server: SimServer, player: None, stub
):
    """At 3x the env pauses the game between steps; closed, it left gameSpeedVal at 0 and the game
    frozen for whoever came next. Now the game runs at the speed the env found it at."""
    env = env_over(sim_server, speed=3.0)
    env.reset(seed=0)
    env.step(0)
    assert speed_of(stub) == (True, 0.0)  # paused while the policy thinks
    env.close()
    flag, value = speed_of(stub)
    assert not flag or value == 1.0


def killed_client_holding(host: str, key: str, paused: bool) -> None:
    """A client in a process of its own that holds ``key`` (and pauses the game) and then dies
    without closing anything, as SIGKILL ends one."""
    code = f"""
        import os
        from env.siphon.game import SiphonGame
        game = SiphonGame({host!r}, "sim_margit")
        game.hold_keys([{key!r}])
        if {paused!r}:
            game.set_speed(0.0)
        os._exit(0)
    """
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, timeout=60)


@pytest.mark.parametrize("paused", [False, True], ids=["a key left down", "paused with a key left down"])
def test_what_a_killed_client_left_is_taken_back_and_said(
    sim_server: SimServer, player: None, stub, caplog, paused: bool
):
    """A client killed while holding W (SIGKILL: nothing runs) left it down: the next envs' idle
    player walked 3.97 m where it should stand. Left paused as well, the next env at 1x passed no
    game time in its steps, and nothing said so. Now the env lets go of every bound key and
    takes a paused game back to real time, in one warning line."""
    killed_client_holding(sim_server.host, "W", paused)
    with caplog.at_level(logging.WARNING, logger="env.siphon.game"):
        env = env_over(sim_server)
    try:
        env.reset(seed=0)
        start = np.array([env.state["HeroLocalPosX"], env.state["HeroLocalPosY"]])
        ticks = env.state["SimTick"]
        for _ in range(5):
            env.step(0)  # idle
        walked = np.hypot(*(np.array([env.state["HeroLocalPosX"], env.state["HeroLocalPosY"]]) - start))
        assert env.state["SimTick"] > ticks + 40  # the game ran: 5 steps of about 12 ticks
    finally:
        env.close()
    assert walked < 0.05, walked
    said = [r.getMessage() for r in caplog.records if "left paused" in r.getMessage()]
    assert len(said) == int(paused), said
