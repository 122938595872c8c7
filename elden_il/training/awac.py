"""Fine-tuning that learns from one env: AWAC over the BC policy's own image features, frozen.

PPO learns from each env step once, and wants many envs; a gaming PC gives one. Here every step
goes into a replay buffer and is learnt from many times, the demonstrations stay in every batch
(half of it, as RLPD samples), and the image features are the ones behaviour cloning learnt,
frozen, so an update trains two small critics and the actor's head alone. The actor's loss is
AWAC's (Nair et al. 2020, arXiv 2006.09359): the likelihood of the buffer's actions, each
weighted by ``exp(advantage / awac_lambda)``, which improves on the data without straying far
from it. The critics (the minimum of two, LayerNorm in each layer, as RLPD has them) learn
n-step targets of the actor's own next action distribution, and first learn the demonstrations
alone, before the first env step: the actor's first updates follow a critic that knows the fights.
Two options change the targets: ``awac_entropy`` makes them soft (SAC's entropy bonus), and
``bc_proposals`` lets the BC policy propose actions beside the actor, at each step and in each
target, where the critics rate BC's higher (IBRL, Hu et al. 2023, arXiv 2311.02198).

The policy it returns is the BC policy with its actor trained: the same network, saved and loaded
as every policy is (``elden_il.policies.policy``); its critic head is BC's, unused.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn
from tqdm import tqdm

from env.common.errors import ConfigError, GameError
from env.common.progress import progress
from env.elden_env import SharedKeys
from env.game import GameState

from elden_il.data import Demonstrations
from elden_il.params import FinetuneConfig
from elden_il.policies.torch_threads import one_torch_thread

if TYPE_CHECKING:
    from elden_il.view.live_run import RunWatch

log = logging.getLogger(__name__)

FEATURE_CHUNK = 512
"""Demonstration rows per pass of the frozen features (bounds the memory of a pass: one a core at once)."""
MAX_WEIGHT = 20.0
"""The largest weight an action's advantage may give it in the actor's loss (AWAC's clip)."""
MAX_REPLAY_BYTES = 8 * 2**30
"""The most memory the env's own steps may hold as features (float32; the pipeline's 26,000
steps of 384 features hold 80 MB)."""
TARGET_RATE = 0.005
"""How far the target critics move towards the critics after each update (Polyak averaging)."""


@dataclass
class Replay:
    """Transitions as rows of frozen features: row ``i`` took ``action[i]``, earned the discounted
    sum ``reward[i]`` of up to ``n_step`` rewards, and lands on row ``next_row[i]``, whose value
    counts ``discount[i]`` (0 where the fight ended). An episode's last observation is a row of
    its own that takes no step."""

    features: torch.Tensor
    n_step: int
    gamma: float
    rows: int = 0
    taken: int = 0
    """How many rows took a step (the first ``taken`` of ``stepped``)."""
    marked: int = 0
    """How many of them a person played (the first ``marked`` of ``marked_steps``)."""

    def __post_init__(self) -> None:
        capacity = len(self.features)
        self.action = torch.zeros(capacity, dtype=torch.long)
        self.reward = torch.zeros(capacity)
        self.next_row = torch.zeros(capacity, dtype=torch.long)
        self.discount = torch.zeros(capacity)
        self.stepped = np.zeros(capacity, dtype=np.int64)
        self.marked_steps = np.zeros(capacity, dtype=np.int64)
        # each stream's (one env's) [row, rewards summed so far] while its sum grows
        self._open: dict[int, list[list[int]]] = {}

    @classmethod
    def empty(cls, capacity: int, width: int, n_step: int, gamma: float) -> Replay:
        return cls(torch.zeros(capacity, width), n_step, gamma)

    def add(self, features: torch.Tensor) -> int:
        """A new observation's row (the replay grows when full: a game that drops out again and
        again adds a first row at each return, with no step)."""
        if self.rows == len(self.features):
            self._grow(max(1024, len(self.features) // 8))
        row = self.rows
        self.features[row] = features
        self.rows += 1
        return row

    def _grow(self, more: int) -> None:
        self.features = torch.cat([self.features, self.features.new_zeros(more, *self.features.shape[1:])])
        for name in ("action", "reward", "next_row", "discount"):
            held = getattr(self, name)
            setattr(self, name, torch.cat([held, held.new_zeros(more)]))
        for name in ("stepped", "marked_steps"):
            held = getattr(self, name)
            setattr(self, name, np.concatenate([held, np.zeros(more, held.dtype)]))

    def step(
        self,
        row: int,
        action: int,
        reward: float,
        terminated: bool,
        next_row: int,
        over: bool,
        marked: bool = False,
        stream: int = 0,
    ) -> None:
        """``row`` took ``action`` and landed on ``next_row``; the rows of ``stream`` (the env that
        stepped: several envs' fights interleave) whose n-step sums are still open, this one
        included, take the reward. ``over``: the episode ended here; ``marked``: a person played
        this step."""
        self.action[row], self.reward[row], self.discount[row] = action, 0.0, 1.0
        self.stepped[self.taken] = row
        self.taken += 1
        if marked:
            self.marked_steps[self.marked] = row
            self.marked += 1
        open_rows = self._open.setdefault(stream, [])
        open_rows.append([row, 0])
        for item in open_rows:
            i = item[0]
            self.reward[i] += self.discount[i] * reward
            self.discount[i] = 0.0 if terminated else self.discount[i] * self.gamma
            self.next_row[i] = next_row
            item[1] += 1
        self._open[stream] = [] if over else [item for item in open_rows if item[1] < self.n_step]

    def close_stream(self, stream: int) -> None:
        """``stream``'s fight ends unfinished (its game was lost): its open sums stay as they
        stand, each counting the value of the last observation it reached."""
        self._open.pop(stream, None)

    def sample(self, count: int, rng: np.random.Generator, marked: bool = False) -> tuple[torch.Tensor, ...]:
        """``count`` transitions drawn alike from every step taken (``marked``: from those a
        person played)."""
        pool, size = (self.marked_steps, self.marked) if marked else (self.stepped, self.taken)
        rows = torch.as_tensor(pool[rng.integers(0, size, count)])
        return (
            self.features[rows],
            self.action[rows],
            self.reward[rows],
            self.features[self.next_row[rows]],
            self.discount[rows],
        )


def demonstration_replay(
    demos: Demonstrations, featurize: Callable[[dict], torch.Tensor], n_step: int, gamma: float
) -> Replay:
    """The demonstrations (loaded with their final observations) as n-step transitions."""
    if not demos.final.any():
        raise ValueError(
            "the demonstrations need their final observations: demonstrations(..., final_observations=True)"
        )
    count = len(demos)
    width = featurize(demos.batch(np.arange(1))).shape[1]
    replay = Replay.empty(count, width, n_step, gamma)
    chunks = [np.arange(start, min(count, start + FEATURE_CHUNK)) for start in range(0, count, FEATURE_CHUNK)]
    # a chunk a thread, each on one torch thread: every core busy, and each chunk the same floats
    with ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="awac-features") as threads:
        for index, features in zip(chunks, threads.map(lambda index: featurize(demos.batch(index)), chunks)):
            replay.features[index] = features
    replay.rows = count
    for i in np.flatnonzero(~demos.final):
        ends = bool(demos.terminated[i]) or bool(demos.final[i + 1])
        replay.step(int(i), int(demos.actions[i]), float(demos.rewards[i]), bool(demos.terminated[i]), int(i) + 1, ends)
    return replay


def critic(width: int, hidden: int, actions: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.ReLU(),
        nn.Linear(hidden, actions),
    )  # fmt: skip


class Learner:
    """The actor (BC's own head, trained in place), two critics and their targets, and one update
    of each from a batch of transitions."""

    def __init__(self, policy: ActorCriticPolicy, config: FinetuneConfig) -> None:
        self.policy, self.config = policy, config
        for parameter in policy.features_extractor.parameters():
            parameter.requires_grad_(False)
        self.actor = nn.Sequential(policy.mlp_extractor.policy_net, policy.action_net)
        actions = int(policy.action_space.n)
        width = policy.features_extractor.features_dim
        # on the policy's device (a GPU where load_policy found one); the replays stay in memory,
        # each batch moved there
        self.device = policy.device
        self.critics = nn.ModuleList([critic(width, config.critic_hidden, actions) for _ in range(2)]).to(self.device)
        self.targets = copy.deepcopy(self.critics).requires_grad_(False)
        # BC's own head as BC left it, where it proposes actions beside the actor's (IBRL's way)
        self.proposer = copy.deepcopy(self.actor).requires_grad_(False) if config.bc_proposals else None
        # foreach: each step's arithmetic over all the parameters at once (on CPU torch loops over
        # them one by one unless told), the same floats
        self.critic_optimizer = torch.optim.Adam(self.critics.parameters(), lr=config.learning_rate, foreach=True)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.learning_rate, foreach=True)
        self._critic_weights, self._target_weights = list(self.critics.parameters()), list(self.targets.parameters())
        # an update's two halves that need not wait for each other run side by side, each op on one
        # torch thread as before (the same floats, in the same order): the targets' values beside
        # the critics' forward pass, the actor's step beside the critics' backward pass
        self._beside = ThreadPoolExecutor(1, thread_name_prefix="awac-beside")
        # the weights an action is drawn from are whole: never half way through an update (several
        # envs' actors act while the learner learns)
        self.lock = threading.Lock()

    def close(self) -> None:
        """Lets the thread an update's halves share go (an update in flight finishes first)."""
        self._beside.shutdown()

    def features(self, obs: dict) -> torch.Tensor:
        with torch.no_grad():
            tensor, _ = self.policy.obs_to_tensor(obs)
            return self.policy.extract_features(tensor, self.policy.features_extractor)

    def act(self, features: torch.Tensor, rng: np.random.Generator) -> int:
        """An action drawn from the actor's distribution at one observation's features, or BC's
        where it proposes one the critics rate higher."""
        features = features.to(self.device)
        with torch.no_grad(), self.lock:
            p = F.softmax(self.actor(features[None]), -1)[0].double().cpu().numpy()
            action = int(rng.choice(len(p), p=p / p.sum()))
            if self.proposer is None:
                return action
            proposal = int(self.proposer(features[None]).argmax())
            q = torch.minimum(*(rated(features[None])[0] for rated in self.critics))
            return proposal if q[proposal] > q[action] else action

    def next_value(self, next_features: torch.Tensor) -> torch.Tensor:
        """What the target critics say the next observations are worth: the actor's expected
        value (plus its entropy's, soft), or BC's proposal's where that is higher."""
        with torch.no_grad():
            logits = self.actor(next_features)
            p = F.softmax(logits, -1)
            q = torch.minimum(*(target(next_features) for target in self.targets))
            # the entropy's term subtracted apart, so that without it the value is the same floats
            value = (p * q).sum(-1) - self.config.awac_entropy * (p * F.log_softmax(logits, -1)).sum(-1)
            if self.proposer is None:
                return value
            proposed = self.proposer(next_features).argmax(-1, keepdim=True)
            return torch.maximum(value, q.gather(1, proposed)[:, 0])

    def update(self, batch: tuple[torch.Tensor, ...], actor_learns: bool = True) -> dict[str, float]:
        with self.lock:
            return self._update(batch, actor_learns)

    def _update(self, batch: tuple[torch.Tensor, ...], actor_learns: bool) -> dict[str, float]:
        features, action, reward, next_features, discount = (part.to(self.device) for part in batch)
        next_value = self._beside.submit(self.next_value, next_features)
        values = [rated(features) for rated in self.critics]
        target = reward + discount * next_value.result()
        # the actor reads the critics' values before their step (as AWAC's authors compute the
        # advantages) and nothing the critics' step writes, so it learns while they do
        actor_step = (
            self._beside.submit(self._actor_step, features, action, [q.detach() for q in values])
            if actor_learns
            else None
        )
        try:
            critic_loss = sum(F.mse_loss(q.gather(1, action[:, None])[:, 0], target) for q in values)
            self.critic_optimizer.zero_grad()
            critic_loss.backward()
            self.critic_optimizer.step()
            with torch.no_grad():
                torch._foreach_lerp_(self._target_weights, self._critic_weights, TARGET_RATE)
        finally:  # the actor's step is over before the update is, however it ends
            actor_loss = actor_step.result() if actor_step is not None else None
        losses = {"critic_loss": float(critic_loss.detach())}
        return losses if actor_loss is None else losses | {"actor_loss": actor_loss}

    def _actor_step(self, features: torch.Tensor, action: torch.Tensor, values: list[torch.Tensor]) -> float:
        """One step of the actor towards the batch's actions, each weighted by its advantage under
        the critics' ``values``; its loss."""
        log_p = F.log_softmax(self.actor(features), -1)
        q = (values[0] + values[1]) / 2
        with torch.no_grad():
            advantage = q.gather(1, action[:, None])[:, 0] - (log_p.exp() * q).sum(-1)
            weight = torch.clamp(torch.exp(advantage / self.config.awac_lambda), max=MAX_WEIGHT)
        actor_loss = -(weight * log_p.gather(1, action[:, None])[:, 0]).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        return float(actor_loss.detach())


class Intervene(Protocol):
    """Who may take over from the actor (``elden_il.training.interventions``)."""

    def new_fight(self) -> None: ...

    def __call__(self, state: GameState, action: int) -> int | None:
        """The action played instead of the actor's ``action`` at ``state``, or None."""


class LostGame(Exception):
    """Every env's game was lost mid-run (the last one's ``GameError`` is the cause), with what
    was trained until then, for the caller to keep."""

    def __init__(self, policy: ActorCriticPolicy, rows: list[dict], updates: list[dict], step: int) -> None:
        super().__init__(f"the game was lost at step {step}")
        self.policy, self.rows, self.updates, self.step = policy, rows, updates, step


REJOIN_EVERY_S = 5.0
"""How often an env whose game stopped answering tries it again, while the other envs play on."""


@dataclass(frozen=True)
class GameSeat:
    """One env the run plays: a name for its lines (a gaming PC's ``host:port``), how to make it
    (connected, reset once with its seed) and who may take over its steps."""

    name: str
    make: Callable[[], object]
    intervene: Intervene | None = None


@dataclass
class _Seated:
    """A seat's env as the run goes: its game, its fight's row and tallies, what it gave."""

    seat: GameSeat
    stream: int
    env: object
    row: int = 0
    steps: int = 0
    episodes: int = 0
    lost: int = 0
    learning: Future | None = None

    def summary(self) -> dict:
        return {"env": self.seat.name, "env_steps": self.steps, "episodes": self.episodes, "lost": self.lost}


class _Run:
    """What the envs' actors share: the learner and its thread, the replays, the draws, the budget
    of steps they spend together, the curves, and whether the run is over. ``lock`` guards all
    but the learner (which guards itself) and the envs (each its actor's own)."""

    def __init__(
        self,
        learner: Learner,
        demo: Replay,
        online: Replay,
        config: FinetuneConfig,
        rng: np.random.Generator,
        thread: ThreadPoolExecutor,
        bar: tqdm,
    ) -> None:
        self.learner, self.demo, self.online, self.config, self.rng = learner, demo, online, config, rng
        self.thread, self.bar = thread, bar
        self.lock = threading.Lock()
        self.claimed = 0
        self.rows: list[dict] = []
        self.updates: list[dict] = []
        self.playing = 0
        self.over = threading.Event()
        self.lost: GameError | None = None
        self.counts_takeovers = False
        """Whether each fight's row counts the steps taken over (interventions, or a person)."""
        self.named = False
        """Whether each fight's row names its env (several envs)."""
        self.on_episode: Callable[[dict], None] | None = None
        self.on_steps: Callable[[int], None] | None = None
        self.watch: RunWatch | None = None


# one observation a step, small batches an update: threads only contend (elden_il.policies.torch_threads)
@one_torch_thread()
def finetune_awac(
    bc: ActorCriticPolicy,
    demos: Demonstrations,
    config: FinetuneConfig,
    seats: Sequence[GameSeat],
    on_episode: Callable[[dict], None] | None = None,
    progress_bar: bool = True,
    on_steps: Callable[[int], None] | None = None,
    person: SharedKeys | None = None,
    watch: RunWatch | None = None,
) -> tuple[ActorCriticPolicy, list[dict], list[dict], list[dict]]:
    """``config.total_steps`` steps of the envs ``seats`` make, all of them together, each step
    followed by ``updates_per_step`` updates from demonstrations and the envs' own steps (run
    while the envs play their next steps); the policy (``bc``, a copy, its actor trained), the
    learning-curve rows (as PPO's: timesteps, return, length, win; with interventions or
    ``person``, the steps taken over; with several envs, which env), the updates' losses every
    thousand steps, and what each env gave.

    Each env has an actor of its own that plays at its game's pace, none waiting for the slowest:
    one live game each, every step into the one replay, every action from the learner's latest
    weights. An env whose game stops answering is one line; the steps it gave stay, the others
    play on, and it rejoins when its game answers again. The run stops (``LostGame``, with what
    it trained) only when every env has lost its game. One env plays exactly as it always did.

    ``on_steps`` is told of each env step. A seat's ``intervene`` is shown each step's state and
    the actor's choice first, and the action it returns is played instead; ``person`` shares the
    one env's keys (``EldenRingEnv.share_keys``: a live game), and the steps they take are played
    as they played them. Both kinds of step count as demonstrations too. ``watch`` is told how
    each env and the learner fare as the run goes (``elden_il.view.live_run``)."""
    if not isinstance(bc.action_space, spaces.Discrete):
        raise ConfigError(
            f"finetune.method awac learns discrete actions; this policy's are {bc.action_space}: "
            "use env.action_mode: discrete, or finetune.method: ppo"
        )
    if person is not None and len(seats) != 1:
        raise ConfigError("a person takes over the one live game at the machine they sit at: fine-tune with one env")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    policy = copy.deepcopy(bc).train()
    # released in reverse, however the run ends: the live games handed back at real time, then
    # the thread an update's halves share
    with contextlib.ExitStack() as held:
        learner = Learner(policy, config)
        held.callback(learner.close)
        demo = demonstration_replay(demos, learner.features, config.n_step, config.gamma)
        for _ in range(config.critic_warmup_updates):
            learner.update(demo.sample(config.replay_batch, rng), actor_learns=False)
        # a step's row and a reset's, and each env's first
        rows_kept, width = 2 * config.total_steps + 2 * len(seats), demo.features.shape[1]
        if rows_kept * width * 4 > MAX_REPLAY_BYTES:
            raise ConfigError(
                f"finetune.total_steps = {config.total_steps}: awac would keep {rows_kept * width * 4 / 2**30:.1f} GiB of "
                f"features ({width} floats a step), more than {MAX_REPLAY_BYTES / 2**30:g} GiB: take fewer steps"
            )
        online = Replay.empty(rows_kept, width, config.n_step, config.gamma)
        seated = []
        for stream, seat in enumerate(seats):  # every game answers before the first step
            seated.append(_Seated(seat, stream, seat.make()))
            held.callback(lambda one=seated[-1]: one.env.close())
        if person is not None:
            seated[0].env.unwrapped.share_keys(person)
        bar = held.enter_context(
            progress(total=config.total_steps, shown=progress_bar, desc="fine-tuning", unit="step")
        )
        # The updates from the steps taken so far run on a thread of their own while the envs play
        # their next steps (torch lets go of the GIL while it computes): a step costs the longer of
        # the two, not their sum, and a live game plays on while the learner learns. Each step's
        # action waits for the updates its env's previous step asked for: it is the actor's latest.
        # Leaving the block waits for an update in flight: the policy is handed on whole.
        with ThreadPoolExecutor(1, thread_name_prefix="awac-learner") as learner_thread:
            run = _Run(learner, demo, online, config, rng, learner_thread, bar)
            run.playing = len(seated)
            run.counts_takeovers = person is not None or any(seat.intervene is not None for seat in seats)
            run.named, run.on_episode, run.on_steps, run.watch = len(seated) > 1, on_episode, on_steps, watch
            if watch is not None:
                for one in seated:
                    watch.playing(one.seat.name)
            actors = ThreadPoolExecutor(max(1, len(seated) - 1), thread_name_prefix="awac-actor")
            try:  # the first env's actor on this thread, where Ctrl-C lands; the others beside it
                others = [actors.submit(_act, run, one) for one in seated[1:]]
                _act(run, seated[0])
                for other in others:
                    other.result()
            finally:  # however it ends, the other actors stop at their next step
                run.over.set()
                actors.shutdown()
            if run.lost is not None:
                raise LostGame(trained(policy), run.rows, run.updates, online.taken) from run.lost
            _learnt(_learn(learner_thread, learner, demo, online, config, rng), run)  # the last step's
            if watch is not None:
                watch.done()
    return trained(policy), run.rows, run.updates, [one.summary() for one in seated]


def _act(run: _Run, seated: _Seated) -> None:
    """One env's actor: fights until the run's budget is spent, its game lost and found again
    as often as it goes; returns when the run is over. Anything else it raises ends the run for
    every actor."""
    try:
        while True:
            try:
                _fight(run, seated)
                return
            except GameError as error:
                if not _lose(run, seated, error) or not _rejoin(run, seated):
                    return
    except BaseException:
        run.over.set()
        raise


def _fight(run: _Run, seated: _Seated) -> None:
    """Fights in ``seated``'s env from a reset, each step's action the learner's latest, until the
    budget is spent; a ``GameError`` from its game goes to the caller."""
    learner, online, env, intervene = run.learner, run.online, seated.env, seated.seat.intervene
    _new_fight(run, seated)
    episode_return, length, played = 0.0, 0, 0
    while True:
        waiting = time.perf_counter()  # the game sits paused while the learner finishes
        _learnt(seated.learning, run)
        paused_s = time.perf_counter() - waiting
        seated.learning = None
        with run.lock:
            if run.claimed >= run.config.total_steps:
                run.over.set()  # an env still waiting for its game stops waiting
            if run.over.is_set():
                return
            run.claimed += 1
            action = learner.act(online.features[seated.row], run.rng)
            seated.learning = _learn(run.thread, learner, run.demo, online, run.config, run.rng)
        try:
            replaced = intervene(env.unwrapped.state, action) if intervene is not None else None
            action = action if replaced is None else replaced
            obs, reward, terminated, truncated, info = env.step(action)
        except GameError:
            with run.lock:  # the step was never taken: it goes back to the budget
                run.claimed -= 1
            raise
        person_played = bool(info.get("taken_over"))
        if person_played:  # the step was theirs: what they pressed is its action
            action = int(info["action"])
        taken_over = replaced is not None or person_played
        over = terminated or truncated
        features = learner.features(_one(obs))[0]
        with run.lock:
            next_row = online.add(features)
            online.step(seated.row, action, float(reward), bool(terminated), next_row, over, taken_over, seated.stream)
            seated.steps += 1
            timesteps = online.taken
            run.bar.update(1)
        if run.on_steps is not None:
            run.on_steps(1)
        if run.watch is not None:
            run.watch.stepped(seated.seat.name, paused_s)
        seated.row, episode_return, length = next_row, episode_return + float(reward), length + 1
        played += taken_over
        if over:
            row = {"timesteps": timesteps, "return": episode_return, "length": length, "win": bool(info.get("win"))}
            if run.counts_takeovers:
                row["taken_over"] = played
            if run.named:
                row["env"] = seated.seat.name
            with run.lock:
                seated.episodes += 1
                run.rows.append(row)
                if run.on_episode is not None:
                    run.on_episode(row)
            if run.watch is not None:
                run.watch.fought(seated.seat.name, row["win"])
            _new_fight(run, seated)
            episode_return, length, played = 0.0, 0, 0


def _new_fight(run: _Run, seated: _Seated) -> None:
    """``seated``'s env reset: its first observation a row of the replay, whoever may take over
    told of the new fight."""
    obs, _ = seated.env.reset()
    features = run.learner.features(_one(obs))[0]
    with run.lock:
        seated.row = run.online.add(features)
    if seated.seat.intervene is not None:
        seated.seat.intervene.new_fight()


def _lose(run: _Run, seated: _Seated, error: GameError) -> bool:
    """``seated``'s game stopped answering: its fight's open sums close where they stand, and
    unless it was the last env playing (the run is then over, lost), one line says so and it
    will try to rejoin (True)."""
    _learnt(seated.learning, run)
    seated.learning = None
    if run.watch is not None:
        run.watch.lost(seated.seat.name, error)
    with run.lock:
        run.online.close_stream(seated.stream)
        seated.lost += 1
        run.playing -= 1
        last = run.playing == 0
        if last:
            run.lost = error
            run.over.set()
    if not last:
        log.warning(
            "%s stopped answering at step %d (%s): its %d steps stay in the replay, the others play on, and it "
            "rejoins when it answers",
            seated.seat.name,
            run.online.taken,
            error,
            seated.steps,
        )
    with contextlib.suppress(GameError):
        seated.env.close()
    return not last


def _rejoin(run: _Run, seated: _Seated) -> bool:
    """Tries ``seated``'s game every ``REJOIN_EVERY_S`` until it answers (True) or the run is over."""
    while not run.over.wait(REJOIN_EVERY_S):
        try:
            env = seated.seat.make()
        except GameError as error:
            log.debug("%s still does not answer: %s", seated.seat.name, error)
            continue
        with run.lock:
            seated.env = env
            run.playing += 1
        log.warning("%s answers again: it rejoins the run at step %d", seated.seat.name, run.online.taken)
        if run.watch is not None:
            run.watch.rejoined(seated.seat.name)
        return True
    return False


def _learn(
    thread: ThreadPoolExecutor,
    learner: Learner,
    demo: Replay,
    online: Replay,
    config: FinetuneConfig,
    rng: np.random.Generator,
) -> Future | None:
    """``updates_per_step`` updates from the steps taken so far, started on ``thread``: their batches
    are drawn here, in the loop's order of draws, so a run is the same whichever thread is faster.
    None before the first step (the demonstrations alone taught the critics before it) or
    where there are none to make."""
    if not online.taken or not config.updates_per_step:
        return None
    batches = [drawn_batch(demo, online, config, rng) for _ in range(config.updates_per_step)]
    return thread.submit(lambda seen=online.taken: (seen, [learner.update(batch) for batch in batches]))


def _learnt(learning: Future | None, run: _Run) -> None:
    """Waits for ``learning``'s updates; every thousandth step's last losses go into the run's
    ``updates``, and the count made to its watch."""
    if learning is None:
        return
    seen, losses = learning.result()
    # several envs may ask at the same count of steps: its thousandth is logged once
    if losses and seen % 1000 == 0 and all(logged["timesteps"] != seen for logged in run.updates):
        run.updates.append({"timesteps": seen, **losses[-1]})
    if run.watch is not None:
        run.watch.learned(len(losses))


def drawn_batch(demo: Replay, online: Replay, config: FinetuneConfig, rng: np.random.Generator) -> tuple:
    """One update's transitions: ``demo_fraction`` of them demonstrations (the recorded ones and
    the steps a person played, alike), the rest the env's own steps."""
    from_demos = round(config.replay_batch * config.demo_fraction)
    parts = []
    corrected = round(from_demos * online.marked / (online.marked + demo.taken)) if online.marked else 0
    parts.append(demo.sample(from_demos - corrected, rng))
    if corrected:
        parts.append(online.sample(corrected, rng, marked=True))
    parts.append(online.sample(config.replay_batch - from_demos, rng))
    return _joined(*parts)


def trained(policy: ActorCriticPolicy) -> ActorCriticPolicy:
    """The policy as the run leaves it: every weight trainable again, in eval mode."""
    for parameter in policy.features_extractor.parameters():
        parameter.requires_grad_(True)
    return policy.eval()


def _one(obs: dict) -> dict:
    return {key: np.asarray(value)[None] for key, value in obs.items()}


def _joined(*batches: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.cat(parts) for parts in zip(*batches))
