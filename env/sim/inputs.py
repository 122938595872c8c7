"""Key and mouse input on its way into the world: Siphon key names in, button masks out.

Input arrives whenever it likes (gRPC threads, the play window, a lock-step caller) while the
world advances in ticks. ``InputLatch`` collects it between ticks and hands the world, once per
tick, the buttons held now plus every press and release since the previous tick, so a tap that
begins and ends between two ticks is still seen. Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from env.keys import normalize_key
from env.sim.controls import Button


def key_to_button_map(keybinds: Mapping[str, str]) -> dict[str, int]:
    """Profile keybinds (action -> key) inverted to key -> button bits (a key may drive several)."""
    mapping: dict[str, int] = {}
    for action, key in keybinds.items():
        mapping[normalize_key(key)] = mapping.get(normalize_key(key), 0) | Button.from_name(action)
    return mapping


class InputLatch:
    def __init__(self, keybinds: Mapping[str, str]) -> None:
        self._buttons = key_to_button_map(keybinds)
        self._lock = threading.Lock()
        self._keys_down: set[str] = set()
        self._pressed = 0
        self._released = 0
        self._mouse_dx = 0.0

    def _bits(self, key: str) -> int:
        return self._buttons.get(key, 0)  # a valid key bound to nothing does nothing, as in a game

    def press(self, key: str) -> None:
        """Press ``key`` (a Siphon name; raises ``ValueError`` for an unknown one)."""
        key = normalize_key(key)
        with self._lock:
            if key not in self._keys_down:
                self._keys_down.add(key)
                self._pressed |= self._bits(key)

    def release(self, key: str) -> None:
        key = normalize_key(key)
        with self._lock:
            if key in self._keys_down:
                self._keys_down.discard(key)
                self._released |= self._bits(key)

    def set_held(self, keys: set[str]) -> None:
        """Hold exactly ``keys``: release the others, press the new ones."""
        wanted = {normalize_key(k) for k in keys}
        for key in self.held_keys() - wanted:
            self.release(key)
        for key in wanted:
            self.press(key)

    def release_all(self) -> None:
        for key in self.held_keys():
            self.release(key)

    def move_mouse(self, dx: float) -> None:
        with self._lock:
            self._mouse_dx += dx

    def held_keys(self) -> set[str]:
        with self._lock:
            return set(self._keys_down)

    def drain(self) -> tuple[int, int, int, float]:
        """What the next tick sees: (held, pressed, released, mouse_dx); events are consumed."""
        with self._lock:
            held = 0
            for key in self._keys_down:
                held |= self._bits(key)
            out = (held, self._pressed, self._released, self._mouse_dx)
            self._pressed = self._released = 0
            self._mouse_dx = 0.0
            return out
