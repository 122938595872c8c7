"""Every knob of ``dvc repro``: one typed tree, a frozen dataclass per section of params.yaml.

A field's default is the pipeline's default, with three exceptions declared once, here, each
with its reason: the env, fine-tuning and the demonstrations' recording are settings other
callers make too (``make_env``, ``finetune``, ``capture.record``), whose own defaults suit them,
so the pipeline's differ in ``PIPELINE_ENV``, ``PIPELINE_FINETUNE`` and ``DEMO_RECORDING``, and
nowhere else. params.yaml writes every default out for the user to read and change
(``tests/test_params.py`` holds the two equal), so deleting a key from params.yaml changes
nothing. Each field declares what it accepts (``env.common.fields.checked``); the ``env``
section is not a mirror of the env's settings but ``EnvConfig`` itself, which owns them. Reading a
file (``load_params``) checks every section at once, so a stage never starts on a bad value, and
says which key of which file is wrong in one line.

The dataclasses are plain data (no torch): ``train_bc`` and ``finetune`` take their sections
as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from env.common.errors import ConfigError
from env.common.fields import (
    FIGHTS,
    FLAG,
    MAX_SEED,
    SEED,
    STEP_MS,
    TEXT,
    FieldError,
    Rule,
    check_fields,
    checked,
    is_int,
    is_number,
    number,
    one_of,
    optional,
    whole,
)
from env.common.files import UnreadableFile, read_text
from env.config import FIELD_NAMES, MAX_GAME_SPEED, EnvConfig
from env.factory import BACKENDS
from env.sim.boss import available_bosses

from capture.dataset_id import DATASET_ID
from capture.record import RecordSettings


class ParamsError(ConfigError):
    """params.yaml is missing, malformed, or has a bad value; the message says which and why."""


FIRST_HELD_OUT_SEED = 1_000_000
"""The first seed of the evaluation's fights: demonstrations and training use small seeds, so
fights from here on are ones no policy has seen. Studies and benchmarks that compare with the
pipeline's evaluation start here too."""


@dataclass(frozen=True)
class DemosParams:
    """``demos``: where the demonstrations come from."""

    source: str = checked("sim", one_of("sim", "raw"))
    """sim: the autopilot recorded against the in-process simulator; raw: your own recordings."""
    boss: str = checked("margit", one_of(*available_bosses()))
    """sim only: the simulator's boss the demonstrations fight (a file of ``env/sim/bosses/``,
    played through its profile ``sim_<boss>``); the dataset, training and evaluation follow the
    recordings' profile, so this one key moves the whole pipeline to another boss."""
    raw_dir: str | None = checked("datasets/raw", optional(TEXT))
    """raw only: the folder of your recordings (``python -m capture.record``)."""
    record: RecordSettings = field(default_factory=lambda: DEMO_RECORDING)
    """sim only: the recording session itself, ``capture.record``'s own settings (those of them
    in ``RECORD_KEYS``; the env is params.yaml's)."""

    def __post_init__(self) -> None:
        check_fields(self)


DEMO_RECORDING = RecordSettings(
    backend="sim",
    autopilot=True,
    max_episodes=40,
    master_size=(128, 128),  # smaller than the recorder's own: the pipeline's frames are 84x84, cheaper to draw
    reproducible=True,  # the same params record the same bytes: DVC sees no change
)
"""The demonstrations' recording session: the autopilot in-process, as ``python -m capture.record
--backend sim --autopilot`` records, 40 fights, each file's bytes following from the params."""
RECORD_KEYS = ("max_episodes", "seed", "rate", "player", "master_size", "video_codec")
"""The recorder's settings params.yaml's ``demos.record`` may set; the others are the stage's own."""


MOVED_DEMOS_KEYS = {
    "episodes": "max_episodes",
    "seed": "seed",
    "rate_hz": "rate",
    "player": "player",
    "master_size": "master_size",
    "video_codec": "video_codec",
}
"""The demos keys that are the recorder's own settings now, and their names under ``demos.record``."""


def read_demos(values: Any, source: str = "params.yaml") -> DemosParams:
    """params.yaml's ``demos`` section; its ``record`` mapping is ``DEMO_RECORDING`` with the
    ``RECORD_KEYS`` it names changed, each held to the recorder's own rule, and a number of
    fights to record (at least 1: the recorder's 0 records until someone quits)."""
    record = None
    if isinstance(values, dict):
        values = dict(values)
        record = values.pop("record", None)
        moved = sorted(set(values) & set(MOVED_DEMOS_KEYS))
        if moved:
            raise ParamsError(
                f"{source} demos.{moved[0]}: the recording's settings are capture.record's own, under "
                f"demos.record now: write demos.record.{MOVED_DEMOS_KEYS[moved[0]]}"
            )
    demos = read_section(values, "demos", DemosParams, source)
    if record is None:
        return demos
    if not isinstance(record, dict):
        raise ParamsError(f"{source} demos.record must be a mapping of keys ({', '.join(RECORD_KEYS)}), got {record!r}")
    unknown = sorted(set(record) - set(RECORD_KEYS))
    if unknown:
        raise ParamsError(f"{source} demos.record: unknown keys {unknown}; known: {list(RECORD_KEYS)}")
    changes = {key: tuple(value) if isinstance(value, list) else value for key, value in record.items()}
    try:
        recording = replace(DEMO_RECORDING, **changes)
        FIGHTS.check("max_episodes", recording.max_episodes)
    except FieldError as e:
        raise ParamsError(f"{source} demos.record.{e}") from None
    return replace(demos, record=recording)


@dataclass(frozen=True)
class DatasetParams:
    """``dataset``: the dataset's name. The env it is built for is params.yaml's ``env``."""

    id: str = checked("eldenil/margit-sim-v0", DATASET_ID)
    """The Minari dataset id, namespace/name-vN."""

    def __post_init__(self) -> None:
        check_fields(self)


FROM_ELSEWHERE = {
    "profile": "it is the recordings' own profile, read from them when the dataset is built",
    "capture_size": "it is the recordings' own picture size, read from them when the dataset is built",
    "game_speed": "how fast a live game runs is finetune.game_speed and evaluate.game_speed",
}
"""``EnvConfig`` fields params.yaml's ``env`` does not set, and where each comes from instead."""


PIPELINE_ENV = EnvConfig(observe_flasks=True)
"""The pipeline's env where params.yaml leaves a key out: the env's own defaults but for the flask
count, which the simulator's profile reads (the env's own default keeps the PRD's spaces, which
every profile can give)."""


def read_env(values: Any, source: str = "params.yaml") -> EnvConfig:
    """params.yaml's ``env`` section: the ``EnvConfig`` itself, less the fields that come from
    elsewhere (``FROM_ELSEWHERE``); its timestep is one a recording can be cut into."""
    fixed = sorted(set(values) & set(FROM_ELSEWHERE)) if isinstance(values, dict) else []
    if fixed:
        raise ParamsError(f"{source} env.{fixed[0]} cannot be set here: {FROM_ELSEWHERE[fixed[0]]}")
    config = read_section(values, "env", EnvConfig, source, PIPELINE_ENV)
    try:
        STEP_MS.check("timestep_ms", config.timestep_ms)
    except FieldError as e:
        raise ParamsError(f"{source} env.{e}") from None
    return config


def layers(low: int, high: int, most: int, least: int = 1) -> Rule:
    """A list of ``least`` to ``most`` whole numbers, each from ``low`` to ``high`` (a layer each)."""
    return Rule(
        lambda v: isinstance(v, tuple) and least <= len(v) <= most and all(is_int(x) and low <= x <= high for x in v),
        f"must be a list of {least} to {most} whole numbers, each from {low} to {high}",
    )


@dataclass(frozen=True)
class NetworkSize:
    """``network``: the policy network's size and shape. Behaviour cloning makes it and fine-tuning
    continues it (``elden_il.policies.policy.network_size`` reads it back from the saved policy), so a
    changed size retrains from behaviour cloning on. Plain ints and tuples of ints: a saved policy
    keeps them as its extractor's arguments. A narrow one runs every code path of training, saving
    and loading at a fraction of the cost (the tests' networks)."""

    cnn_channels: tuple[int, ...] = checked((16, 32, 32), layers(1, 1024, 6))
    """Each convolution's output channels, one entry per convolution."""
    cnn_kernels: tuple[int, ...] = checked((8, 4, 3), layers(1, 32, 6))
    """Each convolution's square kernel, in pixels."""
    cnn_strides: tuple[int, ...] = checked((4, 2, 1), layers(1, 16, 6))
    """Each convolution's stride."""
    cnn_dim: int = checked(256, whole(1, 65_536))
    """The frame's features, after the convolutions."""
    state_dim: int = checked(128, whole(1, 65_536))
    """The game state's features."""
    hidden: tuple[int, ...] = checked((256,), layers(1, 65_536, 4, least=0))
    """The actor's and the critic's own layers, each."""

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("cnn_kernels", "cnn_strides"):
            if len(getattr(self, name)) != len(self.cnn_channels):
                raise FieldError(
                    name, list(getattr(self, name)), "must have one entry per convolution, as cnn_channels has"
                )


HOSTS = Rule(
    lambda v: isinstance(v, tuple) and all(isinstance(h, str) and ":" in h for h in v),
    'must be a list of "host:port" strings',
)


WEIGHTS = Rule(
    lambda v: (
        isinstance(v, dict)
        and all(isinstance(k, str) and k.strip() and is_number(w) and 0 <= w <= 1000 for k, w in v.items())
    ),
    "must be a mapping of keybind names to weights from 0 to 1000 ({use_item: 30})",
)


@dataclass(frozen=True)
class BCConfig:
    """``bc``: behaviour cloning (a batch of -1 would train to nan)."""

    epochs: int = checked(16, whole(1, 100_000), "BC's passes over the training episodes, at most")
    """Passes over the training episodes, at most."""
    batch_size: int = checked(128, whole(1, 1_000_000))
    learning_rate: float = checked(3e-4, number(0, 1, above=True))
    weight_decay: float = checked(1e-5, number(0, 1))
    validation_fraction: float = checked(0.1, number(0, 1, below=True))
    """The share of whole episodes held out to pick the best epoch."""
    patience: int = checked(3, whole(1))
    """Epochs without a better validation loss before stopping."""
    intervention_weight: float = checked(
        1.0, number(0, 1000), "weight of a correction step in BC's loss (a demonstration step: 1)"
    )
    """Recordings a person corrected a policy in (``elden_il.pilot --policy``): a corrected
    step's weight in the loss; a step the policy played itself weighs nothing, a demonstration 1."""
    action_weights: dict[str, float] = checked({}, WEIGHTS)
    """A weight in the loss for the steps that press each named keybind (the profile's
    ``[keybinds]``, in either action mode), as if there were that many of them: a rare action a
    fight turns on (the drink, ``{use_item: 30}``) is otherwise learnt as one never taken.
    ``{}``: every step alike."""
    augment_shift: int = checked(0, whole(0, 32))
    """Random shifts (DrQ, RAD): each training frame moved by up to this many pixels each way, its
    edge pixels repeated into the gap, a new shift every time it is drawn; 0: the frames as they are."""
    seed: int = checked(0, whole(0, 2**32 - 1))
    """The first network's training seed (the next networks count up from it)."""
    runs: int = checked(1, whole(1, 16))
    """Networks trained one after another, each on its own seed, acting as one policy, their
    log-probabilities averaged: on a person's 20 fights one network's result swings with its
    seed from nothing to above half the person's (elden_il/studies/STUDIES.md, "Several BC networks as one")."""

    def __post_init__(self) -> None:
        check_fields(self)


FINETUNE_METHODS = ("ppo", "awac")


@dataclass(frozen=True)
class FinetuneConfig:
    """``finetune``: RL from the BC policy, kept near it (``total_steps: -5`` would publish BC
    untrained as "fine-tuned")."""

    method: str = checked("ppo", one_of(*FINETUNE_METHODS))
    """ppo: PPO with a KL penalty to the BC policy, over num_envs envs (``elden_il.training.finetune``);
    awac: off-policy from one env or several (a lab's gaming PCs), every step reused, the
    demonstrations in every batch and the image features BC learnt frozen
    (``elden_il.training.awac``)."""
    total_steps: int = checked(30_000, whole(1))
    backend: str = checked("sim", one_of(*BACKENDS))
    """sim: num_envs in-process simulators; sim_server: num_envs simulator servers over gRPC;
    siphon: live, one env per entry of hosts."""
    hosts: tuple[str, ...] = checked((), HOSTS)
    """siphon only: "pc1:50051", one per gaming PC (or simulator server)."""
    game_speed: float = checked(1.0, number(1, MAX_GAME_SPEED))
    """A live game only (sim_server, siphon): it runs this many times faster than real time during
    each step, paused between steps (``EnvConfig.game_speed``); the in-process simulator is
    lock-step at any value."""
    num_envs: int = checked(2, whole(1, 256))
    subprocesses: bool = checked(False, FLAG)
    """The envs in subprocesses (where there are cores to spare; the same results either way)."""
    kl_coef: float = checked(0.05, number(0))
    """The pull towards the BC policy (a KL penalty)."""
    learning_rate: float = checked(1e-4, number(0, 1, above=True))
    """Adam's step, the actor's and the critics': AWAC's one run ends steadier at a third of PPO's
    0.0003, which PPO's runs were tuned at (elden_il/studies/STUDIES.md, "The learning rate")."""
    n_steps: int = checked(1024, whole(2, 1_000_000))
    """Steps per env per rollout (what they hold in memory is checked against the env's
    observations when fine-tuning starts: ``elden_il.training.finetune.check_rollout_fits``)."""
    batch_size: int = checked(256, whole(2))
    """PPO normalises advantages over a batch: one sample is nan."""
    n_epochs: int = checked(10, whole(1))
    """Passes over each rollout: fewer leave the critic unable to explain the returns."""
    gamma: float = checked(0.99, number(0, 1, above=True))
    gae_lambda: float = checked(0.95, number(0, 1))
    clip_range: float = checked(0.1, number(0, above=True))
    vf_coef: float = checked(0.5, number(0))
    """The value loss's weight, also in the features it shares with the actor."""
    kl_decay_steps: int = checked(30_000, whole(0))
    """0: kl_coef throughout; else it falls linearly to 0 over this many steps."""
    value_warmup_steps: int = checked(4096, whole(0))
    """Env steps in which only the critic learns, the actor frozen as BC left it."""
    value_warmup_epochs: int = checked(30, whole(0))
    """Passes over each warm-up rollout (0: n_epochs)."""
    critic_features: str = checked("shared", one_of("shared", "detached", "separate"))
    """shared: the value loss trains the features the actor reads (SB3's way); detached: it reads
    them only; separate: the critic has its own copy."""
    heal_reward: float = checked(0.0, number(0, 1000))
    """Added to the env's reward per max HP a step regains (a drink), while training only: the env
    charges 5 per max HP lost and pays nothing back, so a drink's step looks a swing lost and
    fine-tuning unlearns drinking; 5 pays a drink back what the hits it heals cost. 0: the env's
    reward alone."""
    seed: int = checked(0, whole(0, 2**32 - 1))
    """The first run's training seed (the next runs count up from it)."""
    awac_lambda: float = checked(0.3, number(0, above=True))
    """awac: the temperature of the advantage weights (lower: the actor follows the critic harder;
    at 1 it stays so near its data that it ends about where the teacher is, and far lower it
    follows the critic's mistakes too: elden_il/studies/STUDIES.md, "The advantage weights' temperature")."""
    critic_warmup_updates: int = checked(2000, whole(0, 1_000_000))
    """awac: critic updates on the demonstrations alone before the first env step."""
    demo_fraction: float = checked(0.1, number(0, 1))
    """awac: the share of every batch drawn from the demonstrations (the rest: the env's own steps).
    A few keep the critics anchored; HIL-SERL's half keeps the actor nearer its teacher, and none
    lets it drift off (elden_il/studies/STUDIES.md, "The demonstrations' share of each batch")."""
    n_step: int = checked(3, whole(1, 100))
    """awac: rewards summed into each critic target before the next observation's value."""
    replay_batch: int = checked(128, whole(2, 65_536))
    """awac: transitions per update."""
    updates_per_step: int = checked(1, whole(0, 16))
    """awac: updates after each env step (RLPD's update-to-data ratio); 0 learns nothing, the run
    only plays: the baseline its learning's cost is measured against."""
    critic_hidden: int = checked(256, whole(8, 4096))
    """awac: the width of each critic's two hidden layers."""
    awac_entropy: float = checked(0.0, number(0, 10))
    """awac: the weight of the actor's entropy in the critics' targets (a soft value, as SAC's);
    0: the actor's expected value alone."""
    interventions: str = checked("none", one_of("none", "scripted", "person"))
    """awac: who may take over while it learns, the steps they play joining the demonstrations:
    nobody; the simulator's scripted human, in-process (the pilot's ``--scripted-human``: it plays
    the expert while a boss blow winds up and the actor's choice differs;
    ``elden_il.training.interventions``); or you, at a live game's keys or controller on the machine that
    learns, with any bound key, as in the pilot (``capture.live_takeover``)."""
    bc_proposals: bool = checked(False, FLAG)
    """awac: the BC policy proposes too (as IBRL does): at each step, and in each target, the
    critics take BC's action where they rate it above the actor's."""
    runs: int = checked(1, whole(1, 16))
    """Fine-tuning runs from the same BC policy, side by side, one core each (backend sim only);
    with more than one, the fine-tuned policy is all of them acting as one, their log-probabilities
    averaged. Where a run ends swings with its seed by tens of points, and the fights the runs
    lose differ (elden_il/studies/STUDIES.md, "Several runs as one policy")."""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.interventions != "none" and self.method != "awac":
            raise FieldError(
                "interventions", self.interventions, "takes over method awac's steps alone: set method awac"
            )
        if self.interventions == "person" and self.backend == "sim":
            raise FieldError(
                "interventions",
                self.interventions,
                "needs a live game (backend sim_server or siphon): the in-process simulator runs lock-step, "
                "where nobody can press a key; interventions scripted stands in for you there",
            )
        envs = len(self.hosts) if self.backend == "siphon" else self.num_envs
        if self.interventions == "person" and envs != 1:
            raise FieldError(
                "interventions",
                self.interventions,
                f"takes over one live game, at the machine you sit at, and this run plays {envs}: fine-tune with one "
                "env (one host) to take over, or set interventions to none",
            )
        if self.runs != 1 and self.backend != "sim":
            raise FieldError(
                "runs",
                self.runs,
                f"must be 1 with backend {self.backend}: several runs train side by side, each on in-process "
                "simulators of its own; a live game trains one",
            )


def check_seed_range(first_seed: int, fights: int, name: str = "first_seed") -> None:
    """Refuse seeds past the last one (``first_seed`` and the ``fights - 1`` after it)."""
    if first_seed + fights - 1 > MAX_SEED:
        raise FieldError(
            name,
            first_seed,
            f"must be at most {MAX_SEED - fights + 1}: {fights} fights count up from it to {MAX_SEED} at most",
        )


PIPELINE_FINETUNE = FinetuneConfig(method="awac", total_steps=26_000, num_envs=1)
"""The pipeline's fine-tuning where params.yaml leaves a key out: AWAC from one env, about an hour
of one gaming PC at 4x, so in-process and against a live game alike it is the same recipe;
``FinetuneConfig``'s own default stays PPO over two envs, which code calling ``finetune`` with
a policy and no demonstrations can run."""


@dataclass(frozen=True)
class EvaluateParams:
    """``evaluate``: every policy on the same held-out fights."""

    fights: int = checked(100, FIGHTS)
    first_seed: int = checked(FIRST_HELD_OUT_SEED, SEED)
    """Held out: demonstrations and training use small seeds."""
    backend: str = checked("sim", one_of(*BACKENDS))
    """sim: in-process; sim_server: python -m env.sim over gRPC; siphon: a real host."""
    host: str = checked("127.0.0.1:50051", TEXT)
    """siphon only."""
    game_speed: float = checked(1.0, number(1, MAX_GAME_SPEED))
    """A live game only (sim_server, siphon): as ``finetune.game_speed``."""
    deterministic: bool = checked(True, FLAG)
    """The most likely action (false: sample from the policy)."""
    parallel: int = checked(8, whole(1, 256))
    """sim only: fights run side by side, decisions batched."""
    workers: int = checked(2, whole(1, 256))
    """sim only: processes of this machine the fights are spread over (1: this process alone);
    each plays ``parallel`` fights side by side. Ray's ``RAY_ADDRESS`` spreads them over a cluster instead."""

    def __post_init__(self) -> None:
        check_fields(self)
        check_seed_range(self.first_seed, self.fights)

    @property
    def seeds(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.fights))


LIVE_SERVERS = ("real", "ideal")


@dataclass(frozen=True)
class EvaluateLiveParams:
    """``evaluate_live``: the evaluate stage's policies on its held-out seeds again, over the live
    path (``python -m elden_il.pipeline evaluate_live``; not part of ``dvc repro``: it plays in
    real time). Each worker starts a simulator server of its own and plays it over gRPC as the
    real game is played, paused between steps at ``game_speed``."""

    fights: int = checked(100, FIGHTS)
    """Held-out fights per policy: the first of the evaluate stage's seeds (``evaluate.first_seed``)."""
    game_speed: float = checked(3.0, number(1, MAX_GAME_SPEED))
    """As ``evaluate.game_speed``: a step is still its timestep of game time."""
    server: str = checked("real", one_of(*LIVE_SERVERS))
    """real: the server as unkind as Siphon (one lock, a scan per memory call, its sticky config
    and NPC hook: ``python -m env.sim --real-server``); ideal: the simulator's own server."""
    workers: int = checked(6, whole(1, 64))
    """Servers playing at once, each with a process of its own: a live fight mostly waits on its
    game's time, so more workers than cores still play faster."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class PipelineParams:
    """params.yaml, whole."""

    demos: DemosParams = field(default_factory=DemosParams)
    dataset: DatasetParams = field(default_factory=DatasetParams)
    env: EnvConfig = field(default_factory=lambda: PIPELINE_ENV)
    """The env the dataset is built for and every policy trains and is evaluated in; its profile
    and picture (``capture_size``) are the recordings', filled in when the dataset is built."""
    network: NetworkSize = field(default_factory=NetworkSize)
    bc: BCConfig = field(default_factory=BCConfig)
    finetune: FinetuneConfig = field(default_factory=lambda: PIPELINE_FINETUNE)
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    evaluate_live: EvaluateLiveParams = field(default_factory=EvaluateLiveParams)

    @classmethod
    def from_mapping(cls, raw: Any, source: str = "params.yaml") -> PipelineParams:
        """The tree from parsed YAML, every value checked; ``ParamsError`` names the first bad one
        as ``<source> <section>.<key> = <value>: <what it accepts>``."""
        if not isinstance(raw, dict):
            raise ParamsError(f"{source} must be a mapping of sections ({', '.join(SECTIONS)})")
        unknown = sorted(set(raw) - set(SECTIONS))
        if unknown:
            raise ParamsError(f"{source}: unknown sections {unknown}; known: {list(SECTIONS)}")
        moved = sorted(set(raw.get("dataset") or {}) & set(FIELD_NAMES))
        if moved:
            raise ParamsError(
                f"{source} dataset.{moved[0]}: the env's settings are all in the env section now: "
                f"write env.{moved[0]} (the dataset section keeps only its id)"
            )
        return cls(
            **{
                name: READERS[name](raw.get(name) or {}, source)
                if name in READERS
                else read_section(raw.get(name) or {}, name, kind, source)
                for name, kind in SECTIONS.items()
            }
        )


SECTIONS: dict[str, type] = {
    "demos": DemosParams,
    "dataset": DatasetParams,
    "env": EnvConfig,
    "network": NetworkSize,
    "bc": BCConfig,
    "finetune": FinetuneConfig,
    "evaluate": EvaluateParams,
    "evaluate_live": EvaluateLiveParams,
}
"""params.yaml's sections, in its order, and the dataclass each is read into (``demos``, ``env``
and ``finetune`` by ``READERS``)."""
READERS = {
    "demos": read_demos,
    "env": read_env,
    "finetune": lambda values, source: read_section(values, "finetune", FinetuneConfig, source, PIPELINE_FINETUNE),
}
"""The sections with a reader of their own: ``demos`` and ``env`` nest another part's settings,
``finetune`` fills a key left out from the pipeline's defaults (``PIPELINE_FINETUNE``)."""


def read_section(values: Any, name: str, kind: type, source: str = "params.yaml", defaults: Any = None) -> Any:
    """One section as its dataclass ``kind``, every key known and every value checked; a key left
    out takes its value from ``defaults`` (``kind()`` unless given)."""
    known = [f.name for f in fields(kind)]
    if not isinstance(values, dict):
        raise ParamsError(f"{source} {name} must be a mapping of keys ({', '.join(known)}), got {values!r}")
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ParamsError(f"{source} {name}: unknown keys {unknown}; known: {sorted(known)}")
    defaults = kind() if defaults is None else defaults
    values = {
        key: tuple(value) if isinstance(getattr(defaults, key), tuple) and isinstance(value, list) else value
        for key, value in values.items()
    }  # YAML has lists, not tuples
    try:
        return replace(defaults, **values)
    except FieldError as e:
        raise ParamsError(f"{source} {name}.{e}") from None


MAX_PARAMS_BYTES = 256_000
"""params.yaml is a few kilobytes; a larger file is not read."""


MAX_PARAMS_DEPTH = 32
"""params.yaml nests a handful of levels (a section, a setting, a list or a mapping in it): far
deeper is no setting, and PyYAML reads each level by recursion (lists 500 deep, a 10 KB file,
were a ``RecursionError``)."""


class PlainYaml(yaml.SafeLoader):
    """YAML's safe loader, without aliases and within ``MAX_PARAMS_DEPTH`` levels: params.yaml
    holds plain values, and an alias of an alias of a list (a few hundred bytes: "billion
    laughs") expands to gigabytes as it is read."""

    def __init__(self, stream: str, name: str = "params.yaml") -> None:
        super().__init__(stream)
        self.name = name  # what its errors' marks name, where PyYAML says <unicode string>
        self.depth = 0

    def compose_node(self, parent, index):  # noqa: ANN001, ANN201 - PyYAML's own signature
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise ParamsError(
                f"{self.name}, line {event.start_mark.line + 1}: *{event.anchor} is a YAML alias: params.yaml takes "
                "plain values only; write the value out"
            )
        if self.depth >= MAX_PARAMS_DEPTH:
            raise ParamsError(
                f"{self.name}, line {event.start_mark.line + 1}: nested deeper than any setting ({MAX_PARAMS_DEPTH} "
                "levels at most): params.yaml takes a section, its settings and their lists or mappings; write "
                "the value as the setting takes it"
            )
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_params(path: Path = Path("params.yaml")) -> PipelineParams:
    """params.yaml as the typed tree; ``ParamsError`` for a missing file, one that is no plain
    UTF-8 file of a few kilobytes, bad YAML (aliases included) or a bad value."""
    try:
        text = read_text(path, MAX_PARAMS_BYTES)
    except UnreadableFile as e:
        if e.reason == "is missing":
            raise ParamsError(f"{path} not found: run from the repository root") from None
        raise ParamsError(str(e)) from None
    try:
        raw = yaml.load(text, Loader=lambda stream: PlainYaml(stream, str(path)))  # noqa: S506 - a safe loader
    except yaml.YAMLError as e:
        raise ParamsError(f"{path} is not valid YAML: {e}") from None
    except ValueError as e:  # a number of thousands of digits
        raise ParamsError(f"{path} holds a number no setting takes ({str(e).split(';')[0]})") from None
    return PipelineParams.from_mapping(raw, path.name)
