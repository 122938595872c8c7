"""One fight, however it is reached: a live step (a simulator server, paused between steps, at a
game speed) presses, holds and times its keys as an in-process step does, and says how much
game time it really ran; in-process, each step is drawn as a live one falls."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from env.common.errors import GameError
from env.config import EnvConfig
from env.elden_env import EldenRingEnv
from env.factory import make_env
from env.game import PausedTap
from env.sim.expert import ScriptedExpert
from env.sim.game import SimGame
from env.sim.launcher import SimServer
from env.siphon.game import SiphonGame
from env.step_timing import LIVE, TICK_MS

from elden_il.evaluation.evaluate import evaluate
from elden_il.evaluation.fight_loop import PLAY_AGAIN, Actor, PlayerActor

ROLL_LEFT = ["move_forward"] * 3 + ["roll_left", "idle", "idle"]


def live_env(server: SimServer, speed: float, **options) -> EldenRingEnv:
    return EldenRingEnv(
        SiphonGame(server.host, "sim_margit"),
        EnvConfig(profile="sim_margit", game_speed=speed),
        state_attributes=("SimTick",),
        pause_between_steps=True,  # as evaluation over a server does; above 1x, always
        **options,
    )


def input_ticks(env: EldenRingEnv) -> tuple[int, int, int]:
    game = env.game
    if isinstance(game, SimGame):
        return game.world.tick_count, game.world.press_tick, game.world.release_tick
    read = game.client.read(["SimTick", "SimPressTick", "SimReleaseTick"])
    return read["SimTick"], read["SimPressTick"], read["SimReleaseTick"]


@pytest.mark.realtime
@pytest.mark.slow
@pytest.mark.parametrize("speed", [1.0, 3.0])
def test_a_live_step_taps_while_the_game_runs_and_holds_the_tap_its_game_time(
    sim_server: SimServer, player: None, speed: float
):
    """A paused live step resumes the game before it taps: the dodge's press reaches the game on
    the step's ticks, not while it is paused (then press and release land before one tick and
    the roll fires at once, a step's worth of timing unlike in-process), and it is held the
    config's ``tap_ms`` of game time at any speed, as in-process: 3 ticks for 50 ms, give or take
    the tick a live call can be late by."""
    env = live_env(sim_server, speed)
    try:
        env.reset(seed=3)
        for name in ROLL_LEFT:
            start, _, _ = input_ticks(env)
            env.step(env.actions.index(name))
            if name == "roll_left":
                end, pressed, released = input_ticks(env)
                break
    finally:
        env.close()
    assert start <= pressed < start + 2, (start, pressed)  # pressed once the game runs, on its first ticks
    assert released - pressed in (2, 3, 4), (
        pressed,
        released,
    )  # held 50 ms of game time, not 0 (paused) or 150 (3x wall)
    assert released < end


def test_a_tap_while_the_game_is_paused_is_refused_on_both_backends(sim_server: SimServer, player: None):
    """The press and release of a tap sent to a paused game land before its next tick (the game
    may never see it): both backends refuse it, saying to resume first."""
    game = SimGame()
    game.set_speed(0.0)
    with pytest.raises(PausedTap, match="resume the game"):
        game.tap_keys(["SPACE"])
    live = SiphonGame(sim_server.host, "sim_margit")
    try:
        live.set_speed(0.0)
        with pytest.raises(PausedTap, match="resume the game"):
            live.tap_keys(["SPACE"])
    finally:
        live.close()


class ClockReader(Actor):
    """The scripted expert, noting at each decision the game's own tick and the env's clock."""

    def __init__(self, config: EnvConfig) -> None:
        self.expert = PlayerActor("expert", config)
        self.clocks: list[tuple[int, float]] = []

    def start(self, slot: int, seed: int) -> None:
        self.expert.start(slot, seed)
        self.clocks.append((-1, 0.0))  # a new fight: no step before it

    def act(self, observations, envs, slots):
        state = envs[0].unwrapped.state
        self.clocks.append((state["SimTick"], state.timestamp))
        return self.expert.act(observations, envs, slots)


def profile_without_clock(folder) -> str:
    """The simulator's profile with no ``[clock]``: the real game's case, whose env measures a
    paused step on the wall's clock."""
    import shutil

    from env.profile import PROFILES_DIR

    copy = shutil.copytree(PROFILES_DIR / "sim_margit", folder / "sim_margit")
    text = (copy / "profile.toml").read_text()
    start = text.index("[clock]")
    (copy / "profile.toml").write_text(text[:start] + text[text.index("\n\n", start) + 2 :])
    return str(copy)


@pytest.mark.realtime
@pytest.mark.slow
@pytest.mark.parametrize("clock", ["game", "wall"])
def test_a_live_evaluation_gets_the_game_time_the_env_reports_at_every_step(tmp_path, clock):
    """Evaluation's live path (a simulator server of its own in the real-server mode, its scans
    slow; 3x, paused between steps): every step ran the game time the env said it ran. With the
    game's own count (the simulator's profile names one: ``[clock]``) exactly, to the tick; where
    a profile has none (the real game's), as closely as the wall's clock can tell from the
    client's side (the game's clock rounds to whole ticks, and a loaded machine answers late).
    The wall's measure was off by a third of a tick a step on average under load, and the
    scripted expert, timing the boss's blows by it, lost fights live it won in-process."""
    profile = "sim_margit" if clock == "game" else profile_without_clock(tmp_path)
    config = EnvConfig(profile=profile, game_speed=3.0, max_steps=60)
    actor = ClockReader(config)

    def make() -> EldenRingEnv:
        return make_env(
            config,
            backend="sim_server",
            # Siphon's scan as slow as it gets (unverified on the game: tens of ms near the module's
            # end): at 3x each pause lands about five ticks after it is asked for
            server_args=("--real-server", "--scan-ms", "30"),
            state_attributes=(*ScriptedExpert.ATTRIBUTES, "SimTick"),
            pause_between_steps=True,
        )

    results = evaluate({"expert": actor}, make, seeds=[1_000_000, 1_000_001], parallel=1)
    assert results["expert"]["fights"] == 2
    steps = [
        (tick - before, (stamp - stamped) * 1000)
        for (before, stamped), (tick, stamp) in zip(actor.clocks, actor.clocks[1:])
        if before >= 0 and tick >= 0
    ]
    assert len(steps) > 60
    errors = np.array([reported_ms - ticks * TICK_MS for ticks, reported_ms in steps])
    off = np.abs(errors)
    if clock == "game":
        assert off.max() < 1e-6, (errors.round(1), steps)
        return
    # the suite's own workers stall an answer now and then by up to five ticks, so a step's error
    # is bounded where it is rare (95 % of steps within a tick, half a tick on average: the old
    # report, exactly the timestep, was a tick or two short of most slow steps) and a stall's
    # length bounds the rest
    assert np.percentile(off, 95) < TICK_MS and off.mean() < TICK_MS / 2 and off.max() < 6 * TICK_MS, (
        errors.round(1),
        steps,
    )


def drawn_steps(timing: str, fight_seed: int, steps: int = 120, **options: int) -> list[tuple[int, int, int]]:
    """Per roll step in-process: (ticks the step ran, tick its tap was pressed on, ticks held)."""
    env = EldenRingEnv(SimGame(), EnvConfig(step_timing=timing))
    env.reset(options={"fight_seed": fight_seed, **options})
    roll = env.actions.index("roll_left")
    out = []
    for _ in range(steps):
        start, _, _ = input_ticks(env)
        env.step(roll)
        env.game.write("HeroHp", 1100)  # nobody dies and the rolls go on: the steps' timing is all that is looked at
        env.game.write("HeroSp", 100)
        end, pressed, released = input_ticks(env)
        out.append((end - start, pressed - start, released - pressed))
    return out


def test_in_process_steps_are_drawn_as_live_ones_fall_and_repeat_with_their_fight():
    """``step_timing: live`` (the default) draws each in-process step's length and its tap's
    delay and hold from the live path's shares; a fight's draws are its seed's, so the same fight
    plays the same way twice, unless asked for another of its draws; ``exact`` makes every step
    12 ticks with its tap at once for 3."""
    live = drawn_steps("live", 7)
    assert live == drawn_steps("live", 7) == drawn_steps("live", 7, timing_draw=0)
    assert live != drawn_steps("live", 8)
    assert live != drawn_steps("live", 7, timing_draw=1) == drawn_steps("live", 7, timing_draw=1)
    lengths, delays, holds = (Counter(column) for column in zip(*live))
    assert set(lengths) <= {12 + t for t in LIVE.length.counts} and len(lengths) > 1
    assert set(delays) <= set(LIVE.tap_delay.counts) and set(holds) <= {3 + t for t in LIVE.tap_hold.counts}
    assert set(drawn_steps("exact", 7)) == {(12, 0, 3)}


def test_a_draw_is_numpys_weighted_choice_draw_for_draw():
    """The shares are prepared once, not at every draw; the draws stay ``rng.choice``'s, so every
    seeded fight (the README's table, the committed results) plays as it did."""
    for share in (LIVE.tap_delay, LIVE.tap_hold, LIVE.length):
        ticks, weights = np.array(list(share.counts), float), np.array(list(share.counts.values()), float)
        ours, numpys = np.random.default_rng(11), np.random.default_rng(11)
        drawn = [share.draw_ms(ours) for _ in range(20_000)]
        assert drawn == [float(numpys.choice(ticks, p=weights / weights.sum())) * TICK_MS for _ in range(20_000)]
        assert ours.random() == numpys.random()  # one uniform a draw, as numpy takes


def test_a_drawn_step_reports_the_game_time_it_ran():
    env = EldenRingEnv(SimGame(), EnvConfig())
    env.reset(seed=0)
    ticks = [env.game.world.tick_count]
    reported = []
    terminated = False
    while not terminated:  # the idle player's fight, to its end
        _, _, terminated, _, info = env.step(0)
        ticks.append(env.game.world.tick_count)
        reported.append(info["step_game_ms"])
    assert np.allclose(np.diff(ticks) * TICK_MS, reported) and len(set(reported)) > 1


def test_an_evaluation_reports_the_game_time_its_steps_ran():
    """Each policy's evaluation says how long its steps ran in game time, so an evaluation over
    the live path can be set beside the in-process one it should match: exactly the timestep
    under ``step_timing: exact``, spread a tick either way under the default live draws."""

    def steps_of(timing: str) -> dict:
        config = EnvConfig(step_timing=timing)
        results = evaluate(
            {"expert": PlayerActor("expert", config)},
            lambda: make_env(config, state_attributes=ScriptedExpert.ATTRIBUTES),
            seeds=[0, 1],
            parallel=2,
        )
        report = results["expert"]
        assert report["step_game_ms"]["steps"] == round(report["episode_length"] * report["fights"])
        return report["step_game_ms"]

    exact, drawn = steps_of("exact"), steps_of("live")
    assert exact["mean"] == exact["p1"] == exact["max"] == 200.0 and exact["sd"] == 0.0
    assert drawn["p1"] <= 200.0 - TICK_MS + 1e-6 and drawn["p99"] >= 200.0 + TICK_MS - 1e-6 and drawn["sd"] > 0
    assert abs(drawn["mean"] - 200.0) < TICK_MS / 4


class KillsTheServer(PlayerActor):
    """The scripted expert, killing the simulator server under its env at the tenth step of a
    fight (``times`` fights in all): a live fight whose game stops answering, as a lost call on a
    starved machine or a crashed server ends one."""

    def __init__(self, config: EnvConfig, times: int) -> None:
        super().__init__("expert", config)
        self.times = times
        self.steps = 0

    def start(self, slot, seed):
        super().start(slot, seed)
        self.steps = 0

    def act(self, observations, envs, slots):
        self.steps += 1
        if self.steps == 10 and self.times > 0:
            self.times -= 1
            server = envs[0].unwrapped.game.server
            server.process.kill()
            server.process.wait()
        return super().act(observations, envs, slots)


@pytest.mark.slow
def test_a_live_fight_whose_game_stops_answering_is_fought_again_and_the_evaluation_goes_on():
    """One lost game (its server killed mid-fight) costs a live evaluation that fight's start,
    not the fights already played: the fight is begun again in a fresh env and counted; a game
    lost every time ends the run with the game's own error once the fight has had its tries."""
    config = EnvConfig(game_speed=3.0, max_steps=30)

    def make() -> EldenRingEnv:
        return make_env(
            config, backend="sim_server", state_attributes=ScriptedExpert.ATTRIBUTES, pause_between_steps=True
        )

    seeds = [1_000_000, 1_000_001]
    results = evaluate({"expert": KillsTheServer(config, times=1)}, make, seeds, parallel=1)["expert"]
    assert results["fights"] == 2 and results["fights_begun_again"] == 1
    assert results["episode_length"] == 30 and results["step_game_ms"]["steps"] == 60  # each fight whole, once

    with pytest.raises(GameError, match="127.0.0.1"):
        evaluate({"expert": KillsTheServer(config, times=PLAY_AGAIN + 1)}, make, seeds[:1], parallel=1)
