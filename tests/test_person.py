"""The person-like demonstrator: a person's reaction times, lapses and taps on top of the
scripted expert's knowledge, recorded through the real recorder in-process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from env.config import EnvConfig
from env.game import GameState
from env.sim.boss import load_boss
from env.sim.expert import ScriptedExpert
from env.sim.person import MIN_TAP_S, HumanLimits, PersonLikeExpert

from capture.episode import list_episodes, read_episode
from capture.record import RecordSettings, record

MOVES_BY_PHASE = load_boss("margit").moves_by_phase
MOVE = MOVES_BY_PHASE[1][0]
IDLE_ANIM = 0


def state(t: float, anim: int) -> GameState:
    """The boss 2 m away at full HP, playing ``anim`` at time ``t``."""
    return GameState(
        {
            "HeroHp": 1000,
            "HeroMaxHp": 1000,
            "HeroSp": 100,
            "HeroAnimId": 0,
            "HeroLocalPosX": 0.0,
            "HeroLocalPosY": 0.0,
            "NpcHp": 4000,
            "NpcMaxHp": 4000,
            "NpcAnimId": anim,
            "NpcLocalPosX": 2.0,
            "NpcLocalPosY": 0.0,
            "HeroFlaskCharges": 3,
        },
        t,
    )


def noticed_after(person: PersonLikeExpert, onset: float, frame_s: float = 1 / 30) -> float:
    """Watch frames of a move starting at ``onset``; how long until the person notices it."""
    t = onset
    while not person.observe(state(t, MOVE.anim_id)):
        t += frame_s
        if t > onset + 5:
            return float("inf")
    person.act(state(t, MOVE.anim_id))
    return t - onset


def test_a_boss_move_is_noticed_a_human_reaction_time_after_it_starts():
    limits = HumanLimits(lapse=0.0)
    person = PersonLikeExpert(limits=limits, seed=7)
    delays = []
    for i in range(400):
        person.reset()
        person.observe(state(10.0 * i - 1, IDLE_ANIM))
        delays.append(noticed_after(person, 10.0 * i, frame_s=0.001))
    delays = np.array(delays)
    # the ex-Gaussian's mean is the published mean simple reaction time; nobody reacts in 0 s
    assert abs(delays.mean() - limits.mean_reaction_s) < 0.01, delays.mean()
    assert delays.min() > 0.1 and np.percentile(delays, 95) > limits.mean_reaction_s + 0.05


def test_until_it_notices_a_move_the_person_plays_as_if_none_had_started():
    expert, person = ScriptedExpert(), PersonLikeExpert(limits=HumanLimits(lapse=0.0), seed=0)
    for player in (expert, person):
        player.act(state(0.0, IDLE_ANIM))
    # the frame the move starts on: the expert knows it (2 m away, a blow is coming), the person not yet
    for player in (expert, person):
        player.act(state(0.2, MOVE.anim_id))
    assert expert.attack_coming and not person.attack_coming


def test_a_lapse_leaves_a_move_unnoticed():
    person = PersonLikeExpert(limits=HumanLimits(lapse=1.0), seed=0)
    person.observe(state(0.0, IDLE_ANIM))
    assert noticed_after(person, 1.0) == float("inf")
    person.act(state(2.0, MOVE.anim_id))
    assert not person.attack_coming


def test_a_practised_person_presses_ahead_of_the_lag_it_has_learned():
    """In real time a press reaches the game a little late; a person used to their setup presses
    that much earlier. With the same draws, the roll comes exactly the lead sooner."""
    slow = next(m for m in MOVES_BY_PHASE[1] if m.strikes[0].start / 60 > 1.0)  # noticed long before its blow

    def first_roll(lead_s: float) -> float:
        person = PersonLikeExpert(limits=HumanLimits(lapse=0.0), seed=1)
        person.lead_s = lead_s
        person.act(state(9.0, IDLE_ANIM))
        for ms in range(3000):
            if person.act(state(10.0 + ms / 1000, slow.anim_id)).startswith("roll"):
                return ms / 1000
        raise AssertionError("the person never rolled")

    assert first_roll(0.0) - first_roll(0.08) == pytest.approx(0.08, abs=0.0015)


def test_taps_last_as_long_as_a_persons():
    limits = HumanLimits()
    person = PersonLikeExpert(limits=limits, seed=3)
    taps = np.array([person.tap_ms() for _ in range(2000)]) / 1000
    assert abs(taps.mean() - limits.tap_s) < 0.005 and taps.min() >= MIN_TAP_S and taps.std() > 0.01


def record_with(player: str, out: Path, episodes: int = 2) -> list[Path]:
    record(
        RecordSettings(
            env=EnvConfig(profile="sim_margit"),
            backend="sim",
            autopilot=True,
            player=player,
            max_episodes=episodes,
            max_episode_seconds=20,
            seed=0,
            out=out,
            reproducible=True,
        )
    )
    return list_episodes(out)


def test_a_person_like_recording_is_reproducible_and_is_not_the_experts(tmp_path: Path):
    first, again = record_with("person", tmp_path / "a"), record_with("person", tmp_path / "b")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]
    expert = record_with("expert", tmp_path / "expert")
    for mine, theirs in zip(first, expert):
        ours, its = read_episode(mine, frames=False), read_episode(theirs, frames=False)
        assert ours.events.size > 0 and its.events.size > 0
        assert not np.array_equal(ours.events, its.events), "the same fight, played by another player"
