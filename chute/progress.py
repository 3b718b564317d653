"""A progress bar on a terminal (files, rows, MB/s, ETA); silent otherwise."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any


class Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._task: Any = None
        self._files = 0
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
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as RichProgress

        self._files = files
        self._bar = RichProgress(
            TextColumn("[bold]loading"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TextColumn("{task.fields[files]} files, {task.fields[rows]} rows"),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
            transient=True,
        )
        self._task = self._bar.add_task("load", total=total_bytes, files=f"0/{files}", rows="0")
        self._bar.start()

    def update(self, files_done: int, rows: int, bytes_done: int) -> None:
        if self._bar is None:
            return
        self._bar.update(self._task, completed=bytes_done, files=f"{files_done}/{self._files}", rows=f"{rows:,}")
