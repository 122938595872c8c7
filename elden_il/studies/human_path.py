"""Does a person's recording train? The human path against lock-step, side by side in one run.

The same player, the simulator's scripted expert, plays the same fights (seeds 0, 1, ...) three
times:
- **lock-step**: in-process through the autopilot, the way the pipeline's ``demos`` are made;
- **lock-step, the window's picture**: the same, each frame drawn at the play window's size and
  then cropped and resized as the recorder does with the window's (what the picture alone does);
- **as a person**: a separate program watches the game through its own Siphon client once per
  decision step (on its own clock, out of phase with the recorder), decides with the same
  expert, and presses real keys (XTest, as a keyboard does) into ``python -m env.sim --window``,
  while ``python -m capture.record`` records it exactly as it records a person: the pynput
  listener, 30 Hz, one clock, fights cut and restarted by the recorder;
- **as a person on a controller** (``--recordings controller``): the same player on a game
  controller, a virtual pad SDL reports like a real one, while the recorder (its ``record()``,
  in this process, since SDL's virtual pad exists in one process only) hears it through its
  controller listener; the game gets the same presses through Siphon's keys.

Each set of recordings is built into a Minari dataset with params.yaml's ``dataset`` and ``env``
settings, behaviour cloning (params.yaml's ``bc``) trains on it once per training seed, and
every policy fights the same held-out seeds (from 1,000,000, deterministic actions) in the env
its dataset names. The person's decisions are logged too, to measure how often a step's recorded
label is the decision the person made in that step.

    python -m elden_il.studies.human_path                       # 20 fights, 3 seeds x 100
    python -m elden_il.studies.human_path --fights 2 --seeds 0 --eval-fights 10   # a quick look

Needs Xvfb and xdotool when there is no display (scripts/setup.sh installs them).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from env.common.cli import command_parser, flag, from_flags, ruled, run_command
from env.common.fields import MAX_FIGHTS, MAX_SEED, SEED, check_fields, checked, number, one_of, whole
from env.common.machine import describe
from env.observations import parse_size
from env.sim.players import PLAYERS

from elden_il.params import FIRST_HELD_OUT_SEED, PipelineParams, load_params

log = logging.getLogger(__name__)

WINDOW = (1280, 720)
"""The play window's size: what a person records from on the simulator."""
RECORDINGS = {
    "lock-step": "lock-step",
    "lock-step-window": "lock-step, the window's picture",
    "person": "a person's way: window, real keys, recorder",
    "person-fixed-grid": "the same, steps laid from the first sample",
    "controller": "a person's way on a controller: virtual pad, recorder",
}
"""Row -> what it trains on: the three recordings of the same fights: the pipeline's, the same
drawn as the play window is (what the picture alone costs), and the person's through the window
(what real time, a second program's keys and the listener add); and the person's again, built on
a step grid laid from each episode's first sample rather than where the presses fall (what the
builder's grid does)."""
FOLDER = {"person-fixed-grid": "person"}
"""Rows that train on another row's recordings."""
PEOPLE = ("person", "controller")
"""Rows recorded in real time by a scripted person, whose decisions are logged."""


@dataclass
class Decisions:
    """What the scripted person decided and when, on the machine's monotonic clock (the
    recorder's clock too: ``time.monotonic`` is one clock for every process)."""

    t: list[float] = field(default_factory=list)
    action: list[str] = field(default_factory=list)
    scheduled: list[float] = field(default_factory=list)
    """When the read each decision was made on was due: the player's own rhythm, free of how long
    a loaded machine took to answer the read (``t`` is when the answer came)."""
    roll_lags: list[float] = field(default_factory=list)
    """From each roll's dodge let go to the first read showing the roll, in seconds."""


class KeyboardHands:
    """A person's hands on the keyboard: real key events (XTest) into the focused window, which
    the recorder's pynput listener hears as it hears a person."""

    def __init__(self, profile) -> None:
        from capture.takeover import PynputKeyboard

        self.profile = profile
        self.keyboard = PynputKeyboard()

    def hold(self, actions: frozenset[str]) -> None:
        """Hold down exactly what does ``actions``."""
        from env.actions import KeyCommand

        self.keyboard.play(KeyCommand(frozenset(k for a in actions for k in self.profile.keys_for(a))))

    def release(self) -> None:
        self.keyboard.release()

    def close(self) -> None:
        self.release()


STICK = {"move_forward": (0.0, -1.0), "move_back": (0.0, 1.0), "move_left": (-1.0, 0.0), "move_right": (1.0, 0.0)}
"""Where the stick points for each move (SDL's axes: y -1 is up, away from the player)."""


class PadHands:
    """A person's hands on a game controller: a virtual pad (``env.sim.virtual_pad``) that SDL,
    and so the recorder's controller listener in this process, reads as a pad plugged in,
    pushed and pressed as the profile's controller layout says. The virtual pad exists in this
    process alone, so the game, in its own process, is given the same presses at the same
    moments through Siphon's key input: the game takes keyboard and controller at once."""

    def __init__(self, profile, host: str) -> None:
        from env.sim.virtual_pad import VirtualPad
        from env.siphon.client import SiphonClient

        self.profile = profile
        self.layout = profile.controller
        self.pad = VirtualPad()
        self.game = SiphonClient(host)
        self.keys: set[str] = set()
        self.holding: frozenset[str] = frozenset()
        self.changes: list[float] = []  # when the pad changed, on the recorder's clock (time.monotonic)

    def hold(self, actions: frozenset[str]) -> None:
        x = sum(STICK[a][0] for a in actions if a in STICK)
        y = sum(STICK[a][1] for a in actions if a in STICK)
        push = max(1.0, float(np.hypot(x, y)))
        if actions != self.holding:
            self.changes.append(time.monotonic())
        self.holding = actions
        self.pad.axis(self.layout.stick + "x", x / push)
        self.pad.axis(self.layout.stick + "y", y / push)
        for action, control in self.layout.buttons.items():
            if control in ("lefttrigger", "righttrigger"):
                self.pad.axis(control, 1.0 if action in actions else 0.0)
            else:
                self.pad.button(control, action in actions)
        keys = {k for a in actions for k in self.profile.keys_for(a)}
        for key in sorted(self.keys - keys):
            self.game.toggle_key(key, False)
        for key in sorted(keys - self.keys):
            self.game.toggle_key(key, True)
        self.keys = keys

    def release(self) -> None:
        self.hold(frozenset())

    def close(self) -> None:
        try:
            self.release()
        finally:
            self.pad.detach()
            self.game.close()


class ScriptedPlayer(threading.Thread):
    """A scripted player at the keyboard or a controller: the scripted expert, or the person-like
    one (``env.sim.person``). It watches the game ``rate`` times a second through its own Siphon
    client (never configuring the server, as a second program must not), decides once per
    ``step_s`` on its own clock (and, the person-like one, as soon as it notices a boss move), and
    presses with its ``hands`` (made in its thread by ``make_hands(profile)``), holding a tapped
    control for its tap's length while it goes on watching (released late, a roll starts late:
    the expert's dodges have tens of milliseconds to spare). A fight is joined when it is fresh
    (both at full HP) and left when a fighter is down.

    Its clock runs on its reads' schedule, not on when each read came back: a decision falls due
    at the read scheduled for it. Judged by the time a read returned, a millisecond of a read's
    own delay decided whether a decision fell at that read or a whole read later, so its
    decisions came in two clusters a read apart, and the recording paired half of them with a
    picture a read older than the one they were made on.

    The person-like player is a practised one: it learns how long its setup takes to show a roll
    after the dodge is let go (``Decisions.roll_lags``, each the first read showing the roll after the
    release) and presses that much earlier than it would in lock-step, as a person who has played
    on a setup allows for its lag. In lock-step the wait for the next sample is there too, so
    the lead is what real time adds: the lags' median less half a read period."""

    def __init__(
        self, host: str, player: str, step_s: float, tap_ms: float, rate: float, make_hands, seed: int = 0
    ) -> None:
        super().__init__(daemon=True)
        self.host, self.player, self.step_s, self.tap_s, self.period = host, player, step_s, tap_ms / 1000, 1 / rate
        self.seed = seed  # the person-like player's draws
        self.make_hands = make_hands
        self.hands = None
        self.decisions = Decisions()
        self.fights_joined = 0
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._play()
        except BaseException as e:  # reported by the caller, which owns the run
            self.error = e
        finally:
            self.ready.set()

    def lead_s(self) -> float:
        """How much earlier than in lock-step the player presses: what its setup's lag has taught it."""
        if not self.decisions.roll_lags:
            return 0.0
        return max(0.0, float(np.median(self.decisions.roll_lags[-LAGS_KEPT:])) - self.period / 2)

    def _play(self) -> None:
        from env import fight_rules
        from env.actions import ActionTable
        from env.game import GameState
        from env.profile import load_profile
        from env.sim.expert import ScriptedExpert
        from env.sim.moves import PlayerAnim
        from env.sim.person import PersonLikeExpert
        from env.sim.players import make_player
        from env.siphon.client import SiphonClient, SiphonError

        from capture.drivers import DecisionClock

        profile = load_profile("sim_margit")
        table = ActionTable(profile, "discrete")
        expert = make_player(self.player, self.step_s, self.tap_s, self.seed)
        clock = DecisionClock(self.step_s)
        hands = self.hands = self.make_hands(profile)
        self.ready.set()
        client = SiphonClient(self.host)
        names = [*ScriptedExpert.ATTRIBUTES, "HeroMaxHp", "NpcMaxHp"]
        in_fight = False
        held: frozenset[str] = frozenset()  # what the last decision holds
        tapped: frozenset[str] = frozenset()  # the tap still under the finger
        tap_ends = float("inf")
        rolled_at: float | None = None  # when a roll's dodge was let go, until the roll shows
        watch_at = time.monotonic()
        try:
            while not self.stopping.is_set():
                if tap_ends < watch_at + self.period:  # the finger comes up before a read would be done: on time
                    time.sleep(max(0.0, tap_ends - time.monotonic()))
                if time.monotonic() >= tap_ends:  # the finger comes up: a roll starts now
                    hands.hold(held)
                    tap_ends = float("inf")
                    if "dodge" in tapped:
                        rolled_at = time.monotonic()
                    tapped = frozenset()
                if time.monotonic() >= watch_at:
                    scheduled, watch_at = watch_at, watch_at + self.period
                    try:
                        state = GameState(client.read(names), time.monotonic())
                    except SiphonError:
                        hands.release()  # a loading screen, a restart: nothing to read yet
                        held = tapped = frozenset()
                        tap_ends, rolled_at, in_fight = float("inf"), None, False
                    else:
                        if rolled_at is not None and int(state["HeroAnimId"]) == PlayerAnim.ROLL:
                            self.decisions.roll_lags.append(state.timestamp - rolled_at)
                            rolled_at = None
                        if not in_fight and fight_rules.fresh(state):
                            in_fight = True
                            self.fights_joined += 1
                            expert.reset()
                            clock.reset()
                        if in_fight and fight_rules.AT_DEATH.is_over(state):
                            in_fight = False
                            hands.release()
                            held = tapped = frozenset()
                            tap_ends = float("inf")
                        if in_fight and (clock.due(scheduled) or expert.observe(state)):
                            if isinstance(expert, PersonLikeExpert):
                                expert.lead_s = self.lead_s()
                            name = expert.act(state)
                            self.decisions.t.append(state.timestamp)
                            self.decisions.scheduled.append(scheduled)
                            self.decisions.action.append(name)
                            entry = profile.discrete_actions[table.index(name)]
                            held = frozenset(entry.hold)
                            if entry.tap:
                                if tapped:  # a finger must come up before it presses again
                                    hands.hold(held)
                                tapped = frozenset(entry.tap)
                                tap_ends = time.monotonic() + (expert.tap_ms() or 1000 * self.tap_s) / 1000
                            hands.hold(held | tapped)
                time.sleep(max(0.0, min(watch_at, tap_ends) - time.monotonic()))
        finally:
            hands.close()
            client.close()


LAGS_KEPT = 20
"""The player's lead follows its last this many rolls: a person goes by recent experience."""


@contextlib.contextmanager
def a_display() -> Iterator[None]:
    """The display the window opens on: this session's, or a virtual one."""
    if os.environ.get("DISPLAY"):
        yield
        return
    from env.sim.display import virtual_display

    with virtual_display(WINDOW):
        yield


def record_as_a_person(
    fights: int,
    out: Path,
    params: PipelineParams,
    player: str,
    tap_ms: float,
    fight_seconds: float = 300,
    window: tuple[int, int] = WINDOW,
    seed: int = 0,
) -> Decisions:
    """``fights`` fights played through a ``window``-sized play window by ``player`` at the keyboard,
    recorded by the real recorder in its own process (an episode ends after ``fight_seconds``,
    as the recorder's ``--max-episode-seconds``), the first fight's seed and the player's draws
    ``seed``; returns the person's decisions."""
    from env.sim.display import focus_window
    from env.sim.launcher import SimServer

    config = params.env
    rate = params.demos.record.rate
    server_log = out.with_suffix(".server.log")
    with (
        a_display(),
        SimServer(seed=seed, size=window, extra_args=("--window",), log_path=server_log) as server,
    ):
        focus_window(server.process.pid)
        person = ScriptedPlayer(server.host, player, config.timestep_ms / 1000, tap_ms, rate, KeyboardHands, seed)
        person.start()
        recorder_log = out.with_suffix(".recorder.log")
        with open(recorder_log, "wb") as sink:
            recorder = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "capture.record",
                    "--host",
                    server.host,
                    "--profile",
                    "sim_margit",
                    "--out",
                    str(out),
                    "--no-status",
                    "--max-episodes",
                    str(fights),
                    "--seed",
                    str(seed),
                    "--max-episode-seconds",
                    str(fight_seconds),
                    "--rate",
                    str(rate),
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=600 * fights,
            )
        person.stopping.set()
        person.join(10)
    if recorder.returncode != 0:
        raise RuntimeError(f"the recorder exited with {recorder.returncode}: see {recorder_log}")
    if person.error is not None:
        raise RuntimeError(f"the scripted person failed: {person.error!r}") from person.error
    return person.decisions


def record_on_a_controller(
    fights: int,
    out: Path,
    params: PipelineParams,
    player: str,
    tap_ms: float,
    fight_seconds: float = 300,
    window: tuple[int, int] = WINDOW,
    seed: int = 0,
) -> tuple[Decisions, list[float]]:
    """``fights`` fights played on a game controller against a simulator server drawing a
    ``window``-sized picture, recorded by the real recorder's ``record()`` in this process (its
    controller listener hears the virtual pad, as it hears one plugged in), the first fight's seed
    and the player's draws ``seed``; returns the person's decisions and when the pad changed
    (``time.monotonic``, the recorder's clock)."""
    from env.sim.launcher import SimServer

    from capture.record import RecordSettings, record

    config = params.env
    rate = params.demos.record.rate
    with a_display(), SimServer(seed=seed, size=window, log_path=out.with_suffix(".server.log")) as server:
        person = ScriptedPlayer(
            server.host,
            player,
            config.timestep_ms / 1000,
            tap_ms,
            rate,
            lambda profile: PadHands(profile, server.host),
            seed,
        )
        person.start()
        person.ready.wait(30)
        try:
            record(
                RecordSettings(
                    env=config.replace(profile="sim_margit"),
                    host=server.host,
                    rate=rate,
                    out=out,
                    max_episodes=fights,
                    max_episode_seconds=fight_seconds,
                )
            )
        finally:
            person.stopping.set()
            person.join(10)
    if person.error is not None:
        raise RuntimeError(f"the scripted person failed: {person.error!r}") from person.error
    return person.decisions, person.hands.changes


def pad_latency(raw: Path, changes: list[float]) -> dict:
    """From the pad changing (``changes``) to the first sample whose input window holds the
    change: each moment the listener logged a change (its poll) is paired with the last change
    made at or before it, and with the first sample taken after it."""
    from capture.episode import list_episodes, read_episode
    from capture.inputs import PAD_AXIS, PAD_DOWN, PAD_UP

    changed = np.sort(np.asarray(changes))
    delays, polls = [], []
    for path in list_episodes(raw):
        episode = read_episode(path, frames=False)
        logged = np.unique(episode.events["t"][np.isin(episode.events["kind"], (PAD_DOWN, PAD_UP, PAD_AXIS))])
        made = np.searchsorted(changed, logged, side="right") - 1
        sample = np.searchsorted(episode.t, logged)
        kept = (made >= 0) & (sample < len(episode.t))
        polls.append(logged[kept] - changed[made[kept]])
        delays.append(episode.t[sample[kept]] - changed[made[kept]])
    delays_ms = 1000 * np.concatenate(delays) if delays else np.zeros(0)
    polls_ms = 1000 * np.concatenate(polls) if polls else np.zeros(0)
    return {
        "changes": int(delays_ms.size),
        "to_poll_ms_median": float(np.median(polls_ms)) if polls_ms.size else None,
        "median_ms": float(np.median(delays_ms)) if delays_ms.size else None,
        "p99_ms": float(np.percentile(delays_ms, 99)) if delays_ms.size else None,
    }


def press_pictures(raw: Path, params: PipelineParams) -> dict:
    """For each step that begins with a press, the picture the builder pairs it with: how long
    after the press it was taken (negative: before it), in milliseconds; the live recorder's
    sample at each press makes this a millisecond or so, the schedule alone up to minus a period."""
    from capture.build_dataset import episode_step_starts, samples_at
    from capture.labels import HeardActions

    dt = params.env.timestep_ms / 1000
    offsets = []
    for episode, boundaries, _, table in labelled_steps(raw, params, True):
        heard = HeardActions(table.profile, episode.key_names)
        starts = episode_step_starts(episode, boundaries, heard, dt)
        pressed = np.isin(starts, heard.press_times(episode))
        offsets.append(episode.t[samples_at(episode.t, starts[pressed])] - starts[pressed])
    ms = 1000 * np.concatenate(offsets) if offsets else np.zeros(0)
    if not ms.size:
        return {"steps": 0}
    return {
        "steps": int(ms.size),
        "median_ms": float(np.median(ms)),
        "p1_ms": float(np.percentile(ms, 1)),
        "p99_ms": float(np.percentile(ms, 99)),
        "taken_at_the_press": float(np.mean(ms >= 0)),
    }


def lag_ms(lags: list[float]) -> dict | None:
    """The spread of a player's roll lags (``Decisions.roll_lags``): what real time put between its
    hands and the game (half a read period is the wait lock-step has too)."""
    if not lags:
        return None
    ms = 1000 * np.asarray(lags)
    return {"rolls": int(ms.size), "median": float(np.median(ms)), "p90": float(np.percentile(ms, 90))}


def record_lock_step(
    fights: int,
    out: Path,
    params: PipelineParams,
    player: str,
    capture_size: tuple[int, int] | None = None,
    seed: int = 0,
) -> None:
    """``player``'s fights in-process, as the autopilot, the first fight's seed and the player's draws
    ``seed``; ``capture_size``: the picture drawn at that size and then made an observation as the
    play window's is (None: drawn at the frame size)."""
    from capture.record import RecordSettings, record

    rate = params.demos.record.rate
    config = params.env.replace(profile="sim_margit", capture_size=capture_size)
    record(
        RecordSettings(
            env=config,
            backend="sim",
            autopilot=True,
            player=player,
            max_episodes=fights,
            seed=seed,
            rate=rate,
            out=out,
            master_size=config.picture_size,  # the frame size itself where no capture size is asked for
        )
    )


GRIDS = {"aligned_to_presses": True, "from_first_sample": False}
"""The builder's step grid, and the grid laid from each episode's first sample instead."""


def labelled_steps(raw: Path, params: PipelineParams, align_to_presses: bool) -> Iterator[tuple]:
    """Each episode in ``raw`` on the builder's step grid (``align_to_presses``): (episode,
    boundaries, labels as action indexes, the action table)."""
    from env.actions import ActionTable
    from env.profile import load_profile

    from capture.build_dataset import step_grid, step_labels
    from capture.episode import list_episodes, read_episode
    from capture.labels import HeardActions, StepLabeler

    table = ActionTable(load_profile("sim_margit"), "discrete")
    dt = params.env.timestep_ms / 1000
    for path in list_episodes(raw):
        episode = read_episode(path, frames=False)
        heard = HeardActions(table.profile, episode.key_names)
        boundaries = step_grid(episode, dt, decided=False, heard=heard, align_to_presses=align_to_presses)
        yield episode, boundaries, step_labels(episode, boundaries, heard, StepLabeler(table)), table


def label_agreement(raw: Path, decisions: Decisions, params: PipelineParams) -> dict:
    """How often a step's label is the person's last decision within that step, on the
    builder's own step grid and labels (the steps with a decision in them), on both grids."""
    decided_t = np.asarray(decisions.t)
    results = {}
    for grid, align in GRIDS.items():
        agree = total = 0
        for _, boundaries, labels, table in labelled_steps(raw, params, align):
            for k, label in enumerate(labels):
                inside = np.flatnonzero((decided_t >= boundaries[k]) & (decided_t < boundaries[k + 1]))
                if len(inside):
                    agree += int(label == table.index(decisions.action[inside[-1]]))
                    total += 1
        results[grid] = {"steps_with_a_decision": total, "agreement": agree / total if total else None}
    return results


def teacher_agreement(raw: Path, params: PipelineParams, player: str) -> dict:
    """How often a step's label is the action the teacher itself takes on the state the dataset
    pairs it with: ``player`` replayed, lock-step, over each episode's step states in order (its
    own tap length). This is the mapping behaviour cloning fits, measured before any training:
    a picture from the wrong moment or a label from the wrong step lowers it. On both grids."""
    from env.game import GameState
    from env.sim.players import make_player

    from capture.build_dataset import episode_step_starts, samples_at
    from capture.labels import HeardActions

    config = params.env
    dt = config.timestep_ms / 1000
    results = {}
    for grid, align in GRIDS.items():
        agree = total = 0
        for episode, boundaries, labels, table in labelled_steps(raw, params, align):
            heard = HeardActions(table.profile, episode.key_names)
            at = samples_at(episode.t, episode_step_starts(episode, boundaries, heard, dt))
            teacher = make_player(player, dt, config.tap_ms / 1000)
            for k, label in enumerate(labels):
                state = GameState(dict(zip(episode.attribute_names, episode.state[at[k]])), float(boundaries[k]))
                agree += int(table.index(teacher.act(state)) == label)
                total += 1
        results[grid] = {"steps": total, "agreement": agree / total if total else None}
    return results


def train_and_evaluate(
    raw: Path, name: str, params: PipelineParams, seeds: list[int], eval_fights: int, work: Path
) -> dict:
    """Build ``raw`` into a dataset, train BC once per seed, evaluate each policy on the held-out
    fights in the dataset's env; the row for the table."""
    from env.factory import make_env

    from capture.build_dataset import build_dataset

    from elden_il.data import demonstrations, open_dataset
    from elden_il.evaluation.evaluate import PolicyActor
    from elden_il.evaluation.fight_loop import run_fights
    from elden_il.evaluation.win_rate import wilson_interval
    from elden_il.training.bc import train_bc

    bc_config = params.bc
    dataset_id = f"bench/{name}-v0"
    build_dataset(
        raw,
        dataset_id,
        params.env,
        root=work / "minari",
        force=True,
        align_to_presses=name != "person-fixed-grid",
    )
    demos = demonstrations(open_dataset(dataset_id, work / "minari"))
    held_out = list(range(FIRST_HELD_OUT_SEED, FIRST_HELD_OUT_SEED + eval_fights))
    wins_by_seed = []
    for seed in seeds:
        policy = work / f"bc-{name}-{seed}"
        train_bc(demos, replace(bc_config, seed=seed), policy, size=params.network)
        records, _ = run_fights(lambda: make_env(demos.config), PolicyActor(policy, True), held_out)
        wins_by_seed.append(sum(r.win for r in records))
        log.info(
            "%s, training seed %d: %d of %d held-out fights won",
            name,
            seed,
            wins_by_seed[-1],
            eval_fights,
        )
    wins, total = sum(wins_by_seed), eval_fights * len(seeds)
    return {
        "recordings": RECORDINGS[name],
        "episodes": demos.source_episodes,
        "steps": len(demos),
        "win_rate": wins / total,
        "win_rate_ci95": list(wilson_interval(wins, total)),
        "win_rate_by_seed": [w / eval_fights for w in wins_by_seed],
        "eval_fights": total,
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| recordings of the same expert | episodes | steps | BC win rate (95 % interval) | by training seed |",
        "|---|---:|---:|---|---|",
    ]
    for r in rows:
        low, high = r["win_rate_ci95"]
        seeds = ", ".join(f"{w:.0%}" for w in r["win_rate_by_seed"])
        lines.append(
            f"| {r['recordings']} | {r['episodes']} | {r['steps']:,} | {r['win_rate']:.1%} "
            f"({low:.1%}-{high:.1%}) | {seeds} |"
        )
    return "\n".join(lines)


def run(
    fights: int,
    seeds: list[int],
    eval_fights: int,
    player: str,
    tap_ms: float,
    params: PipelineParams,
    work: Path,
    reuse: bool = False,
    recordings: tuple[str, ...] = tuple(RECORDINGS),
    window: tuple[int, int] = WINDOW,
    first_seed: int = 0,
) -> dict:
    """The ``recordings`` (with ``reuse``, those a previous run left in ``work`` are kept), their
    datasets and policies, and for each person's recordings how often their labels are the
    person's decisions: the results as a dict (see ``main``)."""
    work.mkdir(parents=True, exist_ok=True)
    seconds = {}
    for name, size in (("lock-step", None), ("lock-step-window", window)):
        if name in recordings and not (reuse and any((work / name).glob("*.h5"))):
            shutil.rmtree(work / name, ignore_errors=True)  # a rerun records afresh
            started = time.perf_counter()
            record_lock_step(fights, work / name, params, player, size, first_seed)
            seconds[name] = time.perf_counter() - started
    decisions, latency = {}, None
    for person in PEOPLE:
        if person not in recordings and not (person == "person" and "person-fixed-grid" in recordings):
            continue
        decisions_file = work / f"{person}.decisions.json"
        if not (reuse and decisions_file.exists()):
            shutil.rmtree(work / person, ignore_errors=True)
            started = time.perf_counter()
            if person == "person":
                made = record_as_a_person(fights, work / person, params, player, tap_ms, window=window, seed=first_seed)
            else:
                made, changes = record_on_a_controller(
                    fights, work / person, params, player, tap_ms, window=window, seed=first_seed
                )
                (work / "controller.changes.json").write_text(json.dumps(changes))
            seconds[person] = time.perf_counter() - started
            decisions_file.write_text(json.dumps(vars(made)))
        decisions[person] = Decisions(**json.loads(decisions_file.read_text()))
    if (work / "controller.changes.json").exists() and "controller" in decisions:
        latency = pad_latency(work / "controller", json.loads((work / "controller.changes.json").read_text()))
    rows = [
        train_and_evaluate(work / FOLDER.get(name, name), name, params, seeds, eval_fights, work) for name in recordings
    ]
    return {
        "machine": describe(),
        "fights": fights,
        "first_seed": first_seed,
        "training_seeds": seeds,
        "eval_fights_per_policy": eval_fights,
        "player": player,
        "person_tap_ms": tap_ms,
        "window": list(window),
        "record_seconds": seconds,
        "person_decisions": {person: len(made.t) for person, made in decisions.items()},
        "roll_shown_after_release_ms": {person: lag_ms(made.roll_lags) for person, made in decisions.items()},
        "labels": {person: label_agreement(work / person, made, params) for person, made in decisions.items()},
        "controller_event_to_sample": latency,
        "press_to_its_picture": {person: press_pictures(work / person, params) for person in decisions},
        "teacher_agreement": {
            name: teacher_agreement(work / name, params, player)
            for name in ("lock-step", *PEOPLE)
            if any((work / name).glob("*.h5"))
        },
        "rows": rows,
    }


@dataclass(frozen=True)
class HumanPathArgs:
    """What the study records, trains and plays: each field its flag."""

    fights: int = checked(20, whole(1, 10_000), "fights recorded each way")
    seeds: tuple[int, ...] = field(
        default=(0, 1, 2), metadata=flag("BC training seeds", type=ruled(int, whole(0, 2**31 - 1)), nargs="+")
    )
    eval_fights: int = checked(100, whole(1, MAX_FIGHTS), "held-out fights per policy")
    player: str = checked(
        "expert",
        one_of(*PLAYERS),
        "who plays every recording: a player of the simulator (env/sim/players.py; the person-like one draws its "
        "own reaction times and taps)",
        choices=tuple(PLAYERS),
    )
    tap_ms: float = checked(
        50.0,
        number(1, 1000),
        "how long the expert's finger stays on a tapped key through the window (the person-like player draws its own)",
    )
    params: Path = field(default=Path("params.yaml"), metadata=flag("dataset, env and bc settings", type=Path))
    work: Path | None = field(
        default=None,
        metadata=flag(
            "recordings, datasets, policies (default: datasets/studies/human_path, "
            "or human_path-person for the person-like player)",
            type=Path,
        ),
    )
    reuse: bool = field(
        default=False, metadata=flag("keep the recordings a previous run left in --work; record only the missing ones")
    )
    recordings: tuple[str, ...] = field(
        default=tuple(RECORDINGS),
        metadata=flag("train and evaluate on these (default: all of them)", nargs="+", choices=tuple(RECORDINGS)),
    )
    window: tuple[int, int] = field(
        default=WINDOW,
        metadata=flag(
            "the play window's size, which the person's recordings keep as their picture "
            "(default: 1280x720; a smaller one leaves a 2-core machine more time to play in)",
            type=parse_size,
            metavar="WxH",
        ),
    )
    first_seed: int = checked(
        0,
        SEED,
        "the first recorded fight's seed (the next ones count up) and the person-like player's draws: "
        "another set of the same player's fights",
    )
    json: Path | None = field(default=None, metadata=flag("also write the results here", type=Path))

    def __post_init__(self) -> None:
        check_fields(self)


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("python -m elden_il.studies.human_path", __doc__, HumanPathArgs)
    args = from_flags(HumanPathArgs, parser.parse_args(argv))
    if args.first_seed + args.fights - 1 > MAX_SEED:
        parser.error(f"--first-seed {args.first_seed} with --fights {args.fights}: the last seed would pass {MAX_SEED}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return run_command(lambda: run_and_show(args))


def run_and_show(args: HumanPathArgs) -> None:
    """The study as ``args`` ask, its table printed (and written to ``--json``)."""
    results = run(
        args.fights,
        args.seeds,
        args.eval_fights,
        args.player,
        args.tap_ms,
        load_params(args.params),
        args.work or Path("datasets/studies/human_path" + ("" if args.player == "expert" else f"-{args.player}")),
        args.reuse,
        args.recordings,
        args.window,
        args.first_seed,
    )
    print(table(results["rows"]))
    print(f"labels: {results['labels']}")
    print(f"teacher agreement: {results['teacher_agreement']}")
    if results["controller_event_to_sample"]:
        print(f"controller event -> first sample showing it: {results['controller_event_to_sample']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
