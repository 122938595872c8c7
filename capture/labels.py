"""Recorded key state -> the env's actions, one per step.

A step's action is read from every sample inside the step: a key pressed anywhere in it counts
(so a tap shorter than a step is never lost), a key held counts by how many samples hold it.

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
