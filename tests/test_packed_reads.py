"""Packed reads: neighbouring attributes read as one Siphon array, planned from the config's own
pointer chains, served by the simulator from the same layout, and equal to reading them one by one."""

from __future__ import annotations

import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REAL_SERVER_TEST_ARGS

from env.attribute_config import AttributeSpec, SiphonConfig
from env.observations import observed_attributes
from env.profile import load_profile
from env.sim.launcher import SimServer
from env.siphon.client import SiphonClient, SiphonError
from env.siphon.packed_reads import MAX_SPAN, ReadPlan, plan_blocks

P1 = "48 8B 05 ?? ?? ?? ?? 48 85 C0 74 0F 48 39 88"


def spec(
    name: str, type_: str, offset: int, chain: tuple[int, ...] = (0x10EF8, 0x0, 0x190, 0x0), pattern: str = P1
) -> AttributeSpec:
    return AttributeSpec(name, type_, pattern, (*chain, offset))


def test_the_games_config_packs_into_its_objects():
    profile = load_profile("eldenring_margit")
    blocks = {b.name: b for b in plan_blocks(profile.siphon.attributes)}
    stats = blocks["HeroHp..HeroMaxSp"]
    assert stats.spec.type == "array" and stats.spec.length == 36 and stats.spec.offsets[-1] == 0x138
    assert [(f.name, f.offset) for f in stats.fields] == [
        ("HeroHp", 0),
        ("HeroMaxHp", 4),
        ("HeroFp", 16),
        ("HeroMaxFp", 24),
        ("HeroSp", 28),
        ("HeroMaxSp", 32),
    ]
    # the game stores X, Z, Y; NoGravity sits 0x15B bytes further on and stays a scalar read
    assert [f.name for f in blocks["HeroLocalPosX..HeroLocalPosY"].fields] == [
        "HeroLocalPosX",
        "HeroLocalPosZ",
        "HeroLocalPosY",
    ]
    assert not any("NoGravity" in name for name in blocks)
    assert blocks["NpcHp..NpcMaxHp"].spec.method == "dll"  # a dll attribute's array reads the same NPC
    # the observation needs 10 attributes: 6 reads; a full snapshot of 34: 13 (NpcParamId alone in its object)
    plan = ReadPlan.for_names(observed_attributes(profile), blocks.values())
    assert sorted(plan.requests) == sorted(
        [
            "HeroHp..HeroMaxSp",
            "NpcHp..NpcMaxHp",
            "HeroLocalPosX..HeroLocalPosY",
            "NpcGlobalPosX..NpcGlobalPosAngle",
            "HeroAnimId",
            "NpcAnimId",
        ]
    )
    assert len(ReadPlan.for_names(profile.attribute_names, blocks.values()).requests) == 13


def test_only_neighbours_of_one_object_are_packed():
    attributes = {
        a.name: a
        for a in [
            spec("A", "int", 0x10),
            spec("B", "float", 0x14),
            spec("Far", "int", 0x10 + MAX_SPAN),  # would make the array longer than MAX_SPAN
            spec("OtherObject", "int", 0x18, chain=(0x10EF8, 0x0, 0x190, 0x8)),
            spec("OtherPattern", "int", 0x18, pattern="48 8B 0D ?? ?? ?? ??"),
            AttributeSpec("NoChain", "int"),
            spec("Blob", "array", 0x1C),
            spec("Flag", "bool", 0x200),
            spec("FlagInside", "bool", 0x200),  # the same byte twice
        ]
    }
    blocks = plan_blocks(attributes)
    assert [[f.name for f in b.fields] for b in blocks] == [["A", "B"]]
    block = blocks[0]
    assert block.unpack(block.pack({"A": -7, "B": 0.5})) == {"A": -7, "B": 0.5}
    # an array is used only where it saves a call
    assert ReadPlan.for_names(["A", "Far"], blocks).requests == ("A", "Far")
    assert ReadPlan.for_names(["B", "Far", "A"], blocks).requests == ("A..B", "Far")


def test_packed_and_one_by_one_reads_agree_on_every_attribute(sim_server: SimServer, player: None):
    profile = load_profile("sim_margit")
    names = observed_attributes(profile)
    client = SiphonClient(sim_server.host)
    try:
        client.configure(profile.siphon)
        client.wait_for_hook(profile.siphon, timeout=20)
        client.write("gameSpeedFlag", True)
        client.write("gameSpeedVal", 0.0)  # paused: one state for both ways of reading
        assert len(client._plan(names).requests) == 6
        packed = client.read(profile.attribute_names)
        client.configure(profile.siphon, packed_reads=False)
        assert len(client._plan(names).requests) == 10
        assert client.read(profile.attribute_names) == packed
    finally:
        client.close()


def test_the_simulator_refuses_an_array_it_cannot_fill(sim_server: SimServer):
    profile = load_profile("sim_margit")
    lonely = replace(spec("Blob", "array", 0x400), length=16)  # no attribute of the config inside it
    config = SiphonConfig(
        profile.siphon.path,
        profile.siphon.process_name,
        profile.siphon.window_name,
        {**profile.siphon.attributes, "Blob": lonely},
    )
    client = SiphonClient(sim_server.host)
    try:
        with pytest.raises(SiphonError, match="Blob: the simulator has no raw memory"):
            client.configure(config)
        client.configure(profile.siphon)
        with pytest.raises(SiphonError, match="is an array: write the attributes it holds"):
            client.write("HeroHp..HeroMaxSp", b"\0" * 36, "array")
    finally:
        client.close()


def test_reads_from_several_threads_at_once(sim_server: SimServer, player: None):
    """The recorder reads from its sampler thread while the main thread may read too."""
    profile = load_profile("sim_margit")
    client = SiphonClient(sim_server.host)
    client.configure(profile.siphon)
    client.wait_for_hook(profile.siphon, timeout=20)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(50):
                values, frame = client.read_and_capture(profile.attribute_names)
                assert values.keys() == set(profile.attribute_names) and frame.ndim == 3
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    assert not errors


def test_a_profile_can_turn_packed_reads_off(tmp_path: Path):
    source = Path(load_profile("sim_margit").directory)
    for name in ("profile.toml", "siphon.toml"):
        (tmp_path / name).write_text((source / name).read_text())
    text = (tmp_path / "profile.toml").read_text()
    (tmp_path / "profile.toml").write_text("packed_reads = false\n" + text)
    assert load_profile(tmp_path).packed_reads is False
    (tmp_path / "profile.toml").write_text('packed_reads = "no"\n' + text)
    with pytest.raises(Exception, match="packed_reads must be true or false"):
        load_profile(tmp_path)


def test_a_server_that_cannot_read_our_arrays_falls_back_to_one_by_one_reads(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
):
    """A Siphon whose array reads fail (here: come back short; on the real server: a config that
    stuck from an earlier client): values still come, read one by one, and one warning says how
    to get packed reads back. Nothing is returned half-read."""
    from env.sim import server as sim_server

    serve_array = sim_server.SimSiphonService.GetAttribute

    def short_arrays(self, request, context):
        response = serve_array(self, request, context)
        if response.WhichOneof("value") == "array_value":
            response.array_value = response.array_value[:-1]
        return response

    monkeypatch.setattr(sim_server.SimSiphonService, "GetAttribute", short_arrays)
    running = sim_server.serve(port=0, size=(84, 84))
    profile = load_profile("sim_margit")
    client = SiphonClient(running.address)
    try:
        client.configure(profile.siphon)
        with caplog.at_level("WARNING", logger="env.siphon.client"):
            values = client.read(["HeroHp", "HeroMaxHp"])
            again = client.read(["HeroHp", "HeroMaxHp", "HeroLocalPosX"])
        assert 0 < values["HeroHp"] <= values["HeroMaxHp"] and again["HeroMaxHp"] == values["HeroMaxHp"]
        assert caplog.text.count("cannot read this client's packed arrays") == 1, caplog.text
        assert "HeroHp..HeroMaxSp" in caplog.text and "Restart Siphon" in caplog.text
    finally:
        client.close()
        running.stop()


def test_a_loading_screen_that_ends_mid_read_keeps_the_packed_arrays(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
):
    """A read refused at a loading screen that is over by the time the client checks the
    attributes one by one (a death's reload, seen in long recordings): the arrays were refused
    by the game, not by the server, so they stay, and nothing warns."""
    from env.sim import server as sim_server

    serve = sim_server.SimSiphonService.GetAttribute
    loading = {"arrays refused": 0}

    def arrays_refused_once(self, request, context):
        response = serve(self, request, context)
        if response.WhichOneof("value") == "array_value" and not loading["arrays refused"]:
            loading["arrays refused"] += 1
            return sim_server.pb2.GetSiphonResponse(success=False, message="pointer chain is null")
        return response

    monkeypatch.setattr(sim_server.SimSiphonService, "GetAttribute", arrays_refused_once)
    running = sim_server.serve(port=0, size=(84, 84))
    client = SiphonClient(running.address)
    profile = load_profile("sim_margit")
    try:
        client.configure(profile.siphon)
        with caplog.at_level("WARNING", logger="env.siphon.client"):
            values = client.read(["HeroHp", "HeroMaxHp"])
        assert loading["arrays refused"] == 1 and 0 < values["HeroHp"] <= values["HeroMaxHp"]
        assert "packed arrays" not in caplog.text
        assert client._plan(["HeroHp", "HeroMaxHp"]).blocks  # still read as one array
    finally:
        client.close()
        running.stop()


def test_a_real_server_first_initialised_by_pysiphon_init_is_read_one_by_one_after_one_warning(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
):
    """The real Siphon keeps the attribute list it first initialised memory with. After
    `pysiphon init siphon.toml` (no packed arrays in it), this client's arrays cannot be read:
    it falls back to one attribute at a time for good, says so exactly once with how to get the
    fast path back, and reads what reading one by one reads."""
    import shutil
    import subprocess

    real = (
        *REAL_SERVER_TEST_ARGS,
        "--start",
        "fight",
    )
    profile = load_profile("sim_margit")
    pysiphon = shutil.which("pysiphon", path=str(Path(sys.executable).parent))
    assert pysiphon is not None, "pysiphon's CLI is installed with pysiphon"
    with SimServer(size=(84, 84), extra_args=real, log_path=tmp_path / "server.log") as server:
        init = subprocess.run(
            [pysiphon, "--host", server.host, "init", str(profile.siphon.path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert init.returncode == 0, init.stdout + init.stderr
        client, plain = SiphonClient(server.host), SiphonClient(server.host)
        try:
            client.configure(profile.siphon)  # sends our arrays too; the server keeps pysiphon's list
            client.wait_for_hook(profile.siphon, timeout=20)
            client.write("gameSpeedFlag", True)
            client.write("gameSpeedVal", 0.0)  # paused: one state for every read below
            with caplog.at_level("WARNING", logger="env.siphon.client"):
                values = client.read(profile.attribute_names)
                observed = client.read_and_capture(observed_attributes(profile))[0]
                again = client.read(profile.attribute_names)
            assert values == again == plain.read(profile.attribute_names)  # unconfigured: one by one
            assert observed == {n: values[n] for n in observed}
            assert caplog.text.count("cannot read this client's packed arrays") == 1, caplog.text
            assert (
                "HeroHp..HeroMaxSp" in caplog.text
                and "Restart Siphon, then connect with this project first" in caplog.text
            )
            assert len(client._plan(observed_attributes(profile)).requests) == 10  # no arrays planned any more
        finally:
            client.close()
            plain.close()
