"""Behaviour cloning's network and batches: the policy network params.yaml sizes, kept whole by a
saved policy and continued by fine-tuning; random shifts of the training frames (DrQ, RAD).
Real recordings, a real Minari dataset and real training."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import TINY_NETWORK

from env.actions import ActionTable
from env.common.errors import ConfigError
from env.config import EnvConfig
from env.profile import load_profile

from capture.build_dataset import build_dataset
from capture.record import RecordSettings, record

from elden_il.data import DatasetError, demonstrations, sample_weights
from elden_il.params import BCConfig, NetworkSize, ParamsError, load_params
from elden_il.policies.policy import (
    SAVED_BEFORE_SIZES,
    FightFeatures,
    PolicyEnsemble,
    load_policy,
    make_policy,
    network_size,
    policy_space,
)
from elden_il.training.bc import device, log_likelihood, random_shift, train_bc

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

CONFIG = EnvConfig(profile="sim_margit", frame_stack=2, action_history=2)


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory):
    """One short expert fight, for an env with a frame stack and an action history."""
    root = tmp_path_factory.mktemp("bc")
    record(
        RecordSettings(
            env=CONFIG, backend="sim", autopilot=True, max_episodes=1, max_episode_seconds=6, out=root / "raw"
        )
    )
    return demonstrations(build_dataset(root / "raw", "test/bc-v0", CONFIG, root=root / "minari"))


def shift_of(moved: np.ndarray, frame: np.ndarray, pad: int) -> tuple[int, int]:
    """The one (rows, columns) shift within ``pad`` that makes ``frame`` (H, W, C) into ``moved``,
    its edges repeated."""
    h, w = frame.shape[:2]
    found = [
        (dy, dx)
        for dy in range(-pad, pad + 1)
        for dx in range(-pad, pad + 1)
        if np.array_equal(frame[np.clip(np.arange(h) + dy, 0, h - 1)][:, np.clip(np.arange(w) + dx, 0, w - 1)], moved)
    ]
    assert len(found) == 1, found
    return found[0]


def test_a_random_shift_moves_each_frame_whole_and_a_stacks_frames_alike():
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, (16, 12, 10, 3), dtype=np.uint8)  # (N, H, W, C), as the env gives them
    moved = random_shift(frames, 2, np.random.default_rng(0))
    assert moved.shape == frames.shape and moved.dtype == np.uint8
    shifts = [shift_of(moved[n], frames[n], 2) for n in range(len(frames))]
    assert len(set(shifts)) > 4  # drawn per frame, over the whole range
    assert np.array_equal(moved, random_shift(frames, 2, np.random.default_rng(0)))  # seeded

    stacks = rng.integers(0, 256, (8, 4, 12, 10, 3), dtype=np.uint8)  # (N, k, H, W, C)
    moved = random_shift(stacks, 2, np.random.default_rng(1))
    for n in range(len(stacks)):
        first = shift_of(moved[n, 0], stacks[n, 0], 2)
        assert all(shift_of(moved[n, i], stacks[n, i], 2) == first for i in range(1, 4))


def test_behaviour_cloning_with_random_shifts_learns_from_moved_frames_reproducibly(demos, tmp_path: Path):
    """Shifts change what is learned, and the same seed learns the same weights again."""
    config = BCConfig(epochs=1, batch_size=32, validation_fraction=0.0, augment_shift=4)
    weights = []
    for name, bc in (("shifted", config), ("again", config), ("unshifted", replace(config, augment_shift=0))):
        train_bc(demos, bc, tmp_path / name, size=TINY_NETWORK)
        weights.append(load_policy(tmp_path / name).policy.state_dict())
    shifted, again, unshifted = weights
    assert all(torch.equal(shifted[k], again[k]) for k in shifted)
    assert not all(torch.equal(shifted[k], unshifted[k]) for k in shifted)


def test_bc_runs_train_a_network_per_seed_acting_as_one_the_first_the_one_a_single_run_trains(demos, tmp_path: Path):
    """``bc.runs: 2`` saves two networks as one policy: the first the very network ``runs: 1``
    trains on the same seed (its epochs logged, its history kept), the second its own seed's."""
    config = BCConfig(epochs=2, batch_size=32, validation_fraction=0.0, seed=3)
    one = train_bc(demos, config, tmp_path / "one", size=TINY_NETWORK)
    logged: list[dict] = []
    two = train_bc(demos, replace(config, runs=2), tmp_path / "two", on_epoch=logged.append, size=TINY_NETWORK)

    single, together = load_policy(tmp_path / "one").policy, load_policy(tmp_path / "two").policy
    assert isinstance(together, PolicyEnsemble) and len(together.members) == 2
    first, second = (member.state_dict() for member in together.members)
    assert all(torch.equal(value, first[key]) for key, value in single.state_dict().items())
    assert not all(torch.equal(value, second[key]) for key, value in single.state_dict().items())
    assert [network["seed"] for network in two["networks"]] == [3, 4] and "networks" not in one
    assert two["networks"][0]["best_val_loss"] == one["best_val_loss"] == two["best_val_loss"]
    assert len(logged) == one["epochs_run"] and two["config"]["runs"] == 2
    assert (tmp_path / "two" / "history.json").read_text() == (tmp_path / "one" / "history.json").read_text()


def test_a_keybind_is_pressed_by_the_same_steps_in_either_action_mode():
    profile = load_profile("sim_margit")
    discrete = ActionTable(profile, "discrete")
    actions = np.array([discrete.index(a) for a in ("heal", "move_forward", "roll_forward", "idle")])
    assert discrete.presses("use_item", actions).tolist() == [True, False, False, False]
    assert discrete.presses("move_forward", actions).tolist() == [False, True, True, False]  # held, in a roll too
    bits = ActionTable(profile, "multi_binary")
    actions = np.stack(
        [bits.bits(frozenset({"use_item"})), bits.bits(frozenset({"attack", "move_forward"})), bits.idle]
    )
    assert bits.presses("use_item", actions).tolist() == [True, False, False]
    assert bits.presses("move_forward", actions).tolist() == [False, True, False]
    with pytest.raises(ValueError, match="no keybind 'use_itme'; its keybinds: move_forward, .*use_item"):
        discrete.presses("use_itme", actions)


def test_action_weights_weigh_the_steps_that_press_their_keybinds(demos):
    table = demos.config.actions(load_profile(demos.config.profile))
    attacking = table.presses("attack", demos.actions)
    forward = table.presses("move_forward", demos.actions)
    assert attacking.any() and forward.any() and not (attacking & forward).any()
    weights = sample_weights(demos, action_weights={"attack": 5.0, "move_forward": 0.5})
    assert set(weights[attacking]) == {5.0} and set(weights[forward]) == {0.5}
    assert set(weights[~attacking & ~forward]) == {1.0}
    assert set(sample_weights(demos, action_weights={})) == {1.0}
    with pytest.raises(
        DatasetError,
        match="bc.action_weights: profile 'sim_margit' has no keybind 'atack'; its keybinds: .*attack.*leave 'atack' out",
    ):
        sample_weights(demos, action_weights={"atack": 5.0})


def test_bc_weighted_to_an_action_learns_it_as_more_likely(demos, tmp_path: Path):
    """A weighted keybind's steps count that many times in the loss: the same training, seed and
    batches, with the attack weighted, makes the demonstrated attacks more likely."""
    table = demos.config.actions(load_profile(demos.config.profile))
    attacks = np.flatnonzero(table.presses("attack", demos.actions))
    likelihood = {}
    for name, weights in (("alike", {}), ("weighted", {"attack": 30.0})):
        config = BCConfig(epochs=5, batch_size=16, learning_rate=3e-3, validation_fraction=0.0, action_weights=weights)
        train_bc(demos, config, tmp_path / name, size=TINY_NETWORK)
        policy = load_policy(tmp_path / name).policy
        with torch.no_grad():
            likelihood[name] = log_likelihood(policy.eval(), demos, attacks, device()).mean().item()
    assert likelihood["weighted"] > likelihood["alike"] + 0.5, likelihood


def test_the_network_params_size_the_policy_and_a_saved_policy_keeps_them(demos, tmp_path: Path):
    size = NetworkSize(
        cnn_channels=(4, 6), cnn_kernels=(6, 3), cnn_strides=(3, 2), cnn_dim=24, state_dim=20, hidden=(12, 10)
    )
    train_bc(demos, BCConfig(epochs=1, batch_size=64, validation_fraction=0.0), tmp_path / "bc", size=size)
    policy = load_policy(tmp_path / "bc").policy
    assert network_size(policy) == size
    convolutions = [m for m in policy.features_extractor.cnn if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convolutions] == [
        (4, (6, 6), (3, 3)),
        (6, (3, 3), (2, 2)),
    ]
    assert policy.features_extractor.cnn[0].in_channels == 2 * 3  # the stack's frames, channels side by side


def test_loading_a_policy_builds_no_optimizer_and_leaves_torchs_compiler_unimported(tmp_path: Path):
    """A command that plays a policy (evaluation, the pilot, the viewer) only loads it: SB3's
    policies build an optimizer as they are made, and torch's optimizers import its compiler
    (``torch._dynamo``) on first use, most of such a command's start. In a fresh process, as a
    command loads one."""
    from elden_il.policies.policy import save_policy

    save_policy(make_policy(*CONFIG.spaces(load_profile(CONFIG.profile)), TINY_NETWORK), CONFIG, tmp_path / "policy")
    probe = (
        "import sys; from elden_il.policies.policy import load_policy; loaded = load_policy(sys.argv[1]); "
        "print(loaded.policy.optimizer, 'torch._dynamo' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "policy")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["None", "False"]


def test_a_policy_saved_without_its_sizes_loads_as_the_network_it_was():
    """Policies saved before a saved policy kept every size were the Nature CNN's; their
    extractor is rebuilt from ``FightFeatures``' defaults, which stay that network."""
    observation, action = CONFIG.spaces(load_profile(CONFIG.profile))
    features = FightFeatures(policy_space(observation))
    assert [m.out_channels for m in features.cnn if isinstance(m, torch.nn.Conv2d)] == list(
        SAVED_BEFORE_SIZES.cnn_channels
    )
    assert features.features_dim == SAVED_BEFORE_SIZES.cnn_dim + SAVED_BEFORE_SIZES.state_dim
    policy = make_policy(observation, action, SAVED_BEFORE_SIZES)
    policy.features_extractor_kwargs = {}  # as such a policy was saved
    assert network_size(policy) == SAVED_BEFORE_SIZES


def test_the_network_reads_the_flask_charges_when_the_env_observes_them():
    config = CONFIG.replace(observe_flasks=True)
    observation, action = config.spaces(load_profile(config.profile))
    policy = make_policy(observation, action, TINY_NETWORK)
    obs = {k: np.stack([v, v]) for k, v in observation.sample().items()}
    obs["flasks"] = np.array([[3.0], [0.0]], np.float32)
    features = policy.extract_features(policy.obs_to_tensor(obs)[0])
    assert not torch.equal(features[0], features[1])  # the same picture and state, a different count


def test_convolutions_that_leave_nothing_of_the_frame_are_one_line():
    observation, action = CONFIG.spaces(load_profile(CONFIG.profile))
    with pytest.raises(ConfigError, match=r"leave nothing of a .* frame: use fewer, smaller or less strided"):
        make_policy(
            observation, action, NetworkSize(cnn_channels=(8, 8, 8), cnn_kernels=(8, 8, 8), cnn_strides=(8, 8, 8))
        )


@pytest.mark.parametrize(
    "network, message",
    [
        ({"cnn_kernels": [8, 4]}, "network.cnn_kernels = [8, 4]: must have one entry per convolution"),
        ({"cnn_channels": []}, "network.cnn_channels = (): must be a list of 1 to 6 whole numbers"),
        ({"cnn_dim": 0}, "network.cnn_dim = 0: must be a whole number from 1"),
        ({"hidden": [64, -1]}, "network.hidden = (64, -1): must be a list of 0 to 4 whole numbers"),
    ],
)
def test_a_bad_network_param_is_one_line(tmp_path: Path, network: dict, message: str):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"network": network}))
    with pytest.raises(ParamsError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_params(tmp_path / "params.yaml")
