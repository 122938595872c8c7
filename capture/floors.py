"""``python -m capture.floors``: the HP floors your character needs, from your recorded fights.

On the real game's profile the env ends an episode when a fighter's HP falls to its floor
(``[fight]`` in ``profile.toml``), and a floor only works above the hardest single blow against
that fighter (``env.hp_floors``). How hard Margit hits depends on the character, so this reads
recorded episodes (the recorder writes nothing to the game: every blow in them landed as the game
dealt it), finds the biggest HP drop between two samples on each side, and prints the floors that
catch it with the env's margin. A drop that ends at 0 HP is only a lower bound on that blow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from env.common.cli import flag, parse_settings, run_command
from env.fight_rules import hp_lost
from env.hp_floors import FIGHTERS, floor_for

from capture.episode import list_episodes, read_episode
from capture.episode_format import EpisodeError


def hardest_blows(raw_dir: Path) -> dict[str, tuple[int, int]]:
    """Per floor key (``player_hp_floor``, ``boss_hp_floor``), the hardest blow recorded in any
    finished episode as (HP lost between two samples, max HP then); (0, 1) if none landed."""
    paths = list_episodes(raw_dir)
    if not paths:
        raise EpisodeError(f"no finished episodes in {raw_dir}: record some with `python -m capture.record`")
    hardest = {key: (0, 1) for _, _, _, key, _ in FIGHTERS}
    for path in paths:
        episode = read_episode(path, frames=False)
        for _, hp, max_hp, key, _ in FIGHTERS:
            values, maxima = episode.column(hp), episode.column(max_hp)
            if len(values) < 2:
                continue
            lost = hp_lost({hp: values[:-1]}, {hp: values[1:], max_hp: maxima[1:]}, hp, max_hp)
            # a failed memory read (NaN, inf) is no blow: only drops between two finite samples count
            lost[~np.isfinite(lost)] = 0.0
            i = int(np.argmax(lost))
            taken, of = hardest[key]
            if lost[i] > taken / of:
                hardest[key] = (int(values[i] - values[i + 1]), int(maxima[i + 1]))
    return hardest


def floors_table(hardest: dict[str, tuple[int, int]]) -> str:
    """The ``[fight]`` floors that catch ``hardest``, with what each comes from."""
    lines = ["[fight]"]
    for who, _, _, key, _ in FIGHTERS:
        taken, of = hardest[key]
        if taken == 0:
            lines.append(f"# {key}: no blow against {who} was recorded; record fights in which {who} is hit")
            continue
        lines.append(
            f"{key} = {floor_for(taken / of):.2f}  # the hardest blow against {who}: {taken} HP of {of} "
            f"({taken / of:.0%})"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class FloorsArgs:
    """What ``python -m capture.floors`` reads."""

    raw_dir: Path = field(
        default=Path("datasets/raw"),
        metadata=flag("folder of recorded episodes", positional=True, nargs="?", type=Path),
    )


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m capture.floors", __doc__, FloorsArgs, argv=argv, epilog="")
    return run_command(lambda: print(floors_table(hardest_blows(args.raw_dir))))


if __name__ == "__main__":
    raise SystemExit(main())
