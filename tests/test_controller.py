"""A game controller, from the device to a dataset step: SDL's reading of a pad (a virtual one,
which SDL reports exactly like a pad plugged in), the recorder's listener and its input log, the
episode file, the labels the builder gives controller play, and the play window's controller."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from env.actions import ActionTable
from env.controller import AXES, BUTTONS
from env.gamepad import Gamepad
from env.profile import load_profile
from env.sim.buttons import InputLatch
from env.sim.controls import Button
from env.sim.virtual_pad import VirtualPad
from env.sim.window import PadFollower

from capture.episode import read_episode
from capture.episode_writer import EpisodeMeta, EpisodeWriter, Sample
from capture.inputs import PAD_AXIS, PAD_DOWN, PAD_UP, InputLog
from capture.labels import HeardActions, StepLabeler
from capture.pad_listener import PadListener
from capture.video import codec

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

PROFILE = load_profile("sim_margit")
TABLE = ActionTable(PROFILE, "discrete")
STATE = np.array([100.0 if name.endswith("Hp") else 0.0 for name in PROFILE.attribute_names])
"""Both fighters at full HP, standing still: a fight that goes on."""


@pytest.fixture
def pad() -> Iterator[VirtualPad]:
    pad = VirtualPad()
    yield pad
    pad.detach()


def read_until(gamepad: Gamepad, ready, timeout: float = 2.0):
    """Read ``gamepad`` until ``ready(state, notices)``; every notice seen on the way."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        state, notices = gamepad.read()
        seen += notices
        if ready(state, seen):
            return state, seen
        time.sleep(0.005)
    raise AssertionError(f"the pad never read as wanted; notices: {seen}")


def test_sdl_reads_a_pad_by_position_and_names_it(pad: VirtualPad):
    gamepad = Gamepad()
    try:
        state, seen = read_until(gamepad, lambda state, _: state is not None)
        assert [n.kind for n in seen] == ["connected"] and seen[0].name == "Xbox 360 Controller"
        assert not state.buttons.any() and not state.axes.any()  # triggers at rest read 0, not half
        pad.button("b", True)
        pad.axis("lefty", -1.0)
        pad.axis("righttrigger", 0.6)
        state, _ = read_until(gamepad, lambda state, _: state.buttons[BUTTONS.index("b")])
        assert state.axes[AXES.index("lefty")] == pytest.approx(-1.0, abs=1e-4)
        assert state.axes[AXES.index("righttrigger")] == pytest.approx(0.6, abs=1e-3)
    finally:
        gamepad.close()


def test_unplugged_replugged_and_a_second_pad_are_each_one_notice(pad: VirtualPad):
    gamepad = Gamepad()
    try:
        read_until(gamepad, lambda state, _: state is not None)
        other = VirtualPad("Wireless Controller")
        try:
            _, seen = read_until(gamepad, lambda _, seen: bool(seen))
            assert [(n.kind, n.name, n.heard) for n in seen] == [
                ("second", "Wireless Controller", "Xbox 360 Controller")
            ]
            pad.detach()  # the first goes: the other is heard
            state, seen = read_until(gamepad, lambda state, seen: len(seen) >= 2)
            assert [(n.kind, n.name) for n in seen] == [
                ("unplugged", "Xbox 360 Controller"),
                ("connected", "Wireless Controller"),
            ]
        finally:
            other.detach()
        state, seen = read_until(gamepad, lambda state, seen: state is None and seen)
        assert [n.kind for n in seen] == ["unplugged"]
    finally:
        gamepad.close()


def test_a_pad_sdl_has_no_mapping_for_says_how_to_add_one_and_the_mapping_works(tmp_path: Path):
    """An unknown pad is named once, with how to add a mapping; given one through
    SDL_GAMECONTROLLERCONFIG (as the line says), the same pad is read; given garbage there, the
    pad is the unknown one again, and nothing fails."""
    script = tmp_path / "unknown_pad.py"
    script.write_text(
        "import sys, time\n"
        "from env.gamepad import Gamepad, describe\n"
        "from env.sim.virtual_pad import VirtualPad\n"
        "pad = VirtualPad('Generic USB Joystick', mapped=False)\n"
        "gamepad = Gamepad()\n"
        "for _ in range(50):\n"
        "    state, notices = gamepad.read()\n"
        "    for n in notices: print(n.kind, n.guid, describe(n))\n"
        "    if state is not None: print('read', state.buttons[:2].tolist()); break\n"
        "    time.sleep(0.01)\n"
    )

    def run(**environ: str) -> str:
        result = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env={**os.environ, **environ}
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    unmapped = run()
    kind, guid, words = unmapped.splitlines()[0].split(" ", 2)
    assert kind == "unmapped" and "read" not in unmapped
    assert "SDL_GAMECONTROLLERCONFIG" in words and guid in words and "Generic USB Joystick" in words
    mapping = f"{guid},Generic USB Joystick,a:b0,b:b1,x:b2,y:b3,leftx:a0,lefty:a1,platform:Linux,"
    mapped = run(SDL_GAMECONTROLLERCONFIG=mapping)
    assert mapped.splitlines()[0].startswith("connected") and "read [False, False]" in mapped
    garbage = run(SDL_GAMECONTROLLERCONFIG="\x7fnot,a:mapping,at all" * 1000)  # SDL skips what it cannot parse
    assert garbage.splitlines()[0].split(" ", 1)[0] == "unmapped"


def test_reading_a_pad_leaves_ctrl_c_and_sigterm_to_the_program():
    """SDL, once started, takes SIGINT and SIGTERM for itself wherever they are at their defaults
    and turns them into a quit event that no one here reads: a process reading a pad (or making a
    virtual one) then lived through `kill`. Started in a fresh process, as a command starts it."""
    script = (
        "import os, signal, time\n"
        "from env.gamepad import Gamepad\n"
        "from env.sim.virtual_pad import VirtualPad\n"
        "pad = VirtualPad()\n"
        "gamepad = Gamepad()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(2)\n"
        "print('lived through SIGTERM')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == -15 and "lived" not in result.stdout, (result.returncode, result.stderr)


def test_the_listener_logs_the_pad_on_the_recorders_clock_within_a_poll(pad: VirtualPad):
    log = InputLog(PROFILE.bound_keys)
    listener = PadListener(log)
    listener.start()
    try:
        assert log.controller == "Xbox 360 Controller"
        pressed_at = time.monotonic()
        pad.button("rightshoulder", True)
        pad.axis("leftx", 0.8)
        time.sleep(0.05)
        pad.button("rightshoulder", False)
        time.sleep(0.02)
        window = log.drain()
        kinds = [
            (int(e["kind"]), BUTTONS[e["key"]] if e["kind"] != PAD_AXIS else AXES[e["key"]]) for e in window.events
        ]
        assert kinds == [(PAD_DOWN, "rightshoulder"), (PAD_AXIS, "leftx"), (PAD_UP, "rightshoulder")]
        assert 0 <= window.events["t"][0] - pressed_at < 0.02  # a 2 ms poll, on a busy machine
        assert window.pad_pressed[BUTTONS.index("rightshoulder")] and not window.pad_held.any()
        assert window.pad_axes[AXES.index("leftx")] == pytest.approx(0.8, abs=1 / 128)
        pad.button("a", True)
        time.sleep(0.02)
        pad.detach()  # unplugged while holding a and the stick: the game sees both let go
        time.sleep(0.05)
        window = log.drain()
        assert not window.pad_held.any() and not window.pad_axes.any() and log.controller == ""
    finally:
        listener.stop()


def test_a_press_on_the_controller_is_what_starts_an_action_not_every_change():
    """The live recorder samples at once on a press (``InputLog.press_heard``); on a controller a
    press is an action coming on by the profile's layout, so a resting stick's tremor, a stick
    pushed further the same way, a trigger short of its threshold and a release take no sample."""
    log = InputLog(PROFILE.bound_keys, layout=PROFILE.controller)
    woken = []
    log.on_press = lambda: woken.append(True)
    leftx, righttrigger = AXES.index("leftx"), AXES.index("righttrigger")

    def press_after(change) -> bool:
        log.drain()
        change()
        return log.press_heard.is_set()

    assert not press_after(lambda: log.pad_axis(leftx, 0.1))  # inside the dead zone
    assert press_after(lambda: log.pad_axis(leftx, 0.6))  # move_right comes on
    assert not press_after(lambda: log.pad_axis(leftx, 0.9))  # still move_right
    assert not press_after(lambda: log.pad_axis(righttrigger, 0.05))  # short of the threshold
    assert press_after(lambda: log.pad_axis(righttrigger, 0.8))  # strong_attack
    assert not press_after(lambda: log.pad_axis(righttrigger, 0.0))
    assert press_after(lambda: log.pad_button(BUTTONS.index("b"), True))  # dodge
    assert not press_after(lambda: log.pad_button(BUTTONS.index("b"), False))
    assert press_after(lambda: log.key(PROFILE.bound_keys[0], True))
    assert len(woken) == 4
    log.drain()
    assert not log.press_heard.is_set()


def episode_with(tmp_path: Path, events: list[tuple], seconds: float = 1.0, pad_start=None) -> Path:
    """A 30 Hz episode of ``seconds`` with the input log ``events`` ((t, kind, column, value))."""
    log = InputLog(PROFILE.bound_keys, clock=lambda: 0.0)
    writer = EpisodeWriter(
        tmp_path,
        EpisodeMeta(
            "sim_margit",
            PROFILE.attribute_names,
            PROFILE.bound_keys,
            30.0,
            codec("lossless"),
            (96, 96),
            "human",
            0,
            "test",
        ),
        lock_step=True,
    )
    first = True
    for i in range(round(seconds * 30) + 1):
        t = i / 30
        for when, kind, column, value in [e for e in events if (i == 0 or e[0] > t - 1 / 30) and e[0] <= t]:
            if kind == "key":
                log.key(column, value, when)
            elif kind == "button":
                log.pad_button(BUTTONS.index(column), value, when)
            else:
                log.pad_axis(AXES.index(column), value, when)
        window = log.drain()
        sample = Sample(
            t,
            t,
            np.zeros((96, 96, 3), np.uint8),
            STATE,
            window.held,
            window.pressed,
            0.0,
            0.0,
            pad_held=window.pad_held,
            pad_pressed=window.pad_pressed,
            pad_axes=window.pad_axes,
        )
        if first and pad_start is not None:
            sample = replace(sample, **pad_start)
        first = False
        writer.append(sample)
        writer.append_events(window.events)
    return writer.finish("timeout", {})


def labels_of(path: Path, mode: str = "discrete", profile=PROFILE) -> list:
    from capture.build_dataset import step_grid, step_labels

    episode = read_episode(path)
    table = ActionTable(profile, mode)
    heard = HeardActions(profile, episode.key_names)
    boundaries = step_grid(episode, 0.2, decided=False, heard=heard, align_to_presses=False)
    labels = step_labels(episode, boundaries, heard, StepLabeler(table))
    return [table.names[a] for a in labels] if mode == "discrete" else [tuple(int(b) for b in a) for a in labels]


def test_controller_play_labels_as_key_play_does(tmp_path: Path):
    """A stick pushed forward is move_forward; a direction plus a dodge tap is a roll that way; a
    dodge tap with the stick at rest a backstep; a trigger past its threshold the strong attack;
    a stick resting within its dead zone nothing."""
    path = episode_with(
        tmp_path,
        [
            (0.01, "axis", "lefty", -0.9),  # step 0: forward
            (0.21, "axis", "lefty", 0.0),
            (0.21, "axis", "leftx", -0.95),  # step 1: left, and b tapped: a roll to the left
            (0.25, "button", "b", True),
            (0.30, "button", "b", False),
            (0.41, "axis", "leftx", 0.0),  # step 2: b alone: a backstep
            (0.45, "button", "b", True),
            (0.50, "button", "b", False),
            (0.62, "axis", "righttrigger", 0.7),  # step 3: the strong attack
            (0.66, "axis", "righttrigger", 0.0),
            (0.81, "axis", "leftx", 0.15),  # step 4: within the dead zone
        ],
    )
    assert labels_of(path) == ["move_forward", "roll_left", "roll_back", "strong_attack", "idle"]
    bits = labels_of(path, "multi_binary")
    names = TABLE.profile.keybinds
    assert [tuple(n for n, b in zip(names, row) if b) for row in bits] == [
        ("move_forward",),
        ("move_left", "dodge"),
        ("dodge",),
        ("strong_attack",),
        (),
    ]


def test_a_diagonal_holds_two_moves_and_keyboard_and_controller_together_label_whichever_acted(tmp_path: Path):
    path = episode_with(
        tmp_path,
        [
            (0.01, "axis", "lefty", -0.7),  # step 0: forward-right, like W + D
            (0.01, "axis", "leftx", 0.7),
            (0.21, "axis", "lefty", 0.0),
            (0.21, "axis", "leftx", 0.0),
            (0.21, "key", "A", True),  # step 1: A held on the keyboard, b tapped on the pad
            (0.26, "button", "b", True),
            (0.30, "button", "b", False),
            (0.39, "key", "A", False),
            (0.41, "axis", "lefty", 0.9),  # step 2: the stick back, R tapped on the keyboard
            (0.45, "key", "R", True),
            (0.47, "key", "R", False),
        ],
        seconds=0.6,
    )
    bits = labels_of(path, "multi_binary")
    names = TABLE.profile.keybinds
    assert [tuple(n for n, b in zip(names, row) if b) for row in bits][0] == ("move_forward", "move_right")
    assert labels_of(path)[1:] == ["roll_left", "heal"]


def test_a_pad_held_when_the_episode_starts_counts_from_its_first_sample(tmp_path: Path):
    buttons = np.zeros(len(BUTTONS), bool)
    axes = np.zeros(len(AXES), np.float32)
    axes[AXES.index("lefty")] = 1.0  # already pulling back
    path = episode_with(
        tmp_path, [(0.22, "axis", "lefty", 0.0)], seconds=0.4, pad_start={"pad_held": buttons, "pad_axes": axes}
    )
    assert labels_of(path) == ["move_back", "idle"]


def test_a_chord_labels_as_its_action_not_as_its_last_key(tmp_path: Path):
    """On the game's own layout Shift + left click is the strong attack, a plain click the attack."""
    game = load_profile("eldenring_margit")
    log = InputLog(game.bound_keys)
    held, pressed = [], []
    for down in (("LEFT",), ("LEFT_SHIFT", "LEFT"), ("SPACE",)):
        for key in down:
            log.key(key, True)
        window = log.drain()
        held.append(window.held)
        pressed.append(window.pressed)
        for key in down:
            log.key(key, False)
        log.drain()
    heard = HeardActions(game, game.bound_keys)
    on, went = heard.from_keys(np.stack(held), np.stack(pressed))
    names = list(game.keybinds)
    assert [[names[a] for a in np.flatnonzero(row)] for row in went] == [["attack"], ["strong_attack"], ["dodge"]]
    table = ActionTable(game, "discrete")
    assert table.command(table.index("strong_attack")).tap == ("LEFT_SHIFT", "LEFT")
    multi = ActionTable(game, "multi_binary")
    attack = multi.bits(frozenset({"attack", "move_forward"}))
    first, again = multi.command(attack, None), multi.command(attack, attack)
    assert first.hold == {"W"} and first.tap == ("LEFT",)  # a mouse button is tapped as its bit turns on
    assert again.hold == {"W"} and again.tap == ()  # and never held


def test_controller_play_with_a_profile_that_has_no_controller_layout_is_one_line(tmp_path: Path):
    import shutil

    from env.config import EnvConfig

    from capture.build_dataset import BuildError, build_dataset

    folder = tmp_path / "profile"
    shutil.copytree(PROFILE.directory, folder)
    toml = folder / "profile.toml"
    text = toml.read_text()
    start = text.index("[controller]")
    toml.write_text(text[:start] + text[text.index("# How a fight restarts") :])
    raw = tmp_path / "raw"
    path = episode_with(raw, [(0.01, "button", "b", True)])
    assert path.exists()
    with pytest.raises(
        BuildError, match="played on a controller, but profile 'sim_margit' has no \\[controller\\] table"
    ):
        build_dataset(raw, "test/pad-v0", EnvConfig(profile=str(folder)), root=tmp_path / "minari")


def test_an_episode_from_before_controllers_reads_as_a_pad_at_rest(tmp_path: Path):
    import h5py

    path = episode_with(tmp_path, [(0.01, "key", "W", True)], seconds=0.4)
    with h5py.File(path, "r+") as f:  # as format 2 wrote it
        for name in ("pad_held", "pad_pressed", "pad_axes"):
            del f[name]
        f.attrs["format_version"] = 2
    episode = read_episode(path)
    assert episode.pad_held.shape == (len(episode), len(BUTTONS)) and not episode.pad_axes.any()
    assert labels_of(path) == ["move_forward", "move_forward"]


def test_the_play_window_follows_a_controller_beside_the_keyboard(pad: VirtualPad):
    latch = InputLatch(PROFILE.keybinds)
    follower = PadFollower(latch, PROFILE.controller)
    try:
        pad.axis("lefty", -1.0)
        pad.button("b", True)
        follower.follow()
        held, pressed, _, _ = latch.drain()
        assert held == Button.MOVE_FORWARD | Button.DODGE and pressed == held
        latch.press("P")  # the keyboard at once
        pad.button("b", False)
        follower.follow()
        held, pressed, released, _ = latch.drain()
        assert held == Button.MOVE_FORWARD | Button.ATTACK and pressed == Button.ATTACK and released == Button.DODGE
    finally:
        follower.close()
    assert latch.drain()[0] == Button.ATTACK  # the pad let go when the window closed


def test_the_simulator_plays_a_chord_as_the_game_does():
    """Siphon taps Shift then left click: the game's strong attack, not its attack."""
    latch = InputLatch(load_profile("eldenring_margit").keybinds)
    latch.press("LEFT_SHIFT")
    latch.press("LEFT")
    held, pressed, _, _ = latch.drain()
    assert held == pressed == Button.STRONG_ATTACK
    latch.release("LEFT")
    latch.release("LEFT_SHIFT")
    latch.press("LEFT")
    assert latch.drain()[1] == Button.ATTACK


@pytest.mark.slow
def test_a_pad_unplugged_mid_fight_keeps_the_episode_says_so_once_and_is_heard_again_when_back(
    xvfb: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """The real recorder, recording a person on a pad against a simulator server in real time:
    the pad pulled out mid-fight lets go of what it held (the episode goes on, one line says
    so), and once plugged back in it is heard again, in the same episode."""
    import logging
    import threading

    from env.sim.launcher import SimServer

    from capture.record import RecordSettings, record

    out = tmp_path / "raw"
    events: list[str] = []
    with SimServer(size=(64, 64)) as server:
        holder = {"pad": VirtualPad()}

        def person() -> None:
            time.sleep(1.0)
            holder["pad"].axis("lefty", -1.0)  # walk forward, then pull the pad out
            time.sleep(0.5)
            holder["pad"].detach()
            events.append("unplugged")
            time.sleep(1.0)
            holder["pad"] = VirtualPad()  # plugged back in
            events.append("back")
            time.sleep(0.5)
            holder["pad"].button("b", True)
            time.sleep(0.1)
            holder["pad"].button("b", False)

        hands = threading.Thread(target=person, daemon=True)
        hands.start()
        with caplog.at_level(logging.INFO):
            saved = record(RecordSettings(host=server.host, out=out, max_episodes=1, max_episode_seconds=4.0, rate=30))
        hands.join(5)
        holder["pad"].detach()
    assert events == ["unplugged", "back"]
    (path,) = saved
    episode = read_episode(path)
    text = caplog.text
    assert text.count("unplugged: the episode goes on") == 1 and text.count("connected: its buttons") == 2, text
    assert episode.attrs["outcome"] == "timeout" and episode.attrs["controller"] == "Xbox 360 Controller"
    pad = episode.events[np.isin(episode.events["kind"], (PAD_DOWN, PAD_UP, PAD_AXIS))]
    lefty = pad[(pad["kind"] == PAD_AXIS) & (pad["key"] == AXES.index("lefty"))]
    assert lefty["dx"].tolist() == [-1.0, 0.0], "the stick let go when the pad went"
    b = pad[(pad["kind"] != PAD_AXIS) & (pad["key"] == BUTTONS.index("b"))]
    assert b["kind"].tolist() == [PAD_DOWN, PAD_UP] and b["t"][0] > lefty["t"][1] + 0.8, "heard again once back"


def test_the_viewer_shows_what_the_pad_did(tmp_path: Path):
    pytest.importorskip("rerun")
    from test_view import entities, indices_with

    from elden_il.view.__main__ import main

    path = episode_with(
        tmp_path / "raw", [(0.1, "button", "b", True), (0.2, "button", "b", False), (0.3, "axis", "lefty", -1.0)]
    )
    saved = tmp_path / "pad.rrd"
    assert main([str(path), "--save", str(saved)]) == 0
    found = entities(saved, "sample")
    assert {"/pad/held/b", "/pad/axes/lefty"} <= found and "/pad/held/a" not in found, found
    assert len(indices_with(saved, "sample", "/pad/axes/lefty:Scalars:scalars")) == len(read_episode(path))
