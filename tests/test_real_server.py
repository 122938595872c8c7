"""The simulator's real-server mode over gRPC: each behaviour of the real Siphon server and the
real game, checked against the ideal server it replaces. Every test here fails
against an ideal server."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.profile import PROFILES_DIR as PROFILES
from env.profile import load_profile
from env.sim.boss import load_boss
from env.sim.geometry import GATE, GRACE
from env.sim.launcher import SimServer
from env.sim.moves import PlayerAnim
from env.sim.real_server import STATUS_MARK
from env.sim.server import serve as serve_in_process
from env.sim.world import SENTRY_NPC_ID, Phase

FAST = ("--real-server", "--hook-poll-s", "0.05", "--capture-init-ms", "10", "--first-frame-ms", "50")
PROCESS = "elden-il-sim"


class Siphon:
    """Bare stubs, so that what is tested is the server, not a client's way around it."""

    def __init__(self, host: str) -> None:
        self.channel = grpc.insecure_channel(host)
        self.stub = pb2_grpc.SiphonServiceStub(self.channel)

    @staticmethod
    def config(names: dict[str, str], window: str = "w", dll: tuple[str, ...] = ()) -> pb2.SetProcessConfigRequest:
        attributes = [
            pb2.ProcessAttributeProto(name=n, type=t, method="dll" if n in dll else "") for n, t in names.items()
        ]
        return pb2.SetProcessConfigRequest(process_name=PROCESS, process_window_name=window, attributes=attributes)

    def configure(self, names: dict[str, str], window: str = "w", dll: tuple[str, ...] = ()) -> None:
        assert self.stub.SetProcessConfig(self.config(names, window, dll), timeout=5).success
        for call, request in (
            ("InitializeMemory", pb2.InitializeMemoryRequest()),
            ("InitializeInput", pb2.InitializeInputRequest()),
            ("InitializeCapture", pb2.InitializeCaptureRequest()),
        ):
            assert getattr(self.stub, call)(request, timeout=5).success

    def get(self, name: str, timeout: float = 5) -> pb2.GetSiphonResponse:
        return self.stub.GetAttribute(pb2.GetSiphonRequest(attributeName=name), timeout=timeout)

    def value(self, name: str) -> float:
        response = self.get(name)
        assert response.success, response.message
        return getattr(response, response.WhichOneof("value"))

    def set(self, name: str, **value) -> pb2.SetSiphonResponse:
        return self.stub.SetAttribute(pb2.SetSiphonRequest(attributeName=name, **value), timeout=5)

    def tap(self, *keys: str, hold_ms: int = 50) -> pb2.InputKeyTapResponse:
        return self.stub.InputKeyTap(pb2.InputKeyTapRequest(keys=list(keys), hold_ms=hold_ms), timeout=5)

    def capture(self) -> pb2.CaptureFrameResponse:
        return self.stub.CaptureFrame(pb2.CaptureFrameRequest(), timeout=5)


HERO = {"HeroHp": "int", "HeroMaxHp": "int", "HeroLocalPosX": "float", "HeroLocalPosY": "float"}
NPC = {"NpcHp": "int", "NpcId": "int"}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    servers = []

    def start(*args: str, size: tuple[int, int] = (160, 90)) -> Siphon:
        server = SimServer(size=size, extra_args=args, log_path=tmp_path / f"server{len(servers)}.log")
        servers.append(server)
        return Siphon(server.host)

    yield start
    for server in servers:
        server.stop()


def test_one_mutex_and_a_scan_per_call_queue_reads_but_not_input_or_capture(serve):
    for args, serialised in (((), False), ((*FAST, "--scan-ms", "40"), True)):
        siphon = serve(*args)
        siphon.configure(HERO)
        started = time.monotonic()
        reads = [
            siphon.stub.GetAttribute.future(pb2.GetSiphonRequest(attributeName="HeroHp"), timeout=10) for _ in range(8)
        ]
        time.sleep(0.05)
        assert siphon.tap("W", hold_ms=0).success and len(siphon.capture().frame) == 160 * 90 * 4
        prompt = time.monotonic() - started  # input and capture take no lock
        assert all(r.result().success for r in reads)
        queued = time.monotonic() - started
        assert prompt < 0.25
        if serialised:  # 8 scans of 40 ms one after another, never cached
            assert queued >= 8 * 0.040
            one = time.monotonic()
            siphon.value("HeroHp")
            assert time.monotonic() - one >= 0.040
        else:
            assert queued < 0.25


def test_every_locked_call_queues_behind_the_npc_hook_and_mouse_and_toggles_do_not(serve):
    """Siphon's one mutex, held through the hook's wait for a target: SetAttribute,
    SetProcessConfig, InitializeCapture and GetServerStatus queue on it; MoveMouse and
    InputKeyToggle take no lock."""
    config = {**HERO, "gameSpeedFlag": "bool", **NPC}
    for args, real in ((("--start", "grace"), False), ((*FAST, "--scan-ms", "1", "--hook-delay-s", "0.3"), True)):
        siphon = serve(*args)
        siphon.configure(config, dll=tuple(NPC))
        npc = siphon.stub.GetAttribute.future(pb2.GetSiphonRequest(attributeName="NpcId"), timeout=20)
        time.sleep(0.1)  # the hook is being injected, the mutex held
        stub = siphon.stub
        locked = {
            "SetAttribute": stub.SetAttribute.future(
                pb2.SetSiphonRequest(attributeName="gameSpeedFlag", bool_value=False), timeout=20
            ),
            "SetProcessConfig": stub.SetProcessConfig.future(Siphon.config(config, dll=tuple(NPC)), timeout=20),
            "InitializeCapture": stub.InitializeCapture.future(pb2.InitializeCaptureRequest(), timeout=20),
            "GetServerStatus": stub.GetServerStatus.future(pb2.GetServerStatusRequest(), timeout=20),
        }
        started = time.monotonic()
        assert stub.MoveMouse(pb2.MoveMouseRequest(delta_x=1, delta_y=0, steps=1), timeout=5).success
        for down in (True, False):
            assert stub.InputKeyToggle(pb2.InputKeyToggleRequest(key="C", toggle=down), timeout=5).success
        assert time.monotonic() - started < 0.25  # input takes no lock
        time.sleep(0.6)  # past the injection delay: the hook waits for a target
        waiting = {name for name, call in locked.items() if not call.done()}
        assert waiting == (set(locked) if real else set()), waiting
        assert siphon.tap("B").success  # lock on: the hook lets go, and every queued call runs
        assert npc.result().success and all(call.result().success for call in locked.values())


def test_a_write_pays_a_scan_and_a_sim_control_pays_none(serve):
    """Writes find their attribute by the same scan as reads. The simulator's own controls stand
    in for things a user does by hand, not for memory Siphon scans: they cost nothing."""
    for args, real in (((), False), ((*FAST, "--start", "fight", "--scan-ms", "300"), True)):
        siphon = serve(*args)
        siphon.configure({**HERO, "gameSpeedFlag": "bool"})
        started = time.monotonic()
        assert siphon.set("gameSpeedFlag", bool_value=False).success
        assert (time.monotonic() - started >= 0.3) == real
        started = time.monotonic()
        siphon.value("SimTick"), siphon.value("SimPhase")
        assert siphon.set("SimSeed", int_value=3).success
        assert time.monotonic() - started < 0.3  # three control calls, not one scan's worth


def test_the_first_config_sticks_until_the_server_restarts(serve):
    for args in ((), FAST):
        siphon = serve(*args)
        siphon.configure({"HeroHp": "int"}, window="first")  # e.g. `pysiphon init` with another file
        siphon.configure({"HeroHp": "int", "HeroMaxHp": "int"}, window="second")
        status = siphon.stub.GetServerStatus(pb2.GetServerStatusRequest(), timeout=5)
        assert status.window_name == "second" and status.memory_initialized  # what it says changes ...
        assert siphon.get("HeroHp").success
        late = siphon.get("HeroMaxHp")
        if args:  # ... what it reads does not
            assert not late.success and "Failed to read HeroMaxHp" in late.message and "restart" in late.message
        else:
            assert late.success
    fresh = serve(*FAST)  # a restarted server takes the new list
    fresh.configure({"HeroHp": "int", "HeroMaxHp": "int"})
    assert fresh.get("HeroMaxHp").success


def test_the_npc_hook_blocks_the_server_until_a_lock_on_then_follows_the_last_target(serve):
    siphon = serve(*FAST, "--scan-ms", "1", "--hook-delay-s", "0.4")
    siphon.configure({**HERO, **NPC}, dll=tuple(NPC))
    assert (
        siphon.value("SimPhase") == Phase.OUTSIDE
        and (siphon.value("HeroLocalPosX"), siphon.value("HeroLocalPosY")) == GRACE
    )
    started = time.monotonic()
    npc = siphon.stub.GetAttribute.future(pb2.GetSiphonRequest(attributeName="NpcId"), timeout=20)
    time.sleep(0.05)
    hero = siphon.stub.GetAttribute.future(pb2.GetSiphonRequest(attributeName="HeroHp"), timeout=20)
    time.sleep(0.8)  # past the injection delay: still waiting, for a target
    assert not npc.done() and not hero.done()  # every locked call waits behind the hook
    assert len(siphon.capture().frame) > 0  # capture and input do not
    assert siphon.tap("B").success  # lock on, at the grace: the sentry is the one in sight
    assert npc.result().success and npc.result().int_value == SENTRY_NPC_ID
    assert hero.result().success and time.monotonic() - started >= 0.4
    assert siphon.value("NpcHp") != 4174  # "the boss" is a soldier with his own HP
    assert siphon.tap("B").success  # unlocked: the last target stays
    assert siphon.value("NpcId") == SENTRY_NPC_ID

    # through the fog wall (teleport next to it by a local-position write, then E) and lock on
    assert siphon.set("HeroLocalPosY", float_value=GATE[1] - 0.8).success
    assert siphon.tap("E").success
    deadline = time.monotonic() + 10
    while siphon.value("SimPhase") != Phase.FIGHT:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert siphon.value("NpcId") == SENTRY_NPC_ID
    assert siphon.tap("B").success
    assert siphon.value("NpcId") == load_boss("margit").npc_id and siphon.value("NpcHp") == 4174


def test_every_real_game_profile_names_its_boss_as_the_real_server_mode_serves_it(serve):
    """A profile's ``fight.boss_npc_id`` (and ``boss_npc_param_id``) is what the game shows, and the
    simulator serves what the game would: with the boss targeted after walking in (through the fog
    wall, or into an open field's boss's notice), ``NpcId`` and ``NpcParamId`` read the profile's
    numbers, so an episode is cut against the boss on the game as on the simulator (a profile
    naming the map entity id instead, 10000850 for Margit, cut none on the game)."""
    real_game = sorted(p.name for p in PROFILES.iterdir() if p.name.startswith("eldenring_"))
    assert len(real_game) == 3, real_game
    for name in real_game:
        profile = load_profile(name)
        boss = load_boss(profile.boss)
        assert (profile.boss_npc_id, profile.boss_npc_param_id) == (boss.npc_id, boss.npc_param_id), name
        siphon = serve(*FAST, "--hook-delay-s", "0.4", "--profile", name, "--start", "grace")
        siphon.configure({**HERO, **NPC, "NpcParamId": "int", "SimPhase": "int"}, dll=(*NPC, "NpcParamId"))
        keys = profile.keybinds
        if boss.arena.walled:
            assert siphon.set("HeroLocalPosY", float_value=GATE[1] - 0.8).success
            assert siphon.tap(*keys["event_action"]).success  # through the fog wall
        else:
            assert siphon.set("HeroLocalPosY", float_value=boss.start[1] - 10.0).success  # into its notice
        deadline = time.monotonic() + 10
        while siphon.value("SimPhase") != Phase.FIGHT:
            assert time.monotonic() < deadline, f"{name}: never walked into the fight"
            time.sleep(0.05)
        # the first NPC read injects the hook, which answers at the next lock-on, as on the game
        npc = siphon.stub.GetAttribute.future(pb2.GetSiphonRequest(attributeName="NpcId"), timeout=20)
        time.sleep(0.6)  # past the injection delay
        assert siphon.tap(*keys["lock_on"]).success  # lock on to the boss, by the profile's own key
        assert npc.result().int_value == profile.boss_npc_id, name
        assert siphon.value("NpcParamId") == profile.boss_npc_param_id, name


def test_an_ideal_server_reads_the_boss_at_once(serve):
    siphon = serve("--start", "grace", "--hook-delay-s", "5")
    siphon.configure({**HERO, **NPC}, dll=tuple(NPC))
    started = time.monotonic()
    assert siphon.value("NpcId") == load_boss("margit").npc_id and time.monotonic() - started < 1


def test_capture_is_empty_before_the_first_frame_stale_when_minimised_and_fixed_in_size(serve):
    siphon = serve(*FAST[:-2], "--first-frame-ms", "600")
    siphon.configure(HERO)
    empty = siphon.capture()
    assert empty.success and len(empty.frame) == 0 and (empty.width, empty.height) == (160, 90)
    time.sleep(0.7)
    assert len(siphon.capture().frame) == 160 * 90 * 4
    assert siphon.set("SimMinimised", bool_value=True).success
    stale = siphon.capture().frame
    siphon.tap("W", hold_ms=300)  # the world moves on ...
    time.sleep(0.2)
    for _ in range(3):
        assert siphon.capture().frame == stale  # ... the capture does not, and says nothing
    assert siphon.set("SimMinimised", bool_value=False).success
    assert siphon.capture().frame != stale
    assert siphon.set("SimWindowWidth", int_value=200).success  # the window is resized
    resized = siphon.capture()
    assert (resized.width, resized.height) == (160, 90) and len(resized.frame) == 160 * 90 * 4

    ideal = serve()
    ideal.configure(HERO)
    assert ideal.set("SimWindowWidth", int_value=200).success
    follows = ideal.capture()
    assert (follows.width, len(follows.frame)) == (200, 200 * 90 * 4)


def test_a_death_over_grpc_fails_reads_while_loading_and_shows_it(serve):
    siphon = serve(*FAST, "--scan-ms", "1", "--start", "fight", "--death-screen-s", "0.5", "--loading-s", "1.0")
    siphon.configure(HERO)
    assert siphon.set("HeroHp", int_value=0).success
    time.sleep(0.7)
    failed = siphon.get("HeroHp")
    assert not failed.success and "loading screen" in failed.message
    frame = np.frombuffer(siphon.capture().frame, np.uint8)
    assert frame.reshape(90, 160, 4)[..., :3].mean() < 5  # the loading screen
    assert siphon.get("SimTick").success  # the simulator's controls still answer
    time.sleep(1.0)
    assert siphon.value("HeroHp") == siphon.value("HeroMaxHp")
    assert (siphon.value("HeroLocalPosX"), siphon.value("HeroLocalPosY")) == GRACE


def mouse_profile(tmp_path: Path) -> Path:
    """The simulator's profile with attack on the left mouse button and the skill on BUTTON5, so
    a mouse button pressed by the server would show in the world."""
    folder = tmp_path / "mouse_profile"
    shutil.copytree(PROFILES / "sim_margit", folder)
    text = (folder / "profile.toml").read_text()
    (folder / "profile.toml").write_text(
        text.replace('attack = "P"', 'attack = "LEFT"').replace('skill = "F"', 'skill = "BUTTON5"')
    )
    return folder


def test_keys_are_scancodes_and_a_toggled_mouse_button_is_silently_nothing(serve, tmp_path: Path):
    profile = str(mouse_profile(tmp_path))
    ideal = serve("--profile", profile)
    ideal.configure(HERO)
    assert not ideal.stub.InputKeyToggle(pb2.InputKeyToggleRequest(key="LEFT", toggle=True), timeout=5).success

    siphon = serve(*FAST, "--profile", profile)  # at the grace: nobody to hit the player
    siphon.configure({**HERO, "HeroAnimId": "int", "HeroFp": "int"})
    toggle = siphon.stub.InputKeyToggle
    before = [siphon.value(n) for n in ("HeroAnimId", "HeroFp", "HeroLocalPosX", "HeroLocalPosY", "SimPhase")]
    ticks = siphon.value("SimTick")
    for key in ("LEFT", "BUTTON5", "NOT_A_KEY"):  # scancode 0: nothing pressed, success reported
        assert toggle(pb2.InputKeyToggleRequest(key=key, toggle=True), timeout=5).success
    time.sleep(0.4)  # held down for a dozen ticks: no attack, no skill
    assert siphon.value("SimTick") >= ticks + 10
    assert [siphon.value(n) for n in ("HeroAnimId", "HeroFp", "HeroLocalPosX", "HeroLocalPosY", "SimPhase")] == before
    for key in ("LEFT", "BUTTON5", "NOT_A_KEY"):
        assert toggle(pb2.InputKeyToggleRequest(key=key, toggle=False), timeout=5).success
    assert siphon.tap("NOT_A_KEY").success
    assert siphon.tap("LEFT").success  # a tap honours the exact mouse name: the attack is bound
    time.sleep(0.1)
    assert siphon.value("HeroAnimId") == PlayerAnim.LIGHT_ATTACK
    deadline = time.monotonic() + 5
    while siphon.value("HeroAnimId") != PlayerAnim.IDLE:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert siphon.tap("left").success  # taps: exact mouse names only ("left" is no key: nothing)
    y0 = siphon.value("HeroLocalPosY")
    assert toggle(pb2.InputKeyToggleRequest(key="w", toggle=True), timeout=5).success  # a position, any case
    time.sleep(0.3)
    assert toggle(pb2.InputKeyToggleRequest(key="w", toggle=False), timeout=5).success
    assert siphon.value("HeroLocalPosY") > y0 + 0.3


def test_the_games_profile_is_served_in_real_mode_at_the_grace_by_default(serve):
    siphon = serve("--profile", "eldenring_margit", "--scan-ms", "1")
    status = siphon.stub.GetServerStatus(pb2.GetServerStatusRequest(), timeout=5)
    assert "real-server mode" in status.message
    siphon.configure(HERO)
    assert siphon.value("SimPhase") == Phase.OUTSIDE
    assert math.hypot(siphon.value("HeroLocalPosX"), siphon.value("HeroLocalPosY")) > 10
    sim = serve()
    assert "real-server mode" not in sim.stub.GetServerStatus(pb2.GetServerStatusRequest(), timeout=5).message


def test_the_in_process_server_serves_the_games_profile_in_real_mode_by_default():
    for profile, real in (("eldenring_margit", True), ("sim_margit", False)):
        running = serve_in_process(port=0, size=(84, 84), profile=profile)
        try:
            status = Siphon(running.address).stub.GetServerStatus(pb2.GetServerStatusRequest(), timeout=5)
            assert (STATUS_MARK in status.message) == real
            assert (running.process.world.phase is Phase.OUTSIDE) == real
        finally:
            running.stop()
