"""Frames from Siphon's StreamFrames: the client's stream source (``env.siphon.stream``), the
real-server mode's broadcaster (about 15 fps, latest frame wins, JPEG quality from the request),
and a server that goes away mid-rollout: one line within the deadline, never black frames."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import numpy as np
import pytest
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.common.errors import ConfigError, GameError
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.profile import PROFILES_DIR, Profile, load_profile
from env.sim.launcher import SimServer
from env.siphon.game import SiphonGame
from env.siphon.stream import StreamLost

from tests.conftest import REAL_SERVER_TEST_ARGS

SIZE = (160, 90)


def streaming(quality: int = 85) -> Profile:
    return replace(load_profile("sim_margit"), frame_source="stream", stream_quality=quality)


def real_server_at(size: tuple[int, int], log: Path) -> SimServer:
    """A real-server-mode simulator whose world starts in the fight (no lock-on needed)."""
    return SimServer(seed=0, size=size, extra_args=(*REAL_SERVER_TEST_ARGS, "--start", "fight"), log_path=log)


@pytest.fixture
def real_server(tmp_path: Path) -> Iterator[SimServer]:
    with real_server_at(SIZE, tmp_path / "server.log") as server:
        yield server


def test_the_env_observes_the_newest_streamed_frame_and_reports_its_age(sim_server: SimServer, player: None):
    game = SiphonGame(sim_server.host, streaming())
    try:
        env = EldenRingEnv(game, EnvConfig(timestep_ms=100, frame_size=(32, 32)))
        env.reset(seed=0)
        numbers, ages = [], []
        for _ in range(6):
            obs, _, _, _, info = env.step(0)
            numbers.append(game.capture_frame().number)
            ages.append(info["frame_age_ms"])
        assert obs["frame"].shape == (32, 32, 3) and obs["frame"].any()  # a picture, not a black frame
        assert numbers == sorted(numbers) and numbers[-1] > numbers[0]  # the server's numbers, moving on
        assert all(0 <= age < 1000 for age in ages), ages
        assert game.capture_frame().rgb.shape == (SIZE[1], SIZE[0], 3)
    finally:
        game.close()


@pytest.mark.realtime
def test_the_real_server_streams_at_its_rate_latest_frame_wins_at_the_requested_quality(tmp_path: Path):
    """A client that reads nothing for a second then gets the frames its connection's flow
    control window held (a few), and then the newest: not the fifteen it missed, in order.
    Frames big enough to fill that window (640x360) and no window growth (BDP probing off)."""
    with (
        real_server_at((640, 360), tmp_path / "server.log") as server,
        grpc.insecure_channel(server.host, options=[("grpc.http2.bdp_probe", 0)]) as channel,
    ):
        game = SiphonGame(server.host, "sim_margit")  # configures the server (capture initialised)
        stub = pb2_grpc.SiphonServiceStub(channel)
        sizes = {}
        for quality in (10, 95):  # the last, whose frames fill the window, tries a slow client
            stream = stub.StreamFrames(pb2.StreamFramesRequest(format="jpeg", quality=quality), timeout=10)
            first = next(stream)
            while (frame := next(stream)).frame_number - first.frame_number < 8:
                pass
            # The server's own stamps: the client's clock would count a scheduling delay of the
            # first frame's arrival, and the frames queued behind it, as the server's pace.
            rate = (frame.frame_number - first.frame_number) / ((frame.timestamp_us - first.timestamp_us) / 1e6)
            assert 8 <= rate <= 22, rate  # about 15 fps (the machine may be busy)
            sizes[quality] = len(frame.data)
        assert sizes[10] < sizes[95] * 0.5, sizes
        time.sleep(1.0)  # a slow client
        numbers = [next(stream).frame_number for _ in range(6)]
        stream.cancel()
        assert max(numbers) - frame.frame_number >= 12, numbers  # it caught up with the newest ...
        assert numbers == sorted(set(numbers))
        assert max(b - a for a, b in zip([frame.frame_number, *numbers], numbers)) >= 5, numbers  # ... by skipping
        game.close()


def test_a_killed_server_is_one_line_within_the_deadline_and_close_returns(sim_server: SimServer, player: None):
    game = SiphonGame(sim_server.host, streaming(), timeout=1.0)
    env = EldenRingEnv(game, EnvConfig(timestep_ms=50, frame_size=(32, 32)))
    env.reset(seed=0)
    kept = [env.step(0)[0] for _ in range(3)]
    sim_server.process.kill()
    sim_server.process.wait()
    started = time.monotonic()
    with pytest.raises(GameError) as caught:
        for _ in range(100):
            env.step(0)
    assert time.monotonic() - started < 3.0
    message = str(caught.value)
    assert "\n" not in message and sim_server.host in message, message
    with pytest.raises(StreamLost, match=f"frame stream from Siphon at {sim_server.host} ended.*start again"):
        game.capture_frame()
    started = time.monotonic()
    env.close()
    assert time.monotonic() - started < 3.0
    assert len(kept) == 3 and all(obs["frame"].any() for obs in kept)


def test_a_silent_stream_is_lost_after_the_deadline_not_served_stale(real_server: SimServer):
    """A network that drops without a word (the server's process frozen: its sockets stay open,
    nothing arrives) fails the next frame request once the deadline has passed."""
    game = SiphonGame(real_server.host, streaming(), timeout=0.5)
    try:
        game.capture_frame()
        os.kill(real_server.process.pid, signal.SIGSTOP)
        try:
            time.sleep(0.2)
            frame = game.capture_frame()  # within the deadline: the last frame, its age plain to see
            assert game.now() - frame.timestamp >= 0.2
            time.sleep(0.5)
            with pytest.raises(StreamLost, match=f"no frame from Siphon at {real_server.host} for .* s"):
                game.capture_frame()
        finally:
            os.kill(real_server.process.pid, signal.SIGCONT)
    finally:
        game.close()


def test_streamed_frames_show_the_game_as_captured_frames_do(real_server: SimServer):
    captures = SiphonGame(real_server.host, "sim_margit")
    streams = SiphonGame(real_server.host, streaming(quality=95))
    try:
        captures.set_speed(0.0)
        time.sleep(0.2)  # the broadcaster's latest grab is of the paused world
        streamed, captured = streams.capture_frame(), captures.capture_frame()
        assert streamed.rgb.shape == captured.rgb.shape
        assert np.abs(streamed.rgb.astype(int) - captured.rgb.astype(int)).mean() < 6  # JPEG at 95
    finally:
        streams.close()
        captures.close()


@pytest.mark.parametrize(
    "line, error",
    [
        ('frame_source = "streams"', "frame_source = 'streams': use one of 'capture', 'stream'"),
        ("stream_quality = 0", "stream_quality = 0 must be a JPEG quality"),
    ],
)
def test_a_bad_frame_source_in_the_profile_is_refused(tmp_path: Path, line: str, error: str):
    folder = tmp_path / "profile"
    folder.mkdir()
    for name in ("profile.toml", "siphon.toml"):
        (folder / name).write_bytes((PROFILES_DIR / "sim_margit" / name).read_bytes())
    (folder / "profile.toml").write_text(line + "\n" + (folder / "profile.toml").read_text())
    with pytest.raises(ConfigError, match=error):
        load_profile(folder)
