"""Test data and checks shared by the tiers: files written by the engine itself,
table checksums, kill-and-rerun trials, and the unsorted-events data set."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from chute.engine import open_engine
from chute.sql import quote_str


def write_with_engine(engine, path: Path, fmt: str, select: str, compression: str | None = None) -> Path:  # type: ignore[no-untyped-def]
    """Write a data file with the engine itself (so every format is real)."""
    comp = f", {quote_str(compression)}" if compression else ""
    if path.exists():
        path.unlink()
    engine.execute(f"INSERT INTO FUNCTION file({quote_str(str(path))}, {quote_str(fmt)}, 'auto'{comp}) {select}")
    return path


def table_checksum(db: Path, checksum_sql: str, table: str = "t") -> tuple[int, int]:
    """(rows, hash) from `checksum_sql` (columns n and h) in a database directory; (0, 0)
    when the table is not there yet. Opens and closes the directory's engine."""
    engine = open_engine(str(db))
    try:
        if not engine.rows(f"SELECT count() AS n FROM system.tables WHERE name = '{table}'")[0]["n"]:
            return 0, 0
        row = engine.rows(checksum_sql)[0]
        return int(row["n"]), int(row["h"] or 0)
    finally:
        engine.close()


def kill_trials(
    command: Callable[[Path], list[str]],
    work: Path,
    checksum: Callable[[Path], tuple[int, int]],
    expected: tuple[int, int],
    full: float,
    idle: float,
    env: Mapping[str, str] | None = None,
) -> tuple[int, int]:
    """SIGKILL `command(db)` at random moments inside a load (past `idle`, the start-up of
    a run with nothing to do, within `full`, a clean load), re-run it, and check the table
    equals the clean one; until three kills landed and two left a partial table (at most
    twelve trials). The window narrows as trials land: a kill that left nothing aims later
    next time, a run that finished first aims earlier (under a full parallel test run the
    clean load's times are only a first guess). Returns (kills, partial tables)."""
    rng = random.Random(8)
    kills = partial = 0
    early, late = idle, max(full, idle + 0.1)
    for trial in range(12):
        if kills >= 3 and partial >= 2:
            break
        db = work / f"trial{trial}"
        proc = subprocess.Popen(command(db), env=env)
        delay = early + rng.uniform(0.05, 0.9) * max(late - early, 0.1)
        time.sleep(delay)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        rows = checksum(db)[0]
        partial += 0 < rows < expected[0]
        if killed and rows == 0:
            early = delay  # killed before its first commit: aim later
        elif not killed:
            late = delay  # it had finished: aim earlier
        subprocess.run(command(db), check=True, env=env)
        assert checksum(db) == expected, f"trial {trial} differs from the clean load"
    return kills, partial


def set_mtime(path: Path, seconds: int) -> None:
    os.utime(path, (seconds, seconds))


UNSORTED = (
    "SELECT number + 1 AS id, toDateTime('2025-01-01 00:00:00', 'UTC') + (cityHash64(number) % (400 * 86400)) AS ts, "
    "concat('user', toString(number % 1000)) AS who, number % 97 AS n FROM numbers({rows})"
)
CHECK = "SELECT count() AS rows, sum(cityHash64(id, ts, who, n, _source, _source_row)) AS h FROM {table}"


def unsorted_files(  # type: ignore[no-untyped-def]
    engine, data: Path, count: int, rows: int, fmt: str, name: str, compression: str | None = None
) -> None:
    """`count` files of `rows` unsorted events each, ids going on from file to file."""
    data.mkdir()
    for i in range(count):
        select = UNSORTED.format(rows=rows).replace(f"numbers({rows})", f"numbers({i * rows}, {rows})")
        write_with_engine(engine, data / name.format(i=i), fmt, select, compression)


def table_parts(engine, table: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(active parts, partitions) of a table in the current database."""
    got = engine.rows(
        "SELECT count() AS parts, uniqExact(partition) AS partitions FROM system.parts "
        f"WHERE database = currentDatabase() AND table = '{table}' AND active"
    )[0]
    return int(got["parts"]), int(got["partitions"])


def halves_for_every_file(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """Let any file into a partitioned table load as two halves (chute.load.halves), and list
    the keys of the files that did (not failed over to the sorting way)."""
    import importlib

    load_halves = importlib.import_module("chute.load.halves")
    monkeypatch.setattr(load_halves, "HALVES_MIN_BYTES", 1)
    write_halves = load_halves.Halves.write
    halves: list[str] = []

    def spy(self, unit, *args, **kwargs):  # type: ignore[no-untyped-def]
        written = write_halves(self, unit, *args, **kwargs)
        halves.append(unit.key)
        return written

    monkeypatch.setattr(load_halves.Halves, "write", spy)
    return halves
