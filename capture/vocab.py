"""``python -m capture.vocab``: the animation ids a profile's vocabulary should list.

The game's animation ids are undocumented, and the observation tells apart only the ids in the
profile's ``[animations]`` lists (the rest observe as 0). This counts ``HeroAnimId`` and
``NpcAnimId`` over recorded episodes and prints the most frequent ones, as the ``[animations]``
table to paste into ``profile.toml``: frequent ids first, at most as many as the observation's
``Discrete`` spaces hold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from env.common.cli import flag, parse_settings, run_command
from env.common.fields import check_fields, checked, whole
from env.observations import BOSS_ANIMATIONS, PLAYER_ANIMATIONS

from capture.episode import list_episodes, read_episode
from capture.episode_format import EpisodeError

COLUMNS = {"player": ("HeroAnimId", PLAYER_ANIMATIONS), "boss": ("NpcAnimId", BOSS_ANIMATIONS)}


def count_animations(raw_dir: Path) -> dict[str, Counter]:
    """Samples spent in each animation id, per fighter, over every finished episode."""
    counts = {fighter: Counter() for fighter in COLUMNS}
    paths = list_episodes(raw_dir)
    if not paths:
        raise EpisodeError(f"no finished episodes in {raw_dir}: record some with `python -m capture.record`")
    for path in paths:
        episode = read_episode(path, frames=False)
        for fighter, (column, _) in COLUMNS.items():
            ids, samples = np.unique(episode.column(column).astype(np.int64), return_counts=True)
            counts[fighter].update(dict(zip(ids.tolist(), samples.tolist(), strict=True)))
    return counts


def vocabulary(counts: dict[str, Counter]) -> dict[str, list[int]]:
    """Each fighter's ids for the profile's ``[animations]``, most frequent first, as many as
    the observation tells apart (its index 0 is kept for 'unknown')."""
    return {
        fighter: [anim for anim, _ in counts[fighter].most_common(size - 1)] for fighter, (_, size) in COLUMNS.items()
    }


def animations_table(counts: dict[str, Counter]) -> str:
    """The ``[animations]`` TOML table of ``vocabulary(counts)``."""
    lines = ["[animations]"]
    for fighter, ids in vocabulary(counts).items():
        lines.append(f"{fighter} = [{', '.join(str(i) for i in ids)}]")
    return "\n".join(lines)


@dataclass(frozen=True)
class VocabArgs:
    """What ``python -m capture.vocab`` reads: each field its argument."""

    raw: Path = field(
        default=Path("datasets/raw"), metadata=flag("episode folder", positional=True, nargs="?", type=Path)
    )
    top: int = checked(10, whole(1, 1000), "also list this many ids per fighter with their share of samples")

    def __post_init__(self) -> None:
        check_fields(self)


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings(
        "python -m capture.vocab",
        __doc__.split("\n\n")[1],
        VocabArgs,
        argv=argv,
        epilog="example: python -m capture.vocab datasets/raw >> my_profile_notes.toml",
    )
    return run_command(lambda: show_animations(args.raw, args.top))


def show_animations(raw: Path, top: int) -> None:
    """Print each fighter's most frequent ids, then the TOML table of every id."""
    counts = count_animations(raw)
    for fighter, counter in counts.items():
        total = sum(counter.values()) or 1  # episodes salvaged with no samples count nothing
        common = ", ".join(f"{anim} ({n / total:.0%})" for anim, n in counter.most_common(top))
        print(f"# {fighter}: {len(counter)} distinct ids; most frequent: {common}")
    print(animations_table(counts))


if __name__ == "__main__":
    raise SystemExit(main())
