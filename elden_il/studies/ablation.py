"""Which settings make the default pipeline's policies strong and fast: variants of params.yaml,
each run through dataset -> bc -> finetune -> evaluation, side by side, from the same recorded
demonstrations.

A variant is a name and the params it changes from params.yaml, as ``section.key=value`` (the
value in YAML). Each runs the pipeline's own stages (``python -m elden_il.pipeline STAGE``, as
``dvc repro`` runs them) in a folder of its own under ``--out``, with its params.yaml there; a
stage whose params (those dvc.yaml lists for it), code and inputs another run already had is not
run again but shared, as DVC would: variants that change only fine-tuning share one behaviour
cloning, and every variant shares the demonstrations the pipeline recorded (``dvc repro demos``
first; a variant of the ``demos`` section records its own). A run that is stopped picks up where
it stopped. The behaviour-cloned and fine-tuned policies then fight the evaluation's held-out
fights (params.yaml's ``evaluate`` seeds, deterministic, in-process), and the scripted expert
once on the same fights, for the line to beat. ``--seeds`` trains each variant once per seed
(``bc.seed`` and ``finetune.seed``), pooling their fights in the table.

    python -m elden_il.studies.ablation --variant default \\
        --variant small_cnn network.cnn_channels=[16,32,32] network.cnn_dim=256 \\
        --variant shift bc.augment_shift=4 --seeds 0 1 --out datasets/studies/ablation

Each stage's wall and CPU time (its process's user + system) is measured as it runs; a shared
stage's times are those of the run that ran it.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from env.common.cli import flag, parse_settings, ruled, run_command
from env.common.errors import ConfigError, DataError
from env.common.fields import FIGHTS, checked, optional, whole
from env.common.machine import describe

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("demos", "dataset", "bc", "finetune")
"""The stages a variant runs, in order; evaluation is this study's (``evaluate_run``)."""


def parse_variant(words: list[str], base: dict) -> tuple[str, dict]:
    """``NAME [section.key=VALUE ...]`` as its name and params.yaml's tree with those changed,
    checked as the pipeline checks params.yaml."""
    from elden_il.params import PipelineParams

    name, *settings = words
    tree = json.loads(json.dumps(base))
    for setting in settings:
        key, sep, value = setting.partition("=")
        section, dot, field = key.partition(".")
        if not (sep and dot):
            raise ConfigError(f"--variant {name}: {setting!r} is not section.key=VALUE (e.g. bc.epochs=12)")
        tree.setdefault(section, {})[field] = yaml.safe_load(value)
    PipelineParams.from_mapping(tree, f"--variant {name}")  # refused as a ParamsError (a ConfigError) naming it
    return name, tree


def with_seed(tree: dict, seed: int, settings: list[str]) -> dict:
    """``tree`` training with ``seed``, where the variant does not set a seed itself."""
    tree = json.loads(json.dumps(tree))
    for section in ("bc", "finetune"):
        if not any(s.startswith(f"{section}.seed=") for s in settings):
            tree.setdefault(section, {})["seed"] = seed
    return tree


def file_digest(path: Path) -> str:
    """The MD5 of a file, or of a folder's files and their names (``__pycache__`` left out, as
    the project's .dvcignore leaves it out of DVC's)."""
    digest = hashlib.md5()
    files = (
        [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    )
    for f in files:
        digest.update(f.relative_to(path.parent).as_posix().encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()


def param_values(tree: dict, names: list[str]) -> dict:
    """The params dvc.yaml names for a stage (``section`` or ``section.key``) from ``tree``,
    filled with the pipeline's defaults."""
    from dataclasses import asdict

    from elden_il.params import PipelineParams

    full = asdict(PipelineParams.from_mapping(tree))
    out = {}
    for name in names:
        section, _, key = name.partition(".")
        out[name] = full[section][key] if key else full[section]
    return json.loads(json.dumps(out, default=str))  # demos.record's paths as text


class Runner:
    """Runs stages in folders under ``out/stages``, each named by what decides its outputs."""

    def __init__(self, out: Path, demos: Path) -> None:
        self.out = out
        self.demos = demos
        self.dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
        self.base_demos_key = None

    def key(self, stage: str, tree: dict, upstream: dict[str, str]) -> str:
        spec = self.dvc[stage]
        code = {dep: file_digest(ROOT / dep) for dep in spec["deps"] if not dep.startswith("datasets/")}
        params = param_values(tree, [p if isinstance(p, str) else next(iter(p)) for p in spec.get("params", [])])
        text = json.dumps({"code": code, "params": params, "upstream": upstream}, sort_keys=True)
        return hashlib.md5(text.encode()).hexdigest()[:12]

    def run(self, tree: dict, base_tree: dict, until: str = STAGES[-1]) -> dict[str, dict]:
        """Every stage of ``tree`` up to ``until``; each stage's folder, times and whether it ran now."""
        outputs: dict[str, Path] = {}  # a datasets/ path -> where it is
        keys: dict[str, str] = {}
        done: dict[str, dict] = {}
        for stage in STAGES[: STAGES.index(until) + 1]:
            spec = self.dvc[stage]
            upstream = {dep: keys[dep] for dep in spec["deps"] if dep in keys}
            key = self.key(stage, tree, upstream)
            folder = self.out / "stages" / f"{stage}-{key}"
            outs = [o if isinstance(o, str) else next(iter(o)) for o in spec.get("outs", [])]
            if stage == "demos" and key == self.key("demos", base_tree, {}):
                record = {"folder": str(self.demos.parent.parent), "wall_s": 0.0, "cpu_s": 0.0, "shared": "recorded"}
                outputs["datasets/demos"] = self.demos
            else:
                record = self.stage(stage, folder, tree, spec, outputs)
                for o in outs:
                    outputs[o] = folder / o
            for o in outs:
                keys[o] = key
            done[stage] = record
        return done

    def stage(self, stage: str, folder: Path, tree: dict, spec: dict, outputs: dict[str, Path]) -> dict:
        marker = folder / "stage.json"
        if marker.exists():
            return {**json.loads(marker.read_text()), "folder": str(folder), "shared": True}
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "params.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
        for dep in spec["deps"]:
            if dep.startswith("datasets/"):
                link = folder / dep
                link.parent.mkdir(parents=True, exist_ok=True)
                if link.is_symlink():
                    link.unlink()
                link.symlink_to(outputs.get(dep, ROOT / dep).resolve())
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        cpu = children_cpu_s()
        started = time.perf_counter()
        with (folder / "stage.log").open("w") as log:
            result = subprocess.run(spec["cmd"], shell=True, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
        if result.returncode != 0:
            raise SystemExit(f"stage {stage} failed in {folder}: see {folder / 'stage.log'}")
        record = {"folder": str(folder), "wall_s": time.perf_counter() - started, "cpu_s": children_cpu_s() - cpu}
        marker.write_text(json.dumps(record))
        print(f"    {stage}: {record['wall_s']:.0f} s wall, {record['cpu_s']:.0f} s CPU", flush=True)
        return {**record, "shared": False}


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def evaluate_run(policies: dict[str, Path], seeds: list[int], parallel: int) -> dict[str, dict]:
    """Each saved policy (or ``expert``) on ``seeds``, deterministic, in the env its policy (or
    the first one) was trained for: as the pipeline's evaluation plays them. A policy is judged
    once per set of seeds: the result is kept beside it (its folder's ``judged-*.json``) for
    the next variant that shares it."""
    from env.config import EnvConfig
    from env.factory import make_env
    from env.sim.expert import ScriptedExpert

    from elden_il.evaluation.evaluate import PolicyActor
    from elden_il.evaluation.fight_loop import PlayerActor, run_fights, summarize

    results = {}
    for name, folder in policies.items():
        kept = folder / f"judged-{seeds[0]}-{len(seeds)}.json"
        if name != "expert" and kept.exists():
            results[name] = json.loads(kept.read_text())
            continue
        config = EnvConfig.load(folder)
        actor = PlayerActor("expert", config) if name == "expert" else PolicyActor(folder, deterministic=True)
        cpu, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        reads = ScriptedExpert.ATTRIBUTES if name == "expert" else ()  # the state the expert plays from

        def make(config: EnvConfig = config, reads: tuple[str, ...] = reads):
            return make_env(config, state_attributes=reads)

        records, _ = run_fights(make, actor, seeds, parallel=parallel)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        results[name] = {
            **summarize(records, wall),
            "wall_s": wall,
            "cpu_s": after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime,
            "wins": [r.win for r in records],
        }
        if name != "expert":
            kept.write_text(json.dumps(results[name]))
    return results


def pooled(runs: list[dict], policy: str) -> str:
    """A policy's win rate over every run's fights, with its Wilson interval."""
    from elden_il.evaluation.win_rate import wilson_interval

    wins = [w for run in runs for w in run["eval"][policy]["wins"]]
    low, high = wilson_interval(sum(wins), len(wins))
    return f"{sum(wins) / len(wins):.1%} ({low:.1%}-{high:.1%})"


def table(results: dict) -> str:
    expert = results["expert"]
    lines = [
        f"{describe()}; torch threads {results['threads']}; {expert['fights']} held-out fights per policy "
        f"(seeds from {results['first_seed']}), deterministic",
        "",
        "| variant | changes | seeds | BC win rate | fine-tuned win rate | fine-tuned, per seed "
        "| bc wall s | finetune wall s | evaluate wall s (BC + fine-tuned) |",
        "|---|---|---|---|---|---|---:|---:|---:|",
    ]
    for name, variant in results["variants"].items():
        runs = list(variant["runs"].values())
        if not runs:
            continue
        tuned = all("finetuned" in run["eval"] for run in runs)
        per_seed = ", ".join(f"{run['eval']['finetuned']['win_rate']:.0%}" for run in runs) if tuned else "-"
        bc, finetune = (
            sum(run["stages"][stage]["wall_s"] for run in runs if stage in run["stages"]) / len(runs)
            for stage in ("bc", "finetune")
        )
        evaluate = sum(run["eval"][p]["wall_s"] for run in runs for p in run["eval"]) / len(runs)
        lines.append(
            f"| {name} | {' '.join(variant['settings']) or '-'} | {', '.join(variant['runs'])} "
            f"| {pooled(runs, 'bc')} | {pooled(runs, 'finetuned') if tuned else '-'} | {per_seed} "
            f"| {bc:.0f} | {finetune:.0f} | {evaluate:.0f} |"
        )
    low, high = expert["win_rate_ci95"]
    lines.append(
        f"| scripted expert (the teacher) | - | - | - | {expert['win_rate']:.1%} ({low:.1%}-{high:.1%}) | | | | |"
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class AblationArgs:
    """Which variants the study runs, on which seeds and fights: each field its flag."""

    variants: tuple[tuple[str, ...], ...] = field(
        metadata=flag(
            "a variant: its name, then the params it changes as section.key=VALUE (repeat for more)",
            flag_name="variant",
            nargs="+",
            action="append",
            required=True,
            metavar="NAME_AND_SETTINGS",
        )
    )
    seeds: tuple[int, ...] = field(
        default=(0,), metadata=flag("training seeds per variant", type=ruled(int, whole(0, 2**31 - 1)), nargs="+")
    )
    fights: int | None = checked(
        None, optional(FIGHTS), "held-out fights (default: params.yaml's evaluate)", type=ruled(int, FIGHTS)
    )
    out: Path = field(default=ROOT / "datasets/studies/ablation", metadata=flag("working folder", type=Path))
    demos: Path = field(
        default=ROOT / "datasets/demos",
        metadata=flag(
            "the recorded demonstrations of params.yaml's demos section (default: the pipeline's, `dvc repro demos`)",
            type=Path,
        ),
    )
    json: Path | None = field(
        default=None, metadata=flag("also write the results here (default: OUT/results.json)", type=Path)
    )
    bc_only: bool = field(
        default=False, metadata=flag("stop after behaviour cloning: its policy alone fights (a quicker look)")
    )


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m elden_il.studies.ablation", __doc__, AblationArgs, argv=argv)
    return run_command(lambda: ablate(args))


def ablate(args: AblationArgs) -> None:
    """Run every variant of ``args`` not run yet, evaluate its policies and print the table."""
    import torch

    from elden_il.params import load_params

    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    evaluate = load_params(ROOT / "params.yaml").evaluate
    fights = args.fights or evaluate.fights
    seeds = list(range(evaluate.first_seed, evaluate.first_seed + fights))
    if not (args.demos / "sim").is_dir():
        raise DataError(f"no recorded demonstrations in {args.demos}: run `dvc repro demos` first")
    runner = Runner(args.out.resolve(), args.demos.resolve())
    path = args.json or args.out / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {"variants": {}}
    results.update(machine=describe(), threads=torch.get_num_threads(), first_seed=evaluate.first_seed)
    for words in args.variants:
        name, tree = parse_variant(words, base)
        variant = results["variants"].setdefault(name, {"settings": words[1:], "runs": {}})
        variant["settings"] = words[1:]
        for seed in args.seeds:
            label = f"seed {seed}"
            if variant["runs"].get(label, {}).get("fights") == fights:
                continue
            print(f"{name}, {label}:", flush=True)
            stages = runner.run(with_seed(tree, seed, words[1:]), base, "bc" if args.bc_only else "finetune")
            models = {"bc": Path(stages["bc"]["folder"]) / "datasets/models/bc"}
            if not args.bc_only:
                models["finetuned"] = Path(stages["finetune"]["folder"]) / "datasets/models/finetuned"
            run = {"fights": fights, "stages": stages, "eval": evaluate_run(models, seeds, evaluate.parallel)}
            run["metrics"] = {
                stage: json.loads((Path(stages[stage]["folder"]) / f"datasets/reports/{stage}.json").read_text())
                for stage in ("bc", "finetune")
                if stage in stages
            }
            variant["runs"][label] = run
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results, indent=1))
            if results.get("expert", {}).get("fights") != fights:  # in the env of a policy: it plays from state
                results["expert"] = evaluate_run({"expert": models["bc"]}, seeds, evaluate.parallel)["expert"]
            print("    " + ", ".join(f"{p} {r['win_rate']:.0%}" for p, r in run["eval"].items()), flush=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results, indent=1))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    raise SystemExit(main())
