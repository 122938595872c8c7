"""Training runs logged with DVCLive, as the pipeline's stages train: the curves ``dvc plots``
draws (``dvc.yaml`` declares them) and VS Code's DVC extension follows live.

Each stage logs into its own folder (``datasets/reports/live/<stage>``): one TSV per curve,
``step`` then the value, under ``plots/metrics/``, and DVCLive's ``metrics.json`` with the latest
values. Nothing from the wall clock goes in (no timestamps), so a rerun with the same params
writes the same bytes. DVCLive is asked neither to edit ``dvc.yaml`` (the pipeline's own
``plots:`` section describes these curves) nor to save a DVC experiment of its own:
``dvc exp run`` already records one per run, and ``dvc repro`` should not make any.
"""

from __future__ import annotations

import logging
from collections import deque
from contextlib import ExitStack
from pathlib import Path

from env.common.staging import staged_folder

log = logging.getLogger(__name__)

WIN_RATE_WINDOW = 20
"""Episodes in the fine-tuning win rate's trailing mean (as in ``plots.learning_curves``)."""


class TrainingLog:
    """One training run's curves: ``bc_epoch`` and ``rl_episode`` are the callbacks that
    ``elden_il.training.bc.train_bc`` and ``elden_il.training.finetune.finetune`` accept. A context manager:
    the curves are written aside (``env.common.staging``) and replace ``directory``'s whole when
    it exits cleanly, so a run stopped half-way leaves the last finished run's curves."""

    def __init__(self, directory: Path) -> None:
        self._staging = ExitStack()
        self.live = _live(self._staging.enter_context(staged_folder(directory)))
        self._wins: deque[float] = deque(maxlen=WIN_RATE_WINDOW)

    def bc_epoch(self, record: dict) -> None:
        """Behaviour cloning after an epoch: train and validation loss, validation accuracy."""
        self._log(record["epoch"], {k: record[k] for k in ("train_loss", "val_loss", "val_accuracy")})

    def rl_episode(self, row: dict) -> None:
        """Fine-tuning after an episode, at the env steps taken so far: its return, length and
        outcome, and the win rate over the last ``WIN_RATE_WINDOW`` episodes (sampled actions)."""
        self._wins.append(float(row["win"]))
        self._log(
            row["timesteps"],
            {
                "episode_return": row["return"],
                "episode_length": row["length"],
                "win": float(row["win"]),
                "win_rate": sum(self._wins) / len(self._wins),
            },
        )

    def _log(self, step: int, values: dict[str, float]) -> None:
        self.live.step = step
        for name, value in values.items():
            self.live.log_metric(name, value)
        self.live.make_summary()

    def __enter__(self) -> TrainingLog:
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.live.end()
        finally:
            self._staging.__exit__(*exc)


def _live(directory: Path):
    """A DVCLive ``Live`` logging into ``directory``, also in a git repository without commits
    yet (``git init``, ``dvc init``, ``dvc repro``), where DVCLive 3.49 fails while looking up
    the commit to attach an experiment to (treeverse/dvclive#522): there is none to attach to,
    and the curves are written all the same."""
    from dvclive import Live
    from scmrepo.exceptions import SCMError

    class CommitlessLive(Live):
        def _init_dvc(self) -> None:
            try:
                super()._init_dvc()
            except SCMError as e:
                log.debug("DVCLive without a DVC experiment: %s", e)

    return CommitlessLive(str(directory), save_dvc_exp=False, dvcyaml=None)
