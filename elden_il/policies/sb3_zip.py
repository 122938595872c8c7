"""``python -m elden_il.policies.sb3_zip``: a policy folder to and from stable-baselines3's zip.

A policy folder is data (``elden_il.policies.policy.save_policy``): anyone's can be loaded safely. SB3's
own zip is a pickle: ``PPO.load`` and ``ActorCriticPolicy.load`` run whatever code its maker put
in it. So the zip is only ever written here for SB3's own tools (``export``: the file
``PPO.load`` reads, for a policy of yours), and read only when the person running the command
says, with ``--trust-pickle``, that they trust who made it (``convert``: a folder saved before
policies were data, or a zip someone sent, becomes a policy folder once, and is then loaded as
data from there on).
"""

from __future__ import annotations

import logging
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from stable_baselines3.common.policies import ActorCriticPolicy

from env.common.cli import add_flags, command_parser, flag, from_flags, run_command
from env.common.errors import ConfigError, DataError
from env.common.files import regular_file_problem
from env.common.staging import staged_folder
from env.config import FILE as CONFIG_FILE
from env.config import EnvConfig

from elden_il.policies.policy import PICKLED_FILE, load_policy, network_size, one_network, policy_kwargs, save_policy

log = logging.getLogger(__name__)


class SpacesOnly(gym.Env):
    """An env that only has the spaces of the one a policy acts in: what ``PPO`` must be given to
    make the model whose zip SB3's tools read, without starting a game."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.observation_space, self.action_space = observation_space, action_space


def export_sb3(folder: Path, target: Path) -> None:
    """Write the policy in ``folder`` as the zip ``PPO.load`` reads (PPO's default settings, the
    policy's weights): for SB3's own tools. The zip is a pickle: share the folder, not the zip.
    ``target`` is the zip (``.zip`` added where it lacks it, as SB3 adds it), or a folder to
    write ``<policy folder>_ppo.zip`` into."""
    from stable_baselines3 import PPO

    from env.profile import load_profile

    if target.is_dir():  # as cp does: into the folder
        target = target / f"{Path(folder).resolve().name}_ppo.zip"
    if target.suffix != ".zip":
        target = target.with_name(target.name + ".zip")  # what SB3's save writes anyway: said as written
    if target.exists() or target.is_symlink():
        problem = regular_file_problem(target)
        if problem is not None:
            raise ConfigError(f"{target} {problem}: give the zip a file's name (as finetuned_ppo.zip) to write")
    loaded = load_policy(folder, device="cpu")
    policy = one_network(loaded, "SB3's zip")
    observation, action = loaded.config.spaces(load_profile(loaded.config.profile))
    model = PPO(
        ActorCriticPolicy,
        SpacesOnly(observation, action),
        policy_kwargs={
            **policy_kwargs(network_size(policy)),
            "share_features_extractor": policy.share_features_extractor,
        },
        device="cpu",
    )
    model.policy.load_state_dict(policy.state_dict())
    model.save(target)
    log.info(
        "wrote %s: PPO.load(%r) reads it (it needs elden-il installed, for the network's class)", target, str(target)
    )


def read_sb3_zip_trusting_its_code(path: Path, device: str = "cpu") -> ActorCriticPolicy:
    """The policy in an SB3 zip: the algorithm's (``PPO.save``) or the policy's own
    (``ActorCriticPolicy.save``). READING IT RUNS THE CODE ITS MAKER PUT IN IT (both are
    pickles): call this only on a file you made or whose maker you trust."""
    from stable_baselines3 import PPO

    try:
        with zipfile.ZipFile(path) as archive:
            algorithm = "data" in archive.namelist()
        if algorithm:
            return PPO.load(str(path), device=device).policy
        return ActorCriticPolicy.load(str(path), device=device)
    except zipfile.BadZipFile:
        raise DataError(f"{path} is not an SB3 zip (not a zip file)") from None
    except (RuntimeError, ValueError, KeyError, EOFError, OSError, AttributeError, ImportError) as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise DataError(f"{path} is not a saved SB3 policy ({reason})") from None


def convert(folder: Path, trust_pickle: bool) -> None:
    """Turn ``folder`` (SB3's ``policy.zip`` and ``env_config.json``, as policies were saved
    before) into a policy folder, in place and whole: the zip is read once, trusting its code,
    and replaced by the weights and their description; every other file stays."""
    zipped = folder / PICKLED_FILE
    if not zipped.is_file():
        raise ConfigError(f"{folder} holds no {PICKLED_FILE} to convert")
    if not trust_pickle:
        raise ConfigError(
            f"{zipped} is a pickle: reading it runs whatever code its maker put in it. If you made it or trust "
            "who did, say so: add --trust-pickle"
        )
    config = EnvConfig.load(folder)
    policy = read_sb3_zip_trusting_its_code(zipped)
    with staged_folder(folder) as built:
        for item in folder.iterdir():
            if item.name not in (PICKLED_FILE, CONFIG_FILE):
                (shutil.copytree if item.is_dir() else shutil.copy2)(item, built / item.name)
        save_policy(policy, config, built)
        load_policy(built, device="cpu")  # what it wrote reads back, with its spaces checked
    print(f"converted {folder}: {PICKLED_FILE} is now policy.safetensors and policy.json (load_policy reads them)")


@dataclass(frozen=True)
class ExportArgs:
    """``export``: a policy folder, written as SB3's zip."""

    folder: Path = field(metadata=flag("a policy folder (as datasets/models/bc)", positional=True, type=Path))
    zip: Path = field(metadata=flag("the zip to write", positional=True, type=Path))


@dataclass(frozen=True)
class ConvertArgs:
    """``convert``: folders of SB3 zips, made policy folders."""

    folders: tuple[Path, ...] = field(
        metadata=flag("folders with policy.zip and env_config.json", positional=True, type=Path, nargs="+")
    )
    trust_pickle: bool = field(
        default=False, metadata=flag("read each policy.zip although reading it runs the code its maker put in it")
    )


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "python -m elden_il.policies.sb3_zip",
        __doc__,
        epilog=__doc__.split("\n\n", 1)[1] + "\nexamples:\n"
        "  python -m elden_il.policies.sb3_zip export datasets/models/finetuned finetuned_ppo.zip\n"
        "  python -m elden_il.policies.sb3_zip convert old/models/bc old/models/finetuned --trust-pickle",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write a policy folder as the zip PPO.load reads")
    add_flags(export, ExportArgs)
    add_flags(
        commands.add_parser("convert", help="turn folders holding SB3's policy.zip into policy folders"), ConvertArgs
    )
    flags = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    def work() -> Any:
        if flags.command == "export":
            asked = from_flags(ExportArgs, flags)
            export_sb3(asked.folder, asked.zip)
            return None
        asked = from_flags(ConvertArgs, flags)
        for folder in asked.folders:
            convert(folder, asked.trust_pickle)
        return None

    return run_command(work)


if __name__ == "__main__":
    raise SystemExit(main())
