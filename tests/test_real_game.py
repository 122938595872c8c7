"""What a first evening with the real game needs from the clients, against the simulator's
real-server mode where it can be shown, and in isolation where it is about Windows."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

from capture import files
from capture.fights import FightTracker
from capture.silence import InputSilence
from env.profile import load_profile


def test_publishing_waits_out_another_process_holding_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Windows: an antivirus or indexer that opened the new file for a moment makes os.replace
    fail with PermissionError; publishing retries instead of leaving the episode unpublished."""
    source, target = tmp_path / "a.h5.partial", tmp_path / "a.h5"
    source.write_bytes(b"episode")
    real_replace, refusals = os.replace, []

    def held_three_times(a, b):
        if len(refusals) < 3:
            refusals.append(a)
            raise PermissionError(13, "The process cannot access the file because it is being used by another process")
        real_replace(a, b)

    monkeypatch.setattr(files.os, "replace", held_three_times)
    files.replace(source, target)
    assert target.read_bytes() == b"episode" and not source.exists() and len(refusals) == 3

    source.write_bytes(b"episode")
    def held_for_good(a, b):
        raise PermissionError(13, "The process cannot access the file because it is being used by another process")

    monkeypatch.setattr(files.os, "replace", held_for_good)
    with pytest.raises(PermissionError):
        files.replace(source, target, retry_for_s=0.2)
    assert source.exists()  # nothing lost: the episode is still there to publish


def test_a_recorder_that_hears_nothing_while_the_game_moves_says_so(caplog: pytest.LogCaptureFixture):
    silence = InputSilence(silence_s=2.0)
    no_events, one_event = np.zeros(0), np.zeros(1)
    with caplog.at_level(logging.WARNING, logger="capture.silence"):
        for i in range(90):  # 3 s at 30 Hz: the player walks, nothing heard
            silence.update(i / 30, {"HeroLocalPosX": i * 0.1, "HeroLocalPosY": 0.0, "HeroAnimId": 1}, no_events)
    assert silence.warned and "run the recorder as Administrator too" in caplog.text

    heard = InputSilence(silence_s=2.0)
    for i in range(90):  # the same, with a key heard every second: nothing to say
        heard.update(i / 30, {"HeroLocalPosX": i * 0.1, "HeroLocalPosY": 0.0, "HeroAnimId": 1},
                     one_event if i % 30 == 0 else no_events)
    assert not heard.warned


def test_only_a_fight_against_the_boss_starts_an_episode():
    """NPC attributes follow whatever was targeted last: a soldier on the way back must not
    start an episode."""
    tracker = FightTracker(boss_npc_id=10000850)
    soldier = {"HeroHp": 500, "HeroMaxHp": 500, "NpcHp": 420, "NpcMaxHp": 420, "NpcId": 43100010}
    boss = {**soldier, "NpcHp": 4174, "NpcMaxHp": 4174, "NpcId": 10000850}
    assert tracker.update(soldier) is None
    assert tracker.update(boss) == "start"
    assert tracker.update({**boss, "HeroHp": 0}) == "death"


def test_the_game_profile_keeps_everyone_alive_and_records_without_writes():
    profile = load_profile("eldenring_margit")
    assert profile.fight_rules.player_floor > 0 and profile.fight_rules.boss_floor > 0
    assert profile.fog_wall is not None and profile.boss_npc_id is not None
    assert not profile.restart_when_recording
    simulator = load_profile("sim_margit")
    assert simulator.fight_rules.player_floor == simulator.fight_rules.boss_floor == 0  # the PRD's rule, exact
    assert simulator.restart_when_recording


GAME_SERVER_ARGS = (
    "--profile", "eldenring_margit", "--real-server", "--scan-ms", "1", "--hook-delay-s", "0.2",
    "--hook-poll-s", "0.05", "--capture-init-ms", "10", "--first-frame-ms", "50",
    "--death-screen-s", "0.5", "--loading-s", "1.0",
)
"""The simulator as unkind as the game, for the game's own profile: Siphon's mutex, scans, hook and
capture, a world that starts at the Site of Grace, real deaths and kills (short screens)."""


@pytest.fixture
def game_server(tmp_path: Path):
    """A real-server-mode simulator for the game's profile, and the person at it, who locks on
    once when the connecting client's hook asks (a soldier outside the fog wall is what is in
    sight)."""
    from env.sim.launcher import SimServer, someone_locks_on

    with SimServer(size=(84, 84), extra_args=GAME_SERVER_ARGS, log_path=tmp_path / "server.log") as server:
        with someone_locks_on(server.host):
            yield server


@pytest.mark.slow
def test_the_env_walks_back_into_the_fight_after_a_real_death_and_names_a_real_kill(game_server):
    """The game's profile against the real-server mode, from the Site of Grace: reset walks
    through the fog wall and locks on; a floor ends an episode with nobody dead; a real death
    (a floor missed) is recovered by the next reset without a human; a real kill is reported with
    the manual step, and once the save is restored (the simulator's stand-in) reset works again."""
    from env.arena import BossKilled
    from env.config import EnvConfig
    from env.factory import make_env

    env = make_env(EnvConfig(profile="eldenring_margit", max_steps=10), backend="siphon", host=game_server.host)
    game = env.unwrapped.game
    try:
        started = time.monotonic()
        obs, _ = env.reset(seed=0)  # from the grace: teleport, walk through the fog, lock on
        first_reset_s = time.monotonic() - started
        assert obs["player_hp"][0] == 1.0 and obs["boss_hp"][0] == 1.0
        assert game.client.read(["NpcId"])["NpcId"] == game.profile.boss_npc_id

        # a blow the floor cannot catch: HP 0 is a real death, a loading screen, a respawn outside
        game.write("HeroHp", 0)
        *_, terminated, _, info = env.step(0)
        assert terminated and not info["win"]
        started = time.monotonic()
        obs, _ = env.reset(seed=1)  # waits out the loading screen, walks back in, locks on
        death_reset_s = time.monotonic() - started
        assert obs["player_hp"][0] == 1.0 and obs["boss_hp"][0] == 1.0
        assert game.client.read(["SimPhase"])["SimPhase"] == 0  # in the fight

        # at the floor: the episode ends, and the env gives the HP back before the game counts a death
        game.write("HeroHp", int(0.3 * game.client.read(["HeroMaxHp"])["HeroMaxHp"]))
        *_, terminated, _, info = env.step(0)
        hero = game.client.read(["HeroHp", "HeroMaxHp", "SimPhase"])
        assert terminated and hero["HeroHp"] == hero["HeroMaxHp"] and hero["SimPhase"] == 0

        # a real kill: the boss is gone from the save; reset says so, with the manual step
        game.write("NpcHp", 0)
        *_, terminated, _, info = env.step(0)
        assert terminated and info["win"]
        with pytest.raises(BossKilled, match="ER0000.sl2"):
            env.reset(seed=2)
        game.client.write("SimRestoreSave", 1, "int")  # the user restores the backup save (sim-only control)
        obs, _ = env.reset(seed=3)
        assert obs["boss_hp"][0] == 1.0 and game.client.read(["SimPhase"])["SimPhase"] == 0
    finally:
        env.close()
    assert first_reset_s < 20 and death_reset_s < 20, (first_reset_s, death_reset_s)


@pytest.mark.slow
def test_the_doctor_checks_a_game_in_under_a_minute_and_names_a_wrong_binding(game_server, tmp_path: Path):
    """At the Site of Grace with a soldier targeted: the doctor says the target is not the boss,
    finds every binding working, and, with the profile's attack on a key the game does not bind,
    names that binding."""
    import shutil
    import subprocess
    import sys

    from env.profile import PROFILES_DIR

    def doctor(profile: str) -> tuple[subprocess.CompletedProcess, float]:
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "env.doctor", "--host", game_server.host, "--profile", profile,
                                 "--hook-timeout", "20"], capture_output=True, text=True, timeout=120)
        return result, time.monotonic() - started

    right, seconds = doctor("eldenring_margit")
    assert right.returncode == 1, right.stdout + right.stderr
    assert "[ok  ] server" in right.stdout and "[ok  ] capture" in right.stdout
    assert "[FAIL] boss: the targeted NPC is 43100010, not the profile's boss_npc_id 10000850" in right.stdout
    assert "[ok  ] keybinds: all 11 bindings make the game react" in right.stdout
    assert "steps/s" in right.stdout and "records at" in right.stdout
    assert seconds < 60, seconds

    wrong = tmp_path / "wrong_attack"
    shutil.copytree(PROFILES_DIR / "eldenring_margit", wrong)
    toml = wrong / "profile.toml"
    toml.write_text(toml.read_text().replace('attack = "P"', 'attack = "K"'))
    result, _ = doctor(str(wrong))
    assert "[FAIL] keybinds: no reaction to attack (K)" in result.stdout, result.stdout


@pytest.mark.slow
def test_recording_the_game_through_deaths_and_walks_back_in(game_server, xvfb: str, tmp_path: Path):
    """A human recording on the game's profile: no writes, no teleports; a death ends the
    episode as a death; the loading screen after it is a pause, not a lost server; the next
    episode starts when the player is back in the fight with the boss targeted."""
    import subprocess
    import sys

    from capture.episode import list_episodes, read_episode
    from env.arena import back_into_the_fight
    from env.siphon_game import SiphonGame

    out = tmp_path / "raw"
    log = tmp_path / "recorder.log"
    with open(log, "w") as sink:
        recorder = subprocess.Popen(
            [sys.executable, "-m", "capture.record", "--profile", "eldenring_margit", "--host", game_server.host,
             "--out", str(out), "--rate", "10", "--max-episodes", "2", "--no-status"],
            stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "DISPLAY": xvfb},
        )
    hands = None
    try:
        deadline = time.monotonic() + 60
        while hands is None:  # the person at the game: connects once the recorder has put the hook in
            try:
                hands = SiphonGame(game_server.host, "eldenring_margit", hook_timeout=30)
            except Exception:  # noqa: BLE001 - the recorder is still connecting
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
        for death in range(2):
            back_into_the_fight(hands, timeout=30)  # walk through the fog wall, lock on
            time.sleep(2.0)  # fight a little
            hands.write("HeroHp", 0)  # and die: YOU DIED, a loading screen, the Site of Grace
            time.sleep(1.0)
        code = recorder.wait(timeout=60)
    finally:
        if recorder.poll() is None:
            recorder.kill()
        if hands is not None:
            hands.close()
    text = log.read_text()
    assert code == 0, text
    assert "paused until it can" in text and "server_lost" not in text
    episodes = [read_episode(p, frames=False) for p in list_episodes(out)]
    assert [e.attrs["outcome"] for e in episodes] == ["death", "death"], text
    for e in episodes:
        assert len(e) >= 15  # about 2 s at 10 Hz, all of it in the fight
        assert e.column("NpcId")[0] == 10000850 and e.column("HeroHp")[-1] == 0


def test_keys_are_recorded_by_physical_position_on_windows(xvfb: str):
    """On an AZERTY keyboard the key left of S prints "Q", but Siphon, the game's bindings and
    so the recording call it "A" (scancode 0x1E); arrows come with the E0 prefix."""
    from types import SimpleNamespace

    from capture.inputs import InputLog
    from capture.listener import PynputListener, name_at

    assert name_at(0x1E, 0) == "A" and name_at(0x2A, 0) == "LEFT_SHIFT" and name_at(0x48, 1) == "UP_ARROW"
    assert name_at(0x48, 0) == "KEYPAD_8" and name_at(0x7F, 0) is None
    log = InputLog(("A", "S", "W"))
    listener = PynputListener(log)  # not started: its handlers are called as pynput's hook calls them
    listener._at_position(0x100, SimpleNamespace(scanCode=0x1E, flags=0))  # WM_KEYDOWN at A's position
    listener._on_press(SimpleNamespace(char="q"))  # what an AZERTY layout prints there
    listener._at_position(0x101, SimpleNamespace(scanCode=0x1E, flags=0))
    listener._on_release(SimpleNamespace(char="q"))
    listener._on_press(SimpleNamespace(char="w"))  # X11 and no hook data: the character, as before
    window = log.drain()
    assert [bool(p) for p in window.pressed] == [True, False, True]


@pytest.mark.slow
def test_the_env_resets_after_the_server_restarts(tmp_path: Path):
    """Siphon restarted between two episodes has forgotten the config: reset sends it again."""
    from env.factory import make_env
    from env.sim.launcher import SimServer, free_port

    port = free_port()
    server = SimServer(size=(84, 84), port=port, log_path=tmp_path / "first.log")
    with server.player():  # the person at the game, where the real-server mode needs one
        env = make_env(backend="siphon", host=server.host, profile="sim_margit")
    try:
        env.reset(seed=0)
        env.step(0)
        server.stop()
        server = SimServer(size=(84, 84), port=port, log_path=tmp_path / "second.log")
        with server.player():  # a restarted Siphon injects its hook anew
            obs, _ = env.reset(seed=1)
        assert obs["player_hp"][0] == 1.0
        env.step(0)
    finally:
        env.close()
        server.stop()


def test_the_client_refuses_what_the_real_server_would_silently_ignore(sim_server):
    """Siphon turns an unknown key name, or a mouse button held through InputKeyToggle, into
    scancode 0 and reports success: nothing happens and nobody is told. Our client refuses both
    before they are sent."""
    from env.siphon import SiphonClient, SiphonError

    client = SiphonClient(sim_server.host)
    try:
        client.configure(load_profile("sim_margit").siphon)
        with pytest.raises(ValueError, match="unknown Siphon key name 'SHFT'"):
            client.toggle_key("SHFT", True)
        with pytest.raises(SiphonError, match="cannot hold the mouse button LEFT: Siphon only taps mouse buttons"):
            client.toggle_key("LEFT", True)
        with pytest.raises(ValueError, match="unknown Siphon key name 'LSHIFT'"):
            client.tap_keys(["W", "LSHIFT"])
    finally:
        client.close()


@pytest.mark.slow
def test_connecting_after_a_death_waits_for_the_lock_on(game_server, caplog: pytest.LogCaptureFixture):
    """The hook is in, but after a death's loading screen nothing is targeted and Siphon refuses
    NPC reads: a client connecting then (a recorder started at the grace) asks for a lock-on
    and waits, instead of failing on the first refused read."""
    from concurrent.futures import ThreadPoolExecutor

    from env.sim.launcher import someone_locks_on
    from env.siphon_game import SiphonGame

    first = SiphonGame(game_server.host, "eldenring_margit", hook_timeout=20)  # the hook goes in
    first.write("HeroHp", 0)  # a real death: YOU DIED, a loading screen, the grace, no target
    first.close()
    time.sleep(2.0)
    with caplog.at_level(logging.WARNING, logger="env.siphon"), ThreadPoolExecutor(1) as pool:
        connecting = pool.submit(SiphonGame, game_server.host, "eldenring_margit", hook_timeout=20)
        time.sleep(4.0)  # refused reads meanwhile: nothing targeted
        assert not connecting.done() and "lock on to the boss now" in caplog.text
        with someone_locks_on(game_server.host):  # the person does as asked
            second = connecting.result(timeout=20)
    try:
        assert second.client.read(["NpcId"])["NpcId"] > 0
    finally:
        second.close()
