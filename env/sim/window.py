"""Play the simulator yourself: a pygame window showing the served world, taking your keyboard,
mouse and game controller.

Keys and mouse buttons go through the same ``InputLatch`` as Siphon's input RPCs, so the window
is just one more input device of the "game process", and the server keeps serving while you
play: this is what the recorder listens to (through X11, via pynput) when it records human play.
A game controller is read as the game reads one (``env.gamepad``), through the profile's
controller layout: the stick moves, the buttons are the layout's actions.
"""

from __future__ import annotations

import logging
import os
import threading

import cv2

from env.controller import ControllerLayout
from env.gamepad import Gamepad, describe
from env.keys import PYGAME_NAMES, normalize_key
from env.profile import Profile
from env.sim.buttons import InputLatch
from env.sim.controls import Button
from env.sim.server import SimProcess

log = logging.getLogger(__name__)

MOUSE_BUTTONS = {1: "LEFT", 2: "MIDDLE", 3: "RIGHT"}
"""pygame's mouse button numbers -> Siphon's names (4 and 5 are the wheel)."""


def siphon_name(pygame_name: str) -> str | None:
    """pygame's key name ('w', 'left shift', 'f5') -> Siphon's ('W', 'LEFT_SHIFT', 'F5')."""
    if pygame_name in PYGAME_NAMES:
        return PYGAME_NAMES[pygame_name]
    try:
        return normalize_key(pygame_name)
    except ValueError:
        return None


class PadFollower:
    """A game controller held beside the keyboard: each ``follow`` reads it and holds, on the
    latch, the buttons of the actions the layout says it does."""

    def __init__(self, latch: InputLatch, layout: ControllerLayout) -> None:
        self.latch = latch
        self.layout = layout
        self.gamepad = Gamepad()

    def follow(self) -> None:
        state, notices = self.gamepad.read()
        for notice in notices:
            log.info(describe(notice))
        mask = 0
        if state is not None:
            for action, held in self.layout.held(state.buttons, state.axes).items():
                if held[0]:
                    mask |= Button.from_name(action)
        self.latch.hold_pad(mask)

    def close(self) -> None:
        self.latch.hold_pad(0)
        self.gamepad.close()


def caption(profile: Profile) -> str:
    """The window's title: the profile's keys, as a player reads them."""
    keys = ", ".join(f"{action} {'+'.join(binding)}" for action, binding in profile.keybinds.items())
    return f"elden-il simulator ({profile.name}): {keys}" + (", or a controller" if profile.controller else "")


def play(process: SimProcess, stop: threading.Event, profile: Profile, fps: int = 60) -> None:
    """Run the window in this (the main) thread until it is closed or ``stop`` is set."""
    os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")  # Ctrl-C and SIGTERM stay the server's (env.gamepad)
    import pygame

    pygame.display.init()  # only the display: no audio device needed (or present, headless)
    size = (process.renderer.width, process.renderer.height)
    screen = pygame.display.set_mode(size)
    pygame.display.set_caption(caption(profile))
    clock = pygame.time.Clock()
    latch = process.latch
    pad = PadFollower(latch, profile.controller) if profile.controller is not None else None
    try:
        while not stop.is_set():
            for event in pygame.event.get():
                if event.type == pygame.QUIT:
                    stop.set()
                elif event.type in (pygame.KEYDOWN, pygame.KEYUP):
                    name = siphon_name(pygame.key.name(event.key))
                    if name is not None:
                        (latch.press if event.type == pygame.KEYDOWN else latch.release)(name)
                elif event.type in (pygame.MOUSEBUTTONDOWN, pygame.MOUSEBUTTONUP) and event.button in MOUSE_BUTTONS:
                    (latch.press if event.type == pygame.MOUSEBUTTONDOWN else latch.release)(
                        MOUSE_BUTTONS[event.button]
                    )
                elif event.type == pygame.MOUSEMOTION and event.rel[0]:
                    latch.move_mouse(event.rel[0])
            if pad is not None:
                pad.follow()
            _, bgr = process.bgr_frame()
            rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            screen.blit(pygame.image.frombuffer(rgb.tobytes(), size, "RGB"), (0, 0))
            pygame.display.flip()
            clock.tick(fps)
    finally:
        if pad is not None:
            pad.close()
        latch.release_all()
        pygame.quit()
