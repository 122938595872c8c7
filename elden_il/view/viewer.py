"""Where a Rerun recording goes: into a viewer started on this machine, or into an ``.rrd`` file.

Rerun (``rerun-sdk``, the ``view`` extra) is imported here and only when a recording is made, so
everything else runs without it. Two of Rerun's defaults are not this project's: its viewer's
server listens on every interface (``--bind 0.0.0.0``), and the viewer sends usage analytics. So
the viewer is started here bound to 127.0.0.1 (the data is streamed to it over loopback while it
is made: the first picture shows before the rest is logged), and Rerun's analytics are turned off
first with its own documented switch, ``rerun analytics disable`` (a setting of the user's, kept
in Rerun's config folder), whenever a recording is made or a viewer started.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from env.common.errors import ConfigError, DataError, SetupError
from env.common.files import regular_file_problem
from env.common.staging import staged_paths

log = logging.getLogger(__name__)

APPLICATION_ID = "elden-il"
RERUN_VERSION = "0.41.0"
"""The rerun-sdk the ``view`` extra pins: a viewer reads the recordings of its own version."""
LOOPBACK = "127.0.0.1"
VIEWER_START_S = 30.0
"""How long a viewer may take to listen (it loads its fonts and GPU context first; seconds on a
software renderer)."""


class ViewError(SetupError):
    """The viewer cannot be used here (no rerun-sdk, no display, a viewer that does not start);
    the message says what to do instead."""


def rerun() -> ModuleType:
    """The ``rerun`` module, or one line saying how to install it."""
    try:
        import rerun as rr
    except ImportError:
        raise ViewError(
            "the viewer needs rerun-sdk: `pip install -e '.[view]'` (scripts/setup.sh installs it)"
        ) from None
    return rr


def cli() -> list[str]:
    """The Rerun command line that rerun-sdk installs, run by this Python (its environment need not
    be on PATH; ``RERUN_CLI_PATH`` picks another binary, as Rerun's own launcher allows)."""
    return [sys.executable, "-m", "rerun_cli"]


def turn_off_analytics() -> subprocess.Popen:
    """Start ``rerun analytics disable`` (it takes a second or so: wait for it before a viewer
    starts). Rerun has no switch per process; this is its documented way, and it lasts."""
    return subprocess.Popen([*cli(), "analytics", "disable"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def has_display() -> bool:
    """Whether a window can open here: always on Windows and macOS, on Linux with X or Wayland."""
    return not sys.platform.startswith("linux") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def view_command(path: Path) -> str:
    """How to open a saved recording on a machine with a display."""
    return (
        f"python -m elden_il.view {path}   (or, with only rerun-sdk=={RERUN_VERSION} installed: "
        f"rerun analytics disable; rerun --bind {LOOPBACK} {path.name})"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def start_viewer(*paths: Path) -> str:
    """Start a Rerun viewer on this machine's display, its server bound to loopback, opening
    ``paths`` (``.rrd`` files) if given; returns the address a recording is streamed to. It runs
    on after this process ends, as a window the person closes."""
    if not has_display():
        raise ViewError(
            "no display here (DISPLAY is not set): save the recording with --save FILE.rrd, then "
            "open it on a machine with one"
        )
    port = _free_port()
    viewer_log = Path(tempfile.gettempdir()) / f"elden-view-{port}.log"
    with viewer_log.open("w") as out:
        process = subprocess.Popen(
            [
                *cli(),
                "--bind",
                LOOPBACK,
                "--port",
                str(port),
                "--expect-data-soon",
                *map(str, paths),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + VIEWER_START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ViewError(
                f"the Rerun viewer stopped as it started (exit code {process.returncode}; its log: "
                f"{viewer_log}): save the recording with --save FILE.rrd and open it elsewhere"
            )
        try:
            socket.create_connection((LOOPBACK, port), timeout=0.5).close()
            log.info(
                "Rerun viewer started (pid %d, listening on %s:%d; its log: %s)",
                process.pid,
                LOOPBACK,
                port,
                viewer_log,
            )
            return f"rerun+http://{LOOPBACK}:{port}/proxy"
        except OSError:
            time.sleep(0.1)
    raise ViewError(f"the Rerun viewer did not start within {VIEWER_START_S:g} s (its log: {viewer_log})")


def open_file(path: Path) -> None:
    """Open a saved ``.rrd`` in a viewer on this machine."""
    if not path.is_file():
        raise DataError(f"no recording at {path}: make one with `python -m elden_il.view ... --save {path}`")
    rerun()
    turn_off_analytics().wait()
    start_viewer(path)


@contextmanager
def recording(name: str, save: Path | None = None, blueprint: Any = None, live: str | None = None) -> Iterator[Any]:
    """A Rerun ``RecordingStream`` named ``name``: written to ``save`` (an ``.rrd``), or else
    streamed to a new viewer on this machine as it is logged; with ``live`` (a listening viewer's
    address), streamed there as well. Whole when the block ends: a ``save`` file is put in place
    only then (``env.common.staging``), so a failure or an interrupt half-way leaves none, or the
    one there before."""
    if save is None:
        with _recording(name, None, blueprint, live) as stream:
            yield stream
        return
    if save.exists() or save.is_symlink():  # a recording replaces a file: never a folder, a FIFO, a device
        problem = regular_file_problem(save)
        if problem is not None:
            raise ConfigError(f"{save} {problem}: a recording replaces a file; give --save a file's name (FIGHT.rrd)")
    with staged_paths(save) as (built,), _recording(name, built, blueprint, live) as stream:
        yield stream


@contextmanager
def _recording(name: str, save: Path | None, blueprint: Any, live: str | None) -> Iterator[Any]:
    rr = rerun()
    analytics = turn_off_analytics()
    stream = rr.RecordingStream(APPLICATION_ID)
    # every entity is on the fight's own timelines (elden_il.view.steps): Rerun's default third
    # one, the wall clock at each log call, says only when the file was made
    stream.set_log_time_enabled(False)
    try:
        sinks = []
        if save is not None:
            save.parent.mkdir(parents=True, exist_ok=True)
            sinks.append(rr.FileSink(str(save)))
        else:
            analytics.wait()
            sinks.append(rr.GrpcSink(start_viewer()))
        if live is not None:
            sinks.append(rr.GrpcSink(live))
        stream.set_sinks(*sinks, default_blueprint=blueprint)
        stream.send_recording_name(name)
        yield stream
        try:
            stream.flush()
        except RuntimeError as error:  # only a viewer can go away half-way: a file is written here
            if live is None:
                raise
            log.warning("the viewer at %s went away (%s); the recording is whole in %s", live, error, save)
    finally:
        stream.disconnect()
        analytics.wait()
