"""A person at a live game's keys while a policy plays it through the env (fine-tuning's
``interventions: person``): they take over with any bound key or the controller, as in the
pilot (``capture.takeover.Takeover``, the same quiet time to hand control back), and each env
step they have is labelled with what they played in it, as the dataset builder labels a
recording (``capture.labels``), so that the step joins the demonstrations.

It is the env's ``SharedKeys`` (``EldenRingEnv.share_keys``): asked at each step's start whether
the person has control (the env then presses nothing), and at its end what they played. The
keyboard and mouse are heard through pynput and a controller through SDL, on the machine the
learner runs on: the gaming PC, where the person sits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from env.actions import ActionTable

from capture.drivers import Listening
from capture.inputs import InputLog
from capture.labels import HeardActions, StepLabeler, step_inputs
from capture.takeover import Takeover

SLICES = 6
"""Slices each step is cut into to label it (``capture.labels.step_inputs``): about a recording's
samples in one of its steps (30 per second, 200 ms a step)."""


class PersonAtTheKeys:
    """The person's input for one env (``actions``: its action table), their control, and each
    of their steps' action. ``listen=False`` hears nothing by itself: input is fed to ``sink``
    (a test's, or another listener's)."""

    def __init__(
        self,
        actions: ActionTable,
        quiet_s: float,
        clock: Callable[[], float] = time.monotonic,
        listen: bool = True,
    ) -> None:
        profile = actions.profile
        self.clock = clock
        self.inputs = InputLog(profile.bound_keys, clock, layout=profile.controller)
        self.sink = Takeover(self.inputs, quiet_s, clock)
        self.heard = HeardActions(profile, self.inputs.key_names)
        self.labeler = StepLabeler(actions)
        self.listening = Listening(self.sink, hotkeys={}) if listen else None
        self._step_start = clock()
        self._held = np.zeros(len(self.inputs.key_names), bool)

    def takes_over(self) -> bool:
        """Whether the person has control of the step starting now; what they did before it is
        not this step's."""
        self._step_start = self.clock()
        self._held = self.inputs.drain().held
        return self.sink.in_control(self._step_start)

    def played(self) -> int | np.ndarray:
        """The action the person played since ``takes_over``: their keys over the step's slices,
        their controller as it is at the step's end (the last slice)."""
        window = self.inputs.drain()
        end = self.clock()
        held, pressed = self.heard.from_keys(
            *step_inputs(window.events, self._held, np.array([self._step_start, end]), SLICES)
        )
        no_keys = np.zeros_like(window.held)
        pad_held, pad_pressed = self.heard.from_samples([replace(window, held=no_keys, pressed=no_keys)])
        held[-1] |= pad_held[0]
        pressed[-1] |= pad_pressed[0]
        self._held = window.held
        return self.labeler.label(held, pressed)

    def close(self) -> None:
        if self.listening is not None:
            self.listening.stop()
