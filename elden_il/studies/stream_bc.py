"""What the stream's JPEG does to a policy trained on exact frames.

``StreamFrames`` delivers JPEG (quality 85 unless asked otherwise), while every recording keeps
its picture as captured and every dataset's frames are made from it. This plays a saved policy
(by default the pipeline's behaviour cloning) over the same held-out fights twice or more, side
by side in one run: once on its env's picture as captured, and once per JPEG quality on that
picture encoded as the simulator server's stream does and decoded as the client does, then cropped and
resized as usual. Fights are decided by their seeds, so the rows differ only by the frames.

    .venv/bin/python -m elden_il.studies.stream_bc --policy datasets/models/bc --fights 100
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cv2

from env.common.cli import JsonOut, flag, parse_settings, ruled, run_command
from env.common.fields import whole
from env.common.machine import describe
from env.elden_env import EldenRingEnv
from env.factory import make_game
from env.game import Frame, Game, GameState
from env.siphon.stream import jpeg_to_rgb

from elden_il.evaluation.fight_loop import HeldOutFights, run_fights, summarize


class JpegFrames:
    """A game whose every frame went through the stream's JPEG and back; the rest is the game's."""

    def __init__(self, game: Game, quality: int) -> None:
        self._game = game
        self._params = [cv2.IMWRITE_JPEG_QUALITY, quality]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._game, name)

    def capture_frame(self) -> Frame:
        return self._jpeg(self._game.capture_frame())

    def observe(self, names=None) -> tuple[GameState, Frame]:
        state, frame = self._game.observe(names)
        return state, self._jpeg(frame)

    def _jpeg(self, frame: Frame) -> Frame:
        encoded = cv2.imencode(".jpg", cv2.cvtColor(frame.rgb, cv2.COLOR_RGB2BGR), self._params)[1]
        return replace(frame, rgb=jpeg_to_rgb(encoded.tobytes(), "the benchmark"))  # as the client decodes


@dataclass(frozen=True)
class StreamArgs:
    """Which policy ``python -m elden_il.studies.stream_bc`` plays, on which JPEG qualities: each field
    its flag (the fights are ``HeldOutFights``)."""

    policy: Path = field(default=Path("datasets/models/bc"), metadata=flag("a saved policy's folder", type=Path))
    quality: tuple[int, ...] = field(
        default=(85, 50), metadata=flag("JPEG qualities to try", type=ruled(int, whole(1, 100)), nargs="+")
    )


def main(argv: list[str] | None = None) -> int:
    args, held, out = parse_settings(
        "python -m elden_il.studies.stream_bc", __doc__, StreamArgs, HeldOutFights, JsonOut, argv=argv
    )
    return run_command(lambda: compare_streams(args, held, out))


def compare_streams(args: StreamArgs, held: HeldOutFights, out: JsonOut) -> None:
    from elden_il.evaluation.evaluate import PolicyActor  # torch: after the arguments are read

    actor = PolicyActor(args.policy, deterministic=True)
    config = actor.loaded.config
    seeds = list(range(held.first_seed, held.first_seed + held.fights))
    results: dict[str, Any] = {
        "machine": describe(),
        "policy": str(args.policy),
        "picture": config.picture_size,
        "frame": config.frame_size,
        "rows": {},
    }
    for quality in [None, *args.quality]:

        def make_env(quality: int | None = quality) -> EldenRingEnv:
            game = make_game(config)
            return EldenRingEnv(game if quality is None else JpegFrames(game, quality), config)

        started = time.perf_counter()
        records, _ = run_fights(make_env, actor, seeds)
        name = "as captured" if quality is None else f"JPEG quality {quality}"
        results["rows"][name] = summarize(records, time.perf_counter() - started)
    print(f"Machine: {results['machine']}\n")
    print(
        f"Policy {args.policy}, {held.fights} held-out fights from seed {held.first_seed}, picture "
        f"{config.picture_size[0]}x{config.picture_size[1]} -> frame {config.frame_size[0]}x{config.frame_size[1]}\n"
    )
    print("| frames | win rate | 95 % interval | boss damage dealt | damage taken | episode length |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in results["rows"].items():
        low, high = row["win_rate_ci95"]
        print(
            f"| {name} | {row['win_rate']:.0%} | {low:.0%}-{high:.0%} | {row['boss_damage_dealt']:.0%} | "
            f"{row['player_damage_taken']:.0%} | {row['episode_length']:.0f} |"
        )
    if out.json:
        with open(out.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    raise SystemExit(main())
