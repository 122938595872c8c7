"""Play the simulator yourself: a pygame window showing the served world, taking your keyboard.

Keys go through the same ``InputLatch`` as Siphon's input RPCs, so the window is just one more
input device of the "game process", and the server keeps serving while you play: this is what
the recorder listens to (through X11, via pynput) when it records human play.
"""

from __future__ import annotations

import logging
import threading

import cv2

from env.keys import PYGAME_NAMES, normalize_key
from env.sim.server import SimProcess

log = logging.getLogger(__name__)


def siphon_name(pygame_name: str) -> str | None:
    """pygame's key name ('w', 'left shift', 'f5') -> Siphon's ('W', 'LEFT_SHIFT', 'F5')."""
    if pygame_name in PYGAME_NAMES:
        return PYGAME_NAMES[pygame_name]
    try:
        return normalize_key(pygame_name)
    except ValueError:
        return None


def play(process: SimProcess, stop: threading.Event, title: str = "elden-il simulator", fps: int = 60) -> None:
    """Run the window in this (the main) thread until it is closed or ``stop`` is set."""
    import pygame

    pygame.display.init()  # only the display: no audio device needed (or present, headless)
    size = (process.renderer.width, process.renderer.height)
    screen = pygame.display.set_mode(size)
    pygame.display.set_caption(
        f"{title}: WASD move, Shift roll/sprint, P attack, L heavy, R heal, Space jump, B lock on, E fog wall"
    )
    clock = pygame.time.Clock()
    latch = process.latch
    try:
        while not stop.is_set():
            for event in pygame.event.get():
                if event.type == pygame.QUIT:
                    stop.set()
                elif event.type in (pygame.KEYDOWN, pygame.KEYUP):
                    name = siphon_name(pygame.key.name(event.key))
                    if name is not None:
                        (latch.press if event.type == pygame.KEYDOWN else latch.release)(name)
                elif event.type == pygame.MOUSEMOTION and event.rel[0]:
                    latch.move_mouse(event.rel[0])
            _, bgr = process.bgr_frame()
            rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            screen.blit(pygame.image.frombuffer(rgb.tobytes(), size, "RGB"), (0, 0))
            pygame.display.flip()
            clock.tick(fps)
    finally:
        latch.release_all()
        pygame.quit()
