"""The teacher: whoever recorded the fights a dataset was built from, and how often they won.

Behaviour cloning copies its teacher; the results table says how well the teacher fought, so a
cloned policy is read against it. With your own recordings (``demos.source: raw``) the teacher is
you, and your rate is the fights you recorded and won; with the simulator's, it is the player the
recorder's autopilot was (the scripted expert or the person-like player). The rate is over the
recorded fights, not the held-out ones every policy is judged on: the same person on other
seeds, which is what a person recording can give.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from env.sim.players import PLAYERS

from capture.episode import recorded_outcome

from elden_il.evaluation.win_rate import wilson_interval

log = logging.getLogger(__name__)

SOURCES = {"human": "you", "autopilot": "the autopilot", "policy": "a policy you corrected"}
"""Who played an episode (its ``source``), in words."""
FAR_BELOW = 0.5
"""BC winning under this share of its teacher's rate is said in a warning: it learnt little of
how the teacher fights."""


def teacher_record(raw_dir: Path, episodes: list[str], autopilot_player: str | None) -> dict:
    """The recorded fights ``episodes`` (file names in ``raw_dir``) as the teacher's row: who
    played them (``autopilot_player``: the autopilot's player, where the simulator recorded
    them), how many, and the share won with its 95 % interval."""
    outcomes = [recorded_outcome(raw_dir / name) for name in episodes]
    wins = sum(outcome == "win" for _, outcome in outcomes)
    sources = Counter(source for source, _ in outcomes)
    if set(sources) == {"autopilot"} and autopilot_player is not None:
        who = PLAYERS[autopilot_player].words if autopilot_player in PLAYERS else autopilot_player
    else:
        who = " and ".join(SOURCES.get(source, source) for source, _ in sources.most_common())
    low, high = wilson_interval(wins, len(outcomes))
    return {"who": who, "fights": len(outcomes), "win_rate": wins / len(outcomes), "win_rate_ci95": [low, high]}


def teacher_label(teacher: dict) -> str:
    """The teacher's row's name in the results table."""
    return f"teacher: {teacher['who']}, {teacher['fights']} recorded fights"


def warn_if_far_below(bc: dict, teacher: dict) -> None:
    """Say so when the cloned policy wins far less often than the fights it was cloned from."""
    if bc["win_rate"] < FAR_BELOW * teacher["win_rate"]:
        log.warning(
            "behaviour cloning wins %.0f %% of the held-out fights, its teacher (%s) %.0f %% of the %d recorded: "
            "it learnt little of how they fight. More recorded fights help most, and on a few of them several "
            'networks acting as one, params.yaml bc.runs: 3 (docs/guide.md, "Train on your own recordings"); the '
            "fine-tuned row shows what RL made of it",
            100 * bc["win_rate"],
            teacher["who"],
            100 * teacher["win_rate"],
            teacher["fights"],
        )
