"""Shared fixtures: real simulator servers over gRPC, and an X server for pynput and the window."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from env.sim.launcher import SimServer


@pytest.fixture
def sim_server(tmp_path: Path) -> Iterator[SimServer]:
    """A fresh ``python -m env.sim`` (seed 0, 160x90) on a free loopback port."""
    with SimServer(seed=0, size=(160, 90), log_path=tmp_path / "server.log") as server:
        yield server


@pytest.fixture(scope="session")
def xvfb() -> Iterator[str]:
    """An X display (Xvfb without key auto-repeat); skips where Xvfb or xdotool are missing."""
    if not (shutil.which("Xvfb") and shutil.which("xdotool")):
        pytest.skip("Xvfb and xdotool are needed (scripts/setup.sh installs them)")
    display = ":97"
    process = subprocess.Popen(
        ["Xvfb", display, "-screen", "0", "1280x720x24", "-nolisten", "tcp", "-ardelay", "60000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{display[1:]}").exists():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            pytest.fail("Xvfb did not start")
        time.sleep(0.05)
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = display
    yield display
    process.terminate()
    process.wait()
    if old is None:
        os.environ.pop("DISPLAY", None)
    else:
        os.environ["DISPLAY"] = old
