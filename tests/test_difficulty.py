"""Difficulty is honest, over 200 seeded in-process fights per policy through the env, the way
evaluation plays them (the README quotes these)."""

from __future__ import annotations

import pytest

from env.sim.duel import duel

FIGHTS = list(range(200))


def win_rate(policy: str) -> float:
    results = duel(policy, FIGHTS)
    return sum(r.win for r in results) / len(results)


@pytest.mark.slow
def test_random_policy_almost_never_wins():
    assert win_rate("random") <= 0.02


@pytest.mark.slow
def test_attacking_every_step_rarely_wins():
    assert win_rate("attack") <= 0.05


@pytest.mark.slow
def test_the_scripted_expert_wins_most_but_not_all_fights():
    assert 0.60 <= win_rate("expert") <= 0.90
