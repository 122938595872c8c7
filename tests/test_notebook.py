"""notebooks/episodes.ipynb runs top to bottom on real data: episodes the autopilot just recorded
in the simulator, a Minari dataset built from them, and an evaluation really run.

The notebook is what a researcher opens first, so a cell that breaks on a format change must
fail here, not in front of them. It reads its parameters from ``ELDEN_IL_*`` environment
variables, which the kernel inherits from this process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from env.elden_env import EldenRingEnv
from env.factory import make_env
from env.sim.expert import ScriptedExpert

from capture.build_dataset import build_dataset
from capture.episode import list_episodes

from elden_il.evaluation.evaluate import evaluate
from elden_il.evaluation.fight_loop import PlayerActor, RandomActor
from elden_il.pipeline import write_json

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "episodes.ipynb"
DATASET_ID = "test/notebook-v0"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two short autopilot episodes, a dataset built from them and an eval.json, all real."""
    root = tmp_path_factory.mktemp("notebook")
    raw, minari_root, reports = root / "raw", root / "minari", root / "reports"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "capture.record",
            "--backend",
            "sim",
            "--autopilot",
            "--max-episodes",
            "2",
            "--max-episode-seconds",
            "15",
            "--out",
            str(raw),
            "--no-status",
            "--log-level",
            "WARNING",
        ],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    build_dataset(raw, DATASET_ID, root=minari_root)

    def make() -> EldenRingEnv:
        return make_env(state_attributes=ScriptedExpert.ATTRIBUTES, max_steps=150)

    actors = {"random": RandomActor(), "expert": PlayerActor("expert")}
    results = evaluate(actors, make, seeds=[1000, 1001], parallel=2)
    write_json(reports / "eval.json", {"backend": "sim", "fights": 2, "policies": results})
    return {"raw": raw, "minari": minari_root, "reports": reports, "empty": root / "no-reports"}


def execute(monkeypatch: pytest.MonkeyPatch, **params: str) -> nbformat.NotebookNode:
    """The notebook run in a fresh kernel from notebooks/. ``python3`` needs no registration:
    jupyter_client falls back to ipykernel's own spec and launches it with ``sys.executable``,
    so the kernel is this virtualenv's interpreter."""
    for name, value in params.items():
        monkeypatch.setenv(f"ELDEN_IL_{name}", value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error
    return notebook


def outputs(notebook: nbformat.NotebookNode, mime: str) -> list[str]:
    """Every output of ``mime`` (``stream`` for printed text), in cell order."""
    found = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if mime == "stream" and output.output_type == "stream":
                found.append(output.text)
            elif mime in output.get("data", {}):
                found.append(output.data[mime])
    return found


def test_the_notebook_is_saved_without_outputs():
    """Saved outputs go stale, bloat every diff and may carry someone's data: commit none."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert "parameters" in code[0].metadata.get("tags", [])


@pytest.mark.slow
def test_the_notebook_shows_recordings_dataset_and_evaluation(data: dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    notebook = execute(
        monkeypatch,
        RAW_DIR=str(data["raw"]),
        MINARI_DATASET=DATASET_ID,
        MINARI_ROOT=str(data["minari"]),
        REPORTS_DIR=str(data["reports"]),
        EPISODE="1",
    )

    # HP + keys, key use, dataset actions, frame strip, timing, policy comparison
    assert len(outputs(notebook, "image/png")) == 6
    tables = outputs(notebook, "text/markdown")
    episode_table = tables[0]
    assert all(path.name in episode_table for path in list_episodes(data["raw"]))
    assert "cut (timeout)" in episode_table and "autopilot" in episode_table
    assert "random" in tables[-1] and "expert" in tables[-1]
    # the fight in detail and the evaluation's recordings, each with the command that opens it in Rerun
    assert f"python -m elden_il.view {list_episodes(data['raw'])[1].resolve()}" in "\n".join(tables)


def test_the_notebook_says_when_there_is_no_evaluation_yet(data: dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    notebook = execute(
        monkeypatch,
        RAW_DIR=str(data["raw"]),
        MINARI_DATASET="",
        REPORTS_DIR=str(data["empty"]),
        MOMENT="10",
    )

    notes = "\n".join(outputs(notebook, "text/markdown"))
    assert "No evaluation results yet" in notes and "dvc repro" in notes
    assert "No `MINARI_DATASET` given" in notes
    assert "sample 10 at" in "".join(outputs(notebook, "stream"))
    assert len(outputs(notebook, "image/png")) == 4
