"""Getting back into the boss fight on a live game after something the game does not undo.

A memory write restarts a fight in place only while both fighters are alive in the arena. After
a real death the game shows a loading screen (every pointer chain fails to read), then puts the
player at the Site of Grace outside the fog wall with nothing targeted; after a real kill the
boss is gone from the save. ``back_into_the_fight`` gets from any of these to "in the arena, the
boss targeted", or says precisely why it cannot, with the game running (a paused game plays
no loading screen, walks nowhere and locks on to nothing: it runs at real time meanwhile):

1. wait out the death and the loading screen (the player's attributes read again, HP above 0);
2. if the NPC the reads follow is not the boss (nothing targeted, another enemy): teleport in
   front of the fog wall, hold forward and tap the event action, wait for the walk through, then
   lock on until the reads show the boss;
3. a boss that was seen at 0 HP, or that cannot be found behind its fog wall, is reported with
   the one manual step that brings it back: restoring the backup of the save.
"""

from __future__ import annotations

import logging
import time
from contextlib import AbstractContextManager
from typing import Protocol

from env.common.errors import GameError
from env.fight_rules import AT_DEATH
from env.game import Game
from env.siphon.client import ReadRefused, SiphonClient

log = logging.getLogger(__name__)

LOCK_ON_TRIES = 3
KILLED_MESSAGE = (
    "the boss was killed for real: Elden Ring removes it from this save, and no memory write "
    "brings it back. Quit to the title screen, copy your backup of the save "
    "(%APPDATA%\\EldenRing\\<steam id>\\ER0000.sl2) back in place, load it, and walk to the boss "
    "again; then restart. (On the simulator: write SimRestoreSave.)"
)


class BossKilled(GameError):
    """The boss died for real; the message says how to get the fight back (a manual step)."""


class SiphonHost(Game, Protocol):
    """What getting back into the fight needs of a game: a Siphon server's, with its client for
    reads that must not wait on a snapshot, a teleport, and whether the boss was seen dead."""

    client: SiphonClient
    boss_seen_dead: bool

    def teleport(self, target: tuple[float, float, float]) -> None: ...

    def running(self) -> AbstractContextManager[None]: ...


def back_into_the_fight(game: SiphonHost, timeout: float) -> None:
    """Return when the player is in the arena with the boss targeted, or raise ``GameError``
    (``BossKilled`` for a real kill) saying what to do."""
    if _in_the_fight(game):  # read where it stands, paused or not
        return
    with game.running():
        _walk_back(game, time.monotonic() + timeout)


def _in_the_fight(game: SiphonHost) -> bool:
    try:
        if AT_DEATH.player_down(game.client.read(["HeroHp", "HeroMaxHp"])):
            return False
    except ReadRefused:
        return False
    return _boss_targeted(game)


def _walk_back(game: SiphonHost, deadline: float) -> None:
    _wait_out_loading(game, deadline)
    if _boss_targeted(game):
        return
    profile = game.profile
    for _ in range(LOCK_ON_TRIES):  # still in the arena, only the target lost?
        if _lock_on(game):
            return
    if profile.fog_wall is None:
        raise GameError(
            f"the boss is not targeted and profile {profile.name!r} has no reset.fog_wall to walk back "
            "in from: walk into the arena and lock on to the boss by hand"
        )
    log.warning("the player is not in the fight (a real death?): walking back through the fog wall")
    game.teleport(profile.fog_wall)
    game.hold_keys(set(profile.keys_for("move_forward")))
    game.tap_keys(list(profile.keys_for("event_action")), 200)
    game.wait_until(game.now() + profile.fog_entry_s)
    game.hold_keys(())
    for _ in range(LOCK_ON_TRIES):
        if _lock_on(game):
            return
        if time.monotonic() > deadline:
            break
    if game.boss_seen_dead:
        raise BossKilled(KILLED_MESSAGE)
    raise GameError(
        "walked through the fog wall but could not lock on to the boss: if it was killed, "
        + KILLED_MESSAGE
        + " Otherwise check reset.fog_wall, fight.boss_npc_id and fight.boss_npc_param_id in profile "
        f"{profile.name!r} (python -m env.doctor prints what the game reports)"
    )


def _wait_out_loading(game: SiphonHost, deadline: float) -> None:
    """Wait while the player is dead ("YOU DIED": HP 0, reads still work; a write of HP does not
    undo it) or the game shows a loading screen (reads refused), until the player is back."""
    said = False
    while True:
        try:
            if not AT_DEATH.player_down(game.client.read(["HeroHp", "HeroMaxHp"])):
                return
            what = "the player died: waiting for the loading screen and the respawn"
        except ReadRefused:
            what = "the game is not readable (a loading screen?): waiting"
        if time.monotonic() > deadline:
            raise GameError(
                "the player has not come back within the recovery timeout (dead, or on a loading screen or "
                "a menu): load into the game at the boss's Site of Grace, then restart"
            )
        if not said:
            log.warning(what)
            said = True
        time.sleep(0.25)


def _boss_targeted(game: SiphonHost) -> bool:
    """Whether NPC reads follow the boss, alive: the profile's boss ids (``NpcId``, and
    ``NpcParamId`` where the config reads it) match. Raises ``BossKilled`` if it is at 0 HP."""
    profile = game.profile
    try:
        npc = game.client.read(["NpcHp", "NpcMaxHp", *profile.boss_id_attributes])
    except ReadRefused:  # nothing targeted since the last loading screen, or the boss gone
        return False
    if profile.not_the_boss(npc) is not None:
        return False
    if AT_DEATH.boss_down(npc):
        raise BossKilled(KILLED_MESSAGE)
    return True


def _lock_on(game: SiphonHost) -> bool:
    game.tap_keys(list(game.profile.keys_for("lock_on")), 50)
    game.wait_until(game.now() + 0.5)
    return _boss_targeted(game)
