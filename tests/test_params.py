"""The one parameter tree: params.yaml says what the dataclasses' defaults are, and nothing else."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from elden_il.params import FROM_ELSEWHERE, RECORD_KEYS, SECTIONS, ParamsError, PipelineParams, load_params

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

ROOT = Path(__file__).resolve().parents[1]
DIFFERENT_FROM_THE_DEFAULTS: dict[str, dict] = {}
"""Keys params.yaml sets to something else than the dataclass default, each with a reason: none."""


def as_yaml(params: PipelineParams) -> dict:
    """The tree as params.yaml writes it (lists where YAML has no tuples; the env without the
    fields that come from elsewhere, the demonstrations' recording with the keys it may set)."""

    def plain(values: dict, keep=lambda key: True) -> dict:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in values.items() if keep(key)}

    tree = {name: plain(asdict(getattr(params, name))) for name in SECTIONS}
    tree["env"] = plain(tree["env"], lambda key: key not in FROM_ELSEWHERE)
    tree["demos"]["record"] = plain(tree["demos"]["record"], lambda key: key in RECORD_KEYS)
    return tree


def test_params_yaml_is_the_defaults_written_out():
    written = yaml.safe_load((ROOT / "params.yaml").read_text())
    defaults = as_yaml(PipelineParams())
    assert list(written) == list(SECTIONS)
    for name in SECTIONS:
        assert list(written[name]) == list(defaults[name]), f"params.yaml {name} lists other keys than its dataclass"
        for key, value in written[name].items():
            if key not in DIFFERENT_FROM_THE_DEFAULTS.get(name, {}):
                assert value == defaults[name][key], (
                    f"params.yaml {name}.{key} = {value!r}, its default {defaults[name][key]!r}"
                )
    assert load_params(ROOT / "params.yaml") == PipelineParams()


def test_a_key_left_out_takes_the_pipelines_default(tmp_path: Path):
    written = yaml.safe_load((ROOT / "params.yaml").read_text())
    del written["finetune"]["n_epochs"], written["finetune"]["runs"], written["evaluate"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(written))
    assert load_params(tmp_path / "params.yaml") == PipelineParams()


BILLION_LAUGHS = (
    "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    + "".join(f"{x}: &{x} [{', '.join(f'*{y}' for _ in range(10))}]\n" for y, x in zip("bcdefgh", "cdefghi"))
    + "bc:\n  epochs: *i\n"
)
"""A few hundred bytes of YAML that expand to 10^9 values when read."""


@pytest.mark.parametrize(
    "text, message",
    [
        ("bc: [1, 2]\n", "params.yaml bc must be a mapping of keys (epochs, batch_size"),
        ("bc:\n  epoch: 3\n", "params.yaml bc: unknown keys ['epoch']"),
        ("training:\n  epochs: 3\n", "params.yaml: unknown sections ['training']"),
        (
            "- demos\n",
            "params.yaml must be a mapping of sections (demos, dataset, env, network, bc, finetune, evaluate, evaluate_live)",
        ),
        ("bc: {epochs: 3\n", "params.yaml is not valid YAML"),
        ("bc:\n  action_weights: [use_item]\n", "params.yaml bc.action_weights = ['use_item']: must be a mapping"),
        ("bc:\n  action_weights: {use_item: -1}\n", "bc.action_weights = {'use_item': -1}: must be a mapping of"),
        (BILLION_LAUGHS, "params.yaml, line 2: *a is a YAML alias: params.yaml takes plain values only"),
        ("bc:\n  epochs: 3  # \xe9poques\n".encode("latin-1"), "params.yaml is not UTF-8 text: byte 0xe9 on line 2"),
        ("bc:\n  epochs: " + "9" * 5000 + "\n", "params.yaml holds a number no setting takes"),
        ("bc:\n  epochs: " + "9" * 300_000 + "\n", "params.yaml is larger than any file of its kind"),
        (
            "bc:\n  action_weights: " + "[" * 500 + "]" * 500 + "\n",
            "params.yaml, line 2: nested deeper than any setting (32 levels at most)",
        ),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) else None,
)
def test_a_malformed_params_file_is_one_line(tmp_path: Path, text: str | bytes, message: str):
    """Each one line, at once and in bounded memory: the 600-byte alias of aliases below took 26 s
    and 2.9 GB before its MemoryError; Windows Notepad's "ANSI" comment, a number of thousands
    of digits and lists nested 500 deep (a 10 KB file: a ``RecursionError`` of 2,994 lines) were
    tracebacks."""
    path = tmp_path / "params.yaml"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    with pytest.raises(ParamsError) as caught:
        load_params(tmp_path / "params.yaml")
    assert message in str(caught.value)


def test_params_given_as_a_folder_or_a_fifo_is_one_line(tmp_path: Path):
    import os

    (tmp_path / "folder.yaml").mkdir()
    os.mkfifo(tmp_path / "fifo.yaml")
    for name, said in (("folder.yaml", "is a folder, not a file"), ("fifo.yaml", "is a FIFO")):
        with pytest.raises(ParamsError, match=said):
            load_params(tmp_path / name)


def test_game_speed_is_how_finetuning_and_evaluation_run_a_live_game_not_which_env(tmp_path: Path):
    """``finetune.game_speed`` reaches the envs fine-tuning plays in, while the policy keeps the
    env config it was cloned for; a speed the env cannot run is refused as one line."""
    from elden_il.params import FinetuneConfig
    from elden_il.training.finetune import seeded_env_fns

    params = PipelineParams(finetune=FinetuneConfig(game_speed=3, num_envs=1))
    config = params.env.replace(profile="sim_margit")
    env = seeded_env_fns(params.finetune, config)[0]()
    try:
        assert env.unwrapped.config.game_speed == 3
        assert env.unwrapped.config.replace(game_speed=1) == config
    finally:
        env.close()
    for section in ("finetune", "evaluate"):
        (tmp_path / "params.yaml").write_text(f"{section}:\n  game_speed: 12\n")
        with pytest.raises(ParamsError) as caught:
            load_params(tmp_path / "params.yaml")
        assert f"{section}.game_speed" in str(caught.value) and "from 1 to 10" in str(caught.value)


@pytest.mark.parametrize("backend", ["siphon", "sim_server"])
def test_several_runs_against_a_live_game_are_refused_with_the_fix(tmp_path: Path, backend: str):
    written = yaml.safe_load((ROOT / "params.yaml").read_text())
    written["finetune"].update(backend=backend, hosts=["127.0.0.1:50051"] if backend == "siphon" else [], runs=2)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(written))
    wanted = rf"finetune.runs = 2: must be 1 with backend {backend}"
    with pytest.raises(ParamsError, match=wanted):
        load_params(tmp_path / "params.yaml")
    written["finetune"]["runs"] = 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(written))
    assert load_params(tmp_path / "params.yaml").finetune.runs == 1


def yaml_snippets() -> list[tuple[str, str]]:
    """Every ```yaml block in the README and the docs: what a reader pastes into params.yaml."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = page.read_text().split("```yaml\n")[1:]
        found += [(f"{page.name} #{number}", block.split("```")[0]) for number, block in enumerate(blocks, 1)]
    return found


@pytest.mark.parametrize(("where", "snippet"), yaml_snippets(), ids=[where for where, _ in yaml_snippets()])
def test_every_params_snippet_in_the_docs_is_one_params_yaml_takes(where: str, snippet: str):
    written = yaml.safe_load((ROOT / "params.yaml").read_text())
    for section, values in yaml.safe_load(snippet).items():
        written[section] = {**written.get(section, {}), **values}
    PipelineParams.from_mapping(written, where)
