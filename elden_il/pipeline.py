"""The stages of ``dvc repro``, each a subcommand reading its section of ``params.yaml``.

    python -m elden_il.pipeline demos      demonstrations: the expert recorded in the simulator
    python -m elden_il.pipeline dataset    raw episodes -> Minari dataset
    python -m elden_il.pipeline bc         behaviour cloning
    python -m elden_il.pipeline finetune   RL fine-tuning near the BC policy
    python -m elden_il.pipeline evaluate   every policy, same seeds, same env; metrics and plots
    python -m elden_il.pipeline summary    the last evaluation, as a table

Outputs (DVC-tracked, git-ignored), all under ``datasets/``: ``demos/``, ``minari/``, ``models/``,
``reports/`` (metrics as JSON for ``dvc metrics show``, plots as PNG, a GIF per policy).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger("elden_il.pipeline")

DEMOS_DIR = Path("datasets/demos/sim")
USER_RAW_DIR = Path("datasets/raw")
MINARI_ROOT = Path("datasets/minari")
MODELS = Path("datasets/models")
REPORTS = Path("datasets/reports")


class ParamsError(ValueError):
    """params.yaml is missing, malformed, or has a bad value; the message says which and why."""


def load_params(path: Path = Path("params.yaml")) -> dict[str, Any]:
    try:
        params = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ParamsError(f"{path} not found: run from the repository root") from None
    except yaml.YAMLError as e:
        raise ParamsError(f"{path} is not valid YAML: {e}") from None
    if not isinstance(params, dict):
        raise ParamsError(f"{path} must be a mapping of sections (demos, dataset, env, bc, finetune, evaluate)")
    return params


NUMBER = (int, float)
SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "demos": {"source": str, "raw_dir": str, "episodes": int, "seed": int, "rate_hz": NUMBER},
    "dataset": {"id": str, "action_mode": str, "timestep_ms": NUMBER, "frame_size": list},
    "env": {"frame_stack": int, "action_history": int, "max_steps": int},
    "evaluate": {"fights": int, "first_seed": int, "backend": str, "host": str, "deterministic": bool, "parallel": int},
}
"""The plain sections; ``bc`` and ``finetune`` are checked against their config dataclasses."""


def section(params: dict, name: str) -> dict[str, Any]:
    """One section, checked: every key known, every value of the right type."""
    allowed = SCHEMA[name]
    values = params.get(name)
    if not isinstance(values, dict):
        raise ParamsError(f"params.yaml needs a '{name}:' section")
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ParamsError(f"params.yaml {name}: unknown keys {unknown}; known: {sorted(allowed)}")
    for key, types in allowed.items():
        if key in values and values[key] is not None and not isinstance(values[key], types):
            raise ParamsError(f"params.yaml {name}.{key} = {values[key]!r} should be {types}")
    return values


def dataclass_params(values: Any, name: str, cls: type) -> Any:
    """A config dataclass from a params section: unknown keys and wrong types are refused."""
    if not isinstance(values, dict):
        raise ParamsError(f"params.yaml needs a '{name}:' section")
    known = {f.name: f.default for f in fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ParamsError(f"params.yaml {name}: unknown keys {unknown}; known: {sorted(known)}")
    values = dict(values)
    for key, value in values.items():
        default = known[key]
        if isinstance(default, tuple) and isinstance(value, list):  # YAML has lists, not tuples
            value = values[key] = tuple(value)
        expected = (int, float) if isinstance(default, float) else type(default)
        if default is not None and value is not None and (not isinstance(value, expected) or isinstance(value, bool) != isinstance(default, bool)):
            raise ParamsError(f"params.yaml {name}.{key} = {value!r} should be a {type(default).__name__}")
    return cls(**values)


def env_kwargs(params: dict) -> dict[str, Any]:
    data = section(params, "dataset")
    env = section(params, "env")
    if data.get("action_mode") not in ("discrete", "multi_binary"):
        raise ParamsError(f"params.yaml dataset.action_mode must be discrete or multi_binary, got {data.get('action_mode')!r}")
    return {
        "action_mode": data["action_mode"],
        "timestep_ms": data.get("timestep_ms", 200),
        "frame_size": tuple(data.get("frame_size", (84, 84))),
        "frame_stack": env.get("frame_stack"),
        "action_history": env.get("action_history"),
        "max_steps": env.get("max_steps", 900),
    }


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


# --------------------------------------------------------------------------------------- stages
def stage_demos(params: dict) -> None:
    demos = section(params, "demos")
    if demos.get("source") not in ("sim", "raw"):
        raise ParamsError(f"params.yaml demos.source must be 'sim' or 'raw', got {demos.get('source')!r}")
    if DEMOS_DIR.exists():
        shutil.rmtree(DEMOS_DIR)
    DEMOS_DIR.mkdir(parents=True)
    if demos["source"] == "raw":
        log.info("demos.source is 'raw': the dataset is built from your recordings in %s", demos.get("raw_dir"))
        return
    from capture import record

    frame = "x".join(str(v) for v in section(params, "dataset").get("frame_size", [84, 84]))
    code = record.main([
        "--backend", "sim", "--autopilot", "--max-episodes", str(demos.get("episodes", 40)),
        "--seed", str(demos.get("seed", 0)), "--rate", str(demos.get("rate_hz", 30)),
        "--frame-size", frame, "--out", str(DEMOS_DIR), "--no-status", "--log-level", "WARNING",
    ])
    if code != 0:
        raise SystemExit(code)


def stage_dataset(params: dict) -> None:
    from capture.build_dataset import BuildSettings, build_dataset

    demos = section(params, "demos")
    kwargs = env_kwargs(params)
    raw = DEMOS_DIR if demos.get("source") == "sim" else Path(demos.get("raw_dir") or USER_RAW_DIR)
    settings = BuildSettings(kwargs["action_mode"], kwargs["timestep_ms"], kwargs["frame_size"], max_steps=kwargs["max_steps"])
    dataset_id = section(params, "dataset")["id"]
    dataset = build_dataset(raw, dataset_id, settings=settings, root=MINARI_ROOT, force=True)
    write_json(REPORTS / "dataset.json", {"episodes": dataset.total_episodes, "steps": dataset.total_steps, "id": dataset_id})


def stage_bc(params: dict) -> None:
    from elden_il.bc import BCConfig, train_bc
    from elden_il.data import check_compatible, load_demonstrations

    config = dataclass_params({**(params.get("bc") or {}), **_history(params)}, "bc", BCConfig)
    kwargs = env_kwargs(params)
    demos = load_demonstrations(section(params, "dataset")["id"], MINARI_ROOT)
    env = _make_env(kwargs)()
    check_compatible(demos, env.observation_space, env.action_space)
    env.close()
    metrics = train_bc(demos, config, MODELS / "bc")
    write_json(REPORTS / "bc.json", metrics)


def _history(params: dict) -> dict:
    env = params.get("env") or {}
    return {"frame_stack": env.get("frame_stack"), "action_history": env.get("action_history")}


def stage_finetune(params: dict) -> None:
    from elden_il.finetune import FinetuneConfig, finetune

    config = dataclass_params(params.get("finetune"), "finetune", FinetuneConfig)
    metrics = finetune(MODELS / "bc" / "policy.zip", config, env_kwargs(params), MODELS / "finetuned")
    write_json(REPORTS / "finetune.json", metrics)


def _make_env(kwargs: dict, backend: str = "sim", host: str = "", server_host: str | None = None):
    from env.elden_env import EldenRingEnv
    from env.sim.expert import ScriptedExpert

    def make():
        if backend == "sim":
            return EldenRingEnv(state_attributes=ScriptedExpert.ATTRIBUTES, **kwargs)
        if backend == "sim_server":
            return EldenRingEnv(backend="siphon", host=server_host, profile="sim_margit",
                                state_attributes=ScriptedExpert.ATTRIBUTES, pause_between_steps=True, **kwargs)
        return EldenRingEnv(backend="siphon", host=host, **kwargs)

    return make


def stage_evaluate(params: dict) -> None:
    from elden_il.evaluate import ExpertActor, PolicyActor, RandomActor, evaluate
    from elden_il.plots import comparison_chart, learning_curves

    ev = section(params, "evaluate")
    backend = ev.get("backend", "sim")
    if backend not in ("sim", "sim_server", "siphon"):
        raise ParamsError(f"params.yaml evaluate.backend must be sim, sim_server or siphon, got {backend!r}")
    if ev.get("fights", 100) < 1:
        raise ParamsError("params.yaml evaluate.fights must be at least 1")
    kwargs = env_kwargs(params)
    seeds = list(range(ev.get("first_seed", 1_000_000), ev.get("first_seed", 1_000_000) + ev.get("fights", 100)))
    deterministic = ev.get("deterministic", True)
    actors = {
        "random": RandomActor(),
        "bc": PolicyActor(MODELS / "bc" / "policy.zip", deterministic),
        "finetuned": PolicyActor(MODELS / "finetuned" / "policy.zip", deterministic),
    }
    if backend == "siphon":
        log.info("the scripted expert knows only the simulator's moves: not evaluated against a real game")
    else:
        actors["expert"] = ExpertActor()
    server = None
    if backend == "sim_server":
        from env.sim.launcher import SimServer

        server = SimServer(size=kwargs["frame_size"])
    try:
        make = _make_env(kwargs, backend, ev.get("host", ""), server.host if server else None)
        parallel = 1 if backend != "sim" else ev.get("parallel", 8)
        results = evaluate(actors, make, seeds, gif_dir=REPORTS / "gifs", parallel=parallel)
    finally:
        if server is not None:
            server.stop()
    write_json(REPORTS / "eval.json", {"backend": backend, "fights": len(seeds), "policies": results})
    show_summary()
    comparison_chart(results, REPORTS / "plots" / "comparison.png")
    learning_curves(MODELS / "bc" / "history.json", MODELS / "finetuned" / "learning_curve.json", REPORTS / "plots" / "learning_curves.png")


def show_summary(path: Path = REPORTS / "eval.json") -> None:
    """The last evaluation as one readable table (``dvc metrics show`` spreads it over dozens of
    columns)."""
    from rich.console import Console
    from rich.table import Table

    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"no evaluation yet ({path}): run `dvc repro`") from None
    table = Table(title=f"{report['fights']} fights per policy, same seeds ({report['backend']})")
    for column in ("policy", "win rate", "95 % CI", "boss damage dealt", "damage taken", "episode length"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name, r in report["policies"].items():
        low, high = r["win_rate_ci95"]
        table.add_row(name, f"{r['win_rate']:.0%}", f"{low:.0%}-{high:.0%}", f"{r['boss_damage_dealt']:.0%}",
                      f"{r['player_damage_taken']:.0%}", f"{r['episode_length']:.0f}")
    Console().print(table)


STAGES = {"demos": stage_demos, "dataset": stage_dataset, "bc": stage_bc, "finetune": stage_finetune, "evaluate": stage_evaluate}
COMMANDS = {**STAGES, "summary": lambda params: show_summary()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elden_il.pipeline", description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=list(COMMANDS), help="a stage, or summary: the last evaluation as a table")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        COMMANDS[args.stage](load_params(args.params))
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # DatasetError, BuildError: already say what to do
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
