"""``python -m elden_il.pilot``: a trained policy plays while the recorder records, and a person
may take over at any step: a policy's fights with a person's corrections, for the dataset.

The recorder (``capture.record``) records whoever plays; this command hands it ``PolicyDriver``
(``record(settings, make_driver=...)``). The policy plays, the person watches with their hands
on the keys and takes over with any bound key (``capture.takeover``); every sample they control
is marked as an intervention. On the simulator the scripted human can stand in for the person:
pressing real keys on the display that the recorder hears as a person's, or, lock-step
in-process, sending them straight to the game.

At each env step (``DecisionClock``) the driver builds the observation the env would give the
policy, with the env's own ``ObservationBuilder`` (the policy's saved ``EnvConfig``: its frame
preprocessing, stack and action history), from the sample's game state and full-size frame,
asks the policy for an action, and sends it as keys (``KeyDriver``), logged like the autopilot's.
The action pushed into the observation's history is the one the dataset builder will label
for the step that just ended (``capture.labels`` over its samples), whoever played it, so the
policy sees what it would see in the env and the dataset what the policy saw.

While the person has control the driver still watches and decides (so a scripted human can
compare) but sends nothing, and lets go of any key it held.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from env.common.cli import add_flags, flag, from_flags, run_command
from env.common.fields import check_fields, checked, number
from env.game import Game, GameState
from env.profile import load_profile

from capture.drivers import DecisionClock, Driver, Hotkeys, KeyDriver, Listening, MakeDriver, RecordError, need_display
from capture.episode_writer import Sample
from capture.inputs import InputLog
from capture.labels import HeardActions, StepLabeler
from capture.record import WHO_PLAYS, Console, RecordSettings, build_parser, record
from capture.takeover import DEFAULT_QUIET_S, PynputKeyboard, ScriptedHuman, Takeover

from elden_il.policies.policy import LoadedPolicy, load_policy
from elden_il.policies.torch_threads import one_torch_thread

EXAMPLES = """
examples:
  # your BC policy plays the simulator in its window; take over with any bound key (F8 quits)
  python -m env.sim --window &
  python -m elden_il.pilot --policy datasets/models/bc --max-episodes 5

  # the same with the simulator's scripted human correcting, lock-step in-process
  python -m elden_il.pilot --backend sim --policy datasets/models/bc --scripted-human --max-episodes 5

  # the real game, on the gaming PC with the Siphon server running and Margit locked on
  python -m elden_il.pilot --profile eldenring_margit --policy datasets/models/finetuned

every other flag is the recorder's (python -m capture.record --help), hotkeys included
"""


@dataclass(frozen=True)
class PilotSettings:
    """A policy at the keys of a recording: the recording's settings and who may correct it."""

    policy: Path = field(
        metadata=flag(
            "the trained policy that plays (its folder, e.g. datasets/models/bc); press any bound key to take "
            "over: those samples are marked as interventions",
            type=Path,
            required=True,
        )
    )
    record: RecordSettings = field(default_factory=RecordSettings)
    takeover_quiet: float = checked(
        DEFAULT_QUIET_S, number(0, 60), "seconds with no bound key held before the policy plays again"
    )
    scripted_human: bool = field(
        default=False,
        metadata=flag(
            "simulator only: a scripted person takes over when the policy's choice differs from the scripted "
            "expert's while a boss attack winds up (real key events on the display, or in-process with --backend sim)"
        ),
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.record.backend == "sim" and not self.scripted_human:
            raise RecordError(
                "--backend sim runs lock-step, where nobody can take over: add --scripted-human, or play the "
                "simulator in its window (python -m env.sim --window) and let the policy play that"
            )


def pilot(settings: PilotSettings, status: bool = False) -> list[Path]:
    """Record the policy's fights as ``settings`` say (``capture.record.record``): the episodes saved."""
    driver = policy_driver(settings.policy, settings.takeover_quiet, settings.scripted_human)
    return record(settings.record, status, make_driver=driver)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(
        "python -m elden_il.pilot",
        " ".join(__doc__.split(": ", 1)[1].split("\n\n")[0].split()),
        EXAMPLES,
        leave_out=WHO_PLAYS,
    )
    add_flags(parser.add_argument_group("the policy at the keys"), PilotSettings)
    args = parser.parse_args(argv)
    console = from_flags(Console, args)
    logging.basicConfig(level=console.log_level, format="%(asctime)s %(levelname)s %(message)s")

    def work() -> None:
        settings = from_flags(PilotSettings, args, record=RecordSettings.from_args(args))
        pilot(settings, status=console.status)

    return run_command(work)


def policy_driver(path: Path, quiet_s: float, scripted_human: bool) -> MakeDriver:
    """Load the policy at ``path`` now, before any game starts (a missing or broken policy is
    one line, with nothing started), and return what makes its driver once the game is up."""
    loaded = load_policy(path, device="cpu")  # the one loader: BC's policy and the fine-tuned one alike

    def make(game: Game, inputs: InputLog, hotkeys: Hotkeys) -> PolicyDriver:
        return PolicyDriver(game, inputs, loaded, quiet_s, scripted_human, hotkeys)

    return make


class PolicyDriver(Driver):
    source = "policy"

    def __init__(
        self, game: Game, inputs: InputLog, loaded: LoadedPolicy, quiet_s: float, scripted_human: bool, hotkeys: Hotkeys
    ) -> None:
        config = loaded.config
        profile = game.profile
        if load_profile(config.profile).name != profile.name:
            raise RecordError(
                f"--policy {loaded.path} was trained for profile {config.profile!r}, "
                f"not {profile.name!r}: pass --profile {config.profile}"
            )
        if scripted_human and "SimSeed" not in profile.siphon.attributes:
            raise RecordError(
                f"--scripted-human knows the simulator's moves only, not profile {profile.name!r}'s: "
                "record against the simulator (--profile sim_margit)"
            )
        self.loaded = loaded
        self.config = config
        self.takeover = Takeover(inputs, quiet_s, game.now)
        self.clock = DecisionClock(config.timestep_ms / 1000.0)
        self.keys = KeyDriver(game, inputs, config.tap_ms)
        self.actions = config.actions(profile)
        self.builder = config.observation_builder(self.actions)
        self.heard = HeardActions(profile, inputs.key_names)
        self.labeler = StepLabeler(self.actions)
        # Lock-step, the scripted human's keys go straight to the game; in real time they are
        # real key events on the display, heard by the listener as a person's would be.
        lock_step = scripted_human and not game.realtime
        self.human = self._scripted_human(game, lock_step) if scripted_human else None
        self.listening = None if lock_step else Listening(self.takeover, hotkeys)
        # One observation at a time (elden_il.policies.torch_threads); put back by ``close``
        self._one_thread = ExitStack()
        self._one_thread.enter_context(one_torch_thread())
        self._step: list[Sample] = []  # the samples since the last decision
        self._started = False
        self.decisions = 0

    def _scripted_human(self, game: Game, lock_step: bool) -> ScriptedHuman:
        if lock_step:
            keyboard = KeyDriver(game, self.takeover, self.config.tap_ms)
        else:
            need_display("pressing the scripted human's keys")
            keyboard = PynputKeyboard()
        return ScriptedHuman(keyboard, self.actions, self.config.timestep_ms / 1000.0)

    def mark(self, sample: Sample) -> Sample:
        return replace(sample, intervention=self.takeover.in_control(sample.t))

    def new_fight(self) -> None:
        self.clock.reset()
        self._step = []
        self._started = False
        if self.human is not None:
            self.human.new_fight()

    def on_sample(
        self, sample: Sample, state: GameState, frame: np.ndarray, events: np.ndarray, recording: bool
    ) -> None:
        if self.listening is not None:
            self.listening.heard(sample, state, events)
        if recording:
            self.act(sample, state, frame)

    def act(self, sample: Sample, state: GameState, frame: np.ndarray) -> object:
        """Feed every sample of a fight with its state and full-size frame; returns the policy's
        action when a decision fell due (sent unless the person has control), else None."""
        self._step.append(sample)
        if self.takeover.in_control(sample.t) and self.keys.holding:
            self.keys.release(keep_logged=self.takeover.held())
        if not self.clock.due(state.timestamp):
            return None
        obs = self._observe(state, frame)
        action = self.loaded.act([obs])[0]
        self.decisions += 1
        if self.human is not None:
            self.human.decide(state, action)
        if not self.takeover.in_control(sample.t):
            self.keys.play(self.actions.command(action))
        return action

    def _observe(self, state: GameState, frame: np.ndarray) -> dict:
        if not self._started:
            self._started = True
            self._step = []
            return self.builder.reset(state, frame)
        # the step's samples: those after the previous decision, up to this one (as the dataset's)
        step, self._step = self._step, []
        return self.builder.step(state, frame, self.labeler.label(*self.heard.from_samples(step)))

    def release(self) -> None:
        if self.human is not None:
            self.human.release()
        self.keys.release(keep_logged=self.takeover.held())

    def close(self) -> None:
        self.release()
        if self.listening is not None:
            self.listening.stop()
        self._one_thread.close()


if __name__ == "__main__":
    raise SystemExit(main())
