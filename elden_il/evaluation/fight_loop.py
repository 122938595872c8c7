"""Whole fights through the env: the one fight loop that evaluation, the difficulty check
(``python -m elden_il.duel``) and the benchmarks share, so a policy has one win rate.

An ``Actor`` chooses actions for a batch of envs at once (one network call for all of them);
``run_fights`` plays one fight per seed, ``parallel`` at a time, and ``summarize`` reports the
win rate with its 95 % interval, damage dealt and taken and episode length. ``play_fights`` and
``play_many`` spread the fights over processes or a Ray cluster (``elden_il.fanout``), with the
same records. It sits above the env it plays, in the evaluation layer: the game needs none of it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from env.actions import ActionTable
from env.common.errors import GameError
from env.common.fields import FIGHTS, SEED, check_fields, checked
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.sim.players import Player, make_player

from elden_il.evaluation.win_rate import wilson_interval
from elden_il.fanout import RETRIES, cluster_address, cluster_cpus, fan_out, report_progress
from elden_il.params import FIRST_HELD_OUT_SEED

log = logging.getLogger(__name__)

PLAY_AGAIN = 2
"""How many times a fight whose game stopped answering (a live game's call past its deadline on a
starved machine, a server that died) is played again from its start in a fresh env before the
error ends the run: one lost call must not throw away an hour of live fights already played."""


@dataclass(frozen=True)
class FightRecord:
    seed: int
    win: bool
    boss_damage_dealt: float
    player_damage_taken: float
    length: int
    episode_reward: float | None
    """None where no env gave rewards: a fight the recorder's autopilot played (``elden_il.duel --clock sample``)."""
    step_game_ms: tuple[float, ...] | None = None
    """The game time each env step ran (``info["step_game_ms"]``), None where no env stepped (a
    recorded fight): how the live path's steps fell against the in-process draws, fight for fight."""
    begun_again: int = 0
    """How many times the fight was begun again after its game stopped answering (``PLAY_AGAIN``)."""


@dataclass
class FightTape:
    """The first fight of a run, step by step, for people to watch (the evaluation's GIF and its
    Rerun recording): the observation each action was chosen from, the action, its reward, and the
    picture ``render()`` gave after it, in the env ``config`` describes."""

    seed: int
    config: EnvConfig | None = None
    observations: list[dict] = field(default_factory=list)
    actions: list = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    frames: list[np.ndarray] = field(default_factory=list)


class Actor:
    """Chooses actions for a batch of envs at once (one network call for all of them)."""

    def start(self, slot: int, seed: int) -> None:
        """A new fight begins in ``slot``."""

    def act(self, observations: list[dict], envs: list[EldenRingEnv], slots: list[int]) -> list:
        raise NotImplementedError


class RandomActor(Actor):
    def __init__(self) -> None:
        self.rngs: dict[int, np.random.Generator] = {}

    def start(self, slot: int, seed: int) -> None:
        self.rngs[slot] = np.random.default_rng(seed)

    def act(self, observations, envs, slots):
        out = []
        for env, slot in zip(envs, slots):
            space = env.action_space
            rng = self.rngs[slot]
            out.append(
                int(rng.integers(space.n)) if hasattr(space, "n") else rng.integers(0, 2, space.shape).astype(np.int8)
            )
        return out


class PlayerActor(Actor):
    """A player of the simulator (``env.sim.players``: the scripted expert, the person-like
    player, "attack every step") asked once per env step, as evaluation asks a policy, in any
    action mode: a fresh player per fight, its own draws seeded by the fight's seed, its taps the
    env's. (The recorder's autopilot asks the same players at every sample: ``elden_il.duel
    --clock sample``.) In ``multi_binary`` a held bit is a single press, so a tap repeated on the
    next step is first released for a step (otherwise the expert would swing once and never again)."""

    def __init__(self, player: str, config: EnvConfig = EnvConfig()) -> None:
        self.player = player
        self.step_seconds = config.timestep_ms / 1000.0
        self.tap_seconds = config.tap_ms / 1000.0
        self.players: dict[int, Player] = {}
        self.tapped: dict[int, frozenset[str]] = {}  # multi_binary: actions tapped last step, per slot
        self.tables: dict[str, ActionTable] = {}  # the discrete table per profile, built once

    def start(self, slot: int, seed: int) -> None:
        self.players[slot] = make_player(self.player, self.step_seconds, self.tap_seconds, seed)
        self.tapped[slot] = frozenset()

    def act(self, observations, envs, slots):
        out = []
        for env, slot in zip(envs, slots):
            base = env.unwrapped
            profile = base.profile
            if profile.name not in self.tables:
                self.tables[profile.name] = ActionTable(profile, "discrete")
            table = self.tables[profile.name]
            index = table.index(self.players[slot].act(base.state))
            if base.action_mode == "discrete":
                out.append(index)
            else:
                entry = profile.discrete_actions[index]
                taps = frozenset(entry.tap) - self.tapped[slot]
                self.tapped[slot] = taps
                out.append(base.actions.bits(frozenset(entry.hold) | taps))
        return out


def run_fights(
    make_env: Callable[[], EldenRingEnv],
    actor: Actor,
    seeds: list[int],
    parallel: int = 8,
    record_first: bool = False,
    on_fight: Callable[[FightRecord], None] | None = None,
) -> tuple[list[FightRecord], FightTape | None]:
    """One fight per seed, ``parallel`` at a time with batched decisions; with ``record_first``
    the first fight's ``FightTape`` (else None). Results do not depend on ``parallel``.
    ``on_fight`` gets each fight's record as it ends (a progress bar). A fight whose game stops
    answering is played again from its start in a fresh env, up to ``PLAY_AGAIN`` times."""
    envs = [make_env() for _ in range(max(1, min(parallel, len(seeds))))]
    if record_first and envs[0].render_mode != "rgb_array":
        for env in envs:
            env.close()
        raise ValueError("record_first needs envs made with render_mode='rgb_array' (their frames are render()'s)")
    queue = list(seeds)
    running: dict[int, tuple[int, dict]] = {}  # slot -> (seed, observation)
    step_ms: dict[int, list[float]] = {}  # slot -> the game time of each step of its fight
    again: dict[int, int] = {}  # seed -> times its fight was begun again
    records: dict[int, FightRecord] = {}
    tape = FightTape(seeds[0]) if record_first else None

    def begin(slot: int, seed: int) -> None:
        nonlocal tape
        while True:
            actor.start(slot, seed)
            step_ms[slot] = []
            if tape is not None and seed == tape.seed:
                tape = FightTape(seed, envs[slot].unwrapped.config)  # a fight begun again is taped anew
            try:
                obs, _ = envs[slot].reset(seed=seed)
            except GameError as error:
                play_again(slot, seed, error)
                continue
            running[slot] = (seed, obs)
            return

    def play_again(slot: int, seed: int, error: GameError) -> None:
        again[seed] = again.get(seed, 0) + 1
        if again[seed] > PLAY_AGAIN:
            raise error
        log.warning(
            "the fight of seed %d lost its game (%s): begun again in a fresh env (%d of %d)",
            seed,
            error,
            again[seed],
            PLAY_AGAIN,
        )
        with contextlib.suppress(GameError):
            envs[slot].close()  # what is left of it: a server that no longer answers is stopped
        envs[slot] = make_env()

    try:
        for slot in range(len(envs)):
            begin(slot, queue.pop(0))
        while running:
            slots = list(running)
            actions = actor.act([running[s][1] for s in slots], [envs[s] for s in slots], slots)
            for slot, action in zip(slots, actions):
                seed = running[slot][0]
                try:
                    obs, reward, terminated, truncated, info = envs[slot].step(action)
                except GameError as error:
                    play_again(slot, seed, error)
                    begin(slot, seed)
                    continue
                step_ms[slot].append(info["step_game_ms"])
                if tape is not None and seed == tape.seed:
                    tape.observations.append(running[slot][1])
                    tape.actions.append(action)
                    tape.rewards.append(float(reward))
                    tape.frames.append(envs[slot].render())
                if terminated or truncated:
                    records[seed] = FightRecord(
                        seed,
                        info["win"],
                        info["boss_damage_dealt"],
                        info["player_damage_taken"],
                        info["episode_length"],
                        info["episode_reward"],
                        tuple(step_ms[slot]),
                        again.get(seed, 0),
                    )
                    if on_fight is not None:
                        on_fight(records[seed])
                    del running[slot]
                    if queue:
                        begin(slot, queue.pop(0))
                else:
                    running[slot] = (seed, obs)
    finally:
        for env in envs:
            env.close()
    return [records[s] for s in seeds], tape


def summarize(records: list[FightRecord], seconds: float) -> dict:
    wins = sum(r.win for r in records)
    low, high = wilson_interval(wins, len(records))
    return {
        "fights": len(records),
        "win_rate": wins / len(records),
        "win_rate_ci95": [low, high],
        "boss_damage_dealt": float(np.mean([r.boss_damage_dealt for r in records])),
        "player_damage_taken": float(np.mean([r.player_damage_taken for r in records])),
        "episode_length": float(np.mean([r.length for r in records])),
        "episode_reward": (
            None
            if any(r.episode_reward is None for r in records)
            else float(np.mean([r.episode_reward for r in records]))
        ),
        "fights_per_minute": len(records) / seconds * 60.0,
        "fights_begun_again": sum(r.begun_again for r in records),
        **step_game_time(records),
    }


STEP_PERCENTILES = (1, 5, 50, 95, 99)


def step_game_time(records: list[FightRecord]) -> dict:
    """How much game time the fights' steps ran: mean, sd, percentiles and the longest, in ms
    (nothing where a fight was recorded, not stepped). In-process these are the env's draws of
    the live spread; over the live path, the game's own count: side by side they say whether the
    live fights met the spread the policies were judged on in-process (the busier the machine, the
    more live steps run a tick long or short)."""
    if not records or any(r.step_game_ms is None for r in records):
        return {}
    ms = np.concatenate([np.asarray(r.step_game_ms, np.float64) for r in records])
    percentiles = np.percentile(ms, STEP_PERCENTILES)
    return {
        "step_game_ms": {
            "steps": int(ms.size),
            "mean": float(ms.mean()),
            "sd": float(ms.std()),
            **{f"p{p}": float(v) for p, v in zip(STEP_PERCENTILES, percentiles)},
            "max": float(ms.max()),
        }
    }


@dataclass(frozen=True)
class _FightJob:
    make_env: Callable[[], EldenRingEnv]
    actor: Actor
    seeds: list[int]
    parallel: int
    record_first: bool


def _play(job: _FightJob, on_fight: Callable[[FightRecord], None] | None = report_progress) -> Played:
    """``job``'s fights; each record, as its fight ends, to ``on_fight`` (by default to whoever
    fanned the job out: ``fan_out``'s ``on_progress``)."""
    started = time.perf_counter()
    records, tape = run_fights(job.make_env, job.actor, job.seeds, job.parallel, job.record_first, on_fight)
    return Played(records, tape, time.perf_counter() - started)


def _describe(job: _FightJob) -> str:
    return (
        f"fights of seeds {job.seeds[0]}..{job.seeds[-1]}"
        if len(job.seeds) > 1
        else f"the fight of seed {job.seeds[0]}"
    )


def play_fights(
    make_env: Callable[[], EldenRingEnv],
    actor: Actor,
    seeds: list[int],
    parallel: int = 8,
    record_first: bool = False,
    retries: int = RETRIES,
    on_fight: Callable[[FightRecord], None] | None = None,
    workers: int = 1,
) -> tuple[list[FightRecord], FightTape | None]:
    """``run_fights``: ``play_many`` for one player, its records and first fight's tape."""
    played = play_many([(make_env, actor, seeds)], parallel, record_first, retries, on_fight, workers)[0]
    return played.records, played.tape


@dataclass(frozen=True)
class Played:
    """One player's fights: their records in seed order, the first fight's tape (or None), and
    the seconds its fights took, summed over the processes that played them."""

    records: list[FightRecord]
    tape: FightTape | None
    seconds: float


def play_many(
    plays: Sequence[tuple[Callable[[], EldenRingEnv], Actor, list[int]]],
    parallel: int = 8,
    record_first: bool = False,
    retries: int = RETRIES,
    on_fight: Callable[[FightRecord], None] | None = None,
    workers: int = 1,
) -> list[Played]:
    """``run_fights`` for each (env factory, actor, seeds) of ``plays``. Fanned out over the cluster when ``RAY_ADDRESS`` is set (each
    play's seeds in a few contiguous chunks per cluster CPU: a lost worker reruns little, the
    cluster stays busy to the end), or else over ``workers`` processes of this machine (each
    play's seeds in ``workers`` chunks, every play's chunks in one pool of processes); each chunk
    plays ``parallel`` fights at a time. The records are the same, fight for fight, as in one
    process: a fight is decided by its seed. ``on_fight`` gets each record as its fight ends on
    this machine (in this process or its workers), as its chunk ends on a cluster."""

    local = cluster_address() is None
    if local and workers <= 1:
        return [_play(_FightJob(make, actor, seeds, parallel, record_first), on_fight) for make, actor, seeds in plays]
    pieces = workers if local else 2 * cluster_cpus()
    jobs, owner = [], []
    for p, (make, actor, seeds) in enumerate(plays):
        for i, chunk in enumerate(np.array_split(np.asarray(seeds), min(len(seeds), pieces))):
            jobs.append(_FightJob(make, actor, [int(s) for s in chunk], parallel, record_first and i == 0))
            owner.append(p)

    def counted(played: Played) -> None:
        if on_fight is not None:
            for record in played.records:
                on_fight(record)

    done = (
        fan_out(_play, jobs, _describe, retries, workers=workers, on_progress=on_fight)
        if local
        else fan_out(_play, jobs, _describe, retries, on_result=counted)
    )
    out = []
    for p in range(len(plays)):
        mine = [played for played, o in zip(done, owner) if o == p]
        records = [r for played in mine for r in played.records]
        out.append(Played(records, mine[0].tape, sum(played.seconds for played in mine)))
    return out


@dataclass(frozen=True)
class HeldOutFights:
    """The held-out fights a policy plays, as the evaluate stage plays them: fights from seeds no
    recording or training used, so that a benchmark's or a study's win rate is comparable with the pipeline's."""

    fights: int = checked(100, FIGHTS, "held-out fights per policy")
    first_seed: int = checked(
        FIRST_HELD_OUT_SEED, SEED, "seed of the first fight (held out: the pipeline's evaluation seeds)"
    )

    def __post_init__(self) -> None:
        check_fields(self)
