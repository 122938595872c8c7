"""What the episode video's default codec costs a policy that learns from it.

Every recording keeps its picture as video (``capture/video.py``), lossy H.264 by default, and
every dataset's frames are made from that video. This records the pipeline's demonstrations
(params.yaml's ``demos`` section) twice, side by side in one run, once with the default codec
and once losslessly: lock-step, so both hold the same fights, states and actions, and differ by
the frames alone. Each is built into a dataset with params.yaml's env settings, behaviour
cloning trains on it with params.yaml's ``bc`` settings once per training seed, and every
policy plays the same held-out fights (the evaluation's seeds). Also reported: the training
frames' PSNR between the two datasets, and the recordings' size on disk.

    .venv/bin/python -m elden_il.studies.codec_bc --seeds 0 1 2 --fights 100
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from env.common.cli import JsonOut, flag, parse_settings, ruled, run_command
from env.common.fields import SEED
from env.common.machine import describe
from env.elden_env import EldenRingEnv
from env.factory import make_game

from capture.build_dataset import build_dataset
from capture.record import record
from capture.video import psnr

from elden_il.evaluation.fight_loop import HeldOutFights, run_fights, summarize
from elden_il.evaluation.win_rate import wilson_interval
from elden_il.params import PipelineParams, load_params

CODECS = ("h264", "lossless")


def record_demos(params: PipelineParams, codec: str, out: Path) -> float:
    """The demos stage's recordings with ``codec`` (its session as ``elden_il.pipeline.stage_demos``
    builds it); returns their MiB on disk."""
    record(replace(params.demos.record, env=params.env.replace(profile="sim_margit"), out=out, video_codec=codec))
    return sum(p.stat().st_size for p in out.iterdir()) / 2**20


@dataclass(frozen=True)
class CodecArgs:
    """Which settings ``python -m elden_il.studies.codec_bc`` records and trains with: each field its
    flag (the fights are the evaluation's seeds, ``HeldOutFights.fights`` of them)."""

    params: Path = field(default=Path("params.yaml"), metadata=flag("the pipeline's params file", type=Path))
    seeds: tuple[int, ...] = field(
        default=(0, 1, 2), metadata=flag("behaviour cloning's training seeds", type=ruled(int, SEED), nargs="+")
    )


def main(argv: list[str] | None = None) -> int:
    args, held, out = parse_settings(
        "python -m elden_il.studies.codec_bc", __doc__, CodecArgs, (HeldOutFights, ("fights",)), JsonOut, argv=argv
    )
    return run_command(lambda: compare_codecs(args, held, out))


def compare_codecs(args: CodecArgs, held: HeldOutFights, out: JsonOut) -> None:
    from elden_il.data import load_demonstrations
    from elden_il.evaluation.evaluate import PolicyActor
    from elden_il.training.bc import train_bc  # torch: after the arguments are read

    params = load_params(args.params)
    seeds = list(range(params.evaluate.first_seed, params.evaluate.first_seed + held.fights))
    results: dict[str, Any] = {
        "machine": describe(),
        "demos": {"episodes": params.demos.record.max_episodes, "master_size": params.demos.record.master_size},
        "frame_size": params.env.frame_size,
        "codecs": {},
    }
    frames = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for codec in CODECS:
            started = time.perf_counter()
            mib = record_demos(params, codec, root / codec / "raw")
            recorded_s = time.perf_counter() - started
            name = f"eldenil/codec-{codec}-v0"
            build_dataset(root / codec / "raw", name, params.env, root=root / "minari", force=True)
            demos = load_demonstrations(name, root / "minari")
            frames[codec] = demos.obs["frame"]
            row: dict[str, Any] = {"raw_mib": mib, "record_s": recorded_s, "steps": len(demos), "policies": {}}
            for seed in args.seeds:
                out = root / codec / f"bc-{seed}"
                started = time.perf_counter()
                train_bc(demos, replace(params.bc, seed=seed), out, size=params.network)
                trained_s = time.perf_counter() - started
                actor = PolicyActor(out, deterministic=params.evaluate.deterministic)
                config = actor.loaded.config
                started = time.perf_counter()
                records, _ = run_fights(lambda config=config: EldenRingEnv(make_game(config), config), actor, seeds)
                row["policies"][seed] = {**summarize(records, time.perf_counter() - started), "train_s": trained_s}
            wins = sum(round(p["win_rate"] * p["fights"]) for p in row["policies"].values())
            total = sum(p["fights"] for p in row["policies"].values())
            row["pooled"] = {
                "win_rate": wins / total,
                "win_rate_ci95": list(wilson_interval(wins, total)),
                "fights": total,
            }
            results["codecs"][codec] = row
    squared_error = np.square(frames["h264"].astype(np.int32) - frames["lossless"]).sum(dtype=np.int64)
    results["frame_psnr_db"] = psnr(float(squared_error), frames["h264"].size)

    print(f"Machine: {results['machine']}\n")
    print(
        f"{params.demos.record.max_episodes} demonstrations at {params.demos.record.master_size[0]}x{params.demos.record.master_size[1]}, "
        f"BC on {results['frame_size'][0]}x{results['frame_size'][1]} frames, {held.fights} held-out fights per "
        f"policy; training frames h264 vs lossless: PSNR {results['frame_psnr_db']:.1f} dB\n"
    )
    print("| recordings | MiB | BC seed | win rate | 95 % interval | boss damage dealt | damage taken |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for codec, row in results["codecs"].items():
        for seed, p in row["policies"].items():
            low, high = p["win_rate_ci95"]
            print(
                f"| {codec} | {row['raw_mib']:.1f} | {seed} | {p['win_rate']:.0%} | {low:.0%}-{high:.0%} | "
                f"{p['boss_damage_dealt']:.0%} | {p['player_damage_taken']:.0%} |"
            )
        low, high = row["pooled"]["win_rate_ci95"]
        print(f"| {codec} | | all | **{row['pooled']['win_rate']:.0%}** | {low:.0%}-{high:.0%} | | |")
    if out.json:
        with open(out.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    raise SystemExit(main())
