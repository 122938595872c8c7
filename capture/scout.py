"""``python -m capture.scout``: a new boss's profile from one visit to its fight.

Stand at the boss's fog wall (or, for a boss with none, where its fight should start), run this
with the boss's name and the new profile's, lock on to the boss when asked, then fight it for a
while: the command reads where you stood, which numbers the game shows for the boss (``NpcId``,
and ``NpcParamId`` where the base's Siphon config reads it), its max HP and the animations both
fighters played, and writes a profile folder beside the one it started from. The new profile
``extends`` that base profile (the same game build: its memory attributes, keybinds and actions),
so it holds only what is the boss's. What one visit cannot tell is listed at the end, and marked
in the file: the HP floors come from a few recorded fights (``python -m capture.floors``), fuller
animation lists from ``python -m capture.vocab``.

A base whose places are not measured yet (``reset.fog_wall = "unmeasured"``, as
``eldenring_godrick``'s) is measured the same way: scout with it as the base, and use the profile
written, which is the base with the places filled in.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import tomlkit

from env.common.cli import flag, log_level_flag, parse_settings, run_command
from env.common.errors import ConfigError
from env.common.fields import check_fields, checked, number
from env.common.staging import staged_folder
from env.profile import NO_PLACE, PROFILES_DIR, Profile, load_profile
from env.siphon.game import SiphonGame

from capture.vocab import COLUMNS, vocabulary

log = logging.getLogger(__name__)

POSITION = ("HeroGlobalPosX", "HeroGlobalPosY", "HeroGlobalPosZ")
"""Where the player stands, in the frame ``reset.fog_wall`` and ``reset.start_position`` use."""
PROFILE_NAME = re.compile(r"[a-z0-9_]{1,64}")
"""A profile's name: a folder name on every system the game runs on."""
WATCH_HZ = 10
"""How often the fight is read for its animations: every animation lasts several reads."""


@dataclass(frozen=True)
class ScoutArgs:
    """What ``python -m capture.scout`` asks: each field its flag."""

    name: str = field(metadata=flag("the new profile's name, e.g. eldenring_godrick", positional=True))
    boss_name: str | None = field(
        default=None,
        metadata=flag(
            "the boss as people call it, e.g. 'Godrick the Grafted' (default: the base's for its boss, or NAME)"
        ),
    )
    boss: str | None = field(
        default=None,
        metadata=flag(
            "the boss's key, e.g. godrick (default: the base's where NAME is the base's name and a suffix, "
            "eldenring_godrick_measured over eldenring_godrick; else NAME after its game prefix)"
        ),
    )
    host: str = field(default="127.0.0.1:50051", metadata=flag("Siphon server host:port"))
    base: str = field(
        default="eldenring_margit",
        metadata=flag("the profile of the same game build the new one extends (its attributes, keybinds and actions)"),
    )
    out: Path | None = field(
        default=None, metadata=flag("where the profile folder goes (default: env/profiles/NAME)", type=Path)
    )
    no_fog_wall: bool = field(
        default=False,
        metadata=flag("the boss has no fog wall (an open field): where you stand is where each fight restarts"),
    )
    watch_s: float = checked(60.0, number(1, 3600), "seconds of fight watched for the fighters' animations")
    hook_timeout: float = checked(60.0, number(1, 3600), "seconds to wait for you to lock on to the boss")
    log_level: str = log_level_flag()

    def __post_init__(self) -> None:
        check_fields(self)

    def boss_key(self, base: Profile) -> str:
        """The new profile's boss: ``--boss``, else the base's where the new profile refines the
        base (its name the base's and a suffix), else NAME after its game prefix, as
        ``env.factory`` names profiles (``eldenring_malenia`` fights ``malenia``)."""
        if self.boss is not None:
            return self.boss
        if self.name == base.name or self.name.startswith(f"{base.name}_"):
            return base.boss
        return self.name.split("_", 1)[-1]


@dataclass(frozen=True)
class Visit:
    """What one visit to a boss showed."""

    standing_at: tuple[float, float, float]
    boss_npc_id: int
    boss_npc_param_id: int | None  # where the config reads NpcParamId
    boss_max_hp: int
    animations: dict[str, list[int]]  # fighter -> ids, most played first
    reads: int


def scout(game: SiphonGame, watch_s: float) -> Visit:
    """Read where the player stands and the targeted boss, then count the animations both
    fighters play for ``watch_s`` seconds of the fight."""
    state = game.read_state()
    standing_at = tuple(float(state[name]) for name in POSITION)
    boss_npc_id, boss_max_hp = int(state["NpcId"]), int(state["NpcMaxHp"])
    boss_npc_param_id = int(state["NpcParamId"]) if "NpcParamId" in state else None
    log.info(
        "standing at %s; the boss reads NpcId %d, NpcParamId %s, max HP %d",
        standing_at,
        boss_npc_id,
        boss_npc_param_id,
        boss_max_hp,
    )
    log.info("fight it now: watching the animations for %.0f s", watch_s)
    counts = {fighter: Counter() for fighter in COLUMNS}
    reads, deadline = 0, game.now() + watch_s
    while game.now() < deadline:
        state = game.read_state([column for column, _ in COLUMNS.values()])
        for fighter, (column, _) in COLUMNS.items():
            counts[fighter][int(state[column])] += 1
        reads += 1
        time.sleep(1 / WATCH_HZ)
    return Visit(standing_at, boss_npc_id, boss_npc_param_id, boss_max_hp, vocabulary(counts), reads)


def write_profile(folder: Path, base: Profile, args: ScoutArgs, visit: Visit) -> None:
    """The new profile: ``extends`` its base, with what is the boss's as the visit showed it, and
    a header naming what is left to fill in. The base is named as ``load_profile`` finds it from
    anywhere: a bundled name, or its folder's absolute path."""
    boss = args.boss_key(base)
    boss_name = args.boss_name or (base.boss_name if boss == base.boss else args.name)
    doc = tomlkit.document()
    doc["extends"] = base.ref if base.ref == base.name else str(base.directory.resolve())
    doc["name"] = args.name
    doc["boss_name"] = boss_name
    doc["boss"] = boss
    reset = tomlkit.table()
    reset["fog_wall"] = NO_PLACE if args.no_fog_wall else list(visit.standing_at)
    reset["start_position"] = list(visit.standing_at)
    doc["reset"] = reset
    fight = tomlkit.table()
    fight["boss_npc_id"] = visit.boss_npc_id
    if visit.boss_npc_param_id is not None:
        fight["boss_npc_param_id"] = visit.boss_npc_param_id
    doc["fight"] = fight
    animations = tomlkit.table()
    animations["player"] = visit.animations["player"]
    animations["boss"] = visit.animations["boss"]
    doc["animations"] = animations
    param = "" if visit.boss_npc_param_id is None else f", NpcParamId {visit.boss_npc_param_id}"
    header = (
        f"# {boss_name}: written by `python -m capture.scout` on {date.today()} from one visit\n"
        f"# (standing at {list(visit.standing_at)}, the boss targeted: NpcId {visit.boss_npc_id}{param}, max HP "
        f"{visit.boss_max_hp};\n# {visit.reads} reads of the fight's animations), laid over {base.name}: its "
        "attributes, keybinds and actions.\n# Left to fill in: fight.player_hp_floor and fight.boss_hp_floor are "
        f"{base.name}'s until a few recorded\n# fights say otherwise (python -m capture.floors); the animation "
        "lists are one visit's (python -m capture.vocab\n# over recorded fights gives fuller ones). Check it: "
        f"python -m env.doctor --profile {folder}\n\n"
    )
    folder.parent.mkdir(parents=True, exist_ok=True)
    with staged_folder(folder) as built:  # whole or not at all, even when stopped half-way
        (built / "profile.toml").write_text(header + tomlkit.dumps(doc))
        load_profile(built)  # what was written loads, or this is a bug


def run(args: ScoutArgs) -> None:
    if not PROFILE_NAME.fullmatch(args.name):
        raise ConfigError(f"profile name {args.name!r}: use lower-case letters, digits and _ (e.g. eldenring_godrick)")
    base = load_profile(args.base)
    folder = args.out or PROFILES_DIR / args.name
    if folder.exists():  # before the visit, not after it
        raise ConfigError(f"{folder} exists: choose another profile name, or --out a new folder")
    print(
        f"connecting to {args.host} with {base.name}'s attributes: stand at the boss's "
        f"{'start' if args.no_fog_wall else 'fog wall'} and lock on to the boss when asked",
        flush=True,
    )
    game = SiphonGame(args.host, base, hook_timeout=args.hook_timeout)
    try:
        visit = scout(game, args.watch_s)
    finally:
        game.close()
    write_profile(folder, base, args, visit)
    param = "" if visit.boss_npc_param_id is None else f", NpcParamId {visit.boss_npc_param_id}"
    print(f"wrote {folder}: boss NpcId {visit.boss_npc_id}{param}, max HP {visit.boss_max_hp}")
    print(
        f"left to fill in: the HP floors (python -m capture.floors); check it: python -m env.doctor --profile {folder}"
    )


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m capture.scout", __doc__, ScoutArgs, argv=argv)
    logging.basicConfig(level=args.log_level, format="%(message)s")
    return run_command(lambda: run(args))


if __name__ == "__main__":
    raise SystemExit(main())
