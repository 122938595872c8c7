"""Learning throughput on this machine, on a small dataset recorded for the purpose:
behaviour-cloning samples/s, fine-tuning env steps/s, and evaluation fights/minute with
decisions batched over 8 fights versus one fight at a time (side by side, as a ratio).
Also the dataset build itself: raw samples/s in, Minari steps/s out, and how its frames are
stored: the same recording built with each lossless frame compression side by side (size per
step, build time, load time as training loads it). ``--dataset-only`` stops there."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from env.common.cli import JsonOut, flag, parse_settings, run_command
from env.common.machine import describe


def main(argv: list[str] | None = None) -> int:
    out, args = parse_settings("python -m benchmarks.bench_learning", __doc__, JsonOut, LearningArgs, argv=argv)
    return run_command(lambda: benchmark(args, out))


@dataclass(frozen=True)
class LearningArgs:
    """How much of the learning path ``python -m benchmarks.bench_learning`` times: each field its flag."""

    dataset_only: bool = field(default=False, metadata=flag("only the recording and the dataset builds"))


def benchmark(args: LearningArgs, out: JsonOut) -> None:
    from env.config import EnvConfig
    from env.factory import make_env

    from capture.build_dataset import build_dataset
    from capture.episode import list_episodes, read_episode
    from capture.record import RecordSettings, record

    from elden_il.data import load_demonstrations
    from elden_il.evaluation.evaluate import PolicyActor
    from elden_il.evaluation.fight_loop import run_fights
    from elden_il.params import BCConfig, FinetuneConfig
    from elden_il.training.bc import train_bc
    from elden_il.training.finetune import finetune

    config = EnvConfig(profile="sim_margit", action_history=4)

    results: dict = {"machine": describe()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        record(RecordSettings(env=config, backend="sim", autopilot=True, max_episodes=6, out=tmp / "raw"))
        seconds = time.perf_counter() - t
        samples = sum(len(read_episode(p)) for p in list_episodes(tmp / "raw"))
        results["record_in_process_samples_per_s"] = samples / seconds
        t = time.perf_counter()
        dataset = build_dataset(tmp / "raw", "bench/margit-v0", config, root=tmp / "minari")
        seconds = time.perf_counter() - t
        results["dataset_build"] = {
            "raw_samples_per_s": samples / seconds,
            "steps_per_s": dataset.total_steps / seconds,
        }
        results["frame_compression"] = compare_compression(tmp / "raw", tmp / "compression", config)
        if args.dataset_only:
            report(results, out.json)
            return
        os.environ["MINARI_DATASETS_PATH"] = str(tmp / "minari")
        demos = load_demonstrations("bench/margit-v0", tmp / "minari")
        bc = train_bc(demos, BCConfig(epochs=2, patience=5), tmp / "bc")
        results["bc_train_samples_per_s"] = bc["train_samples_per_second"]
        ft = finetune(
            tmp / "bc",
            FinetuneConfig(
                total_steps=2048,
                num_envs=2,
                n_steps=256,
                n_epochs=4,
                learning_rate=1e-4,
                subprocesses=True,
                kl_decay_steps=0,
                value_warmup_steps=0,
                value_warmup_epochs=0,
            ),
            config,
            tmp / "ft",
        )
        results["finetune_env_steps_per_s"] = ft["env_steps_per_second"]
        make = lambda: make_env(config)  # noqa: E731
        for parallel in (1, 8):
            t = time.perf_counter()
            run_fights(make, PolicyActor(tmp / "bc", True), list(range(16)), parallel=parallel)
            results[f"eval_fights_per_minute_parallel_{parallel}"] = 16 / (time.perf_counter() - t) * 60
    report(results, out.json)


COMPRESSIONS = {
    "none (Minari as is)": (None, None),
    "lzf": ("lzf", None),
    "gzip 1": ("gzip", 1),
    "gzip 4": ("gzip", 4),
    "gzip 6 (default)": ("gzip", 6),
    "gzip 9": ("gzip", 9),
}


def compare_compression(raw: Path, root: Path, config, repeats: int = 3) -> dict:
    """The same episodes built with each frame compression: bytes per step of main_data.hdf5,
    build seconds and load seconds (``load_demonstrations``, best of ``repeats``)."""
    from capture.build_dataset import build_dataset
    from capture.compression import FrameCompression

    from elden_il.data import load_demonstrations

    out = {}
    for i, (name, (kind, level)) in enumerate(COMPRESSIONS.items()):
        dataset_id = f"bench/compression{i}-v0"
        t = time.perf_counter()
        dataset = build_dataset(raw, dataset_id, config, root=root, compression=FrameCompression(kind, level))
        build_s = time.perf_counter() - t
        loads = []
        for _ in range(repeats):
            t = time.perf_counter()
            load_demonstrations(dataset_id, root)
            loads.append(time.perf_counter() - t)
        size = (root / dataset_id / "data" / "main_data.hdf5").stat().st_size
        out[name] = {
            "steps": dataset.total_steps,
            "bytes_per_step": size / dataset.total_steps,
            "build_s": build_s,
            "load_s": min(loads),
        }
    return out


def report(results: dict, json_path: Path | None) -> None:
    r = results
    print(f"Machine: {r['machine']}\n")
    base = next(iter(r["frame_compression"].values()))
    print("| frames stored as | KB/step | size vs none | build s | load s |\n|---|---:|---:|---:|---:|")
    for name, c in r["frame_compression"].items():
        print(
            f"| {name} | {c['bytes_per_step'] / 1e3:.2f} | {base['bytes_per_step'] / c['bytes_per_step']:.1f}x smaller "
            f"| {c['build_s']:.2f} | {c['load_s']:.3f} |"
        )
    print(f"\n({base['steps']} steps; load = load_demonstrations, best of 3)\n")
    if "bc_train_samples_per_s" not in r:
        if json_path:
            Path(json_path).write_text(json.dumps(results, indent=2))
        return
    print("| measurement | value |\n|---|---:|")
    print(
        f"| recording in-process (autopilot, 30 Hz, 84x84), samples/s | {r['record_in_process_samples_per_s']:,.0f} |"
    )
    print(f"| dataset build, raw samples/s in | {r['dataset_build']['raw_samples_per_s']:,.0f} |")
    print(f"| dataset build, Minari steps/s out | {r['dataset_build']['steps_per_s']:,.0f} |")
    print(f"| behaviour cloning, training samples/s | {r['bc_train_samples_per_s']:,.0f} |")
    print(f"| RL fine-tuning (PPO, 2 envs in subprocesses), env steps/s | {r['finetune_env_steps_per_s']:,.0f} |")
    one, eight = r["eval_fights_per_minute_parallel_1"], r["eval_fights_per_minute_parallel_8"]
    print(f"| evaluation (BC policy), fights/minute, one at a time | {one:,.0f} |")
    print(f"| evaluation (BC policy), fights/minute, 8 side by side | {eight:,.0f} ({eight / one:.1f}x) |")
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
