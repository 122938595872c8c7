"""Fine-tuning's schedules do what their settings say, in a real (tiny) PPO run."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import SHORT_FIGHTS, TINY_NETWORK, save_untrained, untrained_policy
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import DummyVecEnv

from env.config import EnvConfig
from env.factory import make_env
from env.profile import load_profile

from elden_il.params import FinetuneConfig
from elden_il.policies.policy import PolicyEnsemble, load_policy, policy_kwargs, policy_space, save_policy
from elden_il.training.finetune import (
    PRIOR_LOGITS,
    KLToPriorPolicy,
    PriorLogitsBuffer,
    actor_parameters,
    finetune,
    finetune_once,
    seeded_env_fns,
    train,
)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = SHORT_FIGHTS
"""The env every tiny run here fine-tunes in."""


TINY_RUN = FinetuneConfig(total_steps=96, num_envs=1, n_steps=32, batch_size=32, n_epochs=1, value_warmup_steps=0)
"""Three updates of 32 steps: a run short enough to train several times in one test."""


def untrained_bc(folder: Path, config: EnvConfig = CONFIG) -> Path:
    """A fresh policy for ``config`` saved where a BC policy would be: fine-tuning's starting point."""
    return save_untrained(folder, config)


def test_the_critic_warms_up_alone_with_its_own_passes_and_the_kl_pull_decays_to_nothing(tmp_path: Path):
    bc = load_policy(untrained_bc(tmp_path / "bc")).policy
    settings = FinetuneConfig(
        total_steps=64,
        num_envs=1,
        subprocesses=False,
        n_steps=32,
        batch_size=32,
        n_epochs=2,
        learning_rate=1e-3,
        kl_coef=0.05,
        kl_decay_steps=32,
        value_warmup_steps=64,
        value_warmup_epochs=3,
        critic_features="detached",
    )
    model, _ = train(bc, settings, CONFIG, tmp_path / "out")
    assert model.ent_coef == 0.0  # 0.05 at the start, none left from step 32 on
    assert model.policy.detach_critic
    assert model._n_updates == 2 * 3 and model.n_epochs == 2  # two rollouts of 3 warm-up passes; PPO's own kept
    actor = {id(p) for p in actor_parameters(model.policy)}
    names = dict(model.policy.named_parameters())
    bc_params = dict(bc.named_parameters())
    frozen = [n for n, p in names.items() if id(p) in actor]
    learned = [n for n in names if n not in frozen]
    assert frozen and learned
    assert all(torch.equal(names[n], bc_params[n]) for n in frozen), "the actor moved during the warm-up"
    assert any(not torch.equal(names[n], bc_params[n]) for n in learned), "the critic did not learn"


def test_the_kl_term_is_the_kl_to_bc_from_one_pass_with_the_prior_computed_once_per_rollout(tmp_path: Path):
    """What PPO gets from a minibatch equals SB3's own values and log-probs and the KL taken the
    slow way (the policy and BC each run on the minibatch), and its gradient reaches the actor."""
    bc = load_policy(untrained_bc(tmp_path / "bc")).policy
    vec = DummyVecEnv(seeded_env_fns(FinetuneConfig(num_envs=2), CONFIG))  # two: the buffer's order matters
    model = PPO(
        KLToPriorPolicy,
        vec,
        n_steps=20,
        batch_size=20,  # a factor of the buffer's 40 (SB3 warns of a truncated minibatch otherwise)
        rollout_buffer_class=PriorLogitsBuffer,
        policy_kwargs=policy_kwargs(TINY_NETWORK),
        seed=0,
    )
    model.policy.load_state_dict(bc.state_dict())
    with torch.no_grad():  # the policy has moved away from BC
        model.policy.action_net.bias.add_(torch.linspace(-1, 1, model.policy.action_net.bias.numel()))
    model.rollout_buffer.set_prior(bc)
    _, callback = model._setup_learn(40)
    model.collect_rollouts(model.env, callback, model.rollout_buffer, 20)
    vec.close()

    for batch in model.rollout_buffer.get(16):
        obs = {k: v for k, v in batch.observations.items() if k != PRIOR_LOGITS}
        values, log_prob, neg_kl = model.policy.evaluate_actions(batch.observations, batch.actions)
        want_values, want_log_prob, _ = ActorCriticPolicy.evaluate_actions(model.policy, obs, batch.actions)
        with torch.no_grad():
            want_kl = torch.distributions.kl_divergence(
                model.policy.get_distribution(obs).distribution, bc.get_distribution(obs).distribution
            )
        torch.testing.assert_close(values, want_values)
        torch.testing.assert_close(log_prob, want_log_prob)
        torch.testing.assert_close(-neg_kl, want_kl)
        assert (want_kl > 1e-3).all()
        neg_kl.sum().backward()
        assert model.policy.action_net.bias.grad.abs().sum() > 0
        # a minibatch without the prior's logits (a PPO.load-ed model's buffer): the plain entropy
        _, _, entropy = model.policy.evaluate_actions(obs, batch.actions)
        torch.testing.assert_close(entropy, model.policy.get_distribution(obs).entropy())


def test_a_detached_critic_learns_without_moving_the_features_the_actor_reads():
    env = DummyVecEnv(seeded_env_fns(FinetuneConfig(num_envs=1), CONFIG))
    obs = env.reset()
    env.close()

    def gradients(detach_critic: bool) -> tuple[float, float]:
        """How much the value alone pulls on the shared features and on the critic's own head."""
        torch.manual_seed(0)
        policy = KLToPriorPolicy(
            policy_space(env.observation_space),
            env.action_space,
            lambda _: 3e-4,
            detach_critic=detach_critic,
            **policy_kwargs(TINY_NETWORK),
        )
        values, _, _ = policy.evaluate_actions(policy.obs_to_tensor(obs)[0], torch.zeros(1))
        values.sum().backward()

        def grad(module: torch.nn.Module) -> float:
            return sum(float(p.grad.abs().sum()) for p in module.parameters() if p.grad is not None)

        return grad(policy.features_extractor), grad(policy.value_net)

    detached, shared = gradients(True), gradients(False)
    assert detached[0] == 0 and shared[0] > 0
    assert detached[1] > 0 and detached[1] == shared[1]


def test_a_separate_critic_trains_its_own_features_while_the_actors_stay_bcs(tmp_path: Path, monkeypatch):
    """And a run leaves nothing in the temp dir (SB3's own logger made an empty SB3-<date> folder
    there per run)."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    untrained_bc(tmp_path / "bc")
    settings = FinetuneConfig(
        total_steps=64,
        num_envs=1,
        subprocesses=False,
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        value_warmup_steps=64,
        critic_features="separate",
    )
    finetune(tmp_path / "bc", settings, CONFIG, tmp_path / "out")
    assert list(temp.glob("SB3-*")) == []

    bc = load_policy(tmp_path / "bc").policy.features_extractor.state_dict()
    policy = load_policy(tmp_path / "out").policy
    assert policy.vf_features_extractor is not policy.pi_features_extractor
    assert all(torch.equal(value, bc[key]) for key, value in policy.pi_features_extractor.state_dict().items())
    assert any(not torch.equal(value, bc[key]) for key, value in policy.vf_features_extractor.state_dict().items())


def test_a_run_hands_its_policy_to_callbacks_that_save_it_along_the_way(tmp_path: Path):
    """SB3 callbacks given to ``finetune`` run beside its own: the stability benchmark's saves the
    policy every so many steps, each a policy folder that loads, the first still BC's (the
    critic's warm-up leaves the actor alone) and a later one moved on."""
    from elden_il.studies.finetune_stability import PolicyCheckpoints

    untrained_bc(tmp_path / "bc")
    settings = FinetuneConfig(
        total_steps=96, num_envs=1, subprocesses=False, n_steps=32, batch_size=32, n_epochs=1, value_warmup_steps=32
    )
    finetune(
        tmp_path / "bc",
        settings,
        CONFIG,
        tmp_path / "out",
        callbacks=[PolicyCheckpoints([32, 64], CONFIG, tmp_path / "c")],
    )

    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["step-0000032", "step-0000064"]
    bc = load_policy(tmp_path / "bc").policy.action_net.state_dict()
    first, second = (
        load_policy(tmp_path / "c" / name).policy.action_net.state_dict() for name in ("step-0000032", "step-0000064")
    )
    assert all(torch.equal(first[k], bc[k]) for k in bc), "the actor moved during the warm-up"
    assert any(not torch.equal(second[k], bc[k]) for k in bc), "the actor never learned"


def test_a_fall_counts_only_where_a_windows_whole_interval_lies_below_the_start():
    from elden_il.studies.finetune_stability import verdict, windows

    rows = [
        {"timesteps": t, "win": win}
        for t, win in [*((100 + i, i < 5) for i in range(15)), *((1100 + i, i < 1) for i in range(16))]
    ]
    curve = windows(rows, 2000, 1000)
    assert verdict(curve, rows, start=0.2).endswith("clearly below the start (20.0%): no")  # 1 of 16: up to 28 %
    assert verdict(curve, rows, start=0.325).endswith("clearly below the start (32.5%): yes, windows until [2000]")
    assert verdict(curve, rows, start=None).startswith("training fights won: 6 of 31 (19%); lowest window 6% (1%-28%)")


@pytest.mark.slow
def test_the_same_fine_tuning_run_saves_the_same_bytes_from_any_checkout(tmp_path: Path):
    """DVC tracks the fine-tuned policy: a rerun of the same run, also in a fresh clone elsewhere,
    must leave ``dvc.lock`` as it was. SB3's own zip carried the wall clock, memory addresses and
    code pickled by value; the policy folder holds only the weights (safetensors, each tensor
    once in sorted order) and sorted JSON. So the same run, in two processes from two copies of
    the code in differently named folders, gives the same files, which load."""
    untrained_bc(tmp_path / "bc")
    settings = FinetuneConfig(
        total_steps=40,
        num_envs=1,
        subprocesses=False,
        n_steps=20,
        batch_size=20,
        n_epochs=1,
        value_warmup_steps=0,
        learning_rate=2e-4,
        clip_range=0.15,
    )
    script = (
        "import sys; from pathlib import Path; from elden_il.training.finetune import finetune; "
        "from elden_il.params import FinetuneConfig; from env.config import EnvConfig; "
        f"finetune(Path(sys.argv[1]), FinetuneConfig(**{asdict(settings)!r}), EnvConfig(**{asdict(CONFIG)!r}), "
        "Path(sys.argv[2]))"
    )
    saved = []
    for checkout in (tmp_path / "first", tmp_path / "elsewhere" / "clone"):
        for package in ("env", "capture", "elden_il"):
            shutil.copytree(ROOT / package, checkout / package, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "bc"), "out"],
            cwd=checkout,
            check=True,
            capture_output=True,
            timeout=300,
        )
        saved.append({p.name: p.read_bytes() for p in (checkout / "out").iterdir()})
    assert sorted(saved[0]) == [
        "env_config.json",
        "learning_curve.json",
        "policy.json",
        "policy.safetensors",
        "updates.json",
    ]
    assert saved[0] == saved[1]
    loaded = load_policy(tmp_path / "first" / "out")
    with make_env(loaded.config) as env:
        observation, _ = env.reset(seed=3)
        assert loaded.policy.predict(observation, deterministic=True)[0] in range(13)


@pytest.mark.slow
def test_several_runs_act_as_one_policy_each_the_run_of_its_seed(tmp_path: Path):
    """Two real runs from one BC policy, side by side in processes of their own, saved as one
    ensemble whose members are, weight for weight, what each seed's run alone ends with; the
    report lists both runs, and ``on_episode`` gets the first run's curve, row for row."""
    untrained_bc(tmp_path / "bc")
    rows = []
    report = finetune(
        tmp_path / "bc", replace(TINY_RUN, runs=2, seed=5), CONFIG, tmp_path / "out", on_episode=rows.append
    )

    assert [run["seed"] for run in report["runs"]] == [5, 6] and all(run["episodes"] >= 3 for run in report["runs"])
    assert report["episodes"] == sum(run["episodes"] for run in report["runs"])
    ensemble = load_policy(tmp_path / "out")
    assert isinstance(ensemble.policy, PolicyEnsemble) and ensemble.config == CONFIG
    for member, seed in zip(ensemble.policy.members, (5, 6)):
        finetune(tmp_path / "bc", replace(TINY_RUN, seed=seed), CONFIG, tmp_path / f"alone-{seed}")
        alone = load_policy(tmp_path / f"alone-{seed}").policy.state_dict()
        assert all(torch.allclose(member.state_dict()[k], alone[k], atol=1e-6) for k in alone)
    assert rows == json.loads((tmp_path / "out" / "learning_curve.json").read_text())
    assert rows == json.loads((tmp_path / "alone-5" / "learning_curve.json").read_text())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "a run's folder was left behind"


@pytest.mark.parametrize("mode", ["discrete", "multi_binary"])
def test_an_ensemble_acts_on_its_members_geometric_mean_and_loads_as_it_was_saved(tmp_path: Path, mode: str):
    """Each action's probability (each bit's, for multi_binary) is the normalised geometric mean of
    the members', its most likely action the one it plays; saved and loaded, it is the same policy."""
    config = CONFIG.replace(action_mode=mode)
    members = []
    for i in range(3):  # fresh policies are all but uniform: sharpened, their means differ
        policy = untrained_policy(config)
        with torch.no_grad():
            policy.action_net.weight.mul_(300)
        save_policy(policy, config, tmp_path / f"m{i}")
        members.append(tmp_path / f"m{i}")
    save_policy(PolicyEnsemble([load_policy(m).policy for m in members]), config, tmp_path / "ensemble")
    ensemble = load_policy(tmp_path / "ensemble")
    with ensemble.make_env() as env:
        observation, _ = env.reset(seed=3)
        batch = {k: np.asarray(v)[None] for k, v in observation.items()}
        each = np.stack([load_policy(m).probabilities(batch) for m in members])
        probabilities = ensemble.probabilities(batch)
        if mode == "discrete":
            geometric = np.exp(np.log(each).mean(axis=0))
            expected = geometric / geometric.sum(axis=-1, keepdims=True)
        else:  # each bit on or off: the geometric means of both, normalised
            on, off = np.exp(np.log(each).mean(axis=0)), np.exp(np.log(1 - each).mean(axis=0))
            expected = on / (on + off)
        assert np.allclose(probabilities, expected, atol=1e-6)
        assert not np.allclose(probabilities, each.mean(axis=0), atol=1e-3), "not told from the plain average"
        assert not np.allclose(each[0], each[1], atol=1e-6), "the members are alike: the test would prove nothing"
        action = ensemble.policy.predict(observation, deterministic=True)[0]
        assert np.array_equal(action, probabilities[0].argmax() if mode == "discrete" else probabilities[0] > 0.5)
        env.step(action)


def test_fine_tuning_continues_an_ensembles_networks_in_turn_and_sb3s_zip_takes_one(tmp_path: Path):
    """Each fine-tuning run continues one of the policy's networks (behaviour cloning's
    ``bc.runs``): run 0 the first, run 1 the second. The critic's warm-up spans the whole run here,
    so the actor each run ends with is the network it started from."""
    from env.common.errors import ConfigError

    from elden_il.policies.sb3_zip import export_sb3
    from elden_il.training.finetune import finetune_once

    members = [load_policy(untrained_bc(tmp_path / f"m{i}")).policy for i in range(2)]
    save_policy(PolicyEnsemble(members), CONFIG, tmp_path / "ensemble")
    frozen = replace(TINY_RUN, value_warmup_steps=TINY_RUN.total_steps)
    for run, started in enumerate(members):
        finetune_once(tmp_path / "ensemble", frozen, CONFIG, tmp_path / f"run{run}", progress_bar=False, run=run)
        actor = load_policy(tmp_path / f"run{run}").policy.action_net.state_dict()
        assert all(torch.equal(value, started.action_net.state_dict()[key]) for key, value in actor.items()), run
    assert not all(
        torch.equal(members[0].action_net.state_dict()[k], v) for k, v in members[1].action_net.state_dict().items()
    )
    with pytest.raises(ConfigError, match="is an ensemble of 2 networks .* and SB3's zip takes one network"):
        export_sb3(tmp_path / "ensemble", tmp_path / "ensemble.zip")
    assert not (tmp_path / "ensemble.zip").exists()


def test_an_ensemble_of_different_networks_is_refused_before_anything_is_written(tmp_path: Path):
    from elden_il.policies.policy import make_policy

    spaces = CONFIG.spaces(load_profile(CONFIG.profile))
    members = [make_policy(*spaces, TINY_NETWORK), make_policy(*spaces, replace(TINY_NETWORK, cnn_dim=64))]
    with pytest.raises(ValueError, match="an ensemble's members must all be one network"):
        save_policy(PolicyEnsemble(members), CONFIG, tmp_path / "ensemble")
    assert not (tmp_path / "ensemble").exists()


def test_callbacks_watch_one_run_and_are_refused_with_several(tmp_path: Path):
    with pytest.raises(ValueError, match="callbacks watch the SB3 model of one PPO run"):
        finetune(tmp_path / "bc", FinetuneConfig(runs=2), CONFIG, tmp_path / "out", callbacks=[object()])


def spawned_children(pid: int) -> list[int]:
    """The processes ``pid`` started through multiprocessing's spawn (a pool's workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and b"spawn_main" in cmdline:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
@pytest.mark.slow
def test_runs_end_with_the_process_that_started_them_and_the_next_choice_clears_what_they_left(tmp_path: Path):
    """A pool's worker outlives a main process killed outright and would train on, holding a core:
    SIGKILL the main process while its two runs train and both end within seconds; the staging
    folder they trained in is cleared by the next choice, which saves its policy."""
    untrained_bc(tmp_path / "bc")
    endless = FinetuneConfig(
        total_steps=10_000_000, num_envs=1, n_steps=32, batch_size=32, n_epochs=1, value_warmup_steps=0, runs=2
    )
    script = (
        "import sys; from pathlib import Path; from elden_il.training.finetune import finetune; "
        "from elden_il.params import FinetuneConfig; from env.config import EnvConfig; "
        f"finetune(Path(sys.argv[1]), FinetuneConfig(**{asdict(endless)!r}), EnvConfig(**{asdict(CONFIG)!r}), "
        "Path(sys.argv[2]))"
    )
    main = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "bc"), str(tmp_path / "models" / "finetuned")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while len(runs := spawned_children(main.pid)) < 2:
            assert time.monotonic() < deadline, "the two runs never started"
            time.sleep(0.2)
        time.sleep(5)  # each imports torch and the env, then trains
        main.kill()
        main.wait()
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in runs):
            assert time.monotonic() < deadline, "a run trained on after the process that started it was killed"
            time.sleep(0.2)
    finally:
        main.kill()
    assert list((tmp_path / "models").glob(".building-*"))  # what the killed choice left

    quick = replace(endless, total_steps=32)
    finetune(tmp_path / "bc", quick, CONFIG, tmp_path / "models" / "finetuned")
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["finetuned"]
    assert load_policy(tmp_path / "models" / "finetuned").config == CONFIG


def test_training_pays_a_drink_back_and_nothing_else():
    """The same fight, played the same way, with and without ``heal_reward``: the rewards differ
    only in the steps the player's HP rose, by ``heal_reward`` times the fraction of max HP."""
    config = replace(CONFIG, max_steps=400)
    heal = config.actions(load_profile(config.profile)).index("heal")
    fights = {}
    for weight in (0.0, 5.0):
        env = seeded_env_fns(FinetuneConfig(num_envs=1, heal_reward=weight), config)[0]()
        env.reset(seed=3)
        rewards, gained = [], [0.0]
        for _ in range(config.max_steps):
            state = env.unwrapped.state
            hurt = state["HeroHp"] < 0.6 * state["HeroMaxHp"]
            _, reward, terminated, truncated, _ = env.step(heal if hurt and not max(gained) else 0)
            rewards.append(reward)
            gained.append(max(0.0, env.unwrapped.state["HeroHp"] - state["HeroHp"]) / state["HeroMaxHp"])
            if terminated or truncated:
                break
        fights[weight] = np.array(rewards), np.array(gained[1:])
    (plain, gained), (paid, _) = fights[0.0], fights[5.0]
    assert gained.max() > 0.1, "the player never drank: the fight's script no longer reaches a drink"
    np.testing.assert_allclose(paid - plain, 5.0 * gained, atol=1e-9)


def test_an_interrupt_a_library_swallowed_still_ends_the_runs_at_once(tmp_path: Path):
    """Ctrl-C whose ``KeyboardInterrupt`` a library caught and printed as "ignored" is still on
    record (``env.common.interrupts``): the main process, waiting on its runs, ends them and
    stops, rather than letting them train to the end before the swap refuses."""
    from env.common import interrupts

    untrained_bc(tmp_path / "bc")
    endless = replace(TINY_RUN, total_steps=10_000_000, runs=2)
    started = time.monotonic()
    with interrupts.watched() as watch:
        watch.received = signal.SIGINT  # as a swallowed Ctrl-C leaves it
        with pytest.raises(KeyboardInterrupt):
            finetune(tmp_path / "bc", endless, CONFIG, tmp_path / "out")
    assert time.monotonic() - started < 60
    assert spawned_children(os.getpid()) == [], "a run trained on after the interrupt"
    assert not (tmp_path / "out").exists()


def test_a_rollout_larger_than_memory_is_refused_before_anything_is_made():
    """``n_steps`` x ``num_envs`` within their own bounds can still ask for more observations than
    a machine holds (SB3 keeps every one as float32): one line before the run starts."""
    from env.common.errors import ConfigError

    from elden_il.params import FinetuneConfig
    from elden_il.training.finetune import check_rollout_fits

    config = EnvConfig(profile="sim_margit")
    check_rollout_fits(FinetuneConfig(), config)  # the pipeline's: 173 MB
    with pytest.raises(ConfigError, match=r"finetune.n_steps = 1000000 with num_envs = 256: each rollout would hold"):
        check_rollout_fits(FinetuneConfig(n_steps=1_000_000, num_envs=256), config)


# ------------------------------------------------------------------------------ AWAC, one env
AWAC_RUN = FinetuneConfig(
    method="awac", total_steps=60, num_envs=1, critic_warmup_updates=5, replay_batch=16, critic_hidden=16
)
"""A few dozen env steps of AWAC, each with its update, after five on the demonstrations alone."""


def test_awac_learns_the_actor_from_one_env_and_the_demonstrations_with_the_features_bc_learnt(
    awac_start, tmp_path: Path
):
    bc_path, dataset = awac_start
    rows: list[dict] = []
    metrics = finetune(
        bc_path,
        AWAC_RUN,
        CONFIG,
        tmp_path / "awac",
        on_episode=rows.append,
        dataset=dataset,
        watch_file=tmp_path / "w.rrd",
    )
    assert (metrics["env_steps"], metrics["envs"]) == (60, 1)
    states, table, _ = watched(tmp_path / "w.rrd")  # the run as it went, as the pipeline's stage records it
    assert states == {"sim 0": ["its game answers: playing", "the run's budget is spent"]}
    assert "| sim 0 | done | 60 |" in table, table
    assert rows and rows[-1]["timesteps"] <= 60 and {"return", "length", "win"} <= set(rows[-1])
    bc, tuned = load_policy(bc_path).policy.state_dict(), load_policy(tmp_path / "awac").policy.state_dict()
    moved = {name for name in bc if not torch.equal(bc[name], tuned[name])}
    assert moved and all(name.startswith(("mlp_extractor.policy_net", "action_net")) for name in moved), moved
    # the updates run beside the env's steps: a slower env changes which finishes first, not the
    # run; and being watched changes nothing either
    slower = finetune_once(
        bc_path, AWAC_RUN, CONFIG, tmp_path / "again", on_steps=lambda _: time.sleep(0.003), dataset=dataset
    )
    assert slower["episodes"] == metrics["episodes"]
    assert (tmp_path / "awac/policy.safetensors").read_bytes() == (tmp_path / "again/policy.safetensors").read_bytes()


WAIT_S = 0.1
"""How long each half of a step waits in the test below: an env step's game, an update's work."""


def test_awacs_updates_run_while_the_env_plays_its_next_step(awac_start, tmp_path: Path, monkeypatch):
    """A live game's step is mostly waiting on the game: the learner's updates run on a thread of
    their own meanwhile, so a step costs the longer of the two, not their sum. Each half sleeps
    ``WAIT_S``: one after the other they take at least twice that whatever the machine's load,
    side by side about once that, so the bound holds on a busy machine and still fails a loop
    that waits for its updates."""
    from elden_il.training.awac import Learner

    bc_path, dataset = awac_start
    update = Learner.update
    threads: set[str] = set()

    def slow_update(self, batch, actor_learns=True):
        threads.add(threading.current_thread().name)
        time.sleep(WAIT_S)
        return update(self, batch, actor_learns)

    monkeypatch.setattr(Learner, "update", slow_update)
    marks: list[float] = []

    def slow_step(_: int) -> None:  # called after each env step, on the loop's thread
        marks.append(time.perf_counter())
        time.sleep(WAIT_S)

    finetune_once(
        bc_path, replace(AWAC_RUN, total_steps=25), CONFIG, tmp_path / "awac", on_steps=slow_step, dataset=dataset
    )
    assert any(name.startswith("awac-learner") for name in threads), threads
    per_step = (marks[-1] - marks[0]) / (len(marks) - 1)
    assert per_step < 2 * WAIT_S, (
        f"{per_step * 1000:.0f} ms a step: the updates ({WAIT_S * 1000:.0f} ms) waited for the env ({WAIT_S * 1000:.0f} ms)"
    )


class OneAfterTheOther(Executor):
    """Runs what it is given at once, on the caller's thread: an update's halves in sequence."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        done: Future = Future()
        done.set_result(fn(*args, **kwargs))
        return done


def test_an_awac_updates_halves_run_side_by_side_and_learn_the_same_floats(awac_start):
    """The actor's step needs the critics' values and nothing their step writes, so it runs beside
    the critics' backward pass (and the targets' values beside the critics' forward pass): an
    update takes the longer of its halves, and learns exactly what it learns with them in turn."""
    from elden_il.training.awac import Learner

    policy = load_policy(awac_start[0]).policy
    width, actions = policy.features_extractor.features_dim, int(policy.action_space.n)
    generator = torch.Generator().manual_seed(0)
    batches = [
        (
            torch.randn(32, width, generator=generator),
            torch.randint(0, actions, (32,), generator=generator),
            torch.randn(32, generator=generator),
            torch.randn(32, width, generator=generator),
            torch.rand(32, generator=generator),
        )
        for _ in range(20)
    ]
    torch.manual_seed(0)
    beside = Learner(copy.deepcopy(policy), AWAC_RUN)
    torch.manual_seed(0)
    in_turn = Learner(copy.deepcopy(policy), AWAC_RUN)
    in_turn._beside = OneAfterTheOther()
    assert [beside.update(b) for b in batches] == [in_turn.update(b) for b in batches]
    for a, b in ((beside.actor, in_turn.actor), (beside.critics, in_turn.critics), (beside.targets, in_turn.targets)):
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))

    actor_step, critic_step = Learner._actor_step, beside.critic_optimizer.step

    def slow_actor_step(self, *args):
        time.sleep(0.05)
        return actor_step(self, *args)

    def slow_critic_step(*args, **kwargs):
        time.sleep(0.05)
        return critic_step(*args, **kwargs)

    beside._actor_step = slow_actor_step.__get__(beside)
    beside.critic_optimizer.step = slow_critic_step
    started = time.perf_counter()
    beside.update(batches[0])
    took = time.perf_counter() - started
    beside.close()
    assert took < 0.09, f"{took * 1000:.0f} ms an update: the actor's step (50 ms) waited for the critics' (50 ms)"


def test_awac_is_refused_without_demonstrations_or_a_person_at_several_games(awac_start, tmp_path: Path):
    from env.common.errors import ConfigError
    from env.common.fields import FieldError

    with pytest.raises(ConfigError, match="learns from the demonstrations too"):
        finetune(awac_start[0], AWAC_RUN, CONFIG, tmp_path / "x")
    with pytest.raises(FieldError, match="takes over one live game, at the machine you sit at, and this run plays 2"):
        replace(AWAC_RUN, backend="siphon", hosts=("pc1:50051", "pc2:50051"), interventions="person")
    assert not (tmp_path / "x").exists()


def test_awac_refuses_a_replay_larger_than_memory_before_it_takes_a_step(awac_start, tmp_path: Path):
    from env.common.errors import ConfigError

    with pytest.raises(ConfigError, match=r"finetune.total_steps = 100000000: awac would keep .* GiB of features"):
        finetune(
            awac_start[0], replace(AWAC_RUN, total_steps=100_000_000), CONFIG, tmp_path / "x", dataset=awac_start[1]
        )
    assert not (tmp_path / "x").exists()


def test_awac_soft_targets_count_the_actors_entropy_and_bcs_proposals_win_where_the_critics_rate_them_higher(
    awac_start,
):
    """``awac_entropy`` adds the actor's entropy to every target's value; with ``bc_proposals``,
    BC's own action (its head as BC left it) is what a step takes, and what a target values,
    wherever the critics rate it above what the actor chose."""
    from elden_il.training.awac import Learner

    policy = load_policy(awac_start[0]).policy
    features = torch.randn(8, policy.features_extractor.features_dim)
    hard = Learner(copy.deepcopy(policy), AWAC_RUN)
    soft = Learner(copy.deepcopy(policy), replace(AWAC_RUN, awac_entropy=0.5))
    soft.targets.load_state_dict(hard.targets.state_dict())
    soft.actor.load_state_dict(hard.actor.state_dict())
    entropy = -(F.softmax(hard.actor(features), -1) * F.log_softmax(hard.actor(features), -1)).sum(-1)
    assert torch.allclose(soft.next_value(features), hard.next_value(features) + 0.5 * entropy.detach(), atol=1e-5)

    proposing = Learner(copy.deepcopy(policy), replace(AWAC_RUN, bc_proposals=True))
    bc_choice = proposing.proposer(features).argmax(-1)
    for q in (*proposing.critics, *proposing.targets):  # every critic rates BC's choice far above the rest
        last = q[-1]
        torch.nn.init.zeros_(last.weight)
        with torch.no_grad():
            last.bias.fill_(0.0)
            last.bias[int(bc_choice[0])] = 100.0
    with torch.no_grad():
        proposing.actor[-1].bias.fill_(0.0)
        proposing.actor[-1].bias[int(bc_choice[0])] = -50.0  # the actor never picks it itself
    rng = np.random.default_rng(0)
    assert {proposing.act(features[0], rng) for _ in range(20)} == {int(bc_choice[0])}
    values = proposing.next_value(features)
    assert torch.allclose(values[bc_choice == bc_choice[0]], torch.tensor(100.0), atol=1e-3)
    assert torch.all(values[bc_choice != bc_choice[0]] < 50)  # elsewhere the actor's own choices are valued


def test_awac_with_no_updates_per_step_only_plays(awac_start, tmp_path: Path):
    """``updates_per_step: 0``, the baseline a live run's learning is timed against: the env's
    steps are taken and counted, and the policy is BC's, weight for weight."""
    bc_path, dataset = awac_start
    metrics = finetune(bc_path, replace(AWAC_RUN, updates_per_step=0), CONFIG, tmp_path / "played", dataset=dataset)
    assert metrics["env_steps"] == 60
    bc, played = load_policy(bc_path).policy.state_dict(), load_policy(tmp_path / "played").policy.state_dict()
    assert all(torch.equal(bc[name], played[name]) for name in bc)


def test_awac_learns_on_one_torch_thread_and_gives_the_others_back(awac_start, tmp_path: Path):
    """An update is small batches through small networks: spread over threads on a busy machine
    (a gaming PC runs the game) it ran several times slower than on one. The run is on one thread,
    and the caller's thread count is what it was once the run ends."""
    bc_path, dataset = awac_start
    threads_seen: list[int] = []
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        finetune(
            bc_path,
            AWAC_RUN,
            CONFIG,
            tmp_path / "awac",
            on_episode=lambda row: threads_seen.append(torch.get_num_threads()),
            dataset=dataset,
        )
        assert threads_seen and set(threads_seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_an_awac_run_that_loses_its_live_game_keeps_what_it_trained(awac_start, tmp_path: Path):
    """The game's server gone after the first fight: the run ends with one line naming the
    game and where the policy as it stood is saved, and ``load_policy`` reads it there, its
    actor moved by the updates it had."""
    from env.common.errors import GameError
    from env.sim.launcher import SimServer

    from elden_il.training.finetune import PARTIAL_RUN

    bc_path, dataset = awac_start
    with SimServer(size=(84, 84)) as server, server.player():  # locked on: the real-server mode waits for it
        live = replace(AWAC_RUN, total_steps=10_000, backend="siphon", hosts=(server.host,))
        with pytest.raises(GameError) as lost:
            finetune(bc_path, live, CONFIG, tmp_path / "out", on_episode=lambda row: server.stop(), dataset=dataset)
    message = str(lost.value)
    assert (
        "\n" not in message
        and "fine-tuning stopped at step" in message
        and str(tmp_path / "out" / PARTIAL_RUN) in message
    )
    kept = load_policy(tmp_path / "out" / PARTIAL_RUN).policy.state_dict()
    bc = load_policy(bc_path).policy.state_dict()
    assert any(not torch.equal(bc[name], kept[name]) for name in bc if name.startswith("action_net"))
    assert json.loads((tmp_path / "out" / PARTIAL_RUN / "learning_curve.json").read_text())  # the fight it finished


def test_an_awac_run_with_no_game_at_its_host_says_so_in_one_line_and_keeps_nothing(awac_start, tmp_path: Path):
    """No server where ``hosts`` points: Siphon's own one line, before a step is taken, and no
    partial run saved (nothing was trained against a game)."""
    from env.common.errors import GameError
    from env.sim.launcher import free_port

    bc_path, dataset = awac_start
    live = replace(AWAC_RUN, backend="siphon", hosts=(f"127.0.0.1:{free_port()}",))
    with pytest.raises(GameError, match="no Siphon server at 127.0.0.1:") as lost:
        finetune(bc_path, live, CONFIG, tmp_path / "out", dataset=dataset)
    assert "\n" not in str(lost.value) and "fine-tuning stopped" not in str(lost.value)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ AWAC, several envs
def test_several_envs_fill_one_replay_each_at_its_own_pace_the_budget_theirs_together(awac_start, tmp_path: Path):
    """Two in-process simulators, the second slowed: the first takes steps while the second
    waits (neither waits for the other), their steps add up to the budget, and every fight's row
    names the env it was played in."""
    bc_path, dataset = awac_start
    rows: list[dict] = []

    def slow_second(_: int) -> None:  # told after each env step, on that env's actor's thread
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.2)

    several = replace(AWAC_RUN, num_envs=2, total_steps=80)
    metrics = finetune_once(
        bc_path, several, CONFIG, tmp_path / "awac", rows.append, on_steps=slow_second, dataset=dataset
    )
    by_env = {env["env"]: env for env in metrics["by_env"]}
    assert (metrics["env_steps"], metrics["envs"], set(by_env)) == (80, 2, {"sim 0", "sim 1"}), metrics
    assert sum(env["env_steps"] for env in by_env.values()) == 80
    assert by_env["sim 0"]["env_steps"] > by_env["sim 1"]["env_steps"] > 0, by_env
    assert {row["env"] for row in rows} <= set(by_env) and [row["timesteps"] for row in rows] == sorted(
        row["timesteps"] for row in rows
    )
    bc, tuned = load_policy(bc_path).policy.state_dict(), load_policy(tmp_path / "awac").policy.state_dict()
    assert any(not torch.equal(bc[name], tuned[name]) for name in bc if name.startswith("action_net"))


def test_fights_interleaved_in_one_replay_sum_their_rewards_apart_and_a_full_one_grows():
    """Two envs' steps arrive interleaved; each row's n-step sum is its own fight's rewards alone,
    a replay with no room left grows, and a fight whose game was lost keeps the sums it had."""
    from elden_il.training.awac import Replay

    def played(order: list[tuple[int, float, bool]]) -> list[float]:
        """Each step's n-step sum, after steps (env, reward, the fight's last) in this order."""
        replay, rows = Replay.empty(20, 1, 3, 0.5), {}
        for stream, reward, last in order:
            rows.setdefault(stream, replay.add(torch.zeros(1)))
            landed = replay.add(torch.zeros(1))
            replay.step(rows[stream], 0, reward, False, landed, last, stream=stream)
            rows[stream] = landed
        return sorted(replay.reward[replay.stepped[: replay.taken]].tolist())

    fights = {0: [1.0, 2.0, 4.0, 8.0], 1: [100.0, 200.0, 400.0, 800.0]}
    apart = [(stream, reward, i == 3) for stream, rewards in fights.items() for i, reward in enumerate(rewards)]
    together = [(stream, fights[stream][i], i == 3) for i in range(4) for stream in fights]
    assert played(apart) == played(together) and 1 + 2 * 0.5 + 4 * 0.25 in played(together)
    full = Replay.empty(2, 1, 3, 0.5)  # an env back again and again adds rows with no step: it grows
    rows = [full.add(torch.full((1,), float(i))) for i in range(5)]
    full.step(rows[3], 2, 1.0, True, rows[4], True)
    assert rows == [0, 1, 2, 3, 4] and full.features[:5, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert full.taken == 1 and int(full.action[3]) == 2 and int(full.next_row[3]) == 4
    lost = Replay.empty(8, 1, 3, 0.5)
    first = lost.add(torch.zeros(1))
    lost.step(first, 0, 1.0, False, second := lost.add(torch.zeros(1)), False)
    lost.close_stream(0)  # its game gone: the next fight's rewards are not this one's
    lost.step(second, 0, 100.0, False, lost.add(torch.zeros(1)), False)
    assert float(lost.reward[first]) == 1.0


@contextlib.contextmanager
def rerun_receiver(path: Path) -> Iterator[str]:
    """Rerun's own gRPC server on loopback, as a viewer listens, saving what it receives to
    ``path`` rather than drawing it; its address."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "rerun_cli", "--bind", "127.0.0.1", "--port", str(port), "--save", str(path)]
    receiver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            time.sleep(0.1)
        yield f"rerun+http://127.0.0.1:{port}/proxy"
    finally:
        receiver.send_signal(signal.SIGINT)
        receiver.wait(30)


def watched(path: Path) -> tuple[dict[str, list[str]], str, dict[str, int]]:
    """What a run's Rerun recording says: each env's state lines in order, the last table of
    PCs, and how many values each plotted series has."""
    from rerun.chunk import RrdReader

    with warnings.catch_warnings():  # a file a receiver streamed to has no index at its end: it is read through
        warnings.filterwarnings("ignore", "RRD file has no footer")
        table = RrdReader(path).stream().collect().reader(index="wall").to_arrow_table()
    states: dict[str, list[str]] = {}
    for cell in (
        cell
        for name in table.column_names
        if name.endswith("/state:TextLog:text")
        for cell in table.column(name).to_pylist()
    ):
        if cell:
            env, line = cell[0].split(": ", 1)
            states.setdefault(env, []).append(line)
    texts = [cell[0] for cell in table.column("/pcs/table:TextDocument:text").to_pylist() if cell]
    series = {
        name.rsplit(":", 2)[0]: sum(cell is not None for cell in table.column(name).to_pylist())
        for name in table.column_names
        if name.endswith(":Scalars:scalars")
    }
    return states, texts[-1], series


@pytest.mark.slow
def test_a_pc_that_drops_out_mid_run_is_one_line_rejoins_when_it_answers_and_the_run_ends_with_its_policy(
    awac_start, tmp_path: Path, monkeypatch, caplog
):
    """Two simulator servers as two gaming PCs. The second is stopped once it has finished a
    fight: one line names it, the first plays on. Started again on its port, it rejoins and
    fights again; the run spends its budget across both and saves its policy. (The first PC's
    steps wait for the second's return, so that the budget outlasts it on any machine.) The run
    streams its live view to a listening Rerun server as it goes, and records it to a file: each
    PC playing, lost, rejoined and done, its steps an hour, the learner's pace, the win rate."""
    import logging

    from env.sim.launcher import SimServer

    from elden_il.training import awac
    from elden_il.view.live_run import WATCH_VARIABLE, watched_run

    monkeypatch.setattr(awac, "REJOIN_EVERY_S", 0.2)
    bc_path, dataset = awac_start
    first = SimServer(size=(84, 84))
    second = SimServer(size=(84, 84))
    servers = {first.host: first, second.host: second}
    players = {host: server.player() for host, server in servers.items()}
    for player in players.values():
        player.__enter__()
    back = threading.Event()
    fights: dict[str, int] = {}

    def on_episode(row: dict) -> None:
        fights[row["env"]] = fights.get(row["env"], 0) + 1
        if row["env"] == second.host and fights[second.host] == 1:
            players.pop(second.host).__exit__(None, None, None)
            second.stop()
            threading.Thread(target=restart, daemon=True).start()
        elif row["env"] == second.host:
            back.set()

    def restart() -> None:
        time.sleep(1.0)
        servers[second.host] = again = SimServer(size=(84, 84), port=second.port)
        players[second.host] = again.player()
        players[second.host].__enter__()

    def first_waits_for_the_second(_: int) -> None:
        if threading.current_thread() is threading.main_thread() and fights.get(second.host):
            back.wait(120)

    live = replace(AWAC_RUN, total_steps=150, backend="siphon", hosts=tuple(servers), game_speed=4)
    streamed, recorded = tmp_path / "streamed.rrd", tmp_path / "finetune.rrd"
    try:
        with caplog.at_level(logging.WARNING, logger="elden_il.training.awac"), rerun_receiver(streamed) as viewer:
            monkeypatch.setenv(WATCH_VARIABLE, viewer)
            with watched_run(recorded, list(servers)) as watch:
                metrics = finetune_once(
                    bc_path,
                    live,
                    CONFIG,
                    tmp_path / "out",
                    on_episode,
                    on_steps=first_waits_for_the_second,
                    dataset=dataset,
                    watch=watch,
                )
    finally:
        for player in players.values():
            player.__exit__(None, None, None)
        for server in servers.values():
            server.stop()
    assert back.is_set(), fights
    by_env = {env["env"]: env for env in metrics["by_env"]}
    assert by_env[second.host]["lost"] == 1 and by_env[first.host]["lost"] == 0, by_env
    assert sum(env["env_steps"] for env in by_env.values()) == 150 == metrics["env_steps"]
    lines = [record.getMessage() for record in caplog.records]
    assert any(line.startswith(f"{second.host} stopped answering") for line in lines), lines
    assert any(line.startswith(f"{second.host} answers again") for line in lines), lines
    assert load_policy(tmp_path / "out").policy is not None and not (tmp_path / "out" / "partial").exists()
    states, table, series = watched(recorded)
    assert watched(streamed) == (states, table, series)
    spent = "the run's budget is spent"
    assert states[first.host] == ["its game answers: playing", spent], states
    assert [line.split(" (")[0] for line in states[second.host]] == [
        "its game answers: playing",
        "stopped answering",
        "answers again: rejoined the run",
        spent,
    ], states
    last = {row.split(" | ")[0].strip("| "): row.split(" | ") for row in table.splitlines()[2:]}
    assert {host: (row[1], int(row[2]), int(row[5])) for host, row in last.items()} == {
        host: ("done", by_env[host]["env_steps"], by_env[host]["episodes"]) for host in servers
    }, table
    for path in (
        *(f"/pcs/{host.replace(':', chr(92) + ':')}/steps_an_hour" for host in servers),
        "/learner/updates_a_second",
        "/fights/win_rate",
    ):
        assert series.get(path, 0) > 0, (path, series)


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_a_pc_lost_for_good_is_named_and_the_others_spend_the_budget(awac_start, tmp_path: Path, monkeypatch, caplog):
    """The first PC (its actor on the run's own thread) stopped after its first fight, for good:
    the second spends the budget, and the run ends with its policy rather than waiting on."""
    import logging

    from env.sim.launcher import SimServer

    from elden_il.training import awac

    monkeypatch.setattr(awac, "REJOIN_EVERY_S", 0.2)
    bc_path, dataset = awac_start
    with (
        SimServer(size=(84, 84)) as first,
        SimServer(size=(84, 84)) as second,
        first.player(),
        second.player(),
        caplog.at_level(logging.WARNING, logger="elden_il.training.awac"),
    ):

        def on_episode(row: dict) -> None:
            if row["env"] == first.host:
                first.stop()

        live = replace(AWAC_RUN, total_steps=120, backend="siphon", hosts=(first.host, second.host), game_speed=4)
        metrics = finetune_once(bc_path, live, CONFIG, tmp_path / "out", on_episode, dataset=dataset)
    by_env = {env["env"]: env for env in metrics["by_env"]}
    assert by_env[first.host]["lost"] == 1 and by_env[second.host]["env_steps"] > 0, by_env
    assert any(record.getMessage().startswith(f"{first.host} stopped answering") for record in caplog.records)
    assert load_policy(tmp_path / "out").policy is not None


def test_the_steps_a_person_took_over_are_drawn_as_demonstrations(awac_start):
    """``demo_fraction`` of every batch (here half) is demonstrations: the recorded ones and the
    steps a person played, in proportion to how many there are of each; the rest the env's own
    steps, taken over or not."""
    from elden_il.training.awac import Replay, drawn_batch

    demo, online = Replay.empty(40, 4, 1, 0.99), Replay.empty(40, 4, 1, 0.99)
    for replay, actions in ((demo, [0] * 10), (online, [1, 2] * 5)):
        first = replay.add(torch.zeros(4))
        for action in actions:
            row = replay.add(torch.zeros(4))
            replay.step(first, action, 0.0, False, row, False, marked=action == 2)
            first = row
    assert (demo.taken, online.taken, online.marked) == (10, 10, 5)
    actions = drawn_batch(
        demo, online, replace(AWAC_RUN, replay_batch=128, demo_fraction=0.5), np.random.default_rng(0)
    )[1].tolist()
    corrected = round(64 * 5 / 15)
    assert actions[: 64 - corrected] == [0] * (64 - corrected)  # the recordings
    assert actions[64 - corrected : 64] == [2] * corrected  # the steps taken over, as demonstrations
    assert set(actions[64:]) == {1, 2}  # the env's own, both kinds


def test_awac_with_the_scripted_human_taking_over_counts_the_steps_it_played(awac_start, tmp_path: Path):
    from env.common.fields import FieldError

    bc_path, dataset = awac_start
    rows: list[dict] = []
    corrected = replace(AWAC_RUN, total_steps=200, interventions="scripted")
    finetune(bc_path, corrected, CONFIG, tmp_path / "corrected", on_episode=rows.append, dataset=dataset)
    assert all(0 <= row["taken_over"] <= row["length"] for row in rows) and sum(row["taken_over"] for row in rows) > 0
    with pytest.raises(FieldError, match="takes over method awac's steps alone"):
        replace(TINY_RUN, interventions="scripted")


PRESS_NOW_AND_THEN = """
import sys, time
from capture.takeover import PynputKeyboard
from env.actions import KeyCommand
keyboard = PynputKeyboard()
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    time.sleep(1.0)
    keyboard.play(KeyCommand(frozenset({"W"}), ("LEFT_SHIFT",)))  # a roll forward, W held on
    time.sleep(0.5)
    keyboard.release()
"""


@pytest.mark.slow
def test_fine_tuning_a_live_game_learns_from_the_steps_a_person_takes_over(awac_start, xvfb: str, tmp_path: Path):
    """A person's real key events on the display while AWAC plays the simulator's window in real
    time: the learner's listener hears them, they take those steps over, and the steps are
    counted (and drawn) as demonstrations."""
    from env.sim.display import focus_window
    from env.sim.launcher import SimServer

    bc_path, dataset = awac_start
    rows: list[dict] = []
    with SimServer(size=(84, 84), extra_args=("--window",), log_path=tmp_path / "server.log") as server:
        focus_window(server.process.pid)
        live = replace(AWAC_RUN, total_steps=80, backend="siphon", hosts=(server.host,), interventions="person")
        presser = subprocess.Popen([sys.executable, "-c", PRESS_NOW_AND_THEN, "60"])
        try:
            metrics = finetune(bc_path, live, CONFIG, tmp_path / "out", on_episode=rows.append, dataset=dataset)
        finally:
            presser.kill()
    assert metrics["env_steps"] == 80 and len(rows) >= 3
    taken = sum(row["taken_over"] for row in rows)
    assert 0 < taken < sum(row["length"] for row in rows), rows  # theirs now and then, the policy's between


def test_a_person_to_take_over_with_no_display_is_one_line_before_anything_is_loaded(tmp_path: Path, monkeypatch):
    """``finetune.interventions: person`` with no display: after 8 s and 1.3 GB (the policy and
    the demonstrations read), "capture.record needs an X display ... or use --autopilot", which
    names another command and a flag fine-tuning lacks. Now the setting is checked first (the
    dataset named here does not exist: reading it would fail otherwise), its line naming it."""
    from env.common.errors import SetupError

    monkeypatch.delenv("DISPLAY", raising=False)
    settings = FinetuneConfig(method="awac", num_envs=1, backend="sim_server", interventions="person")
    with pytest.raises(SetupError) as refused:
        finetune(
            save_untrained(tmp_path / "bc", CONFIG),
            settings,
            CONFIG,
            tmp_path / "out",
            dataset=("no/such-v0", tmp_path),
        )
    message = str(refused.value)
    assert "finetune.interventions person" in message and "needs an X display (set DISPLAY)" in message, message
    assert "capture.record" not in message and "--autopilot" not in message, message


def test_an_unreachable_host_is_one_line_before_anything_is_loaded(tmp_path: Path):
    """An unreachable host was reported only after 21 s (42 s with the default 2,000 critic
    warm-up updates, which ran before the host was tried). Now each host is tried first (the
    dataset named here does not exist: reading it would fail otherwise)."""
    from env.sim.launcher import free_port
    from env.siphon.client import SiphonError

    host = f"127.0.0.1:{free_port()}"
    settings = FinetuneConfig(method="awac", num_envs=1, backend="siphon", hosts=(host,))
    with pytest.raises(SiphonError) as refused:
        finetune(
            save_untrained(tmp_path / "bc", CONFIG),
            settings,
            CONFIG,
            tmp_path / "out",
            dataset=("no/such-v0", tmp_path),
        )
    message = str(refused.value)
    assert message.startswith(f"finetune.hosts: no Siphon server at {host}"), message
