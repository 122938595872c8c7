"""A game controller, read through SDL: Xbox and PlayStation pads on Windows (XInput, DirectInput,
HIDAPI), any pad SDL has a mapping for elsewhere.

SDL names every supported pad's controls alike (``env.controller.BUTTONS`` and ``AXES``, by
position), so a DualSense's cross is ``a`` as an Xbox pad's A is. The pad is read by polling its
state rather than from SDL's event queue: the queue is one per process, and both the recorder
and the simulator's play window may read the pad in one process; a human press lasts tens of
milliseconds, far longer than a poll. SDL is told to report the pad while another window (the
game's) has the focus, which is how a recorder runs.

A pad SDL has no mapping for (an unknown joystick) cannot be named control by control: it is
reported, with how to add a mapping, and not read. Only the first pad is read; a second is
reported once.

pysdl2 finds SDL's own library in pysdl2-dll (a wheel on Windows, macOS and Linux).
"""

from __future__ import annotations

import ctypes
import logging
import os
from dataclasses import dataclass, field

import numpy as np

from env.common.errors import SetupError
from env.controller import AXES, BUTTONS, TRIGGERS

log = logging.getLogger(__name__)

AXIS_FULL = 32767
"""What SDL reports for an axis at full travel."""
MAPPING_HELP = (
    "set the environment variable SDL_GAMECONTROLLERCONFIG to its mapping line before starting "
    "(SDL's community file gamecontrollerdb.txt has lines for most pads; a mapping tool such as "
    "SDL2 Gamepad Tool makes one), or use an Xbox or PlayStation pad, which SDL knows"
)


def load_sdl():
    """pysdl2's ``sdl2`` module over pysdl2-dll's SDL (silently: pysdl2 warns whenever it picks
    pysdl2-dll's library by itself), or ``SetupError`` saying what to install.

    SDL is told to leave SIGINT and SIGTERM alone: once started, it takes any of them still at
    its default and turns it into a quit event, which nothing here reads, so a process reading a
    pad lived through ``kill``. Ctrl-C and SIGTERM are the program's (``env.common.interrupts``)."""
    try:
        import sdl2dll

        os.environ.setdefault("PYSDL2_DLL_PATH", sdl2dll.get_dllpath())
        import sdl2
    except ImportError as e:
        raise SetupError(
            f"reading a game controller needs pysdl2 and pysdl2-dll ({e}): pip install pysdl2 pysdl2-dll"
        ) from None
    sdl2.SDL_SetHint(sdl2.SDL_HINT_NO_SIGNAL_HANDLERS, b"1")
    return sdl2


@dataclass(frozen=True)
class PadState:
    """One reading of a pad: its buttons down and its axes' positions."""

    buttons: np.ndarray = field(default_factory=lambda: np.zeros(len(BUTTONS), bool))
    axes: np.ndarray = field(default_factory=lambda: np.zeros(len(AXES), np.float32))


@dataclass(frozen=True)
class PadNotice:
    """Something about the pads worth a line: ``connected``, ``unplugged``, ``second`` (a pad
    beside the one read, not read) or ``unmapped`` (SDL cannot name its controls)."""

    kind: str
    name: str
    guid: str = ""
    heard: str = ""  # ``second``: the pad that is read


class Gamepad:
    """The first game controller attached, by polling. ``read()`` is SDL work: call it from one
    thread, the one that made the ``Gamepad``."""

    def __init__(self) -> None:
        self.sdl = sdl = load_sdl()
        sdl.SDL_SetHint(sdl.SDL_HINT_JOYSTICK_ALLOW_BACKGROUND_EVENTS, b"1")
        if sdl.SDL_InitSubSystem(sdl.SDL_INIT_GAMECONTROLLER) != 0:
            raise SetupError(f"SDL could not start its game-controller support: {sdl.SDL_GetError().decode()}")
        # read by polling (see the module docstring): SDL queues no controller events for us
        sdl.SDL_GameControllerEventState(sdl.SDL_IGNORE)
        self._pad = None
        self.name = ""
        self._count = -1  # joysticks attached at the last look
        self._told: set[tuple[str, str]] = set()  # (kind, guid) already said
        self._buttons = np.zeros(len(BUTTONS), bool)
        self._axes = np.zeros(len(AXES), np.float32)
        self._triggers = np.array([a in TRIGGERS for a in AXES])

    def read(self) -> tuple[PadState | None, list[PadNotice]]:
        """The pad's state now (None while none is attached), and what changed among the pads."""
        sdl = self.sdl
        sdl.SDL_GameControllerUpdate()
        notices: list[PadNotice] = []
        if self._pad is not None and not sdl.SDL_GameControllerGetAttached(self._pad):
            notices.append(PadNotice("unplugged", self.name))
            sdl.SDL_GameControllerClose(self._pad)
            self._pad, self.name = None, ""
        count = sdl.SDL_NumJoysticks()
        if self._pad is None or count != self._count:
            self._count = count
            self._scan(count, notices)
        if self._pad is None:
            return None, notices
        for i in range(len(BUTTONS)):
            self._buttons[i] = sdl.SDL_GameControllerGetButton(self._pad, i)
        for i in range(len(AXES)):
            self._axes[i] = sdl.SDL_GameControllerGetAxis(self._pad, i)
        axes = np.clip(self._axes / AXIS_FULL, -1.0, 1.0)
        axes[self._triggers] = np.maximum(axes[self._triggers], 0.0)
        return PadState(self._buttons.copy(), axes.astype(np.float32)), notices

    def _scan(self, count: int, notices: list[PadNotice]) -> None:
        """Open the first game controller there is, unless one is open; say once of every other
        pad what it is."""
        sdl = self.sdl
        heard = None if self._pad is None else sdl.SDL_JoystickInstanceID(sdl.SDL_GameControllerGetJoystick(self._pad))
        for index in range(count):
            name = (sdl.SDL_JoystickNameForIndex(index) or b"a pad").decode(errors="replace")
            guid = self._guid(index)
            if not sdl.SDL_IsGameController(index):
                self._tell(notices, PadNotice("unmapped", name, guid))
            elif self._pad is None:
                pad = sdl.SDL_GameControllerOpen(index)
                if pad:
                    self._pad, self.name = pad, name
                    heard = sdl.SDL_JoystickGetDeviceInstanceID(index)
                    notices.append(PadNotice("connected", name, guid))
            elif sdl.SDL_JoystickGetDeviceInstanceID(index) != heard:
                self._tell(notices, PadNotice("second", name, guid, self.name))

    def _tell(self, notices: list[PadNotice], notice: PadNotice) -> None:
        if (notice.kind, notice.guid) not in self._told:
            self._told.add((notice.kind, notice.guid))
            notices.append(notice)

    def _guid(self, index: int) -> str:
        buffer = ctypes.create_string_buffer(33)
        self.sdl.SDL_JoystickGetGUIDString(self.sdl.SDL_JoystickGetDeviceGUID(index), buffer, len(buffer))
        return buffer.value.decode()

    def close(self) -> None:
        if self._pad is not None:
            self.sdl.SDL_GameControllerClose(self._pad)
            self._pad = None
        self.sdl.SDL_QuitSubSystem(self.sdl.SDL_INIT_GAMECONTROLLER)


def describe(notice: PadNotice) -> str:
    """A notice in words, for a log line."""
    if notice.kind == "unmapped":
        return f"the controller {notice.name!r} (GUID {notice.guid}) is not heard: SDL has no mapping for it; {MAPPING_HELP}"
    if notice.kind == "second":
        return f"two controllers: {notice.heard!r} is heard (the first), {notice.name!r} is not"
    return f"controller {notice.name!r} {notice.kind}"
