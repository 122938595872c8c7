"""A virtual X display (Xvfb) for the play window where there is no screen: tests, benchmarks
and a headless machine play the simulator's window and record it with pynput as on a desktop.

Xvfb runs with key auto-repeat off (``-ardelay``) unless asked for, as a held key would
otherwise arrive as a stream of presses, and picks a free display number itself
(``-displayfd``), so two runs on one machine never share a display.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from env.common.errors import SetupError


class DisplayError(SetupError):
    """No virtual display could be started."""


def can_start() -> bool:
    """Whether Xvfb and xdotool (which finds and focuses the window) are installed."""
    return bool(shutil.which("Xvfb") and shutil.which("xdotool"))


@contextmanager
def virtual_display(
    size: tuple[int, int] = (1280, 720),
    auto_repeat: tuple[int, int] | None = None,
) -> Iterator[str]:
    """A fresh Xvfb screen of ``size``; ``DISPLAY`` names it inside the block. Yields the name.
    ``auto_repeat``: (delay, interval) in ms for a held key to repeat as a desktop's does;
    None: a held key is pressed once."""
    if not can_start():
        raise DisplayError(
            "Xvfb and xdotool are needed for a virtual display: apt-get install xvfb xdotool "
            "(scripts/setup.sh installs them)"
        )
    read_fd, write_fd = os.pipe()
    process = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            str(write_fd),
            "-screen",
            "0",
            f"{size[0]}x{size[1]}x24",
            "-nolisten",
            "tcp",
            *(
                ("-ardelay", "60000")
                if auto_repeat is None
                else ("-ardelay", str(auto_repeat[0]), "-arinterval", str(auto_repeat[1]))
            ),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as announced:
        number = announced.readline().strip()  # written once Xvfb accepts connections
    if not number or process.poll() is not None:
        process.kill()
        raise DisplayError(f"Xvfb did not start (exit code {process.wait()})")
    display = f":{number}"
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = display
    try:
        yield display
    finally:
        process.terminate()
        process.wait()
        if old is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = old


def focus_window(pid: int, timeout: float = 20.0) -> str:
    """Wait for the window of process ``pid`` and give it the keyboard focus; returns its id."""
    search = ["xdotool", "search", "--pid", str(pid)]
    deadline = time.monotonic() + timeout
    while (found := subprocess.run(search, capture_output=True, text=True)).returncode != 0:
        if time.monotonic() > deadline:
            raise DisplayError(f"process {pid} opened no window within {timeout:g} s")
        time.sleep(0.05)
    window = found.stdout.split()[0]
    subprocess.run(["xdotool", "windowfocus", "--sync", window], check=True, capture_output=True)
    return window
