"""Each player of the simulator is written once (``env.sim.players``) and asked on either clock:
once per env step, as evaluation asks a policy (``elden_il.evaluation.fight_loop.PlayerActor``), or at every
sample, as the recorder's autopilot asks it (``capture.autopilot.Autopilot``); ``python -m
elden_il.duel --clock sample`` is the recorder's own play, fight for fight."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.config import EnvConfig
from env.sim.players import PLAYERS

from capture.episode import list_episodes

from elden_il.duel import CLOCKS, duel, fight_of

ROOT = Path(__file__).parents[1]
CONFIG = EnvConfig(profile="sim_margit", max_steps=75)
"""Fights cut after 15 s of game time: long enough for every player to press and be hit."""


@pytest.mark.parametrize("player", list(PLAYERS))
def test_every_player_plays_on_both_clocks(player: str):
    for clock in CLOCKS:
        records = duel(player, [5, 6], CONFIG, parallel=2, clock=clock)
        assert [r.seed for r in records] == [5, 6], clock
        assert all(0 < r.length <= CONFIG.max_steps for r in records), (clock, records)
        assert any(r.boss_damage_dealt > 0 for r in records), (clock, records)  # it pressed, and hit


def test_the_sample_clock_plays_the_fights_the_recorder_records(tmp_path: Path):
    """The person-like player through ``duel --clock sample`` and through ``python -m capture.record
    --backend sim --autopilot --player person`` (the recorder's own picture size, in its own process):
    the same fights, the same outcomes, the same lengths and damage."""
    seeds = [1_000_000, 1_000_001]
    command = [
        *("--backend", "sim", "--autopilot", "--player", "person", "--seed", str(seeds[0])),
        *("--max-episodes", str(len(seeds)), "--max-episode-seconds", "15", "--out", str(tmp_path), "--no-status"),
    ]
    result = subprocess.run(
        [sys.executable, "-m", "capture.record", *command],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    recorded = [fight_of(path, seed, CONFIG) for path, seed in zip(list_episodes(tmp_path), seeds, strict=True)]
    assert duel("person", seeds, CONFIG, clock="sample") == recorded
