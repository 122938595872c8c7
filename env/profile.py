"""Profiles: everything game- and boss-specific, loaded from ``env/profiles/<name>/``.

A profile folder holds ``siphon.toml`` (the Siphon attribute config, sent to the server) and
``profile.toml`` (keybinds, the discrete action table, animation vocabularies, and how to restart
the fight). Loading validates it all up front, so a typo in a key name fails here with the file
and the name, not silently in the game (the real server turns unknown keys into scancode 0).

A profile may be laid over another (``extends = "eldenring_margit"``): a second boss of the same
game build shares its parent's attributes, keybinds and action table, so its file holds only what
is that boss's, and a fix to the shared part is made once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from env.attribute_config import SiphonConfig, line_of, load_siphon_config, read_toml
from env.common.errors import ConfigError
from env.controller import ControllerLayout, load_controller_layout
from env.fight_rules import FightRules
from env.keys import is_mouse_button, normalize_key

PROFILES_DIR = Path(__file__).parent / "profiles"
Binding = tuple[str, ...]
"""The Siphon keys one action is bound to, pressed in this order: one key, or a chord whose
first keys are held as modifiers while the last is pressed (``("LEFT_SHIFT", "LEFT")``)."""
DEFAULT_BOSS = "margit"
"""The boss a profile that names none fights: the one boss every profile fought before ``boss``."""
BOSS_KEY = re.compile(r"[a-z0-9_]{1,64}")
"""A boss key (``tree_sentinel``): the tail of its profiles' names (``eldenring_tree_sentinel``)."""
NOT_INHERITED = ("name", "extends")
"""Top-level keys a profile never takes from the one it extends: its own name is its folder's."""
NO_PLACE = "none"
"""``reset.fog_wall = "none"``: this boss has no such place (an open field), whatever the parent says."""
UNMEASURED = "unmeasured"
"""``reset.fog_wall = "unmeasured"``: the place exists in the game but nobody has measured it yet;
a live reset, which would teleport there, is refused (``Profile.check_reset_measured``)."""
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


class NotTheBoss(NamedTuple):
    """A target that is not the profile's boss: which attribute says so, what it read, and the
    profile key (in ``[fight]``) that names the boss by it."""

    attribute: str
    read: object
    key: str
    wanted: int


BOSS_IDS = (("NpcId", "boss_npc_id"), ("NpcParamId", "boss_npc_param_id"))
"""The attributes that tell which NPC is targeted, and the ``[fight]`` key naming the boss by each."""


def not_the_boss(
    state: Mapping[str, object], boss_npc_id: int | None, boss_npc_param_id: int | None = None
) -> NotTheBoss | None:
    """Why the targeted NPC in ``state`` is not the boss, or ``None`` if nothing says so. ``NpcId``
    is needed where ``boss_npc_id`` is set (a state without it is no fight against the boss);
    ``NpcParamId`` is checked where read (an older config has no such attribute): it tells apart
    bosses that share a model, and so an ``NpcId`` (Margit and Morgott)."""
    for (attribute, key), wanted in zip(BOSS_IDS, (boss_npc_id, boss_npc_param_id)):
        if wanted is None or (attribute == "NpcParamId" and attribute not in state):
            continue
        if state.get(attribute) != wanted:
            return NotTheBoss(attribute, state.get(attribute), key, wanted)
    return None


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
    boss_npc_param_id: int | None = None  # its NpcParamId: tells apart bosses sharing a model (NpcId)
    boss: str = DEFAULT_BOSS  # which boss this profile fights, by key ("godrick"): the simulator's boss data
    unmeasured: tuple[str, ...] = ()  # reset keys ("fog_wall") whose place is known to exist, not measured
    fog_entry_s: float = 3.0  # how long walking through the fog wall takes, before locking on
    restart_when_recording: bool = True  # capture.record's --restart default (writes HP, teleports)
    controller: ControllerLayout | None = None  # the game's controller layout ([controller]), if it has one
    game_clock: GameClock | None = None  # an attribute counting the game's own time ([clock]), if it has one

    @property
    def ref(self) -> str:
        """What ``load_profile`` takes to load this profile again: the bundled name, or the folder."""
        bundled = PROFILES_DIR / self.name
        return self.name if bundled.resolve() == self.directory.resolve() else str(self.directory)

    def check_reset_measured(self) -> None:
        """Refuse, saying how to measure it, a live reset that would teleport the player to a place
        this profile has not measured: a guess (another boss's fog wall) would put the player in
        the wrong arena, or in a wall, with nothing to tell why."""
        if not self.unmeasured:
            return
        keys = " and ".join(f"reset.{key}" for key in self.unmeasured)
        boss = self.boss_name or self.boss
        where, flags = (
            (f"at {boss}'s fog wall", "")
            if "fog_wall" in self.unmeasured
            else (f"where a fight against {boss} should start", " --no-fog-wall")
        )
        raise ConfigError(
            f"profile {self.name!r} has not measured {keys}, which a live reset teleports to: stand {where} "
            f"and run `python -m capture.scout {self.name}_measured --base {self.ref}{flags}`: "
            "it writes a profile that extends this one with the places measured; use that one"
        )

    @property
    def boss_id_attributes(self) -> tuple[str, ...]:
        """What to read to tell the boss from another target: ``NpcId`` where ``boss_npc_id`` is
        set, ``NpcParamId`` where ``boss_npc_param_id`` is and the Siphon config reads it."""
        return tuple(
            attribute
            for (attribute, _), wanted in zip(BOSS_IDS, (self.boss_npc_id, self.boss_npc_param_id))
            if wanted is not None and (attribute == "NpcId" or attribute in self.siphon.attributes)
        )

    def not_the_boss(self, state: Mapping[str, object]) -> NotTheBoss | None:
        """Why the NPC targeted in ``state`` is not this profile's boss, or ``None`` (``not_the_boss``)."""
        return not_the_boss(state, self.boss_npc_id, self.boss_npc_param_id)

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


def _profile_folder(name_or_path: str | Path, beside: Path = Path()) -> Path | None:
    """The folder ``name_or_path`` names: a folder holding profile.toml (relative to ``beside``)
    or a bundled profile's name; ``None`` if neither."""
    for directory in (beside / name_or_path, PROFILES_DIR / str(name_or_path)):
        if (directory / "profile.toml").is_file():
            return directory
    return None


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a bundled profile by name (``"sim_margit"``) or any profile folder by path."""
    directory = _profile_folder(name_or_path)
    if directory is None:
        raise ConfigError(
            f"no profile {str(name_or_path)!r}: give a folder holding profile.toml or one of "
            f"{', '.join(available_profiles())}"
        )
    path = directory / "profile.toml"
    data = _layered(path)
    siphon = load_siphon_config(data["siphon_config"])

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
    unmeasured = tuple(key for key in ("fog_wall", "start_position") if reset.get(key) == UNMEASURED)
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
    boss = data.get("boss", DEFAULT_BOSS)
    if not isinstance(boss, str) or not BOSS_KEY.fullmatch(boss):
        raise ConfigError(
            f'{path}: boss = {boss!r} must be a boss key of lower-case letters, digits and _ ("godrick", '
            '"tree_sentinel"): the tail of its profiles\' names, and what the simulator knows the boss by'
        )

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
        boss_npc_id=_npc_number(path, fight, "boss_npc_id", "NpcId"),
        boss_npc_param_id=_npc_number(path, fight, "boss_npc_param_id", "NpcParamId"),
        boss=boss,
        unmeasured=unmeasured,
        fog_entry_s=float(fog_entry_s),
        restart_when_recording=restart_when_recording,
        controller=load_controller_layout(path, data.get("controller"), tuple(keybinds)),
        game_clock=_game_clock(path, data.get("clock"), siphon),
    )


def _layered(path: Path, below: tuple[Path, ...] = ()) -> dict[str, Any]:
    """``path``'s profile data laid over the profile it ``extends``, if any (over its parent's,
    and so on): a table it gives replaces the parent's key by key, anything else whole (an array
    such as ``discrete_actions`` too). ``siphon_config`` comes back as a path, resolved against the
    folder of the file that names it: a child that names none uses its parent's config where it is.
    ``below``: the children already read, to tell a cycle."""
    data = read_toml(path)
    own_siphon = data.get("siphon_config")
    parent_ref = data.get("extends")
    if parent_ref is None:
        merged = {key: value for key, value in data.items() if key != "siphon_config"}
        merged["siphon_config"] = path.parent / str(own_siphon or "siphon.toml")
        return merged
    if not isinstance(parent_ref, str) or not parent_ref:
        raise ConfigError(
            f"{path}: extends = {parent_ref!r} must name the profile this one is laid over: a bundled profile "
            f'("eldenring_margit") or its folder'
        )
    parent = _profile_folder(parent_ref, beside=path.parent)
    if parent is None:
        raise ConfigError(
            f"{path}: extends = {parent_ref!r}: no such profile; give a folder holding profile.toml (relative to "
            f"{path.parent}) or one of {', '.join(available_profiles())}"
        )
    parent_path = parent.resolve() / "profile.toml"  # named plainly in messages, not "child/../parent"
    chain = (*below, path)
    if any(parent_path.resolve() == child.resolve() for child in chain):
        circle = " -> ".join(str(p) for p in (*chain, parent_path))
        raise ConfigError(f"{path}: extends = {parent_ref!r} goes round in a circle ({circle}): break it")
    merged = {key: value for key, value in _layered(parent_path, chain).items() if key not in NOT_INHERITED}
    for key, value in data.items():
        if key in ("extends", "siphon_config"):
            continue
        inherited = merged.get(key)
        merged[key] = {**inherited, **value} if isinstance(value, dict) and isinstance(inherited, dict) else value
    if own_siphon is not None:
        merged["siphon_config"] = path.parent / str(own_siphon)
    return merged


def _npc_number(path: Path, fight: dict, key: str, attribute: str) -> int | None:
    """``fight.<key>``: the number Siphon's ``attribute`` reads with the boss targeted, if set."""
    value = fight.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{path}: fight.{key} = {value!r} must be the boss's {attribute} (an integer)")
    return value


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
    """``reset.<key>``: a place, or ``None`` where there is none (``"none"``, or the key absent) or
    it is not measured yet (``"unmeasured"``, which the loader notes in ``Profile.unmeasured``)."""
    value = table.get(key)
    if value is None or value in (NO_PLACE, UNMEASURED):
        return None
    if not (
        isinstance(value, list)
        and len(value) == 3
        and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in value)
    ):
        raise ConfigError(
            f'{path}: reset.{key} must be [x, y, z] (global, Z up), "{NO_PLACE}" (the boss has no such place) or '
            f'"{UNMEASURED}" (not measured yet: a live reset is refused), not {value!r}'
        )
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
