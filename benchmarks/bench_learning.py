"""Learning throughput on this machine, on a small dataset recorded for the purpose:
behaviour-cloning samples/s, fine-tuning env steps/s, and evaluation fights/minute with
decisions batched over 8 fights versus one fight at a time (side by side, as a ratio).
Also the dataset build itself: raw samples/s in, Minari steps/s out."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from benchmarks.machine import describe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    from capture.build_dataset import build_dataset
    from capture.episode import list_episodes, read_episode
    from capture.record import RecordSettings, record
    from elden_il.bc import BCConfig, train_bc
    from elden_il.data import load_demonstrations
    from elden_il.evaluate import PolicyActor
    from elden_il.finetune import FinetuneConfig, finetune
    from env.config import EnvConfig
    from env.factory import make_env
    from env.play import run_fights

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
        results["dataset_build"] = {"raw_samples_per_s": samples / seconds, "steps_per_s": dataset.total_steps / seconds}
        os.environ["MINARI_DATASETS_PATH"] = str(tmp / "minari")
        demos = load_demonstrations("bench/margit-v0", tmp / "minari")
        bc = train_bc(demos, BCConfig(epochs=2, patience=5), tmp / "bc")
        results["bc_train_samples_per_s"] = bc["train_samples_per_second"]
        ft = finetune(tmp / "bc" / "policy.zip", FinetuneConfig(total_steps=2048, num_envs=2, n_steps=256), config, tmp / "ft")
        results["finetune_env_steps_per_s"] = ft["env_steps_per_second"]
        make = lambda: make_env(config)  # noqa: E731
        for parallel in (1, 8):
            t = time.perf_counter()
            run_fights(make, PolicyActor(tmp / "bc" / "policy.zip", True), list(range(16)), parallel=parallel)
            results[f"eval_fights_per_minute_parallel_{parallel}"] = 16 / (time.perf_counter() - t) * 60
    r = results
    print(f"Machine: {r['machine']}\n")
    print("| measurement | value |\n|---|---:|")
    print(f"| recording in-process (autopilot, 30 Hz, 84x84), samples/s | {r['record_in_process_samples_per_s']:,.0f} |")
    print(f"| dataset build, raw samples/s in | {r['dataset_build']['raw_samples_per_s']:,.0f} |")
    print(f"| dataset build, Minari steps/s out | {r['dataset_build']['steps_per_s']:,.0f} |")
    print(f"| behaviour cloning, training samples/s | {r['bc_train_samples_per_s']:,.0f} |")
    print(f"| RL fine-tuning (PPO, 2 envs in subprocesses), env steps/s | {r['finetune_env_steps_per_s']:,.0f} |")
    one, eight = r["eval_fights_per_minute_parallel_1"], r["eval_fights_per_minute_parallel_8"]
    print(f"| evaluation (BC policy), fights/minute, one at a time | {one:,.0f} |")
    print(f"| evaluation (BC policy), fights/minute, 8 side by side | {eight:,.0f} ({eight / one:.1f}x) |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
