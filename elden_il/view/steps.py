"""An episode as the learner sees it, step by step, into a Rerun recording.

Three sources give the same steps: a raw episode laid on the env's step grid by the dataset
builder's own code, one episode of a Minari dataset, and an evaluation fight. Each becomes a
``StepView`` and is logged here the same way: the observation (its frame, the frame stack and
action history when the env has them, the scalars), the action taken and its reward, on the
timelines ``step`` and ``time`` (seconds since the episode began). With a policy's action
probabilities, each step also shows what the policy would have done, the steps where its most
likely action is not the one taken are marked, and the disagreements are counted per action:
where a cloned policy parts from the person is what a researcher looks for first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

TIME = "time"
"""The duration timeline every entity is on: seconds since the episode's first sample or step."""
STEP = "step"
"""The sequence timeline of env steps."""
SCALARS = ("player_hp", "boss_hp", "distance", "player_animation", "boss_animation", "flasks")
"""The observation's scalar keys, each a plot (``flasks`` where the env observes it)."""


@dataclass(frozen=True)
class StepView:
    """T steps of one episode: what a viewer shows of the learner's side of it."""

    time_s: np.ndarray  # (T,) seconds since the episode began, at each step's observation
    observations: dict[str, np.ndarray]  # the env's keys, T rows: the observation each action was chosen from
    actions: np.ndarray  # (T,) discrete indices or (T, bits) multi_binary
    rewards: np.ndarray  # (T,)
    action_names: tuple[str, ...]  # the discrete table's names, or the multi_binary bits' (keybinds)
    discrete: bool
    extra_times: dict[str, np.ndarray] | None = None  # more sequence timelines per step (a raw episode's ``sample``)

    def __len__(self) -> int:
        return len(self.time_s)

    def action_text(self, action: Any) -> str:
        """An action as words: its table name, or the names of the bits that are on."""
        if self.discrete:
            return self.action_names[int(action)]
        on = [name for name, bit in zip(self.action_names, np.asarray(action), strict=True) if bit]
        return "+".join(on) or "nothing"


@dataclass(frozen=True)
class Disagreements:
    """Where a policy's most likely action is not the one taken."""

    steps: np.ndarray  # (T,) bool: the policy would have done otherwise at this step
    per_action: dict[str, tuple[int, int]]  # action (discrete) or bit (multi_binary) -> (disagreements, steps)

    @property
    def count(self) -> int:
        return int(self.steps.sum())


def most_likely(probabilities: np.ndarray, discrete: bool) -> np.ndarray:
    """The policy's most likely action per step: the likeliest entry, or each bit more likely on than off."""
    return probabilities.argmax(axis=1) if discrete else (probabilities > 0.5).astype(np.int8)


def disagreements(view: StepView, probabilities: np.ndarray) -> Disagreements:
    """Compare the policy's most likely action with the one taken, step by step. Per action: for
    a discrete table, each action taken and how often the policy would have done something else
    then; for multi_binary, each bit and how often the policy would have set it otherwise."""
    chosen = most_likely(probabilities, view.discrete)
    if view.discrete:
        differ = chosen != view.actions
        per = {
            name: (int(differ[view.actions == i].sum()), int((view.actions == i).sum()))
            for i, name in enumerate(view.action_names)
            if (view.actions == i).any()
        }
        return Disagreements(differ, per)
    bits = chosen != np.asarray(view.actions, np.int8)
    per = {name: (int(bits[:, j].sum()), len(view)) for j, name in enumerate(view.action_names)}
    return Disagreements(bits.any(axis=1), per)


def _indexes(rr: Any, view: StepView, rows: np.ndarray | None = None) -> list:
    rows = np.arange(len(view)) if rows is None else rows
    columns = [rr.TimeColumn(STEP, sequence=rows), rr.TimeColumn(TIME, duration=view.time_s[rows])]
    for name, values in (view.extra_times or {}).items():
        columns.append(rr.TimeColumn(name, sequence=np.asarray(values)[rows]))
    return columns


def _set_step(stream: Any, view: StepView, k: int) -> None:
    stream.set_time(STEP, sequence=k)
    stream.set_time(TIME, duration=float(view.time_s[k]))
    for name, values in (view.extra_times or {}).items():
        stream.set_time(name, sequence=int(values[k]))


def log_steps(rr: Any, stream: Any, view: StepView) -> None:
    """The observations, actions and rewards of ``view``, under ``observation/`` and ``action/``."""
    obs = view.observations
    for key in (k for k in SCALARS if k in obs):
        stream.send_columns(
            f"observation/{key}",
            indexes=_indexes(rr, view),
            columns=rr.Scalars.columns(scalars=np.asarray(obs[key], np.float64).reshape(len(view))),
        )
    stream.send_columns(
        "action/reward",
        indexes=_indexes(rr, view),
        columns=rr.Scalars.columns(scalars=np.asarray(view.rewards, np.float64)),
    )
    stream.send_columns(
        "action/taken",
        indexes=_indexes(rr, view),
        columns=rr.TextLog.columns(text=[view.action_text(a) for a in view.actions]),
    )
    history = obs.get("action_history")
    for k in range(len(view)):
        _set_step(stream, view, k)
        stream.log("observation/frame", rr.Image(obs["frame"][k]))
        if "frame_stack" in obs:  # oldest to newest, left to right
            stream.log(
                "observation/frame_stack",
                rr.Image(np.concatenate(list(obs["frame_stack"][k]), axis=1)),
            )
        if history is not None:
            stream.log(
                "observation/action_history",
                rr.TextLog(", ".join(view.action_text(a) for a in history[k])),
            )
    stream.reset_time()


def log_policy(rr: Any, stream: Any, view: StepView, probabilities: np.ndarray, name: str) -> Disagreements:
    """A policy's view of each step under ``policy/``: its action probabilities (a bar per action
    or bit), its most likely action next to the one taken, each step where they differ marked
    (``policy/disagreement``), and the disagreements counted per action (``policy/per_action``,
    a bar chart, and ``policy/summary``, a table). Returns the disagreements."""
    found = disagreements(view, probabilities)
    chosen = most_likely(probabilities, view.discrete)
    stream.log(
        "policy/actions",
        rr.TextDocument(", ".join(f"{i}: {n}" for i, n in enumerate(view.action_names))),
        static=True,
    )
    for k in range(len(view)):
        _set_step(stream, view, k)
        stream.log("policy/probabilities", rr.BarChart(probabilities[k]))
    stream.reset_time()
    stream.send_columns(
        "policy/most_likely",
        indexes=_indexes(rr, view),
        columns=rr.TextLog.columns(text=[view.action_text(a) for a in chosen]),
    )
    marked = np.flatnonzero(found.steps)
    if len(marked):
        stream.send_columns(
            "policy/disagreement",
            indexes=_indexes(rr, view, marked),
            columns=rr.TextLog.columns(
                text=[
                    f"{name}: {view.action_text(chosen[k])}, taken: {view.action_text(view.actions[k])}" for k in marked
                ],
                level=["WARN"] * len(marked),
            ),
        )
    per = found.per_action
    stream.log(
        "policy/per_action",
        rr.BarChart([per[n][0] if n in per else 0 for n in view.action_names]),
        static=True,
    )
    rows = "\n".join(f"| {n} | {d} | {s} |" for n, (d, s) in per.items())
    what = "action taken" if view.discrete else "bit (key)"
    stream.log(
        "policy/summary",
        rr.TextDocument(
            f"**{name}**: its most likely action differs from the one taken at {found.count} of {len(view)} steps.\n\n"
            f"| {what} | disagreements | steps |\n|---|---|---|\n{rows}\n",
            media_type="text/markdown",
        ),
        static=True,
    )
    return found
