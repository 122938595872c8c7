"""A live game is left at real time with no key held: an env that paused it between steps gives it
back at real time when it closes, and whoever connects next takes back what a killed client left
(paused, fast, a key down, before anything was targeted), saying so, before it waits on the game."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest
from conftest import GAME_SERVER_ARGS
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.profile import load_profile
from env.sim.launcher import SimServer, someone_locks_on
from env.sim.world import Phase
from env.siphon.client import SiphonClient
from env.siphon.game import SiphonGame

log = logging.getLogger(__name__)


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
    frozen for whoever came next. Now the game runs at real time."""
    env = env_over(sim_server, speed=3.0)
    env.reset(seed=0)
    env.step(0)
    assert speed_of(stub) == (True, 0.0)  # paused while the policy thinks
    env.close()
    flag, value = speed_of(stub)
    assert not flag or value == 1.0


def killed_client_leaving(host: str, key: str, speed: float | None) -> None:
    """A client in a process of its own that holds ``key`` (and sets the game's speed, as a 3x env
    does mid-step or between steps) and then dies without closing anything, as SIGKILL ends one."""
    code = f"""
        import os
        from env.siphon.game import SiphonGame
        game = SiphonGame({host!r}, "sim_margit")
        game.hold_keys([{key!r}])
        speed = {speed!r}
        if speed is not None:
            game.set_speed(speed)
        os._exit(0)
    """
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, timeout=60)


TICKS_PER_STEP = 12  # 200 ms of the simulator's 60 ticks a second


@pytest.mark.parametrize(
    "speed", [None, 0.0, 3.0], ids=["a key left down", "paused with a key left down", "at 3x with a key left down"]
)
def test_what_a_killed_client_left_is_taken_back_and_said(
    sim_server: SimServer, player: None, stub, caplog, speed: float | None
):
    """A client killed while holding a key (SIGKILL: nothing runs) left it down: the next envs'
    idle player walked 3.97 m where it should stand. Left paused as well, the next env at 1x passed
    no game time in its steps, and nothing said so; left at 3x (a 3x env killed mid-step), the next
    env at 1x played its five steps at 3x (181 ticks, not 60), said nothing, and left the game at 3x
    when it closed. Now whoever connects lets go of every bound key and takes any speed but real
    time back to it, in one warning line; the steps run at the env's own speed, the hero stands,
    and the game is left at real time."""
    killed_client_leaving(sim_server.host, "S", speed)
    said = the_next_env_at_1x_plays_at_its_speed_with_the_hero_still(sim_server, stub, caplog)
    assert len(said) == int(speed is not None), said


def test_the_env_after_a_3x_env_killed_by_sigkill_plays_at_its_own_speed_with_the_hero_still(
    sim_server: SimServer, player: None, stub, caplog
):
    """A script driving an env at 3x, holding move_back, killed by SIGKILL (paused between its
    steps or at 3x within one, as the kill falls: the case left at 3x, which the next env did not
    notice, is the parametrized test above's, made certain): the next env at 1x is told in one
    line, plays at its own speed, and the hero stands."""
    process = start_script(sim_server.host, "with")
    try:
        assert process.stdout.readline() == "stepping\n"
        time.sleep(0.5)  # some steps in
        process.kill()
        process.communicate(timeout=60)
    finally:
        process.kill()
    said = the_next_env_at_1x_plays_at_its_speed_with_the_hero_still(sim_server, stub, caplog)
    assert len(said) == 1, said


def the_next_env_at_1x_plays_at_its_speed_with_the_hero_still(server: SimServer, stub, caplog) -> list[str]:
    """An env at 1x over ``server`` plays five idle steps: the hero stands, the game runs at 1x,
    and the game is left at real time; what it said of taking the game back."""
    with caplog.at_level(logging.WARNING, logger="env.siphon.game"):
        env = env_over(server)
    try:
        env.reset(seed=0)
        start = np.array([env.state["HeroLocalPosX"], env.state["HeroLocalPosY"]])
        ticks = env.state["SimTick"]
        for _ in range(5):
            env.step(0)  # idle
        walked = np.hypot(*(np.array([env.state["HeroLocalPosX"], env.state["HeroLocalPosY"]]) - start))
        ran = env.state["SimTick"] - ticks
    finally:
        env.close()
    assert walked < 0.05, walked
    # the game ran at 1x: five steps of about 12 ticks (3x: about 180); a loaded machine's late
    # steps are let run up to twice their length
    assert 5 * TICKS_PER_STEP * 2 / 3 < ran < 5 * TICKS_PER_STEP * 2, ran
    flag, value = speed_of(stub)
    assert not flag or value == 1.0
    return [r.getMessage() for r in caplog.records if "taking it back to real time" in r.getMessage()]


def phase_of(host: str) -> Phase:
    with grpc.insecure_channel(host) as channel:
        stub = pb2_grpc.SiphonServiceStub(channel)
        return Phase(stub.GetAttribute(pb2.GetSiphonRequest(attributeName="SimPhase"), timeout=5).int_value)


def left_paused(host: str, where: str) -> None:
    """A client that paused the game before anything was targeted (at the grace, or on the
    loading screen after the player's death) and was killed there: nothing handed back."""
    client = SiphonClient(host)
    try:
        client.configure(load_profile("eldenring_margit").siphon)  # no NPC read: the hook is not in
        if where == "loading":
            client.write("HeroHp", 0)  # YOU DIED, then the loading screen
            deadline = time.monotonic() + 30
            while phase_of(host) is not Phase.LOADING and time.monotonic() < deadline:
                time.sleep(0.02)
        client.write("gameSpeedFlag", True)
        client.write("gameSpeedVal", 0.0)
    finally:
        client.close()
    assert phase_of(host) is (Phase.LOADING if where == "loading" else Phase.OUTSIDE)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["grace", "loading"], ids=["at the grace", "on the loading screen"])
def test_a_game_left_paused_before_anything_is_targeted_is_taken_back_and_fought(tmp_path, caplog, where: str):
    """Paused at the Site of Grace, or on the loading screen after a death, the next env waited
    60 s for a lock-on that a frozen game cannot give, failed blaming the target, hook.dll and
    Easy Anti-Cheat, and left the game paused. Now it takes the game back to real time before it
    waits for a target, says so in one line, and the person's lock-on, asked for, is heard: the
    env walks in and fights."""
    with SimServer(size=(84, 84), extra_args=GAME_SERVER_ARGS, log_path=tmp_path / "server.log") as server:
        left_paused(server.host, where)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING), ThreadPoolExecutor(1) as pool:
            connecting = pool.submit(SiphonGame, server.host, "eldenring_margit")
            while "lock on to the boss now" not in caplog.text and not connecting.done():
                time.sleep(0.1)
            with someone_locks_on(server.host, server.lock_on_keys):  # the person does as asked
                game = connecting.result(timeout=120)
        env = EldenRingEnv(game, EnvConfig(profile="eldenring_margit"))
        try:
            env.reset(seed=0)
            for _ in range(3):
                env.step(0)
            fought = time.monotonic() - started
            assert phase_of(server.host) is Phase.FIGHT
        finally:
            env.close()
        log.info("a game left paused %s: fought %.1f s after connecting", where, fought)
    said = [r.getMessage() for r in caplog.records if "taking it back to real time" in r.getMessage()]
    assert len(said) == 1 and "paused" in said[0], said


SCRIPTS = {
    "with": """
        with make_env(backend="siphon", host=HOST, profile="sim_margit", game_speed=3.0) as env:
            env.reset(seed=0)
            print("stepping", flush=True)
            while True:
                env.step(2)  # move_back, held
    """,
    "finally": """
        env = make_env(backend="siphon", host=HOST, profile="sim_margit", game_speed=3.0)
        try:
            env.reset(seed=0)
            print("stepping", flush=True)
            while True:
                env.step(2)  # move_back, held
        finally:
            env.close()
    """,
}


def start_script(host: str, script: str) -> subprocess.Popen:
    """One of ``SCRIPTS`` in a process of its own, playing against ``host``; it prints "stepping"
    once its env steps."""
    # Ctrl-C as Python takes it in a terminal: under a shell without job control (a suite started
    # in the background) a child inherits SIGINT ignored, and Python then leaves it ignored
    ctrl_c = "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
    code = f"{ctrl_c}HOST = {host!r}\nfrom env.factory import make_env\n" + textwrap.dedent(SCRIPTS[script])
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def hero_walks(host: str, ticks: int = 30) -> float:
    """How far the hero goes in ``ticks`` of game time with nobody at the keys (a key left down
    walks it at 1.6 m/s or more)."""
    client = SiphonClient(host)
    try:
        client.configure(load_profile("sim_margit").siphon)
        names = ["SimTick", "HeroLocalPosX", "HeroLocalPosY"]
        start = client.read(names)
        now = start
        while now["SimTick"] < start["SimTick"] + ticks:
            time.sleep(0.05)
            now = client.read(names)
        return float(
            np.hypot(now["HeroLocalPosX"] - start["HeroLocalPosX"], now["HeroLocalPosY"] - start["HeroLocalPosY"])
        )
    finally:
        client.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_script_stopped_by_ctrl_c_or_sigterm_hands_the_game_back(
    sim_server: SimServer, player: None, stub, script, signum
):
    """A script driving an env at 3x as the examples do (a ``with`` block, or ``close()`` in
    ``finally``) handed the game back on Ctrl-C, but SIGTERM ended it on the spot: the game left
    at 3x or paused, with ``move_back`` held. Now SIGTERM, where the script left it at its default,
    is raised as Ctrl-C is while a live game is open, so the ``with`` or ``finally`` runs: the
    game is back at real time, and the hero stands."""
    process = start_script(sim_server.host, script)
    try:
        assert process.stdout.readline() == "stepping\n"
        time.sleep(0.5)  # some steps in
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode != 0 and "KeyboardInterrupt" in err, err
    flag, value = speed_of(stub)
    assert not flag or value == 1.0, (flag, value)
    assert hero_walks(sim_server.host) < 0.05


def test_the_recorder_takes_back_a_game_a_3x_client_left(sim_server: SimServer, player: None, stub, caplog, tmp_path):
    """The recorder connecting to a game a killed client left at 3x recorded it at 3x and said
    nothing (only an env took a paused game back). Now it takes it back to real time in one line,
    as every client that connects does, and leaves it there."""
    from capture.record import RecordSettings, record

    killed_client_leaving(sim_server.host, "S", 3.0)
    settings = RecordSettings(
        env=EnvConfig(profile="sim_margit"),
        backend="siphon",
        host=sim_server.host,
        autopilot=True,
        max_episodes=1,
        max_episode_seconds=1.0,
        out=tmp_path / "raw",
    )
    with caplog.at_level(logging.WARNING, logger="env.siphon.game"):
        (saved,) = record(settings)
    said = [r.getMessage() for r in caplog.records if "taking it back to real time" in r.getMessage()]
    assert len(said) == 1 and "was left at 3x" in said[0], said
    flag, value = speed_of(stub)
    assert not flag or value == 1.0
    assert saved.exists()
