"""What a first evening with the real game needs from the clients, against the simulator's
real-server mode where it can be shown, and in isolation where it is about Windows."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import GAME_SERVER_ARGS

from env.common import files
from env.doctor import counts_game_time
from env.profile import load_profile
from env.sim.display import focus_window

from capture.episode_cuts import FightTracker
from capture.silence import InputSilence


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
        heard.update(
            i / 30,
            {"HeroLocalPosX": i * 0.1, "HeroLocalPosY": 0.0, "HeroAnimId": 1},
            one_event if i % 30 == 0 else no_events,
        )
    assert not heard.warned


def test_only_a_fight_against_the_boss_starts_an_episode():
    """NPC attributes follow whatever was targeted last: a soldier on the way back must not
    start an episode."""
    tracker = FightTracker(boss_npc_id=213000)
    soldier = {"HeroHp": 500, "HeroMaxHp": 500, "NpcHp": 420, "NpcMaxHp": 420, "NpcId": 43100010}
    boss = {**soldier, "NpcHp": 4174, "NpcMaxHp": 4174, "NpcId": 213000}
    assert tracker.update(soldier) is None
    assert tracker.update(boss) == "start"
    assert tracker.update({**boss, "HeroHp": 0}) == "death"


def test_a_fresh_fight_against_another_npc_is_named_once_with_the_key_to_set(caplog):
    """A profile naming the boss by a number the game does not show (Margit's map entity id
    10000850, where Siphon's NpcId reads 213000) cut no episode and said nothing: now a fresh
    fight against another NPC is one line per NPC, naming the number read and the profile key."""
    tracker = FightTracker(boss_npc_id=10000850, profile="env/profiles/x/profile.toml")
    margit = {"HeroHp": 1100, "HeroMaxHp": 1100, "NpcHp": 4174, "NpcMaxHp": 4174, "NpcId": 213000}
    soldier = {**margit, "NpcHp": 420, "NpcMaxHp": 420, "NpcId": 43100010}
    with caplog.at_level(logging.WARNING, logger="capture.episode_cuts"):
        for state in (margit, margit, soldier, margit, soldier):
            assert tracker.update(state) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        "the targeted NPC is 213000, not env/profiles/x/profile.toml's fight.boss_npc_id 10000850"
    )
    assert "set fight.boss_npc_id = 213000" in lines[0] and "is 43100010" in lines[1]
    caplog.clear()
    right = FightTracker(boss_npc_id=213000)
    with caplog.at_level(logging.WARNING, logger="capture.episode_cuts"):
        assert right.update(margit) == "start"
    assert not caplog.records


def test_a_recording_begun_mid_fight_against_another_npc_names_it_at_once(caplog):
    """Recording may begin mid-fight, where the boss starts an episode on the first state seen:
    another NPC seen there is named at once too, not only at the next fresh fight (a recording
    begun against the wrong boss said nothing until the player died)."""
    tracker = FightTracker(boss_npc_id=213000, profile="p.toml")
    godrick = {"HeroHp": 700, "HeroMaxHp": 1100, "NpcHp": 3000, "NpcMaxHp": 6080, "NpcId": 215000}
    with caplog.at_level(logging.WARNING, logger="capture.episode_cuts"):
        assert tracker.update(godrick) is None and tracker.update(godrick) is None
    assert [r.getMessage()[:58] for r in caplog.records] == [
        "the targeted NPC is 215000, not p.toml's fight.boss_npc_id"
    ]


def test_a_boss_sharing_the_bosss_model_is_told_apart_by_its_npc_param_id_and_named_once(caplog):
    """Morgott has Margit's model, so her NpcId: with the profile's boss_npc_param_id, a fresh
    fight against him starts no episode and is named once, with the number read and the key to
    set; the boss, both numbers right, starts one; a state without NpcParamId (an older config)
    is told by NpcId alone."""
    profile = load_profile("eldenring_margit")
    tracker = FightTracker(profile.boss_npc_id, profile="p.toml", boss_npc_param_id=profile.boss_npc_param_id)
    margit = {"HeroHp": 1100, "HeroMaxHp": 1100, "NpcHp": 4174, "NpcMaxHp": 4174, "NpcId": 213000}
    morgott = {**margit, "NpcParamId": 21300534}
    with caplog.at_level(logging.WARNING, logger="capture.episode_cuts"):
        for state in (morgott, morgott, morgott):
            assert tracker.update(state) is None
    assert [r.getMessage() for r in caplog.records] == [
        "the targeted NPC is 21300534, not p.toml's fight.boss_npc_param_id 21300014: no episode starts until the "
        "boss is targeted (lock on to it); if this is the boss, set fight.boss_npc_param_id = 21300534 there "
        "(python -m env.doctor reads it too)"
    ]
    assert tracker.update({**margit, "NpcParamId": 21300014}) == "start"
    assert FightTracker(213000, boss_npc_param_id=21300014).update(margit) == "start"


def test_the_next_episode_starts_only_when_both_fighters_are_back_at_full_hp():
    """After a death (or a stop) the next episode starts at a fresh fight: the boss targeted and
    both fighters at full HP. A player who walks back in hurt (the soldier on the way) has not
    started a fresh fight, nor has one whose boss is at full HP while the player is still dying."""
    tracker = FightTracker(boss_npc_id=213000)
    fresh = {"HeroHp": 1100, "HeroMaxHp": 1100, "NpcHp": 4174, "NpcMaxHp": 4174, "NpcId": 213000}
    assert tracker.update({**fresh, "HeroHp": 700, "NpcHp": 3000}) == "start"  # recording began mid-fight
    assert tracker.update({**fresh, "HeroHp": 0, "NpcHp": 3000}) == "death"
    assert tracker.update({**fresh, "HeroHp": 0}) is None  # the boss healed while the player lies dead
    assert tracker.update({**fresh, "HeroHp": 700}) is None  # back in the arena, hurt on the way
    assert tracker.update(fresh) == "start"
    tracker.stop(until_new_fight=True)  # F5 at once, nothing restarting the fight: not this one again
    assert tracker.update(fresh) is None and tracker.update({**fresh, "HeroHp": 800}) is None
    assert tracker.update(fresh) == "start"  # a new fight (walked back in after a death, say)
    tracker.stop()  # a pause: the next fresh fight, whichever
    assert tracker.update(fresh) == "start"


def test_the_game_profile_keeps_everyone_alive_and_records_without_writes():
    profile = load_profile("eldenring_margit")
    assert profile.fight_rules.player_floor > 0 and profile.fight_rules.boss_floor > 0
    assert profile.fog_wall is not None and profile.boss_npc_id is not None
    assert not profile.restart_when_recording
    simulator = load_profile("sim_margit")
    assert simulator.fight_rules.player_floor == simulator.fight_rules.boss_floor == 0  # over at HP 0, exactly
    assert simulator.restart_when_recording


def test_the_games_floors_are_above_the_hardest_blow_on_either_side():
    """A floor below a single blow is no floor: a fighter just above it is killed for real by the
    next blow (Margit's holy hammer takes 620 of the simulator's 1100 HP; the player's skill 340
    of Margit's 4174). The game's profile's defaults clear the simulator's hardest blows."""
    from env.sim.boss import load_boss
    from env.sim.moves import PLAYER_ATTACKS
    from env.sim.world import PLAYER_MAX_HP

    margit = load_boss("margit")
    BOSS_MOVES, BOSS_MAX_HP = margit.moves, margit.max_hp

    rules = load_profile("eldenring_margit").fight_rules
    boss_blow = max(s.damage * max(1, s.projectiles) for m in BOSS_MOVES for s in m.strikes)  # a volley may all hit
    player_blow = max(a.damage for a in PLAYER_ATTACKS.values())
    assert rules.player_floor * PLAYER_MAX_HP > boss_blow, (rules.player_floor * PLAYER_MAX_HP, boss_blow)
    assert rules.boss_floor * BOSS_MAX_HP > player_blow, (rules.boss_floor * BOSS_MAX_HP, player_blow)


def test_a_blow_harder_than_a_floor_is_named_once_with_the_floor_that_catches_it(caplog: pytest.LogCaptureFixture):
    from env.fight_rules import FightRules
    from env.hp_floors import FloorWatch

    watch = FloorWatch(FightRules(player_floor=0.35, boss_floor=0.02), "eldenring_margit")
    before = {"HeroHp": 800, "HeroMaxHp": 1100, "NpcHp": 1000, "NpcMaxHp": 4174}
    with caplog.at_level(logging.WARNING, logger="env.hp_floors"):
        watch.update(before, {**before, "HeroHp": 500})  # 300 HP: 27 %, below the floor's 35 %: fine
        assert not caplog.text
        watch.update(before, {**before, "HeroHp": 180})  # the holy hammer: 620 HP, 56 %
        watch.update(before, {**before, "HeroHp": 180})
        watch.update(before, {**before, "NpcHp": 850})  # a light attack: 150 HP, 3.6 % of Margit's
        watch.update(before, {**before, "HeroHp": 1100})  # a heal is no blow
    assert caplog.text.count("a blow took") == 2, caplog.text
    assert "a blow took 620 HP from the player, 56 % of max HP, more than fight.player_hp_floor = 0.35" in caplog.text
    assert "real death" in caplog.text and "Set player_hp_floor to 0.62 or more" in caplog.text
    assert "real kill" in caplog.text and "Set boss_hp_floor to 0.04 or more" in caplog.text
    quiet = FloorWatch(FightRules(), "sim_margit")  # floors 0: down is dead, nothing to warn of
    quiet.update(before, {**before, "HeroHp": 0})
    assert not quiet.warned


@pytest.mark.slow
def test_full_length_fights_on_the_games_profile_kill_nobody_for_real(caplog: pytest.LogCaptureFixture):
    """The scripted expert's full-length fights on the game's profile, against the simulator
    (in-process, lock-step: the world the real-server mode serves, without its timing noise):
    every episode ends at a floor or the time limit, never at a real death or a real kill, and
    the env leaves both fighters alive until the next reset."""
    from env.config import EnvConfig
    from env.factory import make_env
    from env.sim.expert import ScriptedExpert

    from elden_il.evaluation.fight_loop import PlayerActor

    config = EnvConfig(profile="eldenring_margit", max_steps=900)
    attributes = tuple(a for a in ScriptedExpert.ATTRIBUTES if a in load_profile(config.profile).siphon.attributes)
    env = make_env(config, backend="sim", state_attributes=attributes)
    world, actor = env.unwrapped.game.world, PlayerActor("expert", config)
    real_deaths = real_kills = ended_at_a_floor = 0
    try:
        caplog.set_level(logging.WARNING, logger="env.hp_floors")
        for fight in range(20):
            obs, _ = env.reset(seed=fight)
            actor.start(0, fight)
            done = False
            while not done:
                obs, _, terminated, truncated, _ = env.step(actor.act([obs], [env], [0])[0])
                real_deaths += world.player.dead
                real_kills += world.boss.dead
                done = terminated or truncated
            ended_at_a_floor += terminated
            assert world.player.hp == world.player.max_hp and world.boss.hp == world.boss.max_hp  # until reset
    finally:
        env.close()
    assert (real_deaths, real_kills) == (0, 0)
    assert "a blow took" not in caplog.text  # no blow came near beating a floor
    assert ended_at_a_floor >= 15  # full-length: fights end at a floor, rarely at the 900-step limit


def test_the_floors_a_character_needs_come_from_its_recorded_fights(tmp_path: Path, capsys: pytest.CaptureFixture):
    """``python -m capture.floors`` reads recorded episodes (on the game: a human's fights, with
    no writes) and prints floors that catch the hardest blow recorded on each side: here the holy
    hammer (620 of 1100 HP) and the skill (340 of 4174), not a heal, nor the blow that kills
    (it shows only what HP was left)."""
    import tomllib

    from capture import floors
    from capture.episode_writer import EpisodeMeta, EpisodeWriter, Sample
    from capture.video import codec

    names = ("HeroHp", "HeroMaxHp", "NpcHp", "NpcMaxHp")
    meta = EpisodeMeta(
        profile="eldenring_margit",
        attribute_names=names,
        key_names=("W",),
        sample_rate_hz=30.0,
        codec=codec("h264"),
        window_size=(8, 8),
        source="human",
        sim_seed=None,
        host="test",
    )
    fights = (
        [(1100, 4174), (780, 4174), (780, 4024), (1100, 4024), (1100, 3874)],  # a swipe, a light attack, a flask
        [(1100, 4174), (1100, 3834), (480, 3834), (0, 3834)],  # a skill, the holy hammer, then 480 HP: a death
    )
    for fight, outcome in zip(fights, ("timeout", "death")):
        writer = EpisodeWriter(tmp_path, meta)
        for i, (hero, npc) in enumerate(fight):
            writer.append(
                Sample(
                    t=i / 30,
                    frame_t=i / 30,
                    frame=np.zeros((8, 8, 3), np.uint8),
                    state=np.array([hero, 1100, npc, 4174], float),
                    held=np.zeros(1, bool),
                    pressed=np.zeros(1, bool),
                    mouse_dx=0.0,
                    mouse_dy=0.0,
                )
            )
        writer.finish(outcome, {})
    assert floors.main([str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert tomllib.loads(printed)["fight"] == {"player_hp_floor": 0.62, "boss_hp_floor": 0.09}
    assert "620 HP of 1100" in printed and "340 HP of 4174" in printed
    assert floors.main([str(tmp_path / "nothing")]) == 2
    assert "no finished episodes" in capsys.readouterr().err


@pytest.fixture
def game_server(tmp_path: Path):
    """A real-server-mode simulator for the game's profile, and the person at it, who locks on
    once when the connecting client's hook asks (a soldier outside the fog wall is what is in
    sight)."""
    from env.sim.launcher import SimServer, someone_locks_on

    with SimServer(size=(84, 84), extra_args=GAME_SERVER_ARGS, log_path=tmp_path / "server.log") as server:
        with someone_locks_on(server.host, server.lock_on_keys):
            yield server


def test_a_live_reset_to_a_place_not_measured_is_refused_before_anything_is_written(game_server):
    """Godrick's fog wall is not known: a live reset on his profile (the game's config, over
    eldenring_margit's) says so and how to measure it, and writes nothing: it neither teleports
    the player to Margit's fog wall nor waits out a fight that cannot restart."""
    from env.common.errors import ConfigError
    from env.siphon.game import SiphonGame

    game = SiphonGame(game_server.host, load_profile("eldenring_godrick"), hook_timeout=20)
    try:
        before = game.client.read(["HeroGlobalPosX", "HeroGlobalPosY", "HeroHp"])
        with pytest.raises(ConfigError, match=r"'eldenring_godrick' has not measured reset.fog_wall") as refused:
            game.reset_fight(seed=0)
        assert "python -m capture.scout eldenring_godrick_measured --base eldenring_godrick" in str(refused.value)
        assert game.client.read(["HeroGlobalPosX", "HeroGlobalPosY", "HeroHp"]) == before
    finally:
        game.close()


@pytest.mark.slow
def test_the_env_walks_back_into_the_fight_after_a_real_death_and_names_a_real_kill(game_server):
    """The game's profile against the real-server mode, from the Site of Grace: reset walks
    through the fog wall and locks on; a floor ends an episode with nobody dead; a real death
    (a floor missed) is recovered by the next reset without a human; a real kill is reported with
    the manual step, and once the save is restored (the simulator's stand-in) reset works again."""
    from env.config import EnvConfig
    from env.factory import make_env
    from env.siphon.arena import BossKilled

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
def test_fights_with_forced_real_deaths_and_kills_need_no_human(tmp_path: Path):
    """The recovery benchmark (20 fights in BENCHMARKS.md) on ten short fights (1 s each) and short
    game timings: two forced real deaths and a forced real kill between them, a death recovered by
    the next reset alone, the kill reported with the manual step, no reset left to a human."""
    import json
    import subprocess
    import sys

    out = tmp_path / "recovery.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_recovery",
            "--fights",
            "10",
            "--max-steps",
            "5",
            "--server-args",
            " ".join(GAME_SERVER_ARGS),
            "--json",
            str(out),
        ],
        cwd=Path(__file__).parents[1],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["fights"] == 10 and r["human_needed"] == 0, r["human_errors"]
    assert (r["forced_deaths"], r["forced_kills"]) == (2, 1)  # deaths after fights 5 and 10, a kill after 8
    assert r["kills_reported"] == r["forced_kills"] + r["real_kills"]
    resets = r["resets"]
    assert len(resets["first"]) == 1 and len(resets["after_kill"]) == r["kills_reported"]
    assert len(resets["after_death"]) == 1 + r["real_deaths"]  # the death after the last fight needs no reset
    assert sum(map(len, resets.values())) == 10
    assert "| resets that needed a human (other than restoring a killed boss's save) | 0 |" in result.stdout


def test_a_timed_out_call_blames_lock_on_only_when_it_read_an_npc(tmp_path: Path):
    """Siphon answers NPC attributes only once something is targeted, so a timed-out NPC read
    says to lock on; a timed-out read of anything else (here a slow scan) does not."""
    from env.sim.launcher import SimServer
    from env.siphon.client import SiphonClient, SiphonError

    slow = (*GAME_SERVER_ARGS, "--scan-ms", "1500")  # at the grace: nothing targeted, the hook not in yet
    with SimServer(size=(84, 84), extra_args=slow, log_path=tmp_path / "server.log") as server:
        client = SiphonClient(server.host, timeout=0.5)
        try:
            client.configure(load_profile("eldenring_margit").siphon)
            with pytest.raises(SiphonError, match=r"did not answer GetAttribute\(HeroHp\) within its deadline") as hero:
                client.read(["HeroHp"])
            assert "lock on" not in str(hero.value) and "restart Siphon" in str(hero.value)
            with pytest.raises(
                SiphonError, match=r"GetAttribute\(NpcHp\.\.NpcMaxHp.*within its deadline: .*lock on to the boss"
            ):
                client.read(["NpcHp", "NpcMaxHp"])
        finally:
            client.close()


@pytest.mark.slow
def test_no_frame_yet_and_a_frozen_window_are_errors_that_say_so(tmp_path: Path):
    """Siphon answers success with 0 bytes until the window presents its first frame, and with the
    last frame forever once it is minimised: the first is refused at connect, the second once the
    game has moved on for ``stale_after_s`` with the frame unchanged. A scene that is simply still
    (standing at the grace) is no frozen window."""
    from env.sim.launcher import SimServer, someone_locks_on
    from env.siphon.client import NoFrame
    from env.siphon.game import SiphonGame

    never = (*GAME_SERVER_ARGS, "--first-frame-ms", "600000")
    with (
        SimServer(size=(84, 84), extra_args=never, log_path=tmp_path / "never.log") as server,
        someone_locks_on(server.host, server.lock_on_keys),
    ):
        with pytest.raises(NoFrame, match=r"no frame of the game window yet \(it answered 0 bytes\)"):
            SiphonGame(server.host, "eldenring_margit", hook_timeout=20)

    with (
        SimServer(size=(320, 180), extra_args=GAME_SERVER_ARGS, log_path=tmp_path / "server.log") as server,
        someone_locks_on(server.host, server.lock_on_keys),
    ):
        game = SiphonGame(server.host, "eldenring_margit", hook_timeout=20, stale_after_s=1.0)
        try:
            for _ in range(15):  # 1.5 s at the grace, nobody moving: the same frames, and rightly so
                game.observe()
                time.sleep(0.1)
            game.client.write("SimMinimised", True, "bool")
            game.hold_keys({"W"})  # the player walks on; the window shows none of it
            with pytest.raises(NoFrame, match="is it minimised or covered"):
                for _ in range(30):
                    game.observe()
                    time.sleep(0.1)
            time.sleep(0.5)
            game.hold_keys(())
            game.client.write("SimMinimised", False, "bool")
            game.observe()  # restored: the player is somewhere else in the frame now
        finally:
            game.close()


@pytest.mark.slow
def test_a_profile_from_one_visit_names_the_boss_as_the_game_shows_it_and_the_doctor_finds_it(tmp_path: Path):
    """``python -m capture.scout`` at the boss, the boss targeted, a few seconds of fight: a
    profile folder whose boss id, max HP and fog wall are what the game showed (for Margit, the
    numbers her hand-written profile holds), whose animations are the ones played, and whose
    keys, actions and attributes are its base's; the doctor then finds the boss with it."""
    from env.doctor import Check, Doctor
    from env.sim.launcher import SimServer, someone_locks_on

    folder = tmp_path / "scouted"
    args = (*GAME_SERVER_ARGS, "--start", "fight")  # in the arena, the boss targeted
    with SimServer(size=(84, 84), extra_args=args, log_path=tmp_path / "server.log") as server:
        with someone_locks_on(server.host, server.lock_on_keys):
            scouted = subprocess.run(
                [sys.executable, "-m", "capture.scout", "eldenring_scouted", "--host", server.host, "--out", str(folder),
                 "--boss-name", "Margit, scouted", "--watch-s", "3", "--hook-timeout", "20"],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert scouted.returncode == 0, scouted.stdout + scouted.stderr
            assert f"wrote {folder}: boss NpcId 213000, NpcParamId 21300014, max HP 4174" in scouted.stdout
            assert "capture.floors" in scouted.stdout  # what is left to fill in
            doctor = Doctor(server.host, load_profile(folder), hook_timeout=20)
            try:
                doctor.connect()
                doctor.memory()
                doctor.capture()
            finally:
                if doctor.game is not None:
                    doctor.game.close()
    profile, margit = load_profile(folder), load_profile("eldenring_margit")
    assert (profile.name, profile.boss_name, profile.boss_npc_id) == ("eldenring_scouted", "Margit, scouted", 213000)
    assert (profile.boss, profile.boss_npc_param_id) == ("scouted", 21300014)
    assert 'extends = "eldenring_margit"' in (folder / "profile.toml").read_text()  # not a copy of it
    assert not (folder / "siphon.toml").exists()
    assert profile.fog_wall == profile.start_position and profile.fog_wall is not None
    assert profile.boss_animations and profile.player_animations  # what the fighters played
    assert (profile.keybinds, profile.discrete_actions) == (margit.keybinds, margit.discrete_actions)
    assert profile.siphon.attributes == margit.siphon.attributes
    assert all(c.ok for c in doctor.checks), doctor.checks
    assert (
        Check(
            "boss",
            True,
            "Margit, scouted targeted (NpcId 213000 and NpcParamId 21300014, the profile's boss_npc_id and "
            "boss_npc_param_id)",
        )
        in doctor.checks
    )
    again = subprocess.run(
        [sys.executable, "-m", "capture.scout", "eldenring_scouted", "--out", str(folder)],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 2 and again.stderr.strip() == (
        f"error: {folder} exists: choose another profile name, or --out a new folder"
    )  # a folder is never written over, and nothing is asked of the game first


@pytest.mark.parametrize("name", ["eldenring_margit", "eldenring_godrick", "eldenring_tree_sentinel"])
def test_the_doctor_names_the_boss_it_finds_by_the_number_the_game_shows(tmp_path: Path, name: str):
    """With the boss targeted, the doctor says in one line which boss it found: each real-game
    profile's boss_npc_id and boss_npc_param_id are the NpcId and NpcParamId the game serves for
    its boss (the real-server mode serves the game's, the boss the profile names)."""
    from env.doctor import Check, Doctor
    from env.sim.launcher import SimServer, someone_locks_on

    profile = load_profile(name)
    args = (*GAME_SERVER_ARGS, "--profile", name, "--start", "fight")  # in the arena, the boss in sight
    with SimServer(size=(84, 84), extra_args=args, log_path=tmp_path / "server.log") as server:
        with someone_locks_on(server.host, server.lock_on_keys):
            doctor = Doctor(server.host, profile, hook_timeout=20)
            try:
                doctor.connect()
                doctor.memory()
            finally:
                if doctor.game is not None:
                    doctor.game.close()
    assert [c for c in doctor.checks if c.name == "boss"] == [
        Check(
            "boss",
            True,
            f"{profile.boss_name} targeted (NpcId {profile.boss_npc_id} and NpcParamId {profile.boss_npc_param_id}, "
            "the profile's boss_npc_id and boss_npc_param_id)",
        )
    ]


@pytest.mark.slow
def test_the_doctor_checks_a_game_in_under_a_minute_and_names_a_wrong_binding(game_server, tmp_path: Path):
    """At the Site of Grace with a soldier targeted: the doctor says the target is not the boss,
    finds every binding working (lock-on by how the character faces while strafing), and, with
    the profile's lock-on and attack on keys the game does not bind, names those bindings."""
    import shutil
    import subprocess
    import sys

    from env.profile import PROFILES_DIR

    def doctor(profile: str) -> tuple[subprocess.CompletedProcess, float]:
        started = time.monotonic()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "env.doctor",
                "--host",
                game_server.host,
                "--profile",
                profile,
                "--hook-timeout",
                "20",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return result, time.monotonic() - started

    right, seconds = doctor("eldenring_margit")
    assert right.returncode == 1, right.stdout + right.stderr
    assert "[ok  ] server" in right.stdout and "[ok  ] capture" in right.stdout
    assert "[FAIL] boss: the targeted NPC is 43100010, not the profile's boss_npc_id 213000" in right.stdout
    # lock-on judged too; the event action only where it does something (the doctor's steps may
    # take the character near the fog wall, where E walks through it)
    assert "[ok  ] keybinds: all 13 bindings make the game react" in right.stdout or (
        "[ok  ] keybinds: all 12 bindings make the game react" in right.stdout
        and "[--  ] keys not judged: event_action (E: no reaction here" in right.stdout
    ), right.stdout
    assert "[FAIL] frames" not in right.stdout
    assert "steps/s" in right.stdout and "records at" in right.stdout
    assert "[--  ] game clock: the profile names none ([clock])" in right.stdout, right.stdout
    assert seconds < 60, seconds

    # a copy with two keys bound wrong, and a game clock named (the simulator's tick counter)
    wrong = tmp_path / "wrong_attack"
    shutil.copytree(PROFILES_DIR / "eldenring_margit", wrong)
    toml = wrong / "profile.toml"
    toml.write_text(
        toml.read_text().replace('attack = "LEFT"', 'attack = "K"').replace('lock_on = "Q"', 'lock_on = "J"')
        + '\n[clock]\nattribute = "SimTick"\nper_second = 60\n'
    )
    (wrong / "siphon.toml").write_text((wrong / "siphon.toml").read_text() + '\n[attributes.SimTick]\ntype = "int"\n')
    result, _ = doctor(str(wrong))
    assert "[FAIL] keybinds: no reaction to lock_on (J), attack (K)" in result.stdout, result.stdout
    assert re.search(r"\[ok  \] game clock: SimTick counted 0 ms while the game stood paused", result.stdout), (
        result.stdout
    )


def test_a_game_clock_counts_nothing_while_paused_and_the_walls_pace_at_1x():
    assert counts_game_time(0.0, 0.49, 0.5)
    assert not counts_game_time(0.016, 0.5, 0.5)  # counts on while the game is paused: the save's play time, maybe
    assert not counts_game_time(0.0, 0.0, 0.5)  # counts nothing: not a clock
    assert not counts_game_time(0.0, 1.5, 0.5)  # counts the wrong unit (per_second off)


class ScriptedHuman:
    """A person at the simulator's play window on Xvfb, through xdotool: the keys and clicks reach
    the game (the window) and the recorder (pynput on the same display) as a person's do. They
    play on the game's own bindings: nothing rebound."""

    def __init__(self, server_pid: int) -> None:
        self.window = focus_window(server_pid, timeout=40)

    def press(self, *keys: str) -> None:
        subprocess.run(["xdotool", "key", *keys], check=True)

    def click(self, *holding: str) -> None:
        """A left click over the window, with ``holding`` keys down (``shift``: a strong attack)."""
        down = [arg for key in holding for arg in ("keydown", key)]
        up = [arg for key in holding for arg in ("keyup", key)]
        subprocess.run(
            ["xdotool", "mousemove", "--window", self.window, "20", "20", *down, "click", "1", *up],
            check=True,
        )

    def hold(self, key: str, seconds: float) -> None:
        subprocess.run(["xdotool", "keydown", key], check=True)
        time.sleep(seconds)
        subprocess.run(["xdotool", "keyup", key], check=True)

    def walk_in(self, phase=None) -> None:
        """From the Site of Grace: up to the fog wall, through it, then lock on to Margit. With
        ``phase`` (the game's ``SimPhase``, as the person sees the screen) the walk is retried
        until it gets through; without (Siphon's hook holds every read until the lock-on), once."""
        for _ in range(3):
            self.hold("w", 2.5)
            self.press("e")
            deadline = time.monotonic() + 3.0
            while phase is not None and phase() != 0 and time.monotonic() < deadline:  # through the fog
                time.sleep(0.1)
            if phase is None:
                time.sleep(2.0)
            if phase is None or phase() == 0:
                self.press("q")  # the game's own lock-on key
                return
        raise AssertionError("the person could not walk through the fog wall")


@pytest.mark.slow
def test_recording_a_person_through_deaths_walks_back_in_and_a_kill(xvfb: str, tmp_path: Path):
    """A person records on the game's profile (real-server mode, the world at the Site of Grace),
    playing through the window with real key events: walks in, stops the episode by hand (F5) and
    starts another (F5), is killed, walks back in, kills Margit (the blow written by the harness),
    then, while the boss is gone and nothing can be read, discards that episode (F6) and quits
    (F8). The recorder sends no memory writes; every episode started is saved or discarded; the
    loading screen and the boss's absence are pauses, not a lost server."""
    from env.sim.launcher import SimServer
    from env.siphon.client import SiphonClient

    from capture.episode import list_episodes, read_episode

    out, log = tmp_path / "raw", tmp_path / "recorder.log"
    with SimServer(
        size=(320, 180), extra_args=(*GAME_SERVER_ARGS, "--window"), log_path=tmp_path / "server.log"
    ) as server:
        human = ScriptedHuman(server.process.pid)
        eyes = SiphonClient(server.host)  # the harness: Sim* controls, and the one write it makes itself
        see = lambda name: eyes.read([name])[name]  # noqa: E731
        with open(log, "w") as sink:
            recorder = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "capture.record",
                    "--profile",
                    "eldenring_margit",
                    "--host",
                    server.host,
                    "--out",
                    str(out),
                    "--no-status",
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        started = time.monotonic()
        said = lambda words, n: wait_until(lambda: log.read_text().count(words) == n, 20, f"{n} x {words!r}", log)  # noqa: E731
        try:
            # the recorder's NPC hook goes in at a lock-on after it is configured: on a loaded machine
            # its start can take longer than the walk in, so the person walks in once it waits
            wait_until(lambda: "waiting for a target" in log.read_text(), 60, "the recorder to wait for a lock-on", log)
            human.walk_in()  # the lock-on also lets the recorder's NPC hook in: it starts sampling
            said("episode started", 1)
            time.sleep(0.5)  # longer than one env step: a shorter fragment is no demonstration, and dropped
            human.press("F5")  # stop it by hand: this fight is not recorded again ...
            said("episode saved (stopped)", 1)
            time.sleep(0.5)
            human.press("F5")  # ... unless asked: another episode, which Margit ends (the player idles
            said("episode started", 2)  # after an attack and a strong attack, on the mouse as the game binds them)
            human.click()
            time.sleep(1.5)
            human.click("shift")
            wait_until(lambda: see("SimPhase") == 1, 60, "Margit to kill the idle player", log)
            wait_until(lambda: see("SimPhase") == 3, 20, "the respawn at the grace", log)
            human.walk_in(lambda: see("SimPhase"))
            said("episode started", 3)
            time.sleep(1.0)
            eyes.write("NpcHp", 0, "int")  # the harness's only write: the killing blow (one a script lands reliably)
            wait_until(lambda: see("SimPhase") == 5, 5, "the boss felled: a real kill", log)
            wait_until(
                lambda: see("SimPhase") == 6 and "paused until it can" in log.read_text().split("win")[-1],
                20,
                "the boss gone and the recorder paused",
                log,
            )
            human.press("F6")  # discard the kill's episode, while nothing can be read ...
            wait_until(lambda: "discarded the last saved episode" in log.read_text(), 10, "the discard", log)
            assert see("SimPhase") == 6  # ... at once: the game is still unreadable
            human.press("F8")
            assert recorder.wait(timeout=20) == 0, log.read_text()
            writes = see("SimWrites")
        finally:
            if recorder.poll() is None:
                recorder.kill()
            eyes.close()
        seconds = time.monotonic() - started
    text = log.read_text()
    assert writes == 1, text  # the harness's killing blow: the recorder wrote nothing, teleported no one
    assert "server_lost" not in text and text.count("paused until it can") >= 2 and "episode saved (win)" in text
    episodes = [read_episode(p, frames=False) for p in list_episodes(out)]
    assert [e.attrs["outcome"] for e in episodes] == ["stopped", "death"], text
    assert text.count("episode started") == len(episodes) + 1  # the third was discarded: none lost
    assert all(e.column("NpcId")[0] == 213000 for e in episodes)
    # the person's mouse: a click is the attack, Shift + click the strong attack, as the game binds them
    from capture.labels import HeardActions

    second = episodes[1]
    heard = HeardActions(load_profile("eldenring_margit"), second.key_names)
    _, pressed = heard.from_keys(second.keys_held, second.keys_pressed)
    actions = list(heard.names)
    presses = [actions[a] for row in pressed for a in np.flatnonzero(row)]
    assert presses == ["attack", "strong_attack"], presses
    first = episodes[0]  # started by the fight itself, at full HP; the second where the person pressed F5
    assert first.column("HeroHp")[0] == first.column("HeroMaxHp")[0]
    assert not list(out.glob("*.partial"))
    stats = [json.loads(e.attrs["stats"]) for e in episodes]
    print(
        f"\nrecording a person: {len(episodes) + 1} episodes ({len(episodes)} kept, 1 discarded, 0 lost), "
        f"{sum(len(e) for e in episodes)} samples kept, {sum(s['dropped_samples'] for s in stats)} dropped, "
        f"{sum(s['late_samples'] for s in stats)} late, at {[round(s['achieved_rate_hz'], 1) for s in stats]} Hz; "
        f"no writes; {seconds:.0f} s"
    )


def wait_until(predicate, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n" + log.read_text()
        time.sleep(0.1)


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
    """Siphon restarted between two episodes has forgotten the config: reset sends it again, the
    flask count's attribute among the rest."""
    from env.factory import make_env
    from env.sim.launcher import SimServer, free_port

    port = free_port()
    server = SimServer(size=(84, 84), port=port, log_path=tmp_path / "first.log")
    with server.player():  # the person at the game, where the real-server mode needs one
        env = make_env(backend="siphon", host=server.host, profile="sim_margit", observe_flasks=True)
    try:
        env.reset(seed=0)
        env.step(0)
        server.stop()
        server = SimServer(size=(84, 84), port=port, log_path=tmp_path / "second.log")
        with server.player():  # a restarted Siphon injects its hook anew
            obs, _ = env.reset(seed=1)
        assert obs["player_hp"][0] == 1.0
        assert obs["flasks"][0] == 3.0  # the flask count read over the real-server mode, config sent anew
        env.step(0)
    finally:
        env.close()
        server.stop()


def test_the_client_refuses_what_the_real_server_would_silently_ignore(sim_server):
    """Siphon turns an unknown key name, or a mouse button held through InputKeyToggle, into
    scancode 0 and reports success: nothing happens and nobody is told. Our client refuses both
    before they are sent."""
    from env.siphon.client import SiphonClient, SiphonError

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
    from env.siphon.game import SiphonGame

    first = SiphonGame(game_server.host, "eldenring_margit", hook_timeout=20)  # the hook goes in
    first.write("HeroHp", 0)  # a real death: YOU DIED, a loading screen, the grace, no target
    first.close()
    time.sleep(2.0)
    with caplog.at_level(logging.WARNING, logger="env.siphon.client"), ThreadPoolExecutor(1) as pool:
        connecting = pool.submit(SiphonGame, game_server.host, "eldenring_margit", hook_timeout=20)
        time.sleep(4.0)  # refused reads meanwhile: nothing targeted
        assert not connecting.done() and "lock on to the boss now" in caplog.text
        with someone_locks_on(game_server.host, game_server.lock_on_keys):  # the person does as asked
            second = connecting.result(timeout=20)
    try:
        assert second.client.read(["NpcId"])["NpcId"] > 0
    finally:
        second.close()


def run_doctor(host: str, profile: str = "sim_margit") -> str:
    """``python -m env.doctor`` against ``host``, as a user runs it; its output."""
    result = subprocess.run(
        [sys.executable, "-m", "env.doctor", "--host", host, "--profile", profile, "--hook-timeout", "20"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    return result.stdout + result.stderr


def blames_no_binding(output: str) -> bool:
    """The doctor neither names a binding as dead nor says to fix the keys."""
    return (
        "no reaction to" not in output
        and "bind these keys" not in output
        and "[FAIL] keys" not in output
        and "fix keys" not in output
        and "fix keybinds" not in output
    )


@pytest.mark.slow
def test_the_doctor_tells_a_death_during_the_key_check_from_a_wrong_binding(tmp_path: Path):
    """Against a plain ``python -m env.sim`` (a fight, nobody at the keys) the boss killed the
    player while the doctor tried the keys (every run), and it said ``[FAIL] keys: ... loading
    screen``, then "fix keys first"."""
    from env.sim.launcher import SimServer

    with SimServer(size=(160, 90), log_path=tmp_path / "server.log") as server:
        output = run_doctor(server.host)
    assert "[FAIL] game state: the player died during the key check" in output, output
    assert "restart the fight, or stand somewhere safe" in output, output
    assert blames_no_binding(output), output


@pytest.mark.slow
def test_the_doctor_tells_a_paused_game_from_a_wrong_binding(tmp_path: Path):
    """Against ``env.sim --speed 0`` it said "no reaction to move_forward (W) ... bind these keys",
    then "the game is paused": unpause it. Now, as every client that connects, it takes the game
    back to real time, says so in one line, and the keys are tried in a running game."""
    from env.sim.launcher import SimServer

    with SimServer(size=(160, 90), extra_args=("--speed", "0"), log_path=tmp_path / "server.log") as server:
        output = run_doctor(server.host)
    assert output.count("was left paused (gameSpeedVal 0)") == 1 and "taking it back to real time" in output, output
    assert "the game is paused" not in output, output
    assert blames_no_binding(output), output


@pytest.mark.slow
def test_the_doctor_tells_an_empty_flask_from_a_wrong_binding(tmp_path: Path):
    """With 0 flask charges it said "no reaction to use_item (R)". At the Site of Grace (nobody
    attacks there) every other binding is judged."""
    from env.sim.launcher import SimServer
    from env.siphon.client import SiphonClient

    with SimServer(size=(160, 90), extra_args=("--start", "grace"), log_path=tmp_path / "server.log") as server:
        client = SiphonClient(server.host)
        client.configure(load_profile("sim_margit").siphon)
        client.write("HeroFlaskCharges", 0, "int")
        client.close()
        output = run_doctor(server.host)
    assert (
        "use_item (R: no flask charges left: rest at a grace to refill them, or the heal check is skipped)" in output
    ), output
    assert "[ok  ] keybinds: all" in output and blames_no_binding(output), output


@pytest.mark.slow
def test_fine_tuning_against_a_live_game_pays_a_drink_back_over_the_games_own_reward(game_server):
    """Fine-tuning's env for a live game (``seeded_env_fns``, ``heal_reward``) against the
    real-server mode and the game's profile: the reward of every step is the env's own for the
    snapshots it read, plus ``heal_reward`` times the HP fraction a drink restored, and nothing
    more where no HP came back."""
    from env.config import EnvConfig

    from elden_il.params import FinetuneConfig
    from elden_il.training.finetune import seeded_env_fns

    config = EnvConfig(profile="eldenring_margit", max_steps=60)
    settings = FinetuneConfig(backend="siphon", hosts=(game_server.host,), num_envs=1, heal_reward=5.0)
    env = seeded_env_fns(settings, config)[0]()
    game, base = env.unwrapped.game, env.unwrapped.reward_fn
    heal = config.actions(load_profile(config.profile)).index("heal")
    try:
        env.reset(seed=0)
        game.write("HeroHp", int(0.8 * game.client.read(["HeroMaxHp"])["HeroMaxHp"]))  # above the floor (0.62)
        regained = []
        for _ in range(config.max_steps):
            before = env.unwrapped.state
            *_, reward, terminated, truncated, _ = env.step(heal)
            after = env.unwrapped.state
            gained = max(0.0, after["HeroHp"] - before["HeroHp"]) / after["HeroMaxHp"]
            assert reward == pytest.approx(base(before, after) + 5.0 * gained, abs=1e-9)
            regained.append(gained)
            if terminated or truncated or gained:
                break
    finally:
        env.close()
    assert max(regained) > 0.1, (
        f"no drink restored HP: the flask was never drunk ({len(regained)} steps, {terminated=})"
    )
