"""Shared fixtures: every test gets its own embedded database directory.

chDB holds one database directory per process, so each fixture points chute
at a fresh directory; opening it closes the previous one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chute.engine import open_engine


@pytest.fixture()
def target(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "db")
    yield path


@pytest.fixture()
def engine(target: str):  # type: ignore[no-untyped-def]
    return open_engine(target)


def write_with_engine(engine, path: Path, fmt: str, select: str, compression: str | None = None) -> Path:  # type: ignore[no-untyped-def]
    """Write a data file with the engine itself (so every format is real)."""
    from chute.sql import quote_str

    comp = f", {quote_str(compression)}" if compression else ""
    if path.exists():
        path.unlink()
    engine.execute(f"INSERT INTO FUNCTION file({quote_str(str(path))}, {quote_str(fmt)}, 'auto'{comp}) {select}")
    return path


def set_mtime(path: Path, seconds: int) -> None:
    os.utime(path, (seconds, seconds))
