"""A virtual game controller that SDL reports like a real one, for a scripted player.

SDL's virtual joystick (``SDL_JoystickAttachVirtualEx``, as a game controller with an Xbox 360
pad's identity) is seen by everything in this process that reads pads through SDL: the
recorder's controller listener and the play window read it exactly as they read a pad plugged
in. It exists in this process only (SDL keeps it in memory; without ``/dev/uinput`` no pad can
be made for the whole machine), so a scripted player presses it from a thread of the program
that records or plays.
"""

from __future__ import annotations

import ctypes

from env.common.errors import SetupError
from env.controller import AXES, BUTTONS, TRIGGERS
from env.gamepad import AXIS_FULL, load_sdl

XBOX_360 = (0x045E, 0x028E)
"""USB vendor and product of Microsoft's Xbox 360 pad: the identity the virtual pad takes."""
PHYSICAL_BUTTONS = BUTTONS.index("dpright") + 1
"""The buttons of an Xbox pad (a ... dpright): SDL's virtual pad maps them in SDL's order."""


class VirtualPad:
    """A pad attached for as long as it is open (``detach`` is unplugging it). ``mapped=False``
    attaches a plain joystick SDL has no game-controller mapping for (an unknown pad)."""

    def __init__(self, name: str = "Xbox 360 Controller", mapped: bool = True) -> None:
        self.sdl = sdl = load_sdl()
        if sdl.SDL_InitSubSystem(sdl.SDL_INIT_GAMECONTROLLER) != 0:
            raise SetupError(f"SDL could not start its game-controller support: {sdl.SDL_GetError().decode()}")
        desc = sdl.SDL_VirtualJoystickDesc()
        desc.version = sdl.SDL_VIRTUAL_JOYSTICK_DESC_VERSION
        desc.type = sdl.SDL_JOYSTICK_TYPE_GAMECONTROLLER if mapped else sdl.SDL_JOYSTICK_TYPE_UNKNOWN
        desc.naxes, desc.nbuttons = len(AXES), PHYSICAL_BUTTONS
        desc.vendor_id, desc.product_id = XBOX_360 if mapped else (0x1234, 0x5678)
        desc.name = name.encode()
        self._desc = desc  # SDL keeps a pointer to the name
        index = sdl.SDL_JoystickAttachVirtualEx(ctypes.byref(desc))
        if index < 0:
            raise SetupError(f"SDL could not attach a virtual pad: {sdl.SDL_GetError().decode()}")
        self._instance = sdl.SDL_JoystickGetDeviceInstanceID(index)
        self._joystick = sdl.SDL_JoystickOpen(index)
        for trigger in TRIGGERS:  # a trigger at rest is the axis's lowest value
            self.axis(trigger, 0.0)

    def button(self, name: str, down: bool) -> None:
        """Press or release ``name`` (``env.controller.BUTTONS``: ``a``, ``b``, ``rightshoulder``...)."""
        self.sdl.SDL_JoystickSetVirtualButton(self._joystick, BUTTONS.index(name), int(down))

    def axis(self, name: str, value: float) -> None:
        """Move ``name`` (``leftx``, ``lefty``, ... ``righttrigger``) to ``value``: -1 to 1 for a
        stick (``lefty`` -1 is up), 0 to 1 for a trigger."""
        if name in TRIGGERS:
            raw = -32768 + round(min(max(value, 0.0), 1.0) * 65535)
        else:
            raw = round(min(max(value, -1.0), 1.0) * AXIS_FULL)
        self.sdl.SDL_JoystickSetVirtualAxis(self._joystick, AXES.index(name), raw)

    def detach(self) -> None:
        """Unplug it."""
        if self._joystick is not None:
            self.sdl.SDL_JoystickClose(self._joystick)
            self._joystick = None
            for index in range(self.sdl.SDL_NumJoysticks()):
                if self.sdl.SDL_JoystickGetDeviceInstanceID(index) == self._instance:
                    self.sdl.SDL_JoystickDetachVirtual(index)
                    break
            self.sdl.SDL_QuitSubSystem(self.sdl.SDL_INIT_GAMECONTROLLER)
