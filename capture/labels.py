"""Recorded key state -> the env's actions, one per step.

A step's keys are read from the input log's own event times, not from the samples: a key the
person pressed just before a step boundary is sampled only after it (the next sample is up to a
sample period away), which put one in six of a person's decisions into the next step. So each
step is cut into as many equal slices as it holds samples, and every slice gets the keys held at
its end and the keys pressed within it, from the events (``step_inputs``). For a lock-step
recording, whose keys change exactly at sample times, the slices are its samples and the labels
the same. A key pressed anywhere in a step counts (so a tap shorter than a step is never lost), a
key held counts by how many slices hold it.

* ``multi_binary``: the bit of each bound action is set if its key was held or pressed in the step.
* ``discrete``: the profile's table, read generically. Entries that tap a key win when that key
  was pressed in the step (the first pressed, if several); among them, the one whose held keys
  were held longest (a roll goes where the movement keys point; a dodge with no direction is a
  backstep, which moves back, so it labels as the entry that holds ``move_back``). Otherwise the
  hold-only entry held in most of the step's samples, and failing that, the entry that does
  nothing (idle).
"""

from __future__ import annotations

import numpy as np

from env.actions import ActionTable

from capture.episode import EpisodeError
from capture.inputs import BUTTON_DOWN, BUTTON_UP, KEY_DOWN, KEY_UP

EVENT_TOLERANCE_S = 1e-6
"""An event this close before a slice boundary counts as at it: lock-step keys are logged at
sample times, which are float sums like the boundaries."""


def step_inputs(
    events: np.ndarray,
    held_at_start: np.ndarray,
    boundaries: np.ndarray,
    slices: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each step between consecutive ``boundaries`` cut into ``slices`` equal slices: (held,
    pressed), each (steps * slices, K) bool. ``held`` is the keys down just before a slice ends
    (``held_at_start`` until the first event of a key), ``pressed`` the keys that went down in
    the slice, boundaries at its start included (a key pressed on a boundary is the new step's).
    ``events`` is an episode's input log (``capture.inputs.EVENT_DTYPE``)."""
    key_events = events[np.isin(events["kind"], (KEY_DOWN, KEY_UP, BUTTON_DOWN, BUTTON_UP))]
    is_down = np.isin(key_events["kind"], (KEY_DOWN, BUTTON_DOWN))
    fractions = np.arange(slices + 1) / slices
    edges = boundaries[:-1, None] + np.diff(boundaries)[:, None] * fractions[None, :]  # (steps, slices + 1)
    starts = edges[:, :-1].ravel() - EVENT_TOLERANCE_S
    ends = edges[:, 1:].ravel() - EVENT_TOLERANCE_S
    held = np.empty((len(ends), len(held_at_start)), bool)
    pressed = np.empty_like(held)
    for column in range(len(held_at_start)):
        mine = key_events["key"] == column
        times, downs = key_events["t"][mine], is_down[mine]
        if not len(times):
            held[:, column], pressed[:, column] = held_at_start[column], False
            continue
        last = np.searchsorted(times, ends, side="left") - 1  # the key's last event before each end
        held[:, column] = np.where(last >= 0, downs[np.maximum(last, 0)], held_at_start[column])
        down_times = times[downs]
        pressed[:, column] = np.searchsorted(down_times, ends) > np.searchsorted(down_times, starts)
    return held, pressed


def press_phase(events: np.ndarray, start: float, dt: float, slice_s: float) -> float:
    """Where the step grid begins, in seconds after ``start`` (the episode's first sample): the
    offset in [0, ``dt``) that puts the most key and button presses into the first ``slice_s`` of
    their step; 0 where none does better.

    Why: a step's observation is the picture at its start and its label the keys pressed in it,
    and a policy acts on the picture it is shown. A person's presses are not on any grid; on a
    grid laid from the first sample, a press follows its step's picture by anything up to a whole
    step, so the dataset pairs a decision with a picture from before the moment it was made for.
    Laid where the presses fall, each press follows the last picture before it, as a policy's
    action follows its observation. A lock-step recording presses exactly on its own grid, which
    this returns unchanged (0)."""
    downs = events["t"][np.isin(events["kind"], (KEY_DOWN, BUTTON_DOWN))] - start
    if not len(downs):
        return 0.0
    residues = np.sort(np.mod(downs + EVENT_TOLERANCE_S, dt) - EVENT_TOLERANCE_S)
    candidates = np.concatenate([[0.0], residues[residues > 0]])
    # presses with residue in [phase, phase + slice), counted with the grid's wrap-around
    wrapped = np.concatenate([residues, residues + dt])
    counts = np.searchsorted(wrapped, candidates + slice_s - EVENT_TOLERANCE_S) - np.searchsorted(
        wrapped, candidates - EVENT_TOLERANCE_S
    )
    best = int(np.argmax(counts))  # the first of the best: 0 on a tie
    return float(candidates[best])


class StepLabeler:
    def __init__(self, actions: ActionTable, key_names: tuple[str, ...]) -> None:
        profile = actions.profile
        self.action_mode = actions.mode
        self.idle = actions.idle
        self.columns = {k: i for i, k in enumerate(key_names)}
        missing = [k for k in profile.keybinds.values() if k not in self.columns]
        if missing:
            raise EpisodeError(f"the recording has no columns for keys {missing} that profile {profile.name!r} binds")
        self.bits = [self.columns[k] for k in profile.keybinds.values()]
        if self.action_mode == "discrete":
            self.entries = [
                (i, [self.columns[k] for k in command.hold], [self.columns[k] for k in command.tap])
                for i, command in enumerate(actions.commands)
            ]
            back = profile.keybinds.get("move_back")
            self.backstep_column = self.columns.get(back) if back else None

    def label(self, held: np.ndarray, pressed: np.ndarray) -> np.ndarray | int:
        """The action for one step, from its samples' (S, K) held and pressed matrices."""
        if self.action_mode == "multi_binary":
            return (held[:, self.bits].any(axis=0) | pressed[:, self.bits].any(axis=0)).astype(np.int8)
        if len(held) == 0:
            return self.idle
        held_share = held.mean(axis=0)
        pressed_any = pressed.any(axis=0)
        first_press = np.where(pressed_any, pressed.argmax(axis=0), len(pressed))
        tapping = [(i, hold, tap) for i, hold, tap in self.entries if tap and all(pressed_any[c] for c in tap)]
        if tapping:
            first = min(min(first_press[c] for c in tap) for _, _, tap in tapping)
            tapping = [e for e in tapping if min(first_press[c] for c in e[2]) == first]
            return max(tapping, key=lambda e: (self._hold_score(e[1], held_share), self._backstep(e[1])))[0]
        holding = [(i, hold) for i, hold, tap in self.entries if hold and not tap]
        best = max(holding, key=lambda e: self._hold_score(e[1], held_share), default=None)
        if best is None or self._hold_score(best[1], held_share) < 0.5:
            return self.idle  # nothing held through most of the step
        return best[0]

    @staticmethod
    def _hold_score(columns: list[int], held_share: np.ndarray) -> float:
        return float(min(held_share[c] for c in columns)) if columns else 0.0

    def _backstep(self, columns: list[int]) -> bool:
        return self.backstep_column in columns
