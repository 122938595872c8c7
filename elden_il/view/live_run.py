"""A fine-tuning run as it goes, in Rerun: what a lab watches while its gaming PCs fine-tune one
policy together.

Each env (a gaming PC, or a simulator) has a state (``playing``, ``lost`` when its game stopped
answering, ``rejoined`` when it answers again, ``done`` when the run's budget is spent), its steps
an hour over the last minute, its fights and wins, and the share of its time its game sat paused
waiting for the learner's updates (the learner holding the PCs back shows there first). The run
has the learner's updates a second and the win rate of every fight so far, and of the last
``WIN_RATE_WINDOW``. All of it is on the wall clock (``wall``) and on the count of env steps the
run has taken (``env_steps``), so two runs line up either way.

The recording goes to a file (written whole when the run ends, as every recording here) and, when
``WATCH_VARIABLE`` names a listening Rerun viewer, to that viewer as it is logged: the live view.
``python -m elden_il.view --listen`` opens one on this machine and prints the line to set.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from env.common.errors import ConfigError

log = logging.getLogger(__name__)

WATCH_VARIABLE = "ELDEN_IL_WATCH"
"""The environment variable naming a Rerun viewer to stream a fine-tuning run to as it goes
(``rerun+http://127.0.0.1:PORT/proxy``, as ``python -m elden_il.view --listen`` prints it)."""
LISTENING_S = 3.0
"""How long the viewer ``WATCH_VARIABLE`` names may take to answer before the run starts."""
WALL, STEPS = "wall", "env_steps"
TICK_S = 1.0
"""The most often the rates and the table are logged: a step is counted, a second is drawn."""
RATE_WINDOW_S = 60.0
"""Steps an hour and updates a second are the pace over this trailing window: a PC that stops
shows at once, a single slow step does not."""
WIN_RATE_WINDOW = 20
"""Fights in the trailing win rate (as the learning curves' own, ``elden_il.training.tracking``)."""


@dataclass
class _Pace:
    """A count and the times it was read at, over the last ``RATE_WINDOW_S``: its rate a second."""

    count: int = 0
    marks: deque = field(default_factory=deque)

    def rate(self, now: float) -> float:
        self.marks.append((now, self.count))
        while len(self.marks) > 2 and now - self.marks[1][0] >= RATE_WINDOW_S:
            self.marks.popleft()
        then, counted = self.marks[0]
        return (self.count - counted) / (now - then) if now > then else 0.0


@dataclass
class _Env:
    name: str
    path: str
    playing_since: float | None = None
    state: str = "starting"
    steps: _Pace = field(default_factory=_Pace)
    fights: int = 0
    won: int = 0
    paused_s: float = 0.0


class RunWatch:
    """What a fine-tuning run tells its Rerun recording, from any of its actors' threads: each
    env's steps and fights, its game lost and back, the learner's updates."""

    def __init__(self, stream: Any, names: Sequence[str]) -> None:
        import rerun as rr

        self._rr, self._stream = rr, stream
        self._lock = threading.Lock()
        self._envs = {name: _Env(name, rr.escape_entity_path_part(name)) for name in names}
        self._updates = _Pace()
        self._wins: deque[bool] = deque(maxlen=WIN_RATE_WINDOW)
        self._fights = self._won = 0
        self._ticked = time.monotonic()
        for env in self._envs.values():
            stream.log(f"pcs/{env.path}/steps_an_hour", rr.SeriesLines(names=env.name), static=True)

    def playing(self, name: str) -> None:
        """``name``'s game answered and its actor plays."""
        self._state(name, "playing", "its game answers: playing")

    def lost(self, name: str, error: BaseException) -> None:
        """``name``'s game stopped answering."""
        self._state(name, "lost", f"stopped answering ({error})", level="WARN")

    def rejoined(self, name: str) -> None:
        """``name``'s game answers again and its actor plays on."""
        self._state(name, "rejoined", "answers again: rejoined the run")

    def stepped(self, name: str, paused_s: float) -> None:
        """One step of ``name``'s, its game paused ``paused_s`` before it for the learner."""
        with self._lock:
            env = self._envs[name]
            env.steps.count += 1
            env.paused_s += paused_s
            self._tick_if_due()

    def fought(self, name: str, won: bool) -> None:
        """One fight of ``name``'s is over."""
        with self._lock:
            env = self._envs[name]
            env.fights, env.won = env.fights + 1, env.won + won
            self._fights, self._won = self._fights + 1, self._won + won
            self._wins.append(won)
            self._at_now()
            self._stream.log("fights/win_rate", self._rr.Scalars(self._won / self._fights))
            self._stream.log(
                f"fights/win_rate_last_{WIN_RATE_WINDOW}", self._rr.Scalars(sum(self._wins) / len(self._wins))
            )

    def learned(self, updates: int) -> None:
        """The learner made ``updates`` more updates."""
        with self._lock:
            self._updates.count += updates

    def done(self) -> None:
        """The run's budget is spent: every env still playing ``done``, with the last pace of all
        (the run ends only with one env playing)."""
        for name, env in self._envs.items():
            if env.state != "lost":
                self._state(name, "done", "the run's budget is spent")

    def _state(self, name: str, state: str, line: str, level: str = "INFO") -> None:
        with self._lock:
            env = self._envs[name]
            env.state = state
            if env.playing_since is None:  # its paused share counts from its first answer, not the run's loading
                env.playing_since = time.monotonic()
            self._at_now()
            self._stream.log(f"pcs/{env.path}/state", self._rr.TextLog(f"{name}: {line}", level=level))
            self._tick()

    def _at_now(self) -> None:
        """The stream's times, now (Rerun keeps them per thread: set before every log)."""
        self._stream.set_time(WALL, timestamp=time.time())
        self._stream.set_time(STEPS, sequence=sum(env.steps.count for env in self._envs.values()))

    def _tick_if_due(self) -> None:
        if time.monotonic() - self._ticked >= TICK_S:
            self._tick()

    def _tick(self) -> None:
        """Each env's steps an hour and the learner's updates a second, and the table of them all."""
        now = time.monotonic()
        self._ticked = now
        self._at_now()
        rows = [
            "| env | state | steps | steps an hour | paused for the learner | fights | won |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for env in self._envs.values():
            an_hour = env.steps.rate(now) * 3600
            playing_s = now - env.playing_since if env.playing_since is not None else 0.0
            paused = env.paused_s / playing_s if playing_s > 0 else 0.0
            self._stream.log(f"pcs/{env.path}/steps_an_hour", self._rr.Scalars(an_hour))
            rows.append(
                f"| {env.name} | {env.state} | {env.steps.count} | {an_hour:,.0f} | {paused:.0%} | {env.fights} | {env.won} |"
            )
        self._stream.log("learner/updates_a_second", self._rr.Scalars(self._updates.rate(now)))
        self._stream.log("pcs/table", self._rr.TextDocument("\n".join(rows), media_type="text/markdown"))


def blueprint(rr: Any) -> Any:
    """The layout: the table of PCs beside their state lines, then steps an hour, the win rate and
    the learner's pace over time."""
    rrb = rr.blueprint
    return rrb.Blueprint(
        rrb.Vertical(
            rrb.Horizontal(
                rrb.TextDocumentView(origin="pcs/table", name="PCs"),
                rrb.TextLogView(origin="pcs", name="what happened"),
            ),
            rrb.Horizontal(
                rrb.TimeSeriesView(origin="pcs", name="steps an hour"),
                rrb.TimeSeriesView(origin="fights", name="win rate"),
                rrb.TimeSeriesView(origin="learner", name="learner updates a second"),
            ),
        ),
        rrb.TimePanel(timeline=WALL),
        collapse_panels=True,
    )


def watched_address() -> str | None:
    """The viewer ``WATCH_VARIABLE`` names, or None; one line if it names none, or one that does
    not listen (before anything is loaded: a run is not started blind to the view asked for)."""
    address = os.environ.get(WATCH_VARIABLE) or None
    if address is None:
        return None
    where = urlsplit(address)
    if where.scheme not in ("rerun+http", "rerun+https") or where.hostname is None:
        raise ConfigError(
            f"{WATCH_VARIABLE}={address!r} is not a Rerun viewer's address: give the one `python -m elden_il.view "
            "--listen` prints (rerun+http://127.0.0.1:PORT/proxy), or unset it"
        )
    try:
        socket.create_connection((where.hostname, where.port or 9876), timeout=LISTENING_S).close()
    except OSError as error:
        raise ConfigError(
            f"{WATCH_VARIABLE}={address}: no viewer listens there ({error}): open one with `python -m elden_il.view "
            "--listen` and set the address it prints, or unset it (the run is recorded to a file either way)"
        ) from None
    return address


@contextmanager
def watched_run(save: Path, names: Sequence[str]) -> Iterator[RunWatch | None]:
    """A ``RunWatch`` for a run of the envs ``names``, recorded to ``save`` (an ``.rrd``, in place
    when the block ends) and streamed to the viewer ``WATCH_VARIABLE`` names, if it names one.
    None, with a warning, where rerun-sdk (the ``view`` extra) is not installed and no viewer is
    asked for: the run goes on unwatched."""
    live = watched_address()
    if importlib.util.find_spec("rerun") is None:
        if live is not None:
            raise ConfigError(
                f"{WATCH_VARIABLE} asks for a live view, and rerun-sdk is not installed: `pip install -e '.[view]'`"
            )
        log.warning("no %s: rerun-sdk is not installed (`pip install -e '.[view]'`)", save.name)
        yield None
        return
    from elden_il.view.viewer import recording, rerun

    with recording("fine-tuning", save, blueprint(rerun()), live=live) as stream:
        if live is not None:
            log.info("fine-tuning streams its live view to the Rerun viewer at %s", live)
        yield RunWatch(stream, names)
