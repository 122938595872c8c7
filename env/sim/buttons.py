"""Key, mouse and controller input on its way into the world: Siphon key names (or a
controller's held buttons) in, button masks out.

Input arrives whenever it likes (gRPC threads, the play window, a lock-step caller) while the
world advances in ticks. ``InputLatch`` collects it between ticks and hands the world, once per
tick, the buttons held now plus every press and release since the previous tick, so a tap that
begins and ends between two ticks is still seen. Thread-safe.

A key press does what the profile binds to it, as the game does: a chord's key does the chord's
action when its modifiers are down (left click with Shift held is a strong attack, not an
attack), and what a press started lasts until that key is released. A controller (the play
window's) is a second device held beside the keyboard, as the game takes both at once.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from env.keys import normalize_key
from env.sim.controls import Button


def chord_buttons(keybinds: Mapping[str, Sequence[str]]) -> dict[str, list[tuple[frozenset[str], int]]]:
    """Profile keybinds (action -> its keys) as: the key that completes a binding -> (the
    modifiers it needs down, the buttons it presses), longest chord first."""
    by_key: dict[str, list[tuple[frozenset[str], int]]] = {}
    for action, binding in keybinds.items():
        keys = [normalize_key(k) for k in binding]
        by_key.setdefault(keys[-1], []).append((frozenset(keys[:-1]), int(Button.from_name(action))))
    for options in by_key.values():
        options.sort(key=lambda option: -len(option[0]))
    return by_key


class InputLatch:
    def __init__(self, keybinds: Mapping[str, Sequence[str]]) -> None:
        self._chords = chord_buttons(keybinds)
        self._lock = threading.Lock()
        self._keys_down: dict[str, int] = {}  # key -> the buttons its press started
        self._pad = 0  # buttons a controller holds
        self._pressed = 0
        self._released = 0
        self._mouse_dx = 0.0

    def _bits(self, key: str) -> int:
        """What pressing ``key`` does with the keys down now: the longest binding it completes
        (a valid key bound to nothing does nothing, as in a game)."""
        bits, length = 0, -1
        for modifiers, buttons in self._chords.get(key, ()):
            if len(modifiers) < length:
                break
            if modifiers <= self._keys_down.keys():
                bits, length = bits | buttons, len(modifiers)
        return bits

    def press(self, key: str) -> None:
        """Press ``key`` (a Siphon name; raises ``ValueError`` for an unknown one)."""
        key = normalize_key(key)
        with self._lock:
            if key not in self._keys_down:
                self._keys_down[key] = bits = self._bits(key)
                self._pressed |= bits

    def release(self, key: str) -> None:
        key = normalize_key(key)
        with self._lock:
            if key in self._keys_down:
                self._released |= self._keys_down.pop(key)

    def set_held(self, keys: set[str]) -> None:
        """Hold exactly ``keys``: release the others, press the new ones."""
        wanted = {normalize_key(k) for k in keys}
        for key in self.held_keys() - wanted:
            self.release(key)
        for key in wanted:
            self.press(key)

    def hold_pad(self, buttons: int) -> None:
        """The controller's state now: the buttons it holds (a mask); what went down since the
        last call is pressed, what came up released."""
        with self._lock:
            self._pressed |= buttons & ~self._pad
            self._released |= self._pad & ~buttons
            self._pad = buttons

    def release_all(self) -> None:
        for key in self.held_keys():
            self.release(key)
        self.hold_pad(0)

    def move_mouse(self, dx: float) -> None:
        with self._lock:
            self._mouse_dx += dx

    def held_keys(self) -> set[str]:
        with self._lock:
            return set(self._keys_down)

    def drain(self) -> tuple[int, int, int, float]:
        """What the next tick sees: (held, pressed, released, mouse_dx); events are consumed."""
        with self._lock:
            held = self._pad
            for bits in self._keys_down.values():
                held |= bits
            out = (held, self._pressed, self._released, self._mouse_dx)
            self._pressed = self._released = 0
            self._mouse_dx = 0.0
            return out
