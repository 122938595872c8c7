"""The live status line while recording: episodes, HP bars, achieved rate, late and dropped
samples. Drawn with rich, refreshed a few times a second, never on the sampling path's clock."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text


class RecorderStatus:
    def __init__(self, target_hz: float, enabled: bool = True) -> None:
        self.target_hz = target_hz
        self.enabled = enabled
        self._live = Live(refresh_per_second=4, transient=False) if enabled else None

    def __enter__(self) -> RecorderStatus:
        if self._live:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self._live.__exit__(*exc)

    def update(
        self,
        state: Mapping[str, float],
        episodes: int,
        recording: bool,
        samples: int,
        achieved_hz: float,
        late: int,
        dropped: int,
        note: str = "",
    ) -> None:
        if not self._live:
            return
        table = Table.grid(padding=(0, 2))
        table.add_row(
            Text("REC" if recording else "idle", style="bold red" if recording else "dim"),
            f"episodes saved: {episodes}",
            f"samples: {samples}",
            Text(
                f"{achieved_hz:5.1f}/{self.target_hz:g} Hz",
                style="green" if achieved_hz >= 0.97 * self.target_hz else "yellow",
            ),
            Text(f"late {late}  dropped {dropped}", style="red" if dropped else ""),
        )
        hero = state["HeroHp"] / max(1, state["HeroMaxHp"])
        boss = state["NpcHp"] / max(1, state["NpcMaxHp"])
        bars = Table.grid(padding=(0, 1))
        bars.add_row("player", ProgressBar(total=1.0, completed=hero, width=30, complete_style="red"), f"{hero:4.0%}")
        bars.add_row(
            "boss  ", ProgressBar(total=1.0, completed=boss, width=30, complete_style="dark_red"), f"{boss:4.0%}"
        )
        self._live.update(Group(table, bars, Text(note, style="dim")))
