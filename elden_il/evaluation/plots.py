"""The pipeline's pictures, as PNG files (DVC's own HTML plots load a script from a CDN)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from elden_il.training.tracking import WIN_RATE_WINDOW  # noqa: E402

ORDER = ("random", "bc", "finetuned", "expert")


def comparison_chart(results: dict[str, dict], path: Path) -> None:
    """Win rate (with its 95 % interval), boss damage dealt and damage taken, per policy."""
    names = [n for n in ORDER if n in results] + [n for n in results if n not in ORDER]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    x = np.arange(len(names))
    win = np.array([results[n]["win_rate"] for n in names])
    low = win - np.array([results[n]["win_rate_ci95"][0] for n in names])
    high = np.array([results[n]["win_rate_ci95"][1] for n in names]) - win
    axes[0].bar(x, win, yerr=[low, high], capsize=4, color="#b03030")
    axes[0].set_title("win rate (95 % CI)")
    axes[0].set_ylim(0, 1)
    axes[1].bar(x, [results[n]["boss_damage_dealt"] for n in names], color="#c08020")
    axes[1].set_title("boss damage dealt (fraction of HP)")
    axes[2].bar(x, [results[n]["player_damage_taken"] for n in names], color="#3060a0")
    axes[2].set_title("damage taken (fraction of HP)")
    for ax in axes:
        ax.set_xticks(x, names)
    fights = results[names[0]]["fights"]
    fig.suptitle(f"{fights} fights per policy, same seeds, same env")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def learning_curves(bc_history: Path, rl_curve: Path, path: Path, window: int = WIN_RATE_WINDOW) -> None:
    """BC losses per epoch; RL episode return and win rate (moving average) per timestep."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    history = json.loads(bc_history.read_text())
    epochs = [h["epoch"] for h in history]
    left.plot(epochs, [h["train_loss"] for h in history], label="train")
    left.plot(epochs, [h["val_loss"] for h in history], label="validation")
    left.set(title="behaviour cloning", xlabel="epoch", ylabel="negative log-likelihood")
    left.legend()
    rows = json.loads(rl_curve.read_text())
    if rows:
        steps = np.array([r["timesteps"] for r in rows])
        wins = np.array([r["win"] for r in rows], float)
        returns = np.array([r["return"] for r in rows])
        k = min(window, len(rows))  # trailing mean over the last k episodes, none before the k-th
        kernel = np.ones(k) / k
        right.plot(steps[k - 1 :], np.convolve(returns, kernel, "valid"), label=f"return (last {k} episodes)")
        twin = right.twinx()
        twin.plot(steps[k - 1 :], np.convolve(wins, kernel, "valid"), color="#b03030", label=f"win rate (last {k})")
        twin.set_ylim(0, 1)
        twin.set_ylabel("win rate (sampled actions)")
        lines = right.get_lines() + twin.get_lines()
        right.legend(lines, [line.get_label() for line in lines], loc="best", fontsize="small")
    right.set(title="RL fine-tuning", xlabel="env steps", ylabel="episode return")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
