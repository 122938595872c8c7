"""What a first evening with the real game needs from the clients, against the simulator's
real-server mode where it can be shown, and in isolation where it is about Windows."""

from __future__ import annotations

import logging
import os
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
