"""The simulator's memory map against the game's attribute names, and profile loading."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from env.attribute_config import load_siphon_config
from env.common.errors import ConfigError
from env.factory import default_profile, make_env
from env.profile import available_profiles, load_profile
from env.sim import memory
from env.sim.world import World

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

ER_CONFIG = Path(__file__).parents[1] / "env/profiles/eldenring_margit/siphon.toml"


def test_the_simulator_serves_every_attribute_of_the_games_config_with_its_type():
    config = load_siphon_config(ER_CONFIG)
    assert config.process_name == "eldenring.exe"
    assert len(config.attributes) == 34
    world = World()
    for name, spec in config.attributes.items():
        assert memory.ATTRIBUTES[name].type == spec.type, name
        value = memory.read(world, name)
        assert type(value) is {"int": int, "float": float, "bool": bool}[spec.type], name
    assert set(config.attributes) == memory.ELDEN_RING_ATTRIBUTES


def test_positions_are_local_and_global_with_z_up():
    world = World()
    world.player.z = 0.5
    assert memory.read(world, "HeroLocalPosZ") == 0.5
    gx, lx = memory.read(world, "HeroGlobalPosX"), memory.read(world, "HeroLocalPosX")
    assert gx - lx == pytest.approx(memory.MAP_ORIGIN[0], abs=1e-3)


def test_writes_change_the_world_as_in_the_game():
    world = World()
    memory.write(world, "HeroHp", 100)
    memory.write(world, "NpcLocalPosX", 3.0)
    memory.write(world, "gameSpeedFlag", True)
    memory.write(world, "gameSpeedVal", 0.0)
    assert world.player.hp == 100 and world.boss.x == 3.0 and world.speed == 0.0
    memory.write(world, "NpcHp", 1000)
    assert world.boss.hp == 1000
    memory.write(world, "HeroHp", 0)
    assert world.player.dead


def test_reads_and_writes_that_cannot_work_say_why():
    world = World()
    with pytest.raises(memory.MemoryAccessError, match="no attribute 'HeroHP'.*HeroHp"):
        memory.read(world, "HeroHP")
    with pytest.raises(memory.MemoryAccessError, match="read-only"):
        memory.write(world, "NpcAnimId", 3000)


def test_floats_are_32_bit_like_game_memory():
    world = World()
    memory.write(world, "HeroLocalPosX", 0.1)
    assert memory.read(world, "HeroLocalPosX") == float(__import__("numpy").float32(0.1))


def test_the_simulators_profile_names_its_game_clock_and_the_games_names_none():
    """The simulator counts its ticks where a paused env reads them; no counter of the real game's
    is verified to stand still while it is paused, so its env measures a step on the wall's clock."""
    clock = load_profile("sim_margit").game_clock
    assert (clock.attribute, clock.per_second) == ("SimTick", 60.0)
    assert load_profile("eldenring_margit").game_clock is None


def test_both_bundled_profiles_load():
    sim = load_profile("sim_margit")
    assert sim.keybinds["dodge"] == ("LEFT_SHIFT",) and len(sim.discrete_actions) == 13
    assert all(name in memory.ATTRIBUTES for name in sim.attribute_names)


def test_the_game_profile_is_the_games_own_default_bindings_and_controller_layout():
    """A keyboard-and-mouse player rebinds nothing: attacks are mouse taps, the strong attack and
    the skill Shift + a click, as Elden Ring ships; a controller player's pad is the game's
    default layout, every action on a control."""
    game = load_profile("eldenring_margit")
    assert game.keybinds == {
        "move_forward": ("W",),
        "move_back": ("S",),
        "move_left": ("A",),
        "move_right": ("D",),
        "dodge": ("SPACE",),
        "jump": ("F",),
        "crouch": ("X",),
        "lock_on": ("Q",),
        "attack": ("LEFT",),
        "strong_attack": ("LEFT_SHIFT", "LEFT"),
        "skill": ("LEFT_SHIFT", "RIGHT"),
        "use_item": ("R",),
        "event_action": ("E",),
    }
    assert game.bound_keys == ("W", "S", "A", "D", "SPACE", "F", "X", "Q", "LEFT", "LEFT_SHIFT", "RIGHT", "R", "E")
    assert not game.holdable("attack") and game.holdable("dodge")
    for profile in (game, load_profile("sim_margit")):
        layout = profile.controller
        assert layout.buttons == {
            "dodge": "b",
            "jump": "a",
            "crouch": "leftstick",
            "lock_on": "rightstick",
            "attack": "rightshoulder",
            "strong_attack": "righttrigger",
            "skill": "lefttrigger",
            "use_item": "x",
            "event_action": "y",
        }
        assert layout.control_of("move_forward") == "the left stick up"


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (('dodge = "LEFT_SHIFT"', 'dodge = ["LEFT", "LEFT_SHIFT"]'), "a mouse button can only be the last"),
        (('dodge = "LEFT_SHIFT"', 'dodge = "P"'), "keybinds.attack and keybinds.dodge are both P"),
        (('attack = "P"', 'attack = "LEFT"\nmove_up = "LEFT"'), "both LEFT"),
        (
            ('move_forward = "W"', 'move_forward = "RIGHT"'),
            r"discrete_actions\[1\] \(move_forward\) holds move_forward",
        ),
        (('use_item = "x"', ""), "controller.buttons has no button for use_item"),
        (('use_item = "x"', 'use_item = "z"'), "controller.buttons.use_item = 'z': use one of SDL's buttons"),
        (('use_item = "x"', 'use_item = "x"\nmove_forward = "dpup"'), "the moves are the left stick's"),
        (('use_item = "x"', 'use_item = "a"'), "jump and use_item are both a"),
        (('stick = "left"', 'stick = "middle"'), "controller.stick = 'middle'"),
        (('stick = "left"', 'stick = "left"\ndead_zone = 1.5'), "controller.dead_zone = 1.5"),
        (('attribute = "SimTick"', 'attribute = "SimTicks"'), r"\[clock\] = .*an attribute of siphon.toml"),
        (("per_second = 60", "per_second = 0"), r"\[clock\] = .*how many counts make a second"),
    ],
)
def test_a_profile_that_binds_what_cannot_be_played_is_refused_naming_it(
    profile_copy: Path, change: tuple[str, str], refusal: str
):
    path = profile_copy / "profile.toml"
    old, new = change
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
    with pytest.raises(ConfigError, match=refusal):
        load_profile(profile_copy)


@pytest.fixture
def profile_copy(tmp_path: Path) -> Path:
    target = tmp_path / "profile"
    shutil.copytree(Path(__file__).parents[1] / "env/profiles/sim_margit", target)
    return target


def test_a_wrong_key_name_in_keybinds_is_refused_naming_file_and_key(profile_copy: Path):
    path = profile_copy / "profile.toml"
    path.write_text(path.read_text().replace('dodge = "LEFT_SHIFT"', 'dodge = "LSHIFT"'))
    with pytest.raises(ConfigError, match=r"profile.toml: keybinds.dodge: unknown Siphon key name 'LSHIFT'"):
        load_profile(profile_copy)


def test_malformed_toml_is_refused_with_the_line(profile_copy: Path):
    path = profile_copy / "siphon.toml"
    path.write_text(path.read_text().replace('type = "int"', "type = int", 1))
    with pytest.raises(ConfigError, match=r"siphon.toml: malformed TOML: .*line \d+"):
        load_profile(profile_copy)


def test_a_discrete_action_using_an_unbound_button_is_refused(profile_copy: Path):
    path = profile_copy / "profile.toml"
    path.write_text(path.read_text().replace('tap = ["use_item"]', 'tap = ["drink"]'))
    with pytest.raises(ConfigError, match=r"discrete_actions\[11\] \(heal\) uses drink"):
        load_profile(profile_copy)


def test_an_unknown_profile_lists_the_available_ones():
    with pytest.raises(ConfigError, match="sim_margit"):
        load_profile("no_such_profile")


def test_a_bad_attribute_type_is_refused(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text('[process_info]\nname = "x.exe"\n[attributes.HeroHp]\ntype = "double"\n')
    with pytest.raises(ConfigError, match="attributes.HeroHp has type 'double'"):
        load_siphon_config(path)


@pytest.mark.parametrize(
    "command",
    [
        ["env.sim", "--port", "0"],
        ["capture.record", "--backend", "sim", "--autopilot", "--max-episodes", "1"],
        ["capture.build_dataset", "--id", "test/x-v0"],
    ],
)
def test_every_command_line_refuses_a_broken_profile_in_one_line(
    command: list[str], profile_copy: Path, tmp_path: Path
):
    """A user's profile with a typo gets the loader's message, naming file and key; no traceback."""
    keybinds = profile_copy / "profile.toml"
    keybinds.write_text(keybinds.read_text().replace('attack = "P"', 'attack = "PP"'))
    args = [*command, "--profile", str(profile_copy)]
    if command[0] == "capture.record":
        args += ["--out", str(tmp_path / "raw")]
    if command[0] == "capture.build_dataset":
        record = subprocess.run(
            [
                sys.executable,
                "-m",
                "capture.record",
                "--backend",
                "sim",
                "--autopilot",
                "--max-episodes",
                "1",
                "--max-episode-seconds",
                "2",
                "--no-status",
                "--out",
                str(tmp_path / "raw"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert record.returncode == 0, record.stderr
        args += ["--raw", str(tmp_path / "raw"), "--root", str(tmp_path / "minari")]
    result = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "keybinds.attack" in result.stderr and "PP" in result.stderr, (
        result.stderr
    )


def write_profile(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profile.toml").write_text(text)
    return folder


def test_a_profile_extends_another_holding_only_what_is_its_own(tmp_path: Path):
    """A table given replaces the parent's key by key (one level deep), an array replaces whole,
    the name is the child's own, and the Siphon config is the parent's, where the parent keeps it."""
    child = write_profile(
        tmp_path / "eldenring_other",
        'extends = "eldenring_margit"\nboss = "other"\n'
        '[fight]\nboss_npc_id = 475000\n[[discrete_actions]]\nname = "idle"\n',
    )
    margit, profile = load_profile("eldenring_margit"), load_profile(child)
    assert profile.name == "eldenring_other" and profile.boss == "other"
    assert profile.boss_npc_id == 475000 and profile.boss_npc_param_id == margit.boss_npc_param_id
    assert profile.fight_rules == margit.fight_rules  # the floors kept
    assert [a.name for a in profile.discrete_actions] == ["idle"]  # the array replaced whole
    assert (profile.keybinds, profile.controller, profile.reset_writes, profile.fog_wall) == (
        margit.keybinds,
        margit.controller,
        margit.reset_writes,
        margit.fog_wall,
    )
    assert profile.siphon.path == margit.siphon.path and not (child / "siphon.toml").exists()


def test_extends_chains_and_a_child_may_name_its_own_siphon_config(tmp_path: Path):
    """A grandchild takes from both; a parent's siphon_config resolves against the parent's
    folder, a child's own against the child's; a relative folder is found from the child's."""
    sim = Path(__file__).parents[1] / "env/profiles/sim_margit"
    parent = write_profile(tmp_path / "parent", f'extends = "{sim}"\nsiphon_config = "mine.toml"\nboss = "godrick"\n')
    shutil.copy(sim / "siphon.toml", parent / "mine.toml")
    child = write_profile(tmp_path / "child", 'extends = "../parent"\nboss_name = "Godrick the Grafted"\n')
    profile = load_profile(child)
    assert (profile.name, profile.boss, profile.boss_name) == ("child", "godrick", "Godrick the Grafted")
    assert profile.siphon.path == (parent / "mine.toml").resolve()
    assert profile.game_clock == load_profile("sim_margit").game_clock  # from the grandparent


@pytest.mark.parametrize(
    ("extends", "refusal"),
    [
        ('"no_such_profile"', r"child/profile.toml: extends = 'no_such_profile': no such profile; .*eldenring_margit"),
        ('"../child"', r"child/profile.toml: extends = '../child' goes round in a circle"),
        ('"../other"', r"extends = '../child' goes round in a circle \(.*child/profile.toml -> .*other/profile.toml"),
        ("3", r"child/profile.toml: extends = 3 must name the profile this one is laid over"),
    ],
)
def test_a_missing_parent_or_a_cycle_is_refused_naming_the_file_and_key(tmp_path: Path, extends: str, refusal: str):
    write_profile(tmp_path / "other", 'extends = "../child"\n')
    child = write_profile(tmp_path / "child", f"extends = {extends}\n")
    with pytest.raises(ConfigError, match=refusal):
        load_profile(child)


def test_every_bundled_game_profile_loads_with_its_boss_and_the_games_config():
    """Each real-game profile names its boss by key, NpcId and NpcParamId, and plays on the one
    Siphon config of the game build (eldenring_margit's, which the others extend)."""
    config = load_profile("eldenring_margit").siphon.path
    bosses = {}
    for name in available_profiles():
        profile = load_profile(name)
        if name.startswith("eldenring_"):
            assert profile.siphon.path == config, name
            assert "NpcParamId" in profile.boss_id_attributes, name
            assert (profile.player_animations, profile.boss_animations) == ((), ()), name  # capture.vocab's job
            bosses[profile.boss] = (profile.boss_npc_id, profile.boss_npc_param_id)
        assert name.endswith(f"_{profile.boss}"), name
    assert bosses == {
        "margit": (213000, 21300014),
        "godrick": (475000, 47500014),
        "tree_sentinel": (325100, 32510010),
    }
    assert load_profile("sim_margit").boss == "margit" and load_profile("sim_margit").boss_npc_param_id is None


def test_a_place_not_measured_refuses_a_live_reset_with_the_command_that_measures_it():
    """Godrick's fog wall and the Tree Sentinel's starting place are not known: their profiles say
    so ("unmeasured"), inherit no other boss's place, and a live reset is refused saying what to run."""
    godrick, sentinel = load_profile("eldenring_godrick"), load_profile("eldenring_tree_sentinel")
    assert (godrick.fog_wall, godrick.start_position, godrick.unmeasured) == (
        None,
        None,
        ("fog_wall", "start_position"),
    )
    assert (sentinel.fog_wall, sentinel.start_position, sentinel.unmeasured) == (None, None, ("start_position",))
    with pytest.raises(ConfigError, match=r"has not measured reset.fog_wall and reset.start_position") as refused:
        godrick.check_reset_measured()
    assert "python -m capture.scout eldenring_godrick_measured --base eldenring_godrick`" in str(refused.value)
    with pytest.raises(ConfigError, match=r"--base eldenring_tree_sentinel --no-fog-wall`"):
        sentinel.check_reset_measured()
    load_profile("eldenring_margit").check_reset_measured()  # measured: nothing to say


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ('boss = "Tree Sentinel"', r"boss = 'Tree Sentinel' must be a boss key of lower-case letters"),
        ("[fight]\nboss_npc_param_id = 2.5", r"fight.boss_npc_param_id = 2.5 must be the boss's NpcParamId"),
        ('[reset]\nfog_wall = "unknown"', r'reset.fog_wall must be \[x, y, z\].*"none".*"unmeasured"'),
    ],
)
def test_a_bad_boss_key_param_id_or_place_is_refused_naming_it(tmp_path: Path, change: str, refusal: str):
    child = write_profile(tmp_path / "child", f'extends = "eldenring_margit"\n{change}\n')
    with pytest.raises(ConfigError, match=refusal):
        load_profile(child)


def test_the_default_profile_follows_the_boss_asked_for():
    """A config naming no profile plays the backend's game against the boss asked for; a boss
    with no profile there is refused listing those that have one."""
    assert default_profile("sim") == "sim_margit"
    assert default_profile("siphon", "godrick") == "eldenring_godrick"
    assert default_profile("siphon", "Tree Sentinel") == "eldenring_tree_sentinel"
    with pytest.raises(
        ConfigError, match=r"backend 'siphon' has no profile for boss 'malenia'.*godrick, margit, tree_sentinel"
    ):
        default_profile("siphon", "malenia")
    with pytest.raises(ConfigError, match=r"backend 'sim_server' has no profile for boss 'malenia'.*margit"):
        default_profile("sim_server", "malenia")


def test_the_env_takes_the_boss_by_its_key_or_its_name(tmp_path: Path):
    """``boss_name`` matches the profile's boss key ('tree_sentinel') or a part of its name."""
    sentinel = write_profile(
        tmp_path / "sim_sentinel", 'extends = "sim_margit"\nboss = "tree_sentinel"\nboss_name = "Tree Sentinel"\n'
    )
    for boss_name in ("tree_sentinel", "Tree Sentinel", "sentinel", None):
        make_env(profile=str(sentinel), boss_name=boss_name).close()
    with pytest.raises(
        ConfigError,
        match=r"boss_name 'margit' does not match profile 'sim_sentinel' \(Tree Sentinel, boss key 'tree_sentinel'\)",
    ):
        make_env(profile=str(sentinel), boss_name="margit")
