"""``python -m capture.record``: record boss fights while you play (or while the autopilot does).

Run it next to the game (the Siphon server on the gaming PC, or ``python -m env.sim --window``)
and fight. It samples frames, game memory and your keyboard and mouse on one clock, cuts the
stream into episodes at each fight's start and end, and writes each episode to its own HDF5
file and its picture, as captured, to a video beside it, one frame per sample (both durable
while they grow: a crash loses at most the last second). Training frames of any size and crop
are made from that video later (``capture.build_dataset``): nothing is recorded twice.

The recorder records whoever plays: a person, the autopilot, or a driver it is handed
(``record(settings, make_driver=...)``). A trained policy at the keys, with a person taking over,
is a command of the learning layer built on that: ``python -m elden_il.pilot``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from env.common.cli import (
    add_flags,
    command_parser,
    flag,
    from_flags,
    log_level_flag,
    output_folder,
    run_command,
    size_within,
)
from env.common.errors import GameError, Interrupted
from env.common.fields import MAX_FIGHTS, SEED, Rule, check_fields, checked, number, one_of, optional, whole
from env.common.interrupts import SIGNALS
from env.config import PICTURE_SIZE, EnvConfig
from env.factory import DEFAULT_HOST, make_game
from env.game import Unreadable
from env.keys import key_names
from env.profile import Profile, load_profile
from env.sim.players import PLAYERS

from capture.autopilot import Autopilot
from capture.drivers import MakeDriver, PersonDriver, RecordError, need_display
from capture.episode_cuts import FightTracker
from capture.episode_writer import DiskError, EpisodeMeta, EpisodeWriter, Sample, empty_discarded, set_aside
from capture.inputs import InputLog
from capture.sampler import Sampler, Taken
from capture.status import RecorderStatus
from capture.video import CODECS, DEFAULT_CODEC, codec

log = logging.getLogger("capture.record")

UNREADABLE_RETRY_S = 0.25
MASTER_SIZE = (256, 256)
"""The picture the in-process simulator is recorded at (a live game's is its window): large
enough for every training frame up to 256x256, small enough that drawing and encoding it keeps
the pipeline's demonstrations quick (BENCHMARKS.md, the episode's video)."""

KNOWN_CODEC = Rule(lambda v: isinstance(v, str) and v in CODECS, f"must be one of {', '.join(CODECS)}")
"""A name in ``CODECS`` as it is when a setting is checked, not when this module was imported."""

EXAMPLES = """
examples:
  # the simulator, played by you in its window, recorded at 30 Hz into datasets/raw/
  python -m env.sim --window &
  python -m capture.record --profile sim_margit

  # 20 demonstrations by the scripted expert against a simulator server, no human needed
  python -m env.sim &
  python -m capture.record --profile sim_margit --autopilot --max-episodes 20

  # the same, lock-step in-process (no server, no waiting: as fast as the simulator renders),
  # its picture kept at 512x512 and losslessly
  python -m capture.record --backend sim --autopilot --max-episodes 20 --master-size 512x512 --video-codec lossless

  # the real game: run this on the gaming PC itself (pynput hears the local keyboard), with the
  # Siphon server running and Margit locked on
  python -m capture.record --profile eldenring_margit

hotkeys (human recording; never recorded as actions):
  F5 start/stop an episode by hand   F6 discard the last episode (set aside in discarded/)   F8 quit
"""


@dataclass(frozen=True)
class RecordSettings:
    """Everything a recording session needs, as one value: what ``python -m capture.record``
    builds from its flags (each field's ``flag``: declared here, once) and the pipeline's
    ``demos`` stage builds from params.yaml.

    ``env`` is the env the recordings are for: its profile, and (for the autopilot) the timestep
    it decides at and how long it taps. Its frame size and crop are not recorded: each episode
    keeps its picture at ``master_size`` (in-process; None: the env's ``capture_size``, else
    ``MASTER_SIZE``) or at the live game's window size, and any frame is made from it later.
    """

    env: EnvConfig = field(default_factory=lambda: EnvConfig(profile="sim_margit"))
    backend: str = field(
        default="siphon",
        metadata=flag(
            "siphon: a Siphon server at --host (the game, or python -m env.sim) in real time; sim: the simulator "
            "in-process, lock-step (--autopilot)",
            choices=("siphon", "sim"),
        ),
    )
    host: str = field(default=DEFAULT_HOST, metadata=flag("Siphon server host:port"))
    rate: float = checked(30.0, number(0, 1000, above=True), "samples per second")
    master_size: tuple[int, int] | None = checked(
        None,
        optional(PICTURE_SIZE),
        f"--backend sim only: WxH the simulator's picture is drawn and kept at (default: {MASTER_SIZE[0]}x{MASTER_SIZE[1]}); "
        "a live game's is its window's. Datasets of any frame size and crop up to it are built from the recording later",
        type=size_within(PICTURE_SIZE),
    )
    video_codec: str = checked(
        DEFAULT_CODEC,
        KNOWN_CODEC,
        "how each episode's picture is kept: " + "; ".join(f"{c.name}: {c.about}" for c in CODECS.values()),
        choices=tuple(CODECS),
    )
    out: Path = field(default=Path("datasets/raw"), metadata=flag("episode folder", type=output_folder))
    max_episodes: int = checked(0, whole(0, MAX_FIGHTS), "stop after this many episodes (0: until quit)")
    max_episode_seconds: float = checked(300.0, number(0, above=True), "end an episode after this long")
    autopilot: bool = field(
        default=False, metadata=flag("let a player of the simulator play (--player); its keys are recorded")
    )
    player: str = checked(
        "expert",
        one_of(*PLAYERS),
        "with --autopilot: who plays (env/sim/players.py): "
        + "; ".join(f"{name}: {kind.words}" for name, kind in PLAYERS.items()),
        choices=tuple(PLAYERS),
    )
    controller: bool = field(
        default=True,
        metadata=flag(
            "hear a game controller beside the keyboard and mouse (the first one SDL reports: an Xbox or PlayStation "
            "pad, or any pad SDL has a mapping for), as the game takes both; --no-controller: keyboard and mouse only",
            action=argparse.BooleanOptionalAction,
        ),
    )
    manual: bool = field(default=False, metadata=flag("episodes start and stop only by hotkey, not from game memory"))
    restart: bool | None = field(
        default=None,
        metadata=flag(
            "restart the fight in place when recording starts and after each episode (the profile's reset writes and "
            "teleport; default: the profile's reset.when_recording, on for the simulator, off for the real game, where "
            "you walk back in yourself)",
            action=argparse.BooleanOptionalAction,
        ),
    )
    restart_delay: float = checked(1.0, number(0, 600), "seconds of game time to wait before restarting a fight")
    seed: int = checked(0, SEED, "simulator seed of the first fight (the next ones count up)")
    hotkeys: tuple[str, str, str] = field(
        default=("F5", "F6", "F8"),
        metadata=flag("start/stop, discard-last, quit keys (default: F5,F6,F8)", type=key_names(3)),
    )
    reproducible: bool = False
    """Name episodes by their order and fight seed (``00000-seed0_autopilot.h5``) and store no
    wall-clock time in them, instead of naming them by the time they start: in-process, the same
    settings then record byte-identical files (the pipeline's ``demos`` stage, tracked by DVC)."""

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RecordSettings:
        return from_flags(cls, args, env=from_flags(EnvConfig, args))


WHO_PLAYS = ("autopilot", "player")
"""The flags that say who plays: a command that brings its own player (``elden_il.pilot``) leaves
them out."""


@dataclass(frozen=True)
class Console:
    """What a recording command shows while it records: a live status display, and its log."""

    no_status: bool = field(default=False, metadata=flag("no live status display (logs only)"))
    log_level: str = log_level_flag()

    @property
    def status(self) -> bool:
        """The live display: asked for, and a terminal to show it on."""
        return not self.no_status and sys.stdout.isatty()


def build_parser(
    prog: str = "python -m capture.record",
    description: str = __doc__.split("\n\n")[1],
    epilog: str = EXAMPLES,
    leave_out: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    """The recorder's flags: its settings' and the recorded env's; a command built on the
    recorder adds its own to them, ``leave_out`` those that are its own business."""
    p = command_parser(
        prog,
        description,
        (RecordSettings, tuple(f.name for f in fields(RecordSettings) if f.name not in leave_out)),
        epilog=epilog,
    )
    add_flags(
        p.add_argument_group("the env the recordings are for"),
        EnvConfig,
        ("profile", "timestep_ms"),
        profile={"default": "sim_margit"},
        timestep_ms={"help": "the autopilot decides once per this much game time: the env's timestep"},
    )
    add_flags(p, Console)
    return p


def recorded_env(settings: RecordSettings) -> EnvConfig:
    """The env config the game is made from: in-process, one drawing the master picture."""
    master = settings.master_size
    if settings.backend != "sim":
        if master is not None:
            raise RecordError(
                f"--master-size {master[0]}x{master[1]}: a live game's picture is kept at its window's "
                "size; resize the game's window instead, or leave --master-size out"
            )
        return settings.env
    return settings.env.replace(capture_size=master or settings.env.capture_size or MASTER_SIZE)


def check_players(settings: RecordSettings) -> None:
    """The autopilot's player is named only when the autopilot plays."""
    if settings.player != "expert" and not settings.autopilot:
        raise RecordError(f"--player {settings.player} is who the autopilot is: add --autopilot")


def check_hotkeys(hotkeys: tuple[str, ...], profile: Profile) -> None:
    """Refuse hotkeys that are also game keys: the listener keeps hotkeys out of the recorded
    actions, so an attack bound to F5 would never be recorded, and pressing it would cut episodes."""
    bound = {key: action for action, binding in profile.keybinds.items() for key in binding}
    clashes = [f"{key} ({bound[key]})" for key in hotkeys if key in bound]
    if clashes:
        raise RecordError(
            f"--hotkeys {','.join(hotkeys)}: {', '.join(clashes)} also bound in profile {profile.name!r}; "
            f"choose keys the game does not use, e.g. --hotkeys F5,F6,F8"
        )


@dataclass
class Requests:
    """Hotkeys and signals arrive on other threads; the sampling loop acts on them."""

    toggle: threading.Event
    discard: threading.Event
    quit: threading.Event


def driver_maker(settings: RecordSettings) -> MakeDriver:
    """Who plays, as ``settings`` say (the autopilot, or the person), made once the game is up."""
    if settings.autopilot:
        return lambda game, inputs, hotkeys: Autopilot(game, inputs, settings.env, settings.player, settings.seed)
    return lambda game, inputs, hotkeys: PersonDriver(inputs, hotkeys, settings.controller)


class Recorder:
    """Samples the game, cuts the stream into episodes and writes them; one ``Driver`` plays:
    the one ``settings`` name, or the one ``make_driver`` makes (another way of playing while
    recording, with no change here). ``on_saved`` gets each episode's path once it is saved."""

    def __init__(
        self,
        settings: RecordSettings,
        make_driver: MakeDriver | None = None,
        on_saved: Callable[[Path], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_saved = on_saved
        check_players(settings)
        if not settings.autopilot:
            check_hotkeys(settings.hotkeys, load_profile(settings.env.profile))
        if settings.backend == "sim" and make_driver is None and not settings.autopilot:
            raise RecordError(
                "--backend sim runs lock-step with no human at the keys: add --autopilot, or play the "
                "simulator in its window (python -m env.sim --window) and record that"
            )
        env_config = recorded_env(settings)
        if make_driver is None and not settings.autopilot:  # before the game is connected to
            need_display("capture.record, hearing your keyboard,", ", or use --autopilot")
        self.codec = codec(settings.video_codec)  # before the game starts: an FFmpeg build without it says so
        make_driver = make_driver or driver_maker(settings)
        self.game = make_game(env_config, settings.backend, settings.host, seed=settings.seed)
        self.profile = self.game.profile
        self.restart = self.profile.restart_when_recording if settings.restart is None else settings.restart
        self.key_names = self.profile.bound_keys
        self.inputs = InputLog(self.key_names, clock=self.game.now, layout=self.profile.controller)
        self.sampler = Sampler(self.game, self.inputs, settings.rate)
        self.tracker = FightTracker(
            self.profile.boss_npc_id,
            profile=str(self.profile.directory / "profile.toml"),
            boss_npc_param_id=self.profile.boss_npc_param_id,
        )
        self.requests = Requests(threading.Event(), threading.Event(), threading.Event())
        self.writer: EpisodeWriter | None = None
        self._episode_t0 = 0.0
        self._told_start_waits = False  # F5 came while the game could not be read: said once
        self.saved: list[Path] = []
        self.started = 0  # episodes begun, discarded ones included: the next reproducible name
        self.fight_seed = settings.seed
        self.has_seed = settings.backend == "sim" or "SimSeed" in self.profile.siphon.attributes
        toggle, discard, quit_ = settings.hotkeys
        hotkeys = {toggle: self.requests.toggle.set, discard: self.requests.discard.set, quit_: self.requests.quit.set}
        try:
            self.driver = make_driver(self.game, self.inputs, hotkeys)
        except BaseException:
            self.sampler.close()
            self.game.close()
            raise

    # ------------------------------------------------------------------------------ episodes
    def _start_episode(self, first: Sample, window_size: tuple[int, int]) -> None:
        meta = EpisodeMeta(
            profile=self.profile.name,
            attribute_names=self.profile.attribute_names,
            key_names=self.key_names,
            sample_rate_hz=self.settings.rate,
            codec=self.codec,
            window_size=window_size,
            source=self.driver.source,
            sim_seed=self.fight_seed if self.has_seed else None,
            host=self.settings.host,
            controller=self.inputs.controller,
        )
        self.writer = EpisodeWriter(
            self.settings.out, meta, name=self._episode_name(), clock=self.game.now, lock_step=not self.game.realtime
        )
        self.started += 1
        # from the first sample's own time, not the game's clock now: under load the sampler runs
        # a few samples behind, and an episode counted from now ran long by that backlog
        self._episode_t0 = first.t
        self.sampler.count_from(first)
        self.driver.new_fight()
        log.info("episode started: %s", self.writer.path.name)

    def _episode_name(self) -> str | None:
        """A reproducible episode's name: zero-padded, so names sort in recording order (the
        order ``capture.build_dataset`` reads them in, as it reads time-stamped names); None:
        named by the wall-clock time it starts."""
        if not self.settings.reproducible:
            return None
        return f"{self.started:05d}-seed{self.fight_seed}" if self.has_seed else f"{self.started:05d}"

    def _finish_episode(self, outcome: str) -> None:
        """Save the episode in progress, unless it is shorter than one env step: such a fragment
        (a quit or a hotkey just after a start) is no demonstration, and is dropped."""
        writer, self.writer = self.writer, None  # a writer that fails to finish is not tried again
        if writer is None:
            return
        step_s = self.settings.env.timestep_ms / 1000.0
        if writer.duration_s + 1e-9 < step_s:  # the dataset builder's own test for a step
            self._drop(writer)
            log.info(
                "dropped a %.2f s fragment (%s): shorter than one %g ms env step, not a demonstration",
                writer.duration_s,
                outcome,
                self.settings.env.timestep_ms,
            )
            return
        stats = self.sampler.stats
        path = writer.finish(
            outcome,
            {
                "achieved_rate_hz": stats.achieved_rate_hz,
                "late_samples": stats.late,
                "dropped_samples": stats.dropped,
                "press_samples": stats.at_presses,
            },
        )
        self.driver.episode_over()
        self.saved.append(path)
        log.info("episode saved (%s): %s", outcome, path)
        if self.on_saved is not None:
            self.on_saved(path)
        empty_discarded(self.settings.out)  # a discard is undoable until the next episode is saved

    def _drop(self, writer: EpisodeWriter) -> None:
        """Delete an unfinished episode and its video."""
        writer.discard()
        self.driver.episode_over()

    def _restart_fight(self) -> None:
        self.fight_seed += 1
        self.game.wait_until(self.game.now() + self.settings.restart_delay)
        self.driver.release()
        self.game.reset_fight(self.fight_seed)
        self.sampler.restart_clock()

    # ---------------------------------------------------------------------------------- loop
    def run(self, status: RecorderStatus) -> None:
        args = self.settings
        if self.restart:
            self.game.reset_fight(self.fight_seed)
        self.sampler.restart_clock()
        try:
            while not self.requests.quit.is_set():
                taken = self._next_readable_sample()
                if taken is None:
                    break
                sample, state, frame, events = taken
                sample = self.driver.mark(sample)
                window_size = (frame.rgb.shape[1], frame.rgb.shape[0])
                if self._discard_if_asked():
                    continue  # the sample is of the fight given up, or from before a restart
                outcome = self._handle_requests(sample, window_size)
                if outcome is None and not args.manual:
                    event = self.tracker.update(state)
                    if event == "start":
                        self._start_episode(sample, window_size)
                    elif event is not None:
                        outcome = event
                if outcome is None:
                    # after the episode starts: the first decision falls on its first sample
                    self.driver.on_sample(sample, state, frame.rgb, events, recording=self.writer is not None)
                if self.writer is not None:
                    self.writer.append(sample)
                    self.writer.append_events(events)
                    if sample.t - self._episode_t0 >= args.max_episode_seconds:
                        outcome = "timeout"
                if outcome is not None and self.writer is not None:
                    self._finish_episode(outcome)
                    self.tracker.stop(until_new_fight=outcome == "stopped" and not self.restart)
                    if args.max_episodes and len(self.saved) >= args.max_episodes:
                        break
                    if self.restart:
                        self._restart_fight()
                status.update(
                    state,
                    len(self.saved),
                    self.writer is not None,
                    self.sampler.stats.samples,
                    self.sampler.stats.achieved_rate_hz,
                    self.sampler.stats.late,
                    self.sampler.stats.dropped,
                )
        except GameError as e:
            self._finish_episode("server_lost")
            raise GameError(
                f"recording stopped: {e}\n{len(self.saved)} episode(s) saved in {args.out} "
                "(the one in progress as 'server_lost'), none lost"
            ) from None
        except DiskError as e:
            self.writer = None  # its .partial keeps every sample up to its last flush, for capture.recover
            raise DiskError(
                f"recording stopped: {e} ({len(self.saved)} earlier episode(s) in {args.out} are intact)", e.unclosed
            ) from None
        finally:
            if self.writer is not None:
                self._finish_episode("stopped")
            self.close()
        log.info("%d episode(s) saved in %s", len(self.saved), args.out)

    def _next_readable_sample(self) -> Taken | None:
        """The next sample; while the game cannot be read (a loading screen after a death, a boss
        gone, a minimised window) recording pauses rather than stops: an episode still open ends
        as ``unreadable``, and sampling resumes, on a fresh schedule, once reads work again.
        None when asked to quit meanwhile."""
        said = False
        while not self.requests.quit.is_set():
            try:
                return self.sampler.next_sample()
            except Unreadable as e:
                if self.writer is not None:
                    self._finish_episode("unreadable")
                    self.tracker.stop()
                if not said:
                    log.warning("the game cannot be read (%s): paused until it can", e)
                    said = True
                self._discard_if_asked()  # F6 needs no sample: at once, even if F8 follows
                if self.requests.toggle.is_set() and not self._told_start_waits:
                    self._told_start_waits = True
                    log.info("an episode starts by hand as soon as the game can be read again")
                self.game.wait_until(self.game.now() + UNREADABLE_RETRY_S)
                self.sampler.restart_clock()
        return None

    def _handle_requests(self, sample: Sample, window_size: tuple[int, int]) -> str | None:
        """The start/stop hotkey: toggle an episode by hand."""
        if self.requests.toggle.is_set():
            self.requests.toggle.clear()
            self._told_start_waits = False
            if self.writer is not None:
                return "stopped"
            self._start_episode(sample, window_size)
            self.tracker.fighting = True
        return None

    def _discard_if_asked(self) -> bool:
        """F6: drop the episode in progress, or else set the last one saved aside (``set_aside``)
        until the next one is saved. The next episode starts at the next fresh fight (a restart,
        with ``restart``), never in the rest of the fight given up. True if it did either."""
        if not self.requests.discard.is_set():
            return False
        self.requests.discard.clear()
        if self.writer is not None:
            self._drop(self.writer)
            self.writer = None
            self.tracker.stop(until_new_fight=not self.restart)
            log.info("discarded the episode in progress")
            if self.restart:
                self._restart_fight()
        elif self.saved:
            aside = set_aside(self.saved.pop())
            log.info(
                "discarded the last saved episode: set aside as %s until the next episode is saved "
                "(move it back to keep it)",
                aside,
            )
        return True

    def close(self) -> None:
        self.driver.close()
        self.sampler.close()
        self.game.close()


def record(
    settings: RecordSettings,
    status: bool = False,
    make_driver: MakeDriver | None = None,
    on_saved: Callable[[Path], None] | None = None,
) -> list[Path]:
    """Record as ``settings`` say until done (``max_episodes``), quit (F8) or the game is lost;
    returns the episodes saved, each also handed to ``on_saved`` as it is saved (a progress bar). Raises ``EldenILError`` for what the user can fix (no server, a
    broken profile), ``GameError`` when the game is lost mid-recording, after closing the episode
    in progress, and ``Interrupted`` after SIGINT or SIGTERM, once the episode in progress is
    closed as F8 closes it: what was recorded is kept, but the recording is not done."""
    settings.out.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(settings, make_driver, on_saved)
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)
        recorder.requests.quit.set()

    # while recording, a signal quits as F8 does; afterwards the caller's handlers are back (a
    # program that records in-process, a benchmark say, must still stop on SIGTERM)
    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    try:
        with RecorderStatus(settings.rate, enabled=status) as display:
            recorder.run(display)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise Interrupted(
            f"interrupted by {signal.Signals(received[0]).name}: {len(recorder.saved)} episode(s) "
            f"saved in {settings.out}",
            received[0],
        )
    return recorder.saved


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    given = sys.argv[1:] if argv is None else argv
    if any(arg.split("=")[0] == "--policy" for arg in given):  # the flag this command had once
        parser.error(
            "a trained policy plays with python -m elden_il.pilot --policy PATH (the recorder's flags and its own)"
        )
    args = parser.parse_args(argv)
    console = from_flags(Console, args)
    logging.basicConfig(level=console.log_level, format="%(asctime)s %(levelname)s %(message)s")

    def work() -> None:
        record(RecordSettings.from_args(args), status=console.status)

    return run_command(work)


if __name__ == "__main__":
    raise SystemExit(main())
