"""The recorder end to end against live servers: a human's keys on a real X server (Xvfb,
xdotool, pynput) into the simulator's play window, and a server that dies mid-recording."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from conftest import GAME_SERVER_ARGS

from env.sim.display import focus_window
from env.sim.launcher import SimServer
from env.sim.moves import PlayerAnim
from env.siphon.client import SiphonClient

from capture.episode import list_episodes, read_episode

SAMPLE_PERIOD = 1 / 30


def recorder(host: str, out: Path, *extra: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "capture.record", "--host", host, "--out", str(out), "--no-status", *extra],
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
    )


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def xdotool(*args: str) -> tuple[float, float]:
    """Run xdotool; return the monotonic times just before it started and just after it exited:
    the keys went out in between (starting the process alone can take tens of ms when busy)."""
    before = time.monotonic()
    subprocess.run(["xdotool", *args], check=True)
    return before, time.monotonic()


@pytest.mark.slow
def test_human_keys_on_xvfb_are_recorded_with_their_timing(xvfb: str, tmp_path: Path):
    out = tmp_path / "raw"
    # in a fight already, in either mode: a recording without restarts starts where the person is
    extra = ("--window", "--start", "fight")
    with SimServer(size=(320, 180), extra_args=extra, log_path=tmp_path / "server.log") as server:
        focus_window(server.process.pid)
        rec = recorder(server.host, out, "--no-restart", "--max-episode-seconds", "30", log=tmp_path / "recorder.log")
        try:
            wait_for(lambda: list(out.glob("*.partial")), 30, "the recorder to start an episode")
            client = SiphonClient(server.host)  # no configure: a second config would restart capture under the recorder
            client.write("NpcLocalPosY", 9.5, "float")  # the boss starts far off: only our keys move the player
            # ...but it may have struck before that write landed (a knockdown lasts over a second,
            # longer than W is held below): the keys start once the player is free to walk.
            wait_for(
                lambda: client.read(["HeroAnimId"])["HeroAnimId"] == PlayerAnim.IDLE, 10, "the player to stand idle"
            )
            client.close()
            time.sleep(0.3)
            sent = {}
            sent["w_down"] = xdotool("keydown", "w")
            time.sleep(0.6)
            sent["w_up"] = xdotool("keyup", "w")
            time.sleep(0.3)
            sent["p_tap"] = xdotool("keydown", "p", "keyup", "p")  # far shorter than a sample period
            time.sleep(0.3)
            sent["a_down"] = xdotool("keydown", "a")
            time.sleep(0.4)
            sent["a_up"] = xdotool("keyup", "a")
            time.sleep(0.3)
            xdotool("key", "F8")  # the quit hotkey: never recorded as an action
            assert rec.wait(timeout=20) == 0, (tmp_path / "recorder.log").read_text()
        finally:
            if rec.poll() is None:
                rec.kill()
    (path,) = list_episodes(out)
    ep = read_episode(path)
    assert ep.attrs["source"] == "human" and ep.attrs["outcome"] == "stopped"
    keys = {k: i for i, k in enumerate(ep.key_names)}
    events = ep.events

    def event_time(key: str, kind: int) -> float:
        (rows,) = np.nonzero((events["key"] == keys[key]) & (events["kind"] == kind))
        assert len(rows) == 1, f"{key} {kind}: {rows}"
        return float(events["t"][rows[0]])

    # each key's time is when it was sent, give or take the listener's wake-up
    for name, key, kind in [
        ("w_down", "W", 0),
        ("w_up", "W", 1),
        ("a_down", "A", 0),
        ("a_up", "A", 1),
        ("p_tap", "P", 0),
    ]:
        before, after = sent[name]
        assert before <= event_time(key, kind) <= after + SAMPLE_PERIOD, (name, before, event_time(key, kind), after)
    w_down, w_up = sent["w_down"][1], sent["w_up"][0]
    assert "F8" not in ep.key_names
    held_w = ep.keys_held[:, keys["W"]]
    in_hold = (ep.t > w_down + SAMPLE_PERIOD) & (ep.t < w_up)
    assert held_w[in_hold].all() and not held_w[ep.t > sent["w_up"][1] + SAMPLE_PERIOD].any()
    # the tap survived: pressed once, though held at no more than one sample instant
    assert ep.keys_pressed[:, keys["P"]].sum() == 1 and ep.keys_held[:, keys["P"]].sum() <= 1
    # The simulator heard W through its window and walked. Judged by the walk animation, not by the
    # distance covered: the boss, sent away, can still throw daggers whose hit stops a walk short.
    during = (ep.t > w_down) & (ep.t <= w_up + SAMPLE_PERIOD)
    walking = (ep.column("HeroAnimId") == PlayerAnim.WALK) & during
    assert walking.sum() >= 3, ep.column("HeroAnimId")[during]
    y = ep.column("HeroLocalPosY")[walking]
    assert y[-1] > y[0]


@pytest.mark.slow
def test_a_server_dying_mid_recording_closes_the_episode_cleanly(tmp_path: Path):
    out = tmp_path / "raw"
    server = SimServer(size=(84, 84), log_path=tmp_path / "server.log")
    rec = recorder(server.host, out, "--autopilot", log=tmp_path / "recorder.log")
    try:
        with server.player():
            wait_for(lambda: list(out.glob("*.partial")), 30, "an episode to start")
        time.sleep(2.0)
        server.process.kill()
        server.process.wait()
        code = rec.wait(timeout=30)
    finally:
        server.stop()
        if rec.poll() is None:
            rec.kill()
    log = (tmp_path / "recorder.log").read_text()
    assert code == 2, log
    assert "recording stopped: no Siphon server at" in log
    (path,) = list_episodes(out)
    ep = read_episode(path)
    assert ep.attrs["outcome"] == "server_lost" and len(ep) >= 45  # ~2 s at 30 Hz, nothing lost
    assert not list(out.glob("*.partial"))


@pytest.mark.slow
def test_one_command_records_autopilot_episodes_against_the_server(tmp_path: Path):
    out = tmp_path / "raw"
    with SimServer(size=(84, 84), log_path=tmp_path / "server.log") as server, server.player():
        rec = recorder(
            server.host,
            out,
            "--autopilot",
            "--max-episodes",
            "2",
            "--max-episode-seconds",
            "4",
            log=tmp_path / "recorder.log",
        )
        assert rec.wait(timeout=60) == 0, (tmp_path / "recorder.log").read_text()
    episodes = [read_episode(p) for p in list_episodes(out)]
    assert len(episodes) == 2 and all(e.attrs["source"] == "autopilot" for e in episodes)
    assert all(100 <= len(e) <= 130 for e in episodes)  # 4 s at 30 Hz each
    assert all(e.keys_pressed.any() for e in episodes)  # the expert's keys were logged


@pytest.mark.realtime  # the server's fight runs in real time while the recorder starts: alone, not beside three workers
@pytest.mark.parametrize("boss", ["margit", "godrick", "tree_sentinel"])
def test_the_recorder_cuts_a_fight_against_each_boss_of_the_game_and_names_a_wrong_one_once(tmp_path: Path, boss: str):
    """Against the real-server mode serving each boss as the game shows it, the recorder on that
    boss's real-game profile cuts the fight; on another boss's profile it cuts none and says so in
    one line, naming the number it read and the profile key to set."""
    other = "godrick" if boss == "margit" else "margit"
    args = (*GAME_SERVER_ARGS, "--profile", f"eldenring_{boss}", "--start", "fight")
    for profile, log in ((boss, tmp_path / "right.log"), (other, tmp_path / "wrong.log")):
        # a fresh fight for each: a recorder cuts a fight that starts with both fighters at full HP
        with SimServer(size=(84, 84), extra_args=args, log_path=tmp_path / f"{profile}.server.log") as server:
            with server.player():
                rec = recorder(
                    server.host, tmp_path / profile, "--profile", f"eldenring_{profile}", "--autopilot",
                    "--max-episodes", "1", "--max-episode-seconds", "3", log=log,
                )  # fmt: skip
                if profile == other:  # it never cuts one: stopped, as a person stops it, once it has said why
                    wait_for(lambda log=log: "the targeted NPC is" in log.read_text(), 30, "the wrong target named")
                    time.sleep(1.0)
                    rec.send_signal(signal.SIGINT)
                assert rec.wait(timeout=60) == (130 if profile == other else 0), log.read_text()  # 130: by Ctrl-C
    right, wrong = (tmp_path / "right.log").read_text(), (tmp_path / "wrong.log").read_text()
    assert len(list_episodes(tmp_path / boss)) == 1 and "is not" not in right, right
    assert not list_episodes(tmp_path / other)
    named = [line for line in wrong.splitlines() if "the targeted NPC is" in line]
    assert len(named) == 1 and "boss_npc_id" in named[0], wrong


def test_a_held_hotkey_fires_once_per_press(repeating_xvfb: str):
    """Auto-repeat sends a held key's press again and again: a hotkey acts once per press (a
    held F6 discarded episode after episode), a game key is held once."""
    from capture.inputs import InputLog
    from capture.listener import PynputListener

    fired = []
    inputs = InputLog(("W",))
    listener = PynputListener(inputs, {"F6": lambda: fired.append("F6")})
    listener.start()
    try:
        for key in ("F6", "w"):  # only the last key pressed repeats
            xdotool("keydown", key)
            time.sleep(0.6)  # some fifteen repeats
            xdotool("keyup", key)
        xdotool("keydown", "F6", "keyup", "F6")  # a second press: a second action
        time.sleep(0.3)
    finally:
        listener.stop()
    assert fired == ["F6", "F6"]
    events = inputs.drain().events
    assert list(events["kind"]) == [0, 1], events  # W down once, up once


def tap(key: str) -> None:
    xdotool("keydown", key, "keyup", key)


@contextmanager
def quit_by_f8(rec: subprocess.Popen, log: Path) -> Iterator[None]:
    """Run the block with the recorder ``rec`` running, then quit it as a person does (F8): it
    must exit 0. Killed if anything failed."""
    try:
        yield
        tap("F8")
        assert rec.wait(timeout=20) == 0, log.read_text()
    finally:
        if rec.poll() is None:
            rec.kill()


@pytest.mark.slow
def test_f6_sets_a_saved_episode_aside_until_the_next_is_saved(xvfb: str, tmp_path: Path):
    """F6 with no episode in progress moves the last saved one into discarded/ (undoable by
    moving it back) instead of deleting it; saving the next episode removes it for good. An
    F5 start and stop closer together than one env step saves nothing."""
    out = tmp_path / "raw"
    log = tmp_path / "recorder.log"
    with SimServer(size=(84, 84), log_path=tmp_path / "server.log") as server, server.player():
        rec = recorder(server.host, out, "--manual", "--log-level", "DEBUG", log=log)
        with quit_by_f8(rec, log):
            time.sleep(4)  # the recorder connects and starts listening

            def record_one() -> Path:
                before = set(list_episodes(out))
                tap("F5")
                wait_for(lambda: list(out.glob("*.partial")), 20, "an episode to start")
                time.sleep(0.8)
                tap("F5")
                wait_for(lambda: set(list_episodes(out)) - before, 20, "the episode to be saved")
                (new,) = set(list_episodes(out)) - before
                return new

            first = record_one()
            tap("F6")
            aside = out / "discarded" / first.name
            wait_for(aside.exists, 10, "the episode to be set aside")
            assert not first.exists() and read_episode(aside).attrs["outcome"] == "stopped"  # whole, undoable
            assert aside.with_suffix(".mkv").exists() and not first.with_suffix(".mkv").exists()  # with its video
            second = record_one()
            assert not aside.exists()  # gone for good once the next one is saved
            xdotool("keydown", "F5", "keyup", "F5", "keydown", "F5", "keyup", "F5")  # a start and a stop at once
            time.sleep(1.0)
    assert list_episodes(out) == [second], log.read_text()
    assert list(out.glob("*.mkv")) == [second.with_suffix(".mkv")]
    assert not list(out.glob("*.partial")) and not list((out / "discarded").glob("*"))


@pytest.mark.slow
def test_f6_on_the_fight_in_progress_starts_the_next_episode_at_a_fresh_fight(xvfb: str, tmp_path: Path):
    """F6 during a fight throws that attempt away: the next episode is a restarted fight (the
    next seed, both fighters at full HP), not the rest of the attempt given up."""
    out = tmp_path / "raw"
    log = tmp_path / "recorder.log"
    with SimServer(size=(84, 84), log_path=tmp_path / "server.log") as server, server.player():
        rec = recorder(server.host, out, "--seed", "7", log=log)
        with quit_by_f8(rec, log):
            wait_for(lambda: list(out.glob("*.partial")), 30, "the first episode to start")
            time.sleep(1.5)
            first = set(out.glob("*.partial"))
            tap("F6")
            wait_for(lambda: set(out.glob("*.partial")) - first, 20, "the next episode to start")
            time.sleep(1.0)
    (episode,) = [read_episode(p) for p in list_episodes(out)]
    assert episode.attrs["sim_seed"] == 8, log.read_text()  # the fight was restarted, seed 7 given up
    assert list(out.glob("*.mkv")) == [episode.video] and not list(out.glob("*.mkv.partial"))  # its video gone too
    start = dict(zip(episode.attribute_names, episode.state[0]))
    assert start["HeroHp"] == start["HeroMaxHp"] and start["NpcHp"] == start["NpcMaxHp"]
