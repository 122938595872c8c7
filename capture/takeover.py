"""Taking control from a policy (HG-DAgger style corrections).

While a policy plays (``python -m elden_il.pilot --policy``), the person watches with their
hands on the keys or the controller. ``Takeover`` stands between the listeners and the
``InputLog``: the moment a bound key or a controller button goes down (or a stick is pushed),
control is the person's, the policy stops sending keys, and it stays theirs until nothing has
been held for ``quiet_s`` (they let go for a moment). Every
sample taken meanwhile is marked as an intervention (``Sample.intervention``), so training can
tell the person's corrections from the policy's own play.

``ScriptedHuman`` stands in for the person on the simulator: it watches the policy's choice
and takes over when that choice differs from the scripted expert's while a boss attack is
winding up, playing the expert's actions until the attack is over. It presses keys through a
``Keyboard``: ``KeyDriver`` in lock-step (the keys go to the game and, as the person's, into
``Takeover``), or ``PynputKeyboard``, real key events on an X display that the recorder's
listener hears like a person's.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Protocol

from env.actions import ActionTable, KeyCommand
from env.game import GameState
from env.sim.expert import ScriptedExpert

from capture.inputs import InputLog
from capture.listener import SPECIAL_KEYS

log = logging.getLogger(__name__)

PAD_AT_REST = 0.5
"""A stick or trigger pushed less than this share of its travel is a resting thumb, not a
correction: well past any dead zone, so a worn stick never takes control by itself."""
DEFAULT_QUIET_S = 0.6
"""How long the person must let go of every bound key before the policy plays again: a few env
steps, so that a pause between two dodges does not hand control back."""


class Takeover:
    """The listener's ``InputLog`` interface, noting who is in control (thread-safe: keys arrive
    on the listener's thread, control is asked for on the sampling loop's)."""

    def __init__(self, inputs: InputLog, quiet_s: float, clock: Callable[[], float]) -> None:
        self.inputs = inputs
        self.quiet_s = quiet_s
        self.clock = clock
        self._bound = frozenset(inputs.key_names)
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._since: float | None = None  # when the person took control; None: the policy has it
        self._released_at = float("-inf")

    # ----------------------------------------------------------------- the InputLog interface
    def key(self, name: str, down: bool, t: float | None = None) -> None:
        if name in self._bound:
            t = self.clock() if t is None else t
            self._touch(name, down, t)
        self.inputs.key(name, down, t)

    def _touch(self, name: str, down: bool, t: float) -> None:
        """A control the person holds (a key, a pad button, a pushed stick) went down or up."""
        with self._lock:
            if down:
                self._held.add(name)
                if self._since is None:
                    self._since = t
            elif name in self._held:
                self._held.discard(name)
                if not self._held:
                    self._released_at = t

    def tap(self, names: tuple[str, ...], t: float | None = None) -> None:
        t = self.clock() if t is None else t
        for name in names:
            self.key(name, True, t)
            self.key(name, False, t)

    def mouse_move(self, dx: float, dy: float, t: float | None = None) -> None:
        self.inputs.mouse_move(dx, dy, t)

    # ------------------------------------------------------ the controller (PadSink interface)
    @property
    def controller(self) -> str:
        return self.inputs.controller

    @controller.setter
    def controller(self, name: str) -> None:
        self.inputs.controller = name

    def pad_button(self, index: int, down: bool, t: float | None = None) -> None:
        """A controller button is one more bound key: pressing it takes control."""
        t = self.clock() if t is None else t
        self._touch(f"pad:{index}", down, t)
        self.inputs.pad_button(index, down, t)

    def pad_axis(self, index: int, value: float, t: float | None = None) -> None:
        """A stick or trigger pushed past its dead zone takes control, as a key does."""
        t = self.clock() if t is None else t
        self._touch(f"axis:{index}", abs(value) > PAD_AT_REST, t)
        self.inputs.pad_axis(index, value, t)

    def pad_gone(self, t: float | None = None) -> None:
        t = self.clock() if t is None else t
        with self._lock:
            gone = {name for name in self._held if name.startswith(("pad:", "axis:"))}
        for name in gone:
            self._touch(name, False, t)
        self.inputs.pad_gone(t)

    # -------------------------------------------------------------------------------- control
    def in_control(self, t: float) -> bool:
        """Whether the person has control at time ``t`` (times asked for only ever increase):
        from their first bound key press until ``quiet_s`` after they last let go of every key."""
        with self._lock:
            if self._since is None or t < self._since:
                return False
            if self._held or t < self._released_at + self.quiet_s:
                return True
            self._since = None  # they let go long enough: the policy plays again
            return False

    def held(self) -> frozenset[str]:
        """The bound keys the person holds now (their pad's controls left out: no key to release)."""
        with self._lock:
            return frozenset(name for name in self._held if name in self._bound)


class Keyboard(Protocol):
    """How the scripted human presses keys: make the keys of ``command`` the ones pressed."""

    def play(self, command: KeyCommand) -> None: ...

    def release(self) -> None: ...


class ScriptedHuman:
    """The person, scripted for the simulator. Each decision it is shown the state and the
    policy's choice; it takes over (plays the expert's action) when the policy's choice differs
    from the expert's while a boss attack is winding up and the expert's action presses a key
    (taking over is pressing keys), keeps playing the expert while the
    attack lasts, and then lets go of the keys (``Takeover`` hands control back after its quiet
    time). Call ``new_fight`` at each fight's start and ``decide`` at every decision."""

    def __init__(self, keyboard: Keyboard, table: ActionTable, step_seconds: float) -> None:
        self.keyboard = keyboard
        self.table = ActionTable(table.profile, "discrete")  # the expert names discrete actions
        self.policy_table = table
        self.expert = ScriptedExpert(step_seconds)
        self.playing = False

    def new_fight(self) -> None:
        self.expert.reset()
        self.release()

    def decide(self, state: GameState, policy_action: object) -> None:
        taken = self.takes_over(state, policy_action)
        if taken is not None:
            self.keyboard.play(self.table.command(self.table.index(taken)))

    def takes_over(self, state: GameState, policy_action: object) -> str | None:
        """The expert's action (a discrete action's name) where the person plays this decision,
        or None where they leave it to the policy (and let go of any keys they held)."""
        name = self.expert.act(state)
        expert = self.table.command(self.table.index(name))
        # a person takes over by pressing keys: a correction to "do nothing" cannot be made
        presses = bool(expert.hold or expert.tap)
        if self.expert.attack_coming and (self.playing or (presses and self._differs(expert, policy_action))):
            self.playing = True
            return name
        self.release()
        return None

    def release(self) -> None:
        if self.playing:
            self.keyboard.release()
            self.playing = False

    def _differs(self, expert: KeyCommand, policy_action: object) -> bool:
        policy = self.policy_table.command(policy_action)
        return (policy.hold, policy.tap) != (expert.hold, expert.tap)


PYNPUT_SPECIAL = {siphon: pynput for pynput, siphon in reversed(SPECIAL_KEYS.items())}
"""Siphon name -> pynput ``Key`` member, for the keys that have one (the listener's table read
backwards, so that where two members share a name the first wins: ``shift`` for LEFT_SHIFT)."""


def pynput_key(name: str) -> object:
    """The pynput key that presses the key Siphon calls ``name``, as a keyboard would.

    On X every key goes out as a key code, never as a character: pynput's X controller sends a
    character with XSendEvent to the focused window alone, where a listener in another process
    (the recorder) never hears it; a key code goes through XTest, like a real keyboard. A
    letter's or digit's key code there is its Latin-1 keysym, the lower-case character's code
    point."""
    from pynput.keyboard import Key, KeyCode

    special = PYNPUT_SPECIAL.get(name)
    if special is not None:
        return getattr(Key, special)
    char = name.lower()
    if len(char) != 1 or not char.isalnum():
        known = ", ".join(sorted(PYNPUT_SPECIAL))
        raise ValueError(f"the scripted keyboard presses letters, digits and {known}, not {name!r}")
    return KeyCode.from_vk(ord(char)) if sys.platform.startswith("linux") else KeyCode.from_char(char)


class PynputKeyboard:
    """Real key events on the display (X11's XTest through pynput): the recorder's listener
    hears them as it hears a person, and the focused game window receives them."""

    def __init__(self) -> None:
        from pynput.keyboard import Controller  # needs DISPLAY: imported only when pressing

        self._controller = Controller()
        self.holding: frozenset[str] = frozenset()

    def play(self, command: KeyCommand) -> None:
        for name in self.holding - command.hold:
            self._controller.release(pynput_key(name))
        for name in command.hold - self.holding:
            log.debug("scripted keyboard: press %s", name)
            self._controller.press(pynput_key(name))
        for name in command.tap:
            log.debug("scripted keyboard: press %s", name)
            self._controller.press(pynput_key(name))
            self._controller.release(pynput_key(name))
        self.holding = command.hold

    def release(self) -> None:
        self.play(KeyCommand(frozenset()))
