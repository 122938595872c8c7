"""RL fine-tuning from the behaviour-cloned policy, kept near it: PPO with a KL penalty to it
(the VPT recipe, ``finetune.method: ppo``), or AWAC from one env with the demonstrations in
every batch (``finetune.method: awac``, ``elden_il.training.awac``).

PPO from stable-baselines3 does the learning, unchanged. The one addition is where PPO already
has a regulariser: its entropy bonus. ``KLToPriorPolicy`` reports, in place of the entropy,
minus the KL divergence from a frozen copy of the BC policy, so PPO's ``ent_coef * entropy``
term becomes ``kl_coef * KL(pi || pi_BC)`` in the loss: the policy improves reward while
paying for every step it strays from what the demonstrations taught. The frozen copy lives in
the rollout buffer (``PriorLogitsBuffer``), which runs it once over each rollout; the policy
takes the KL from the same forward pass as everything else, so the term costs almost nothing.
"""

from __future__ import annotations

import copy
import json
import logging
import multiprocessing
import signal
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import DictRolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecMonitor
from tqdm import TqdmExperimentalWarning

from env.common.errors import ConfigError, GameError
from env.common.staging import staged_folder
from env.config import EnvConfig
from env.factory import env_fns
from env.rewards import HealReward
from env.sim.expert import ScriptedExpert
from env.siphon.client import SiphonClient, SiphonError
from env.wrappers import RewardBonus

from capture.drivers import need_display
from capture.live_takeover import PersonAtTheKeys
from capture.takeover import DEFAULT_QUIET_S

from elden_il.fanout import cluster_address
from elden_il.params import FinetuneConfig
from elden_il.policies.policy import load_policy, member, network_size, policy_kwargs, save_policy
from elden_il.training.finetune_runs import finetune_runs
from elden_il.training.interventions import ScriptedInterventions
from elden_il.training.ray_vec_env import RayEnv, RayVecEnv

if TYPE_CHECKING:
    from elden_il.view.live_run import RunWatch

log = logging.getLogger(__name__)


PRIOR_LOGITS = "prior_logits"
"""The key under which ``PriorLogitsBuffer`` hands each minibatch's prior logits to the policy."""
PRIOR_CHUNK = 256
"""Samples per forward pass of the prior over a rollout (bounds the memory of one pass)."""


class KLToPriorPolicy(ActorCriticPolicy):
    """An actor-critic whose "entropy" is ``-KL(pi || prior)`` on the minibatches that carry the
    prior's logits (``PriorLogitsBuffer`` adds them), and the plain entropy on any others.

    ``detach_critic``: the critic reads the shared features without training them. Behaviour
    cloning shaped those features for choosing actions; PPO's value loss otherwise reshapes them
    for predicting returns too, and its worst updates move what the actor sees. Detached, the
    sampled win rate dips less, but the critic explains almost none of the returns and the
    policy ends weaker (elden_il/studies/STUDIES.md, "Why the curve dips: five seeds per setting")."""

    def __init__(self, *args, detach_critic: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.detach_critic = detach_critic

    def evaluate_actions(self, obs, actions):
        prior_logits = None
        if isinstance(obs, dict) and PRIOR_LOGITS in obs:
            obs = dict(obs)
            prior_logits = obs.pop(PRIOR_LOGITS)
        # SB3's evaluate_actions, with the KL taken from the same forward pass as the log-probs
        # and values (a second pass for the KL cost as much as the rest of an update)
        features = self.extract_features(obs)
        if self.share_features_extractor:
            latent_pi = self.mlp_extractor.forward_actor(features)
            latent_vf = self.mlp_extractor.forward_critic(features.detach() if self.detach_critic else features)
        else:
            latent_pi = self.mlp_extractor.forward_actor(features[0])
            latent_vf = self.mlp_extractor.forward_critic(features[1])
        distribution = self._get_action_dist_from_latent(latent_pi)
        values, log_prob = self.value_net(latent_vf), distribution.log_prob(actions)
        if prior_logits is None:
            return values, log_prob, distribution.entropy()
        current = distribution.distribution  # torch's Categorical, or Bernoulli for multi-binary
        kl = torch.distributions.kl_divergence(current, type(current)(logits=prior_logits))
        if kl.ndim > 1:  # multi-binary: independent Bernoullis, sum over keys
            kl = kl.sum(dim=1)
        return values, log_prob, -kl


class PriorLogitsBuffer(DictRolloutBuffer):
    """PPO's rollout buffer, plus a frozen prior's action logits for every sample: computed once
    per rollout, when it is complete, and handed to the policy inside each minibatch's
    observations (key ``PRIOR_LOGITS``). The prior's forward pass then costs one pass over the
    rollout, not one per minibatch and epoch. Without ``set_prior``, PPO's buffer as it is."""

    prior: ActorCriticPolicy | None = None
    prior_logits: np.ndarray | None = None

    def set_prior(self, prior: ActorCriticPolicy) -> None:
        frozen = copy.deepcopy(prior).to(self.device)
        for p in frozen.parameters():
            p.requires_grad_(False)
        self.prior = frozen.eval()

    def compute_returns_and_advantage(self, last_values: torch.Tensor, dones: np.ndarray) -> None:
        super().compute_returns_and_advantage(last_values, dones)
        if self.prior is not None:
            self.prior_logits = self.swap_and_flatten(self._logits_of_prior())

    def _logits_of_prior(self) -> np.ndarray:
        """(steps, envs, logits): the prior's action logits for every observation held."""
        n = self.buffer_size * self.n_envs
        flat = {key: obs.reshape(n, *obs.shape[2:]) for key, obs in self.observations.items()}
        chunks = []
        with torch.no_grad():
            for start in range(0, n, PRIOR_CHUNK):
                batch = {key: self.to_torch(obs[start : start + PRIOR_CHUNK]) for key, obs in flat.items()}
                chunks.append(self.prior.get_distribution(batch).distribution.logits.cpu().numpy())
        return np.concatenate(chunks).reshape(self.buffer_size, self.n_envs, -1)

    def _get_samples(self, batch_inds: np.ndarray, env=None):
        samples = super()._get_samples(batch_inds, env)
        if self.prior_logits is not None:
            samples.observations[PRIOR_LOGITS] = self.to_torch(self.prior_logits[batch_inds])
        return samples


UPDATE_DIAGNOSTICS = (
    "train/explained_variance",
    "train/value_loss",
    "train/approx_kl",
    "train/clip_fraction",
    "train/entropy_loss",
)
"""What SB3 logs after an update that says how it went (``entropy_loss`` is minus the KL to BC)."""


def actor_parameters(policy: ActorCriticPolicy) -> list[torch.nn.Parameter]:
    """What decides the actions: the shared features, the actor's layers and its head. The
    critic's own layers and head are the rest."""
    critic = {id(p) for p in (*policy.mlp_extractor.value_net.parameters(), *policy.value_net.parameters())}
    if not policy.share_features_extractor:
        critic |= {id(p) for p in policy.vf_features_extractor.parameters()}
    return [p for p in policy.parameters() if id(p) not in critic]


class ValueWarmup(BaseCallback):
    """Train the critic alone for the first ``steps`` env steps, the actor frozen as BC left it,
    with ``epochs`` passes over each rollout (0: PPO's own ``n_epochs``).

    Behaviour cloning trains only the actor, so PPO starts with a competent actor and a random
    critic: its first advantages are noise, and the clipped updates on them unlearn what BC
    taught. With the actor frozen, PPO's own value loss fits the critic to the BC policy's
    returns first; after that both learn as usual. PPO's few passes a rollout leave the critic
    nearly as untrained as it started (its explained variance stays near 0), so the warm-up
    takes more of them: nothing else is learning then, and there is nothing to overfit but
    the value of the teacher's own play."""

    def __init__(self, steps: int, epochs: int = 0) -> None:
        super().__init__()
        self.steps = steps
        self.epochs = epochs
        self._frozen: list[torch.nn.Parameter] = []
        self._n_epochs = 0

    def _on_training_start(self) -> None:
        if self.steps > 0:
            self._frozen = [p for p in actor_parameters(self.model.policy) if p.requires_grad]
            for p in self._frozen:
                p.requires_grad_(False)
            self._n_epochs = self.model.n_epochs
            self.model.n_epochs = self.epochs or self._n_epochs
            log.info("critic warm-up: the actor is frozen for the first %d steps", self.steps)

    def _on_rollout_start(self) -> None:
        if self._frozen and self.num_timesteps >= self.steps:
            self._end()
            log.info("critic warm-up done at %d steps: the actor learns too", self.num_timesteps)

    def _on_training_end(self) -> None:
        if self._frozen:  # a run no longer than its warm-up: the saved model keeps PPO's own settings
            self._end()

    def _end(self) -> None:
        for p in self._frozen:
            p.requires_grad_(True)
        self._frozen = []
        self.model.n_epochs = self._n_epochs

    def _on_step(self) -> bool:
        return True


class KLDecay(BaseCallback):
    """Lower the KL-to-BC coefficient linearly from its start to 0 over ``steps`` env steps.

    Early on, the pull towards BC keeps noisy first advantages from undoing what BC taught; once
    the critic explains the returns, the same pull only holds the policy back from improving on
    its teacher. Set each rollout, since PPO reads ``ent_coef`` in every update."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps
        self.start = 0.0

    def _on_training_start(self) -> None:
        self.start = float(self.model.ent_coef)

    def _on_rollout_start(self) -> None:
        if self.steps > 0:
            self.model.ent_coef = self.start * max(0.0, 1.0 - self.num_timesteps / self.steps)

    def _on_step(self) -> bool:
        return True


class LearningCurve(BaseCallback):
    """Episode returns and wins as training goes, for the learning-curve plot (each row is also
    handed to ``on_episode`` as it comes: the pipeline logs it with DVCLive), and PPO's own
    diagnostics after each update (how well the critic explains the returns, how far each
    update moved the policy), which show why a curve falls."""

    def __init__(self, on_episode: Callable[[dict], None] | None = None) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self.updates: list[dict] = []
        self.on_episode = on_episode

    def _on_rollout_start(self) -> None:
        logged = self.model.logger.name_to_value
        if "train/explained_variance" in logged:
            self.updates.append(
                {
                    "timesteps": self.num_timesteps,
                    **{key.removeprefix("train/"): float(logged[key]) for key in UPDATE_DIAGNOSTICS if key in logged},
                }
            )

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.rows.append(
                    {
                        "timesteps": self.num_timesteps,
                        "return": float(info["episode"]["r"]),
                        "length": int(info["episode"]["l"]),
                        "win": bool(info.get("win", False)),
                    }
                )
                if self.on_episode is not None:
                    self.on_episode(self.rows[-1])
        return True


def seeded_env_fns(config: FinetuneConfig, env_config: EnvConfig):
    """The factory's env constructors for this run, each env reset once with its own seed, its
    reward with the drink paid back (``heal_reward``)."""

    def seeded(make, i: int):
        def thunk():
            # in a SubprocVecEnv worker, Ctrl-C in the terminal is the main process's to handle
            # (its workers end with it): the worker's own would print a traceback per env
            if multiprocessing.parent_process() is not None:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            env = make()
            if config.heal_reward:
                env = RewardBonus(env, HealReward(config.heal_reward))
            env.reset(seed=config.seed * 1000 + i)
            return env

        return thunk

    # the scripted human reads what the scripted expert reads
    options = {"state_attributes": ScriptedExpert.ATTRIBUTES} if config.interventions == "scripted" else {}
    fns = env_fns(
        env_config.replace(game_speed=config.game_speed), config.backend, config.num_envs, config.hosts, **options
    )
    return [seeded(make, i) for i, make in enumerate(fns)]


def local_or_ray_vec_env(fns: list, subprocesses: bool) -> VecEnv:
    """The sub-envs in Ray actors on the cluster when ``RAY_ADDRESS`` is set (the same rollouts,
    ``elden_il.training.ray_vec_env``), else in sub-processes or in this process as ``subprocesses`` says."""
    if cluster_address() is not None:
        return RayVecEnv(fns)
    return SubprocVecEnv(fns) if subprocesses and len(fns) > 1 else DummyVecEnv(fns)


Dataset = tuple[str, Path]
"""A Minari dataset: its id and the root it is under (``elden_il.data.open_dataset``)."""


def finetune(
    bc_policy_path: Path,
    config: FinetuneConfig,
    env_config: EnvConfig,
    out: Path,
    on_episode: Callable[[dict], None] | None = None,
    callbacks: Sequence[BaseCallback] = (),
    dataset: Dataset | None = None,
    watch_file: Path | None = None,
) -> dict:
    """Fine-tune the BC policy saved at ``bc_policy_path`` (``load_policy``) as ``config.method``
    says, in the env ``env_config`` describes (the one the BC policy was trained for): PPO with a
    KL penalty to it, or AWAC from one env and the demonstrations of ``dataset`` (which it needs).
    Saves the fine-tuned policy in ``out`` (``save_policy``, written whole: a run stopped before it
    ends leaves the previous one) with its curves. ``on_episode`` gets each training episode's
    learning-curve row as it ends; ``callbacks``, SB3's own, run after this module's (PPO only).
    With ``config.runs`` above 1, that many runs, the policies they end with saved as one ensemble
    (``elden_il.training.finetune_runs``; ``callbacks`` belong to one run's own policy and are refused there).
    One AWAC run is recorded as it goes to ``watch_file`` (``elden_il.view.live_run``), and
    streamed to the viewer ``ELDEN_IL_WATCH`` names."""
    check_live_setup(config)
    if config.method == "ppo":
        check_rollout_fits(config, env_config)
    elif dataset is None:
        raise ConfigError("finetune.method awac learns from the demonstrations too: give the dataset to fine-tune from")
    if callbacks and (config.runs != 1 or config.method != "ppo"):
        raise ValueError("callbacks watch the SB3 model of one PPO run: give them with runs=1 and method ppo")
    if config.runs == 1 and config.method == "awac" and watch_file is not None:
        from elden_il.view.live_run import watched_run

        with watched_run(watch_file, env_names(config)) as watch:
            return finetune_once(bc_policy_path, config, env_config, out, on_episode, dataset=dataset, watch=watch)
    if config.runs == 1:
        return finetune_once(bc_policy_path, config, env_config, out, on_episode, callbacks, dataset=dataset)
    return finetune_runs(finetune_once, bc_policy_path, config, env_config, out, on_episode, dataset)


def check_live_setup(config: FinetuneConfig) -> None:
    """What a live run needs from this machine and the network, tried before the policy, the
    demonstrations (a gigabyte and more) and the critics' warm-up: a display to hear the person
    who takes over (``interventions: person``), and each host's Siphon server answering. Each one
    line naming the setting in params.yaml."""
    if config.interventions == "person" and cluster_address() is not None:
        raise ConfigError(
            f"finetune.interventions person hears you at this machine's keys, and RAY_ADDRESS={cluster_address()} "
            "plays the game in a Ray actor: unset RAY_ADDRESS to take over, or set finetune.interventions to none"
        )
    if config.interventions == "person":
        need_display(
            "finetune.interventions person (you at this machine's keys, heard through pynput)",
            ": fine-tune on the machine where you sit at the game, or set finetune.interventions to scripted "
            "(the simulator's scripted human) or none in params.yaml",
        )
    if config.backend == "siphon":
        for host in config.hosts:
            try:
                SiphonClient(host).close()
            except SiphonError as e:
                raise SiphonError(f"finetune.hosts: {e}") from None


MAX_ROLLOUT_BYTES = 8 * 2**30
"""The most memory a run's rollout may hold: SB3 keeps every observation of it as float32 (the
pipeline's 2 envs x 1,024 steps of 84x84 frames: 173 MB)."""


def check_rollout_fits(config: FinetuneConfig, env_config: EnvConfig) -> None:
    """Refuse ``finetune.n_steps`` x ``num_envs`` whose rollout would hold more observations than
    ``MAX_ROLLOUT_BYTES``, before anything is allocated (a run per core holds one each)."""
    from env.profile import load_profile

    observation, _ = env_config.spaces(load_profile(env_config.profile))
    per_step = 4 * sum(int(np.prod(space.shape)) for space in observation.spaces.values())
    held = config.n_steps * config.num_envs * per_step
    if held > MAX_ROLLOUT_BYTES:
        raise ConfigError(
            f"finetune.n_steps = {config.n_steps} with num_envs = {config.num_envs}: each rollout would hold "
            f"{held / 2**30:.1f} GiB of observations (float32, {per_step:,} bytes a step), more than "
            f"{MAX_ROLLOUT_BYTES / 2**30:g} GiB: take fewer steps per rollout (params.yaml finetune.n_steps)"
        )


def finetune_once(
    bc_policy_path: Path,
    config: FinetuneConfig,
    env_config: EnvConfig,
    out: Path,
    on_episode: Callable[[dict], None] | None = None,
    callbacks: Sequence[BaseCallback] = (),
    progress_bar: bool = True,
    on_steps: Callable[[int], None] | None = None,
    dataset: Dataset | None = None,
    run: int = 0,
    watch: RunWatch | None = None,
) -> dict:
    """``finetune`` for one run, the training seed ``config.seed``, whatever ``config.runs`` says,
    continuing the BC policy's network for ``run`` (``elden_il.policies.policy.member``: its own, or an
    ensemble's in turn). ``on_steps`` gets the count of each batch of env steps as they are taken;
    ``watch``, an AWAC run's progress (``elden_il.view.live_run``)."""
    started = time.perf_counter()
    start = member(load_policy(bc_policy_path), run)
    if config.method == "awac":
        from elden_il.data import demonstrations, open_dataset
        from elden_il.training.awac import GameSeat, LostGame, finetune_awac

        demos = demonstrations(open_dataset(*dataset), final_observations=True)
        seats = [
            GameSeat(
                name,
                make if cluster_address() is None else partial(RayEnv, make),
                scripted_interventions(env_config) if config.interventions == "scripted" else None,
            )
            for name, make in zip(env_names(config), seeded_env_fns(config, env_config), strict=True)
        ]
        person = person_at_the_keys(env_config) if config.interventions == "person" else None
        try:
            policy, rows, updates, by_env = finetune_awac(
                start, demos, config, seats, on_episode, progress_bar, on_steps, person, watch
            )
        except LostGame as lost:
            kept = keep_partial_run(lost.policy, lost.rows, lost.updates, env_config, out)
            error = lost.__cause__
            error.args = (
                f"{error} (fine-tuning stopped at step {lost.step} of {config.total_steps}; the policy as it stood "
                f"is saved in {kept})",
            )
            raise error from None
        finally:
            if person is not None:
                person.close()
        steps = config.total_steps
    else:
        counting = [StepCount(on_steps)] if on_steps is not None else []
        model, curve = train(start, config, env_config, out, on_episode, [*callbacks, *counting], progress_bar)
        policy, rows, updates, steps = model.policy, curve.rows, curve.updates, model.num_timesteps
        by_env = []
    seconds = time.perf_counter() - started
    save_run(policy, rows, updates, env_config, out)
    wins = [r["win"] for r in rows]
    return {
        "method": config.method,
        "timesteps": steps,
        "env_steps": steps,
        "envs": len(env_names(config)),
        "env_steps_per_second": steps / seconds,
        "episodes": len(rows),
        "train_win_rate_last_50": float(np.mean(wins[-50:])) if wins else 0.0,
        **({"by_env": by_env} if len(by_env) > 1 else {}),
        "config": asdict(config),
    }


def env_names(config: FinetuneConfig) -> list[str]:
    """What the run's lines call each env: a gaming PC by its ``host:port``, a simulator by its
    backend and number."""
    if config.backend == "siphon":
        return list(config.hosts)
    return [f"{config.backend} {i}" for i in range(config.num_envs)]


def scripted_interventions(env_config: EnvConfig) -> ScriptedInterventions:
    """The simulator's scripted human, deciding at each step of an env ``env_config`` describes."""
    from env.profile import load_profile

    table = env_config.actions(load_profile(env_config.profile))
    return ScriptedInterventions(table, env_config.timestep_ms / 1000.0)


def person_at_the_keys(env_config: EnvConfig) -> PersonAtTheKeys:
    """You, heard at this machine's keyboard and controller, free to take over a live game's
    steps from an env ``env_config`` describes (``capture.live_takeover``)."""
    from env.profile import load_profile

    table = env_config.actions(load_profile(env_config.profile))
    log.info(
        "take over at any step with any bound key or the controller; let go for %g s to hand it back", DEFAULT_QUIET_S
    )
    return PersonAtTheKeys(table, DEFAULT_QUIET_S)


class StepCount(BaseCallback):
    """Hands each env step's count (one per env) to ``on_steps``."""

    def __init__(self, on_steps: Callable[[int], None]) -> None:
        super().__init__()
        self.on_steps = on_steps

    def _on_step(self) -> bool:
        self.on_steps(self.training_env.num_envs)
        return True


def train(
    bc: ActorCriticPolicy,
    config: FinetuneConfig,
    env_config: EnvConfig,
    out: Path,
    on_episode: Callable[[dict], None] | None = None,
    callbacks: Sequence[BaseCallback] = (),
    progress_bar: bool = True,
) -> tuple[PPO, LearningCurve]:
    """The PPO model fine-tuned from ``bc`` (a fresh model given its weights, and ``bc`` frozen
    as the KL prior), and its curves; ``finetune`` without the saving. ``progress_bar``: SB3's
    own (off in a run of several, whose main process shows one bar for them all). A game lost mid-run
    saves the model as it stood in ``out / PARTIAL_RUN`` and says so in its one line.

    The KL prior is not part of the model: a model trained on after this uses ``ent_coef`` as a
    plain entropy bonus unless ``model.rollout_buffer.set_prior(bc_policy)`` is called again."""
    fns = seeded_env_fns(config, env_config)
    vec = local_or_ray_vec_env(fns, config.subprocesses)
    vec = VecMonitor(vec, info_keywords=("win",))
    model = PPO(
        KLToPriorPolicy,
        vec,
        rollout_buffer_class=PriorLogitsBuffer,
        learning_rate=config.learning_rate,
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        vf_coef=config.vf_coef,
        ent_coef=config.kl_coef,
        seed=config.seed,
        policy_kwargs={
            **policy_kwargs(network_size(bc)),
            "share_features_extractor": config.critic_features != "separate",
            "detach_critic": config.critic_features == "detached",
        },
        device=bc.device,
        verbose=0,
    )
    # SB3's own logger, made at learn() when none is set, makes a folder in the temp dir per run
    # (SB3-<date>) and leaves it there; the curves are this project's (``LearningCurve``)
    model.set_logger(Logger(folder=None, output_formats=[]))
    model.policy.load_state_dict(bc.state_dict())
    model.rollout_buffer.set_prior(bc)
    curve = LearningCurve(on_episode)
    hooks = [
        ValueWarmup(config.value_warmup_steps, config.value_warmup_epochs),
        KLDecay(config.kl_decay_steps),
        curve,
        *callbacks,
    ]
    try:
        with warnings.catch_warnings():  # SB3's bar is tqdm's rich one, "experimental" at every run: nothing to act on
            warnings.filterwarnings("ignore", category=TqdmExperimentalWarning)
            model.learn(config.total_steps, callback=hooks, progress_bar=progress_bar)
    except GameError as e:
        kept = keep_partial_run(model.policy, curve.rows, curve.updates, env_config, out)
        e.args = (
            f"{e} (fine-tuning stopped at step {model.num_timesteps} of {config.total_steps}, after "
            f"{len(curve.updates)} update{'' if len(curve.updates) == 1 else 's'}; the model as it stood is "
            f"saved in {kept})",
        )
        raise
    finally:
        vec.close()  # a live game handed back at real time, however the run ended
    return model, curve


PARTIAL_RUN = "partial"
"""Where, under its output folder, a fine-tuning run that lost its game keeps what it trained."""


def keep_partial_run(
    policy: ActorCriticPolicy, rows: list[dict], updates: list[dict], env_config: EnvConfig, out: Path
) -> Path:
    """A game lost mid-run (a gaming PC off the network, a server gone): what was trained until
    then, kept where ``load_policy`` reads it (``out / PARTIAL_RUN``), for the error to name."""
    kept = out / PARTIAL_RUN
    save_run(policy, rows, updates, env_config, kept)
    return kept


def save_run(
    policy: ActorCriticPolicy, rows: list[dict], updates: list[dict], env_config: EnvConfig, out: Path
) -> None:
    """The policy, the env config it acts in and its curves (episodes, updates), as the policy
    folder ``out``, written whole (``env.common.staging``): a run stopped while saving leaves the
    old folder."""
    with staged_folder(out) as folder:
        save_policy(policy, env_config, folder)
        (folder / "learning_curve.json").write_text(json.dumps(rows))
        (folder / "updates.json").write_text(json.dumps(updates))
