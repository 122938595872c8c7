"""``python -m elden_il.view``: see a fight on one scrubbable timeline, in the Rerun viewer.

A raw episode shows as the recorder kept it, sample by sample (``elden_il.view.episode``), with
the steps a dataset built from it would hold beside it; one episode of a Minari dataset shows as
the learner sees it (``elden_il.view.steps``). With ``--policy``, a saved policy's action
probabilities stand at every step next to the action taken, and the steps where it would have
done otherwise are marked and counted per action. The viewer opens on this machine (bound to
127.0.0.1, Rerun's analytics off: ``elden_il.view.viewer``); with ``--save`` the recording goes to an
``.rrd`` file instead, to open wherever there is a display. A saved ``.rrd`` (the evaluation's
too) opens with ``python -m elden_il.view FILE.rrd``. ``--listen`` opens a viewer that waits for a
fine-tuning run to stream to it as it goes (``elden_il.view.live_run``).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from env.common.cli import add_flags, command_parser, flag, from_flags, run_command
from env.common.errors import ConfigError, DataError
from env.common.fields import check_fields, checked, whole
from env.config import EnvConfig
from env.profile import load_profile

from capture.build_dataset import recorded_picture, usable
from capture.episode import Episode, read_episode
from capture.episode_format import PARTIAL

from elden_il.view.episode import log_samples, step_view
from elden_il.view.live_run import WATCH_VARIABLE
from elden_il.view.steps import Disagreements, StepView, log_policy, log_steps
from elden_il.view.viewer import (
    ViewError,
    has_display,
    open_file,
    recording,
    rerun,
    start_viewer,
    turn_off_analytics,
    view_command,
)

log = logging.getLogger(__name__)


def layout(rr: Any, raw: bool, policy: bool) -> Any:
    """The viewer's default arrangement: the pictures on top left, plots under them, the text
    (actions, the policy's marks, the recorder's notes) and the policy's charts on the right."""
    rrb = rr.blueprint
    pictures = [rrb.Spatial2DView(origin="video", name="picture (master size)")] if raw else []
    pictures.append(rrb.Spatial2DView(origin="observation/frame", name="observation frame"))
    plots = (
        [
            rrb.TimeSeriesView(origin="fighters", name="fighters (fractions of max, distance in m)"),
            rrb.TimeSeriesView(origin="keys", name="keys held (rows) and pressed (points)"),
        ]
        if raw
        else [rrb.TimeSeriesView(origin="observation", name="observation scalars")]
    )
    plots.append(rrb.TimeSeriesView(origin="action/reward", name="reward"))
    side: list = [
        rrb.TextLogView(
            origin="/",
            contents=[
                "+ /action/**",
                "+ /policy/**",
                "+ /recorder/**",
                "+ /observation/action_history",
            ],
            name="actions",
        )
    ]
    if policy:
        side += [
            rrb.BarChartView(origin="policy/probabilities", name="policy: action probabilities"),
            rrb.TextDocumentView(origin="policy/summary", name="disagreements"),
        ]
    elif raw:
        side.append(rrb.TextDocumentView(origin="episode", name="episode"))
    return rrb.Blueprint(
        rrb.Horizontal(
            rrb.Vertical(rrb.Horizontal(*pictures), *plots),
            rrb.Vertical(*side),
            column_shares=[3, 2],
        ),
        collapse_panels=True,
    )


def read_raw(path: Path) -> Episode:
    """A finished episode, as the dataset builder would use it, or one line saying what to do."""
    if not path.name.endswith(PARTIAL) and not path.is_file():
        raise DataError(
            f"no episode at {path}: give a finished episode's .h5 (python -m capture.record writes them "
            "into datasets/raw)"
        )
    return usable(read_episode(path))


def _policy(path: Path | None) -> Any:
    if path is None:
        return None
    from elden_il.policies.policy import load_policy  # torch: only when a policy is shown

    return load_policy(path)


def _overlay(rr: Any, stream: Any, view: StepView, policy: Any) -> Disagreements | None:
    log_steps(rr, stream, view)
    if policy is None:
        return None
    found = log_policy(
        rr,
        stream,
        view,
        policy.probabilities(view.observations),
        f"policy {policy.path.name}",
    )
    log.info(
        "the policy's most likely action differs from the one taken at %d of %d steps",
        found.count,
        len(view),
    )
    return found


def show_episode(
    path: Path,
    save: Path | None = None,
    policy_path: Path | None = None,
    config: EnvConfig | None = None,
) -> Disagreements | None:
    """Show (or ``save``) the raw episode at ``path``: its samples, and its steps for ``config``'s
    frame and timestep (default: the env's; the policy's own env with ``policy_path``). Returns
    the policy's disagreements, if a policy was given."""
    episode = read_raw(path)
    policy = _policy(policy_path)
    recorded = str(episode.attrs.get("profile"))
    if policy is not None:
        from elden_il.data import check_config

        config = policy.config
        check_config(
            config,
            recorded_picture(config.replace(capture_size=None), episode.master_size).replace(profile=recorded),
            f"the policy {policy.path}",
            "show it on episodes recorded with its profile and picture, or on the dataset it was trained on (--dataset)",
        )
    else:
        config = recorded_picture((config or EnvConfig()).replace(profile=recorded), episode.master_size)
    rr = rerun()
    with recording(path.stem, save, layout(rr, raw=True, policy=policy is not None)) as stream:
        log_samples(rr, stream, episode, config)
        view = step_view(episode, config)
        if view is None:
            log.warning("%s is shorter than one %g ms step: no steps to show", path.name, config.timestep_ms)
            return None
        return _overlay(rr, stream, view, policy)


def dataset_view(dataset_id: str, index: int, root: Path | None = None) -> tuple[StepView, EnvConfig]:
    """Episode ``index`` of a Minari dataset as steps, with the env it was built for: its stack
    and history rebuilt by the env's rule (``elden_il.data``), loading that episode alone."""
    from minari import MinariDataset

    from elden_il.data import demonstrations, open_dataset

    dataset = open_dataset(dataset_id, root)
    total = dataset.total_episodes
    if not 0 <= index < total:
        raise ConfigError(
            f"dataset {dataset_id!r} has {total} episode{'s' * (total != 1)}: pick --episode from 0 to {total - 1}"
        )
    demos = demonstrations(MinariDataset(dataset.storage, episode_indices=np.array([index])))
    rows = np.arange(len(demos))
    names = demos.config.actions(load_profile(demos.config.profile)).names
    view = StepView(
        time_s=rows * demos.config.timestep_ms / 1000.0,
        observations=demos.batch(rows),
        actions=demos.actions,
        rewards=demos.rewards,
        action_names=names,
        discrete=demos.config.action_mode == "discrete",
    )
    return view, demos.config


def show_dataset(
    dataset_id: str,
    index: int,
    root: Path | None = None,
    save: Path | None = None,
    policy_path: Path | None = None,
) -> Disagreements | None:
    """Show (or ``save``) episode ``index`` of dataset ``dataset_id`` as the learner sees it."""
    view, config = dataset_view(dataset_id, index, root)
    policy = _policy(policy_path)
    if policy is not None:
        from elden_il.data import check_config

        check_config(
            policy.config,
            config,
            f"the policy {policy.path}",
            f"show a policy trained on dataset {dataset_id!r} (its env_config.json), or this policy on its own dataset",
        )
    rr = rerun()
    with recording(f"{dataset_id} episode {index}", save, layout(rr, raw=False, policy=policy is not None)) as stream:
        return _overlay(rr, stream, view, policy)


EPILOG = """examples:
  python -m elden_il.view datasets/raw/20260101-201500-000000_human.h5
      a recorded fight: its video, HUD bars, keys, mouse and steps, in a viewer window
  python -m elden_il.view datasets/raw/FIGHT.h5 --policy datasets/models/bc
      ... with the BC policy's action probabilities; the steps where it disagrees are marked
  python -m elden_il.view --dataset eldenil/margit-sim-v0 --episode 3 --root datasets/minari
      one dataset episode as the learner sees it (frame, stack, action history, label, reward)
  python -m elden_il.view datasets/raw/FIGHT.h5 --save fight.rrd
      no display here (a training box): write the recording, then open it on your own machine
  python -m elden_il.view datasets/reports/recordings/bc.rrd
      open a saved recording, such as the evaluation's first held-out fight of each policy
  python -m elden_il.view --listen
      a viewer that waits for a fine-tuning run: set the line it prints, then `dvc repro finetune`
      shows each gaming PC's state, steps an hour and fights, the learner's pace and the win rate
      as they go (the finetune stage also records its AWAC run to datasets/reports/finetune.rrd)

The viewer's server listens on 127.0.0.1 only, and Rerun's usage analytics are turned off
(`rerun analytics disable`) before it starts."""


@dataclass(frozen=True)
class ViewArgs:
    """What ``python -m elden_il.view`` shows: each field its argument."""

    source: Path | None = field(
        default=None,
        metadata=flag(
            "a raw episode (.h5) to show, or a saved recording (.rrd) to open", positional=True, nargs="?", type=Path
        ),
    )
    dataset: str | None = field(default=None, metadata=flag("a Minari dataset id, to show one of its episodes instead"))
    episode: int = checked(0, whole(0), "which episode of --dataset")
    root: Path | None = field(
        default=None,
        metadata=flag("the datasets root (default: $MINARI_DATASETS_PATH or datasets/minari)", type=Path),
    )
    policy: Path | None = field(
        default=None,
        metadata=flag(
            "a saved policy's folder (as datasets/models/bc): its action probabilities at every step", type=Path
        ),
    )
    save: Path | None = field(
        default=None,
        metadata=flag(
            "write the recording to this file instead of opening a viewer (where there is no display)",
            type=Path,
            metavar="FILE.rrd",
        ),
    )
    listen: bool = field(
        default=False,
        metadata=flag(
            f"open a viewer that waits for a fine-tuning run's live view, and print the {WATCH_VARIABLE} to set"
        ),
    )

    def __post_init__(self) -> None:
        check_fields(self)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("python -m elden_il.view", __doc__, ViewArgs, epilog=EPILOG)
    add_flags(
        parser,
        EnvConfig,
        ("timestep_ms", "frame_size", "frame_crop"),
        timestep_ms={"help": "a raw episode's env step (with --policy: the policy's)"},
        frame_size={
            "help": "a raw episode's observation frame WxH, as a dataset would make it (with --policy: the policy's)"
        },
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    flags = parser.parse_args(argv)
    args = from_flags(ViewArgs, flags)
    if args.listen and (args.source, args.dataset, args.save) != (None, None, None):
        parser.error("--listen opens an empty viewer for a run to stream to: give it nothing else")
    if not args.listen and (args.source is None) == (args.dataset is None):
        parser.error("give a raw episode (.h5), a recording (.rrd) or --dataset ID, one of them")
    if args.save is not None and args.save.suffix != ".rrd":
        parser.error(f"--save {args.save}: name a .rrd file (Rerun's recording format)")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return run_command(lambda: view(args, from_flags(EnvConfig, flags)))


def view(args: ViewArgs, config: EnvConfig) -> None:
    """Open (or with ``--save``, write) what ``args`` name; a raw episode in the env ``config``."""
    if args.listen:
        listen()
    elif args.dataset is not None:
        show_dataset(args.dataset, args.episode, args.root, args.save, args.policy)
    elif args.source.suffix == ".rrd":
        open_file(args.source)
    else:
        show_episode(args.source, args.save, args.policy, config)
    if args.save is not None:
        print(f"saved {args.save}; to view it on a machine with a display: {view_command(args.save)}")


def listen() -> None:
    """A viewer on this machine, bound to loopback, for a fine-tuning run to stream to."""
    rerun()
    if not has_display():
        raise ViewError(
            "no display here (DISPLAY is not set): run `python -m elden_il.view --listen` on your own machine and "
            "reach it from this one with ssh -R, as it then says; the finetune stage also records its run to "
            "datasets/reports/finetune.rrd, to open afterwards"
        )
    turn_off_analytics().wait()
    address = start_viewer()
    port = urlsplit(address).port
    print(
        f"a viewer listens at {address}. In the shell that fine-tunes, set\n  export {WATCH_VARIABLE}={address}\n"
        f"then run `dvc repro finetune`. A learner on another machine reaches this viewer through\n"
        f"  ssh -R {port}:127.0.0.1:{port} LEARNER\nwith the same line set there."
    )


if __name__ == "__main__":
    raise SystemExit(main())
