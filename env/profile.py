"""Profiles: everything game- and boss-specific, loaded from ``env/profiles/<name>/``.

A profile folder holds ``siphon.toml`` (the Siphon attribute config, sent to the server) and
``profile.toml`` (keybinds, the discrete action table, animation vocabularies, and how to restart
the fight). Loading validates it all up front, so a typo in a key name fails here with the file
and the name, not silently in the game (the real server turns unknown keys into scancode 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from env.attribute_config import SiphonConfig, line_of, load_siphon_config, read_toml
from env.common.errors import ConfigError
from env.controller import ControllerLayout, load_controller_layout
from env.fight_rules import FightRules
from env.keys import is_mouse_button, normalize_key

PROFILES_DIR = Path(__file__).parent / "profiles"
Binding = tuple[str, ...]
"""The Siphon keys one action is bound to, pressed in this order: one key, or a chord whose
first keys are held as modifiers while the last is pressed (``("LEFT_SHIFT", "LEFT")``)."""
FRAME_SOURCES = ("capture", "stream")
"""``capture``: one unary CaptureFrame per frame (raw BGRA, exact pixels, a round trip each);
``stream``: Siphon's StreamFrames, JPEG pushed by the server at its own rate, newest kept."""


@dataclass(frozen=True, slots=True)
class DiscreteAction:
    """One entry of the discrete action table, in semantic action names (``move_forward``...)."""

    name: str
    hold: tuple[str, ...] = ()
    tap: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GameClock:
    """An attribute that counts the game's own time, ``per_second`` counts to a second of it.

    A live game paused between steps runs each step between two calls whose answers travel over
    the wire: the wall's clock can only estimate how much game time ran between them, and a player
    that times the boss's moves by that estimate (the scripted expert) misjudges them. Read with
    every observation, the game's own count says exactly how long each step ran."""

    attribute: str
    per_second: float

    def seconds(self, state: Mapping[str, object]) -> float:
        return float(state[self.attribute]) / self.per_second


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    boss_name: str
    directory: Path
    siphon: SiphonConfig
    keybinds: dict[str, Binding]  # semantic action -> the Siphon keys that do it (a key, or a chord)
    discrete_actions: tuple[DiscreteAction, ...]
    player_animations: tuple[int, ...]
    boss_animations: tuple[int, ...]
    reset_writes: tuple[tuple[str, object], ...]  # attribute writes that restart the fight
    start_position: tuple[float, float, float] | None  # global X, Y, Z to teleport to on reset
    fog_wall: tuple[float, float, float] | None  # global X, Y, Z in front of the fog wall, to walk back in
    player_position: tuple[str, str]  # the attributes giving X, Y of the player ...
    boss_position: tuple[str, str]  # ... and of the boss, in one frame (for the distance)
    packed_reads: bool = True  # read neighbouring attributes as one array (env/siphon/packed_reads.py)
    frame_source: str = "capture"  # how frames come from Siphon (FRAME_SOURCES; env/siphon/stream.py)
    stream_quality: int = 85  # the JPEG quality asked of StreamFrames (frame_source = "stream")
    fight_rules: FightRules = FightRules()  # when a fighter is down: the [fight] HP floors
    boss_npc_id: int | None = None  # the boss's NpcId: NPC reads follow whatever was targeted last
    fog_entry_s: float = 3.0  # how long walking through the fog wall takes, before locking on
    restart_when_recording: bool = True  # capture.record's --restart default (writes HP, teleports)
    controller: ControllerLayout | None = None  # the game's controller layout ([controller]), if it has one
    game_clock: GameClock | None = None  # an attribute counting the game's own time ([clock]), if it has one

    @property
    def ref(self) -> str:
        """What ``load_profile`` takes to load this profile again: the bundled name, or the folder."""
        bundled = PROFILES_DIR / self.name
        return self.name if bundled.resolve() == self.directory.resolve() else str(self.directory)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(self.siphon.attributes)

    @property
    def bound_keys(self) -> tuple[str, ...]:
        """Every key and mouse button some binding uses, once each, in binding order: what the
        recorder hears (and logs) of the keyboard and mouse."""
        return tuple(dict.fromkeys(key for binding in self.keybinds.values() for key in binding))

    def keys_for(self, action: str) -> Binding:
        """The keys that do ``action``, pressed in this order (a modifier before its key)."""
        try:
            return self.keybinds[action]
        except KeyError:
            raise ConfigError(
                f"profile {self.name!r} binds no key to {action!r}; bound: {', '.join(self.keybinds)}"
            ) from None

    def holdable(self, action: str) -> bool:
        """Whether ``action`` can be held down through Siphon: only keyboard keys can be (a mouse
        button is honoured by taps alone)."""
        return not any(is_mouse_button(key) for key in self.keys_for(action))


def available_profiles() -> list[str]:
    return sorted(p.name for p in PROFILES_DIR.iterdir() if (p / "profile.toml").is_file())


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a bundled profile by name (``"sim_margit"``) or any profile folder by path."""
    directory = Path(name_or_path)
    if not (directory / "profile.toml").is_file():
        directory = PROFILES_DIR / str(name_or_path)
    path = directory / "profile.toml"
    if not path.is_file():
        raise ConfigError(
            f"no profile {str(name_or_path)!r}: give a folder holding profile.toml or one of "
            f"{', '.join(available_profiles())}"
        )
    data = read_toml(path)
    siphon = load_siphon_config(directory / str(data.get("siphon_config", "siphon.toml")))

    keybinds = _keybinds(path, data.get("keybinds"))

    actions = []
    for i, entry in enumerate(data.get("discrete_actions", [])):
        unknown = [a for a in (*entry.get("hold", []), *entry.get("tap", [])) if a not in keybinds]
        if unknown or "name" not in entry:
            raise ConfigError(
                f"{path}: discrete_actions[{i}] ({entry.get('name', 'unnamed')}) uses "
                f"{', '.join(unknown) or 'no name'}; every action needs a name and may only use "
                f"bound actions: {', '.join(keybinds)}"
            )
        on_mouse = [a for a in entry.get("hold", []) if any(is_mouse_button(k) for k in keybinds[a])]
        if on_mouse:
            raise ConfigError(
                f"{path}: discrete_actions[{i}] ({entry['name']}) holds {', '.join(on_mouse)}, bound to a mouse "
                "button: Siphon taps mouse buttons but never holds them; put it in `tap`"
            )
        actions.append(DiscreteAction(entry["name"], tuple(entry.get("hold", ())), tuple(entry.get("tap", ()))))

    reset = data.get("reset", {})
    writes = []
    for i, write in enumerate(reset.get("writes", [])):
        if not (isinstance(write, list) and len(write) == 2 and write[0] in siphon.attributes):
            raise ConfigError(
                f'{path}: reset.writes[{i}] = {write!r}: each write is ["<attribute in '
                f'{siphon.path.name}>", <number | "{{seed}}" | "<attribute to copy>">]'
            )
        writes.append((write[0], write[1]))
    start, fog_wall = (_position(path, reset, key) for key in ("start_position", "fog_wall"))
    fog_entry_s = reset.get("fog_entry_s", 3.0)
    if isinstance(fog_entry_s, bool) or not isinstance(fog_entry_s, (int, float)) or not 0 < fog_entry_s <= 30:
        raise ConfigError(f"{path}: reset.fog_entry_s = {fog_entry_s!r} must be seconds, from above 0 to 30")
    restart_when_recording = reset.get("when_recording", True)
    if not isinstance(restart_when_recording, bool):
        raise ConfigError(f"{path}: reset.when_recording must be true or false, not {restart_when_recording!r}")

    positions = data.get("positions", {})
    player_xy = tuple(positions.get("player", ("HeroLocalPosX", "HeroLocalPosY")))
    boss_xy = tuple(positions.get("boss", ("NpcLocalPosX", "NpcLocalPosY")))
    for key, names in (("player", player_xy), ("boss", boss_xy)):
        if len(names) != 2 or any(n not in siphon.attributes for n in names):
            raise ConfigError(f"{path}: positions.{key} must name two attributes of {siphon.path.name} (X, Y)")

    packed = data.get("packed_reads", True)
    if not isinstance(packed, bool):
        raise ConfigError(f"{path}: packed_reads must be true or false, not {packed!r}")
    frame_source = data.get("frame_source", "capture")
    if frame_source not in FRAME_SOURCES:
        raise ConfigError(f"{path}: frame_source = {frame_source!r}: use one of {', '.join(map(repr, FRAME_SOURCES))}")
    quality = data.get("stream_quality", 85)
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise ConfigError(f"{path}: stream_quality = {quality!r} must be a JPEG quality, a whole number from 1 to 100")

    fight = data.get("fight", {})
    floors = {}
    for key in ("player_hp_floor", "boss_hp_floor"):
        value = fight.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ConfigError(
                f"{path}: fight.{key} = {value!r} must be a fraction of max HP from 0 (a real death) to below 1"
            )
        floors[key] = float(value)
    boss_npc_id = fight.get("boss_npc_id")
    if boss_npc_id is not None and (isinstance(boss_npc_id, bool) or not isinstance(boss_npc_id, int)):
        raise ConfigError(f"{path}: fight.boss_npc_id = {boss_npc_id!r} must be the boss's NpcId (an integer)")

    anims = data.get("animations", {})
    return Profile(
        name=str(data.get("name", directory.name)),
        boss_name=str(data.get("boss_name", "")),
        directory=directory,
        siphon=siphon,
        keybinds=keybinds,
        discrete_actions=tuple(actions),
        player_animations=_animation_ids(path, anims, "player"),
        boss_animations=_animation_ids(path, anims, "boss"),
        reset_writes=tuple(writes),
        start_position=start,
        fog_wall=fog_wall,
        player_position=player_xy,
        boss_position=boss_xy,
        packed_reads=packed,
        frame_source=frame_source,
        stream_quality=quality,
        fight_rules=FightRules(floors["player_hp_floor"], floors["boss_hp_floor"]),
        boss_npc_id=boss_npc_id,
        fog_entry_s=float(fog_entry_s),
        restart_when_recording=restart_when_recording,
        controller=load_controller_layout(path, data.get("controller"), tuple(keybinds)),
        game_clock=_game_clock(path, data.get("clock"), siphon),
    )


def _game_clock(path: Path, clock: object, siphon: SiphonConfig) -> GameClock | None:
    if clock is None:
        return None
    attribute = clock.get("attribute") if isinstance(clock, dict) else None
    per_second = clock.get("per_second") if isinstance(clock, dict) else None
    if (
        attribute not in siphon.attributes
        or isinstance(per_second, bool)
        or not isinstance(per_second, (int, float))
        or not per_second > 0
    ):
        raise ConfigError(
            f'{path}: [clock] = {clock!r} must be attribute = "<an attribute of {siphon.path.name} that counts the '
            "game's own time>\" and per_second = <how many counts make a second of game time, above 0>; "
            "or leave [clock] out (the env then measures a paused step on the wall's clock)"
        )
    return GameClock(attribute, float(per_second))


MAX_CHORD = 4
"""Keys in one binding at most: a modifier or two and a key is what any game binds."""


def _keybinds(path: Path, table: object) -> dict[str, Binding]:
    """``[keybinds]``: each action's key (``"W"``), or its chord (``["LEFT_SHIFT", "LEFT"]``:
    modifiers held, then the last key pressed, as the game's Shift + left click). A mouse button
    may only come last (Siphon taps mouse buttons, so it cannot hold one as a modifier), and no
    two actions share a binding (a recording could not tell them apart)."""
    if not isinstance(table, dict) or not table:
        raise ConfigError(f'{path}: needs a [keybinds] table of action = "KEY" (or ["MODIFIER", "KEY"])')
    keybinds: dict[str, Binding] = {}
    for action, value in table.items():
        keys = value if isinstance(value, list) else [value]
        if not 1 <= len(keys) <= MAX_CHORD or not all(isinstance(k, str) for k in keys):
            raise ConfigError(
                f'{path}: keybinds.{action} = {value!r}: give a key ("W") or a chord of up to {MAX_CHORD} keys '
                '(["LEFT_SHIFT", "LEFT"])'
            )
        try:
            binding = tuple(normalize_key(k) for k in keys)
        except ValueError as e:
            raise ConfigError(f"{path}: keybinds.{action}: {e}") from None
        if len(set(binding)) != len(binding) or any(is_mouse_button(k) for k in binding[:-1]):
            raise ConfigError(
                f"{path}: keybinds.{action} = {value!r}: a chord is different modifier keys, then its key; a mouse "
                "button can only be the last (Siphon cannot hold a mouse button down as a modifier)"
            )
        twin = next((other for other, bound in keybinds.items() if bound == binding), None)
        if twin is not None:
            raise ConfigError(
                f"{path}: keybinds.{action} and keybinds.{twin} are both {'+'.join(binding)}: "
                "a recording could not tell them apart; give each action its own binding"
            )
        keybinds[action] = binding
    return keybinds


def _position(path: Path, table: dict, key: str) -> tuple[float, float, float] | None:
    value = table.get(key)
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(c, (int, float)) for c in value)):
        raise ConfigError(f"{path}: reset.{key} must be [x, y, z] (global, Z up), not {value!r}")
    return tuple(float(c) for c in value)


def _animation_ids(path: Path, animations: dict, who: str) -> tuple[int, ...]:
    """``[animations]``'s ``who`` list: the game's raw animation ids, whole numbers (a name or a
    quoted number is no id the game reports)."""
    ids = animations.get(who, [])
    if not isinstance(ids, list):
        raise ConfigError(f"{path}: animations.{who} must be a list of animation ids (whole numbers), not {ids!r}")
    for value in ids:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"{path}{line_of(path, value, after='[animations]')}: animations.{who} holds {value!r}, "
                f"not an animation id: write the game's number ({'Hero' if who == 'player' else 'Npc'}AnimId), "
                "e.g. 20000, without quotes"
            )
    return tuple(ids)
