"""Behaviour cloning: fit the policy's action distribution to the demonstrations.

The network is the stable-baselines3 actor-critic that RL fine-tuning will continue from, so
nothing is converted between the two stages: BC maximises the log-likelihood of the
demonstrated actions under ``policy.evaluate_actions``. Episodes, not steps, are split into
training and validation, so validation measures generalisation to unseen fights; training stops
early when validation loss stops improving and keeps the best checkpoint.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view
from stable_baselines3.common.policies import ActorCriticPolicy
from tqdm import tqdm

from env.common.staging import staged_folder

from elden_il.data import Demonstrations, sample_weights
from elden_il.params import BCConfig
from elden_il.policies.policy import NetworkSize, PolicyEnsemble, make_policy, save_policy

log = logging.getLogger(__name__)


def device() -> torch.device:
    """The GPU when there is one, the CPU otherwise."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def split_episodes(
    demos: Demonstrations,
    fraction: float,
    seed: int,
    weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, validation rows), whole episodes apart: the rows of positive weight, split
    among the episodes that have some."""
    kept = weights > 0
    episodes = np.unique(demos.episode[kept])
    rng = np.random.default_rng(seed)
    n_val = max(1, round(len(episodes) * fraction)) if len(episodes) > 1 and fraction > 0 else 0
    val_episodes = rng.choice(episodes, n_val, replace=False) if n_val else np.array([], int)
    is_val = np.isin(demos.episode, val_episodes)
    return np.flatnonzero(~is_val & kept), np.flatnonzero(is_val & kept)


def train_bc(
    demos: Demonstrations,
    config: BCConfig,
    out: Path,
    on_epoch: Callable[[dict], None] | None = None,
    size: NetworkSize = NetworkSize(),
) -> dict:
    """Train, save the best policy to ``out`` (``save_policy``: with the env config it is for),
    return the metrics. Each step's loss is weighed as ``config`` says (``data.sample_weights``:
    corrections, the policy's own steps, ``action_weights``); steps weighted 0 are left out of
    training and validation altogether (still there as frame-stack and action-history context), so
    they train exactly as if they were not in the dataset. ``size`` is the network's (the
    pipeline's by default). ``out`` is written whole once training ends
    (``env.common.staging.staged_folder``): training stopped half-way leaves the old policy, or none.

    With ``config.runs`` above 1, that many networks, each on a training seed of its own
    (``config.seed`` counting up: its own first weights, validation fights and batches), saved as
    one ``PolicyEnsemble``. On a person's few fights, where one network stops depends on its
    seed, and a seed that stops on a poor checkpoint wins nothing; together they vote it down
    (elden_il/studies/STUDIES.md, "Several BC networks as one"). The first network is the one ``runs: 1``
    trains: its epochs go to ``on_epoch`` (the pipeline logs them with DVCLive) and its history
    beside the policy; fine-tuning continues each network in turn (``elden_il.policies.policy.member``)."""
    weights = sample_weights(demos, config.intervention_weight, config.action_weights)
    seeds = [config.seed + run for run in range(config.runs)]
    if len(seeds) > 1:
        log.info("behaviour cloning %d networks (seeds %s) to act as one policy", len(seeds), seeds)
    with staged_folder(out) as folder:
        trained = [
            _train_bc(demos, replace(config, seed=seed), weights, on_epoch if seed == config.seed else None, size)
            for seed in seeds
        ]
        networks = [network for network, _ in trained]
        save_policy(networks[0] if len(networks) == 1 else PolicyEnsemble(networks), demos.config, folder)
        first = trained[0][1]
        (folder / "history.json").write_text(json.dumps(first["history"], indent=2))
    metrics = {
        **{key: value for key, value in first.items() if key != "history"},
        "device": str(device()),
        "config": asdict(config),
        "env_config": demos.config.to_dict(),
    }
    if len(seeds) > 1:
        metrics["networks"] = [
            {
                "seed": seed,
                "epochs_run": run["epochs_run"],
                "best_val_loss": run["best_val_loss"],
                "final": run["final"],
            }
            for seed, (_, run) in zip(seeds, trained)
        ]
    return metrics


def _train_bc(
    demos: Demonstrations,
    config: BCConfig,
    weights: np.ndarray,
    on_epoch: Callable[[dict], None] | None,
    size: NetworkSize,
) -> tuple[ActorCriticPolicy, dict]:
    """One network trained on ``config.seed``, at its best epoch, and how it trained."""
    torch.manual_seed(config.seed)
    dev = device()
    policy = make_policy(demos.observation_space, demos.action_space, size).to(dev)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    train_idx, val_idx = split_episodes(demos, config.validation_fraction, config.seed, weights)
    rng = np.random.default_rng(config.seed)
    shifts = np.random.default_rng([config.seed, SHIFTS])
    history: list[dict] = []
    best, best_weights, stale, samples, train_seconds = float("inf"), None, 0, 0, 0.0

    for epoch in range(1, config.epochs + 1):
        policy.train()
        order = rng.permutation(train_idx)
        losses = []
        started = time.perf_counter()
        for start in tqdm(range(0, len(order), config.batch_size), desc=f"BC epoch {epoch}", leave=False, disable=None):
            index = order[start : start + config.batch_size]
            log_prob = log_likelihood(policy, demos, index, dev, config.augment_shift, shifts)
            w = torch.as_tensor(weights[index], dtype=log_prob.dtype, device=dev)
            loss = -(log_prob * w).sum() / w.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            samples += len(index)
        train_seconds += time.perf_counter() - started
        val_loss, val_acc = evaluate_bc(policy, demos, val_idx, dev)
        record = {"epoch": epoch, "train_loss": float(np.mean(losses)), "val_loss": val_loss, "val_accuracy": val_acc}
        history.append(record)
        log.info("BC (seed %d) epoch %d: %s", config.seed, epoch, record)
        if on_epoch is not None:
            on_epoch(record)
        score = val_loss if len(val_idx) else record["train_loss"]
        if score < best - 1e-4:
            best, stale = score, 0
            best_weights = copy.deepcopy(policy.state_dict())
        else:
            stale += 1
            if stale >= config.patience:
                log.info("validation loss stopped improving: stopping after epoch %d", epoch)
                break

    if best_weights is not None:  # None only where no epoch's loss was a number
        policy.load_state_dict(best_weights)
    return policy, {
        "epochs_run": len(history),
        "best_val_loss": best,
        "final": history[-1],
        "train_samples_per_second": samples / train_seconds if train_seconds else 0.0,
        "train_steps": len(train_idx),
        "val_steps": len(val_idx),
        "episodes": demos.source_episodes,
        "history": history,
    }


def log_likelihood(
    policy: ActorCriticPolicy,
    demos: Demonstrations,
    index: np.ndarray,
    dev: torch.device,
    shift: int = 0,
    rng: np.random.Generator | None = None,
) -> torch.Tensor:
    """The log-probability of each demonstrated action at ``index``; with ``shift``, of the
    frames each moved at random by up to that many pixels (``random_shift``, drawn from ``rng``)."""
    batch = demos.batch(index)
    if shift:
        if rng is None:
            raise ValueError("random shifts need the generator that draws them (rng)")
        for key in FRAME_KEYS & batch.keys():
            batch[key] = random_shift(batch[key], shift, rng)
    obs, _ = policy.obs_to_tensor(batch)
    actions = torch.as_tensor(demos.actions[index], device=dev)
    _, log_prob, _ = policy.evaluate_actions(obs, actions)
    return log_prob


SHIFTS = 1
"""The stream of ``bc.seed``'s random numbers that draws the shifts (the episodes' order is stream 0's)."""
FRAME_KEYS = frozenset({"frame", "frame_stack"})
"""The observation keys that hold pictures, as the env gives them: (N, H, W, C) and (N, k, H, W, C)."""


def random_shift(frames: np.ndarray, pad: int, rng: np.random.Generator) -> np.ndarray:
    """Each picture of the batch (axis 0; a frame, or a stack of frames moving alike) moved by a
    whole number of pixels from ``-pad`` to ``pad`` along its rows and its columns, drawn anew per
    picture, the pixels at its edge repeated into the gap: DrQ's and RAD's random shift (pad by
    repeating the edge, crop back at random). The crops are windows of one padded copy
    (``sliding_window_view``), gathered in one indexing."""
    n = len(frames)
    flat = frames.reshape(-1, *frames.shape[-3:])  # (N * k, H, W, C)
    alike = len(flat) // n  # the frames of one stack
    dy, dx = (np.repeat(rng.integers(0, 2 * pad + 1, n), alike) for _ in range(2))
    padded = np.pad(flat, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    windows = sliding_window_view(padded, flat.shape[1:3], axis=(1, 2))  # (N * k, 2 pad + 1, 2 pad + 1, C, H, W)
    return windows[np.arange(len(flat)), dy, dx].transpose(0, 2, 3, 1).reshape(frames.shape)


@torch.no_grad()
def evaluate_bc(
    policy: ActorCriticPolicy, demos: Demonstrations, index: np.ndarray, dev: torch.device
) -> tuple[float, float]:
    """Validation loss, and how often the most likely action is the demonstrated one."""
    if len(index) == 0:
        return float("nan"), float("nan")
    policy.eval()
    losses, hits = [], 0
    for start in range(0, len(index), 512):
        chunk = index[start : start + 512]
        obs, _ = policy.obs_to_tensor(demos.batch(chunk))
        actions = torch.as_tensor(demos.actions[chunk], device=dev)
        _, log_prob, _ = policy.evaluate_actions(obs, actions)
        losses.append(-log_prob.sum().item())
        predicted = policy._predict(obs, deterministic=True)
        hits += (predicted.reshape(actions.shape) == actions).reshape(len(chunk), -1).all(dim=1).sum().item()
    return sum(losses) / len(index), hits / len(index)
