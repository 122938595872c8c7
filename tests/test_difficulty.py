"""Difficulty is honest, over seeded in-process fights through the env, the way evaluation plays
them: 200 fights for the policies that lose at once; for the expert, whose fights last, the 100
held-out fights of the evaluation, which must also give exactly the evaluation's expert row (one
fight loop, one win rate). elden_il/studies/STUDIES.md quotes ``python -m elden_il.duel`` on seeds 0-199."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from conftest import committed

from env.config import EnvConfig

from elden_il.duel import duel
from elden_il.evaluation.fight_loop import summarize

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


@pytest.fixture(scope="module")
def evaluation() -> dict:
    """The evaluation's report (``datasets/reports/eval.json``, the README's table) and the scripted
    expert's records on its held-out seeds (params.yaml's), played as ``python -m elden_il.duel``
    plays them, with the summary of those records."""
    evaluate = yaml.safe_load(committed("params.yaml"))["evaluate"]
    report = json.loads(committed("datasets/reports/eval.json"))
    seeds = list(range(evaluate["first_seed"], evaluate["first_seed"] + evaluate["fights"]))
    assert report["backend"] == "sim" and report["fights"] == len(seeds)
    started = time.perf_counter()
    records = duel("expert", seeds, EnvConfig())
    return {"report": report, "expert": summarize(records, time.perf_counter() - started)}


@pytest.mark.slow
def test_the_scripted_expert_wins_most_but_not_all_fights(evaluation: dict):
    assert 0.60 <= evaluation["expert"]["win_rate"] <= 0.90


@pytest.mark.slow
def test_the_difficulty_check_on_the_evaluation_seeds_gives_the_evaluations_expert_row(evaluation: dict):
    """The expert is quoted twice: the evaluation's row (the README's table) and the difficulty
    check. Both come from one fight loop, so `python -m elden_il.duel` on the evaluation's seeds
    gives exactly its row."""
    expert = evaluation["report"]["policies"]["expert"]
    assert {key: evaluation["expert"][key] for key in expert} == expert  # the results; the speed is not in eval.json


def test_a_fight_is_decided_by_its_seed_not_by_the_fights_its_env_played_before():
    """The game clock runs on across fights; the expert's timings (and its choice of roll side)
    must count from the fight's start, or a fight's outcome would depend on the batch size and
    on which fights a worker happened to play before it (fan-out would change results)."""
    from env.factory import make_env
    from env.sim.expert import ScriptedExpert

    from elden_il.evaluation.fight_loop import PlayerActor, run_fights

    config = EnvConfig(profile="sim_margit", action_history=4, max_steps=120)

    def play(seeds: list[int]) -> dict:
        make = lambda: make_env(config, state_attributes=ScriptedExpert.ATTRIBUTES)  # noqa: E731
        return {r.seed: r for r in run_fights(make, PlayerActor("expert", config), seeds, parallel=1)[0]}

    alone = play([205])[205]
    assert play([203, 204, 205])[205] == alone
    assert play([201, 202, 203, 204, 205])[205] == alone
