"""Recorded input -> the env's actions, one per step.

What the person did is first read as the profile's actions (``HeardActions``): a key is the
action bound to it, a chord (Shift + left click) the chord's action and not the plain click's,
and a game controller's buttons and stick are actions by the profile's controller layout
(``env.controller``: a stick pushed forward is ``move_forward``). Keyboard and controller may
both be used: an action is held while either device holds it, and pressed when either presses
it, so a step's label comes from whichever acted.

A step's input is read from the input log's own event times, not from the samples: a key the
person pressed just before a step boundary is sampled only after it (the next sample is up to a
sample period away), which put one in six of a person's decisions into the next step. So each
step is cut into as many equal slices as it holds samples, and every slice gets the actions held
at its end and the actions pressed within it, from the events (``step_inputs``). For a lock-step
recording, whose keys change exactly at sample times, the slices are its samples and the labels
the same. An action pressed anywhere in a step counts (so a tap shorter than a step is never
lost), an action held counts by how many slices hold it.

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
from env.controller import AXES, BUTTONS
from env.profile import Profile

from capture.episode import Episode
from capture.episode_format import EpisodeError
from capture.inputs import BUTTON_DOWN, BUTTON_UP, EVENT_DTYPE, KEY_DOWN, KEY_UP, PAD_AXIS, PAD_DOWN, PAD_UP

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


def press_phase(presses: np.ndarray, start: float, dt: float, slice_s: float) -> float:
    """Where the step grid begins, in seconds after ``start`` (the episode's first sample): the
    offset in [0, ``dt``) that puts the most ``presses`` (their times: ``HeardActions.press_times``)
    into the first ``slice_s`` of their step, the latest of those that do (an earlier one holding
    the same presses, such as 0 for presses early in the unshifted grid's steps, starts each step
    up to a slice before them); 0 with no presses.

    Why: a step's observation is the picture at its start and its label the keys pressed in it,
    and a policy acts on the picture it is shown. A person's presses are not on any grid; on a
    grid laid from the first sample, a press follows its step's picture by anything up to a whole
    step, so the dataset pairs a decision with a picture from before the moment it was made for.
    Laid where the presses fall, each press begins its step and is paired with the game as it
    landed (``capture.build_dataset.step_starts``), as a policy's action follows its observation.
    A lock-step recording presses exactly on its own grid, which this returns unchanged (0)."""
    downs = np.asarray(presses, np.float64) - start
    if not len(downs):
        return 0.0
    residues = np.sort(np.mod(downs + EVENT_TOLERANCE_S, dt) - EVENT_TOLERANCE_S)
    candidates = np.concatenate([[0.0], residues[residues > EVENT_TOLERANCE_S]])
    # presses with residue in [phase, phase + slice), counted with the grid's wrap-around
    wrapped = np.concatenate([residues, residues + dt])
    counts = np.searchsorted(wrapped, candidates + slice_s - EVENT_TOLERANCE_S) - np.searchsorted(
        wrapped, candidates - EVENT_TOLERANCE_S
    )
    # the last of the best: the grid at the first of the presses it holds, not before them
    best = len(counts) - 1 - int(np.argmax(counts[::-1]))
    # of residues that are one time but for float sums, the earliest: every such press is in the step
    return float(candidates[np.searchsorted(candidates, candidates[best] - EVENT_TOLERANCE_S)])


class HeardActions:
    """A recording's keys and controller as the profile's actions (columns in ``profile.keybinds``
    order): for every slice of a step grid (``steps``, the dataset builder's), or for samples
    (``from_samples``, a policy's driver labelling what the person just did)."""

    def __init__(self, profile: Profile, key_names: tuple[str, ...]) -> None:
        self.profile = profile
        self.names = tuple(profile.keybinds)
        columns = {k: i for i, k in enumerate(key_names)}
        missing = [k for k in profile.bound_keys if k not in columns]
        if missing:
            raise EpisodeError(f"the recording has no columns for keys {missing} that profile {profile.name!r} binds")
        bindings = [tuple(columns[k] for k in binding) for binding in profile.keybinds.values()]
        self._bindings = bindings
        # a chord outranks a binding it extends (Shift + click is not a click)
        self._outranked_by = [
            [
                j
                for j, other in enumerate(bindings)
                if len(other) > len(b) and set(b) < set(other) and other[-1] == b[-1]
            ]
            for b in bindings
        ]
        self.layout = profile.controller

    # -------------------------------------------------------------------------------- keys
    def from_keys(self, held: np.ndarray, pressed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(held, pressed) over the recording's key columns, (S, K) each -> the same over the
        actions, (S, A): an action is held while all its keys are, and pressed when its last key
        went down with its modifiers down (or going down in the same slice)."""
        on = np.empty((len(held), len(self.names)), bool)
        went = np.empty_like(on)
        for a, binding in enumerate(self._bindings):
            modifiers, key = list(binding[:-1]), binding[-1]
            on[:, a] = held[:, list(binding)].all(axis=1)
            went[:, a] = pressed[:, key] & (held[:, modifiers] | pressed[:, modifiers]).all(axis=1)
        for a, above in enumerate(self._outranked_by):
            if above:
                on[:, a] &= ~on[:, above].any(axis=1)
                went[:, a] &= ~went[:, above].any(axis=1)
        return on, went

    # -------------------------------------------------------------------------- controller
    def pad_events(self, episode: Episode) -> tuple[np.ndarray, np.ndarray]:
        """The controller's part of ``episode`` as action events (``KEY_DOWN``/``KEY_UP`` rows whose
        ``key`` is the action's column), with the actions it held at the first sample: by the
        profile's layout, judged on the controller's whole state after each moment it changed."""
        events = episode.events[np.isin(episode.events["kind"], (PAD_DOWN, PAD_UP, PAD_AXIS))]
        start_buttons, start_axes = episode.pad_held[0], episode.pad_axes[0]
        if self.layout is None:
            if len(events) or start_buttons.any():
                raise EpisodeError(
                    f"{episode.path.name} was played on a controller, but profile {self.profile.name!r} has no "
                    "[controller] table saying which button does which action: add one (docs/guide.md, "
                    "section 4, lists Elden Ring's default layout)"
                )
            return np.zeros(0, EVENT_DTYPE), np.zeros(len(self.names), bool)
        held_start = self.layout.held(start_buttons, start_axes)
        start = np.zeros(len(self.names), bool)
        for action, column in held_start.items():
            start[self.names.index(action)] = column[0]
        if not len(events):
            return np.zeros(0, EVENT_DTYPE), start
        buttons = _filled(events, (PAD_DOWN, PAD_UP), len(BUTTONS), start_buttons, events["kind"] == PAD_DOWN)
        axes = _filled(events, (PAD_AXIS,), len(AXES), start_axes, events["dx"])
        last = np.append(events["t"][1:] != events["t"][:-1], True)  # the state once a moment's changes are in
        held = self.layout.held(buttons[last], axes[last])
        times = events["t"][last]
        rows = []
        for action, column in held.items():
            a = self.names.index(action)
            before = np.concatenate([[start[a]], column[:-1]])
            changed = np.flatnonzero(column != before)
            for i in changed:
                rows.append((times[i], KEY_DOWN if column[i] else KEY_UP, a, 0.0, 0.0))
        out = np.array(sorted(rows, key=lambda row: row[0]), EVENT_DTYPE)
        return out, start

    # ------------------------------------------------------------------------------ steps
    def steps(self, episode: Episode, boundaries: np.ndarray, slices: int) -> tuple[np.ndarray, np.ndarray]:
        """(held, pressed) over the actions, (steps * slices, A) each: every step between
        consecutive ``boundaries`` cut into ``slices`` (``step_inputs``), keyboard and controller
        together."""
        held, pressed = self.from_keys(*step_inputs(episode.events, episode.keys_held[0], boundaries, slices))
        pad_events, pad_start = self.pad_events(episode)
        if len(pad_events) or pad_start.any():
            pad_held, pad_pressed = step_inputs(pad_events, pad_start, boundaries, slices)
            held |= pad_held
            pressed |= pad_pressed
        return held, pressed

    def press_times(self, episode: Episode) -> np.ndarray:
        """When the person pressed something that is an action, keyboard and controller (for
        ``press_phase``)."""
        keys = episode.events[np.isin(episode.events["kind"], (KEY_DOWN, BUTTON_DOWN))]["t"]
        pad, _ = self.pad_events(episode)
        return np.sort(np.concatenate([keys, pad["t"][pad["kind"] == KEY_DOWN]]))

    def from_samples(self, samples: list) -> tuple[np.ndarray, np.ndarray]:
        """(held, pressed) over the actions for each of ``samples`` (``capture.episode_writer.Sample``):
        the keys as ``from_keys`` reads them, the controller by the layout at each sample, a
        control pressed where it was pressed since the sample before or is held now and was not then."""
        if not samples:
            return np.zeros((0, len(self.names)), bool), np.zeros((0, len(self.names)), bool)
        held, pressed = self.from_keys(np.stack([s.held for s in samples]), np.stack([s.pressed for s in samples]))
        if self.layout is not None:
            pad_buttons, pad_axes = np.stack([s.pad_held for s in samples]), np.stack([s.pad_axes for s in samples])
            now = self.layout.held(pad_buttons, pad_axes)
            went = self.layout.held(np.stack([s.pad_pressed for s in samples]), np.zeros_like(pad_axes))
            for action, column in now.items():
                a = self.names.index(action)
                rising = column & ~np.concatenate([[False], column[:-1]])
                held[:, a] |= column
                pressed[:, a] |= went[action] | rising
        return held, pressed


def _filled(
    events: np.ndarray, kinds: tuple[int, ...], columns: int, start: np.ndarray, values: np.ndarray
) -> np.ndarray:
    """(events, columns): each column's value after every event, from the events of ``kinds``
    (``key`` is the column, ``values`` the value each sets), ``start`` before the first."""
    out = np.empty((len(events), columns), np.asarray(start).dtype)
    mine_kind = np.isin(events["kind"], kinds)
    rows = np.arange(len(events))
    for column in range(columns):
        mine = mine_kind & (events["key"] == column)
        last = np.maximum.accumulate(np.where(mine, rows, -1)) if len(events) else rows
        out[:, column] = np.where(last >= 0, np.asarray(values)[np.maximum(last, 0)], start[column])
    return out


class StepLabeler:
    """A step's action from its slices' held and pressed actions (``HeardActions``)."""

    def __init__(self, actions: ActionTable) -> None:
        profile = actions.profile
        self.action_mode = actions.mode
        self.idle = actions.idle
        columns = {name: i for i, name in enumerate(profile.keybinds)}
        if self.action_mode == "discrete":
            self.entries = [
                (i, [columns[a] for a in entry.hold], [columns[a] for a in entry.tap])
                for i, entry in enumerate(profile.discrete_actions)
            ]
            self.backstep_column = columns.get("move_back")

    def label(self, held: np.ndarray, pressed: np.ndarray) -> np.ndarray | int:
        """The action for one step, from its slices' (S, A) held and pressed matrices."""
        if self.action_mode == "multi_binary":
            return (held.any(axis=0) | pressed.any(axis=0)).astype(np.int8)
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
