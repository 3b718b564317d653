"""A progress bar on a terminal (bytes, files, rows, rate, ETA); silent otherwise.

Sizes and rates are binary (KiB, MiB, GiB), as the final report prints them. The bar
moves with the bytes and rows the engine has read, about ten times a second (a batch
of files is one statement; the engine tells its progress while it runs); files count
when their batch is done. The rate and the time left are measured from the start of
the load. The line fits 80 columns.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any


class Progress:
    def __init__(self, enabled: bool, console: Any = None, label: str = "", unit: str = "files") -> None:
        self.enabled = enabled
        self.label = label
        """A word before the bar ("copying"); none for a load, whose line must fit 80 columns."""
        self.unit = unit
        """What the bar counts: files (a load), partitions (a copy)."""
        self._console = console
        """A rich Console to draw on (default: one on stderr)."""
        self._bar: Any = None
        self._task: Any = None
        self._files = 0
        self._total = 0
        self._started = time.monotonic()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def start(self, files: int, total_bytes: int) -> None:
        if not self.enabled or files == 0:
            return
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, TextColumn
        from rich.progress import Progress as RichProgress
        from rich.table import Column

        self._files, self._total = files, total_bytes
        self._started = time.monotonic()

        def text(template: str) -> TextColumn:
            return TextColumn(template, table_column=Column(no_wrap=True))

        self._bar = RichProgress(
            *([TextColumn(f"[bold]{self.label}")] if self.label else []),
            BarColumn(bar_width=12),
            DownloadColumn(binary_units=True, table_column=Column(no_wrap=True)),
            text("{task.fields[rate]}"),
            text("{task.fields[files]} " + self.unit + ", {task.fields[rows]} rows"),
            text("{task.fields[eta]}"),
            console=self._console or Console(file=sys.stderr),
            transient=True,
        )
        self._task = self._bar.add_task("load", total=total_bytes, files=f"0/{files}", rows="0", rate="", eta="")
        self._bar.start()

    @property
    def started(self) -> bool:
        return self._bar is not None

    def update(self, files_done: int, rows: int, bytes_done: int) -> None:
        if self._bar is None:
            return
        self._bar.update(
            self._task,
            completed=bytes_done,
            files=f"{files_done}/{self._files}",
            rows=f"{rows:,}",
            **self._pace(bytes_done),
        )

    def _pace(self, bytes_done: int) -> dict[str, str]:
        """The rate since the start, and the time left at that rate."""
        seconds = time.monotonic() - self._started
        if bytes_done <= 0 or seconds <= 0:
            return {"rate": "", "eta": ""}
        rate = bytes_done / seconds
        left = max(0, self._total - bytes_done) / rate
        minutes, secs = divmod(round(left), 60)
        # MiB/s whatever the rate, as the final report's speed line says it.
        return {"rate": f"{rate / 2**20:.1f} MiB/s", "eta": f"{minutes // 60}:{minutes % 60:02d}:{secs:02d} left"}

    def render(self) -> Any:
        """What the bar shows now (for tests and other renderers); None before start."""
        return None if self._bar is None else self._bar.get_renderable()
