"""hdfs:// sources against a real single-node HDFS (a NameNode and a DataNode on
loopback, tests/harness/extservers.py).

Files are gzip JSON lines whose rows carry their file number `f` and line number
`r`, so provenance (`_source`, `_source_row`) is checked row by row; Parquet files
are written into HDFS by the engine itself.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import chute
from chute.cli import main
from chute.engine import open_engine
from chute.errors import SourceError
from chute.sources import SourceOptions, open_source
from chute.sources.hdfs import HdfsSource

from ..harness.data import kill_trials, table_checksum
from ..harness.extservers import HdfsServer, running
from ..harness.servers import server_query

ROWS = 200
KILL_FILES = 64
KILL_ROWS = 12000
CHECKSUM = (
    "SELECT count() AS n, sum(cityHash64(id, f, r, name, score, _source, _source_row, _source_mtime)) AS h FROM t"
)


def _rows(number: int, rows: int = ROWS) -> bytes:
    lines = (
        json.dumps({"id": number * rows + j, "f": number, "r": j + 1, "name": f"file {number} row {j}", "score": j / 8})
        for j in range(rows)
    )
    return gzip.compress(("\n".join(lines) + "\n").encode(), 1)


def _put(hdfs: HdfsServer, directory: str, numbers: range, rows: int = ROWS) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: hdfs.put(f"{directory}/part-{i:04d}.json.gz", _rows(i, rows)), numbers))


def _expected(numbers: range) -> tuple[int, int]:
    """(rows, sum of ids) of files `numbers`."""
    ids = [i * ROWS + j for i in numbers for j in range(ROWS)]
    return len(ids), sum(ids)


@pytest.fixture(scope="module")
def hdfs() -> Iterator[HdfsServer]:
    with running(HdfsServer) as server:
        _put(server, "/data", range(6))
        server.put("/data/_SUCCESS", b"")
        server.put("/data/notes.txt", b"not data")
        server.put("/data/.hidden/part-9999.json.gz", _rows(9999))
        server.put("/data/sub/part-0100.json.gz", _rows(100))
        server.mkdir("/empty")
        yield server


def _keys(hdfs: HdfsServer, pattern: str, **kwargs: object) -> list[str]:
    source = open_source([hdfs.url(pattern)], SourceOptions(**kwargs))  # type: ignore[arg-type]
    assert isinstance(source, HdfsSource)
    return sorted(u.key.removeprefix(hdfs.url("/")) for u in source.units())


def test_listing_patterns_and_units(hdfs: HdfsServer) -> None:
    top = [f"data/part-{i:04d}.json.gz" for i in range(6)]
    # A directory: walked, hidden and _-names skipped, only known extensions.
    assert _keys(hdfs, "/data") == [*top, "data/sub/part-0100.json.gz"]
    assert _keys(hdfs, "/data/") == [*top, "data/sub/part-0100.json.gz"]
    # Globs go to the engine: `*` stays in a directory, `**` crosses them.
    assert _keys(hdfs, "/data/*.json.gz") == top
    assert _keys(hdfs, "/data/**/part-01*.json.gz") == ["data/sub/part-0100.json.gz"]
    assert _keys(hdfs, "/data/part-000{1,3}.json.gz") == ["data/part-0001.json.gz", "data/part-0003.json.gz"]
    assert _keys(hdfs, "/data/part-0002.json.gz") == ["data/part-0002.json.gz"]
    # With --format, every visible file under a directory counts.
    assert "data/notes.txt" in _keys(hdfs, "/data", format="JSONEachRow")

    source = HdfsSource([hdfs.url("/data/part-0000.json.gz")])
    (unit,) = source.units()
    status = hdfs.status("/data/part-0000.json.gz")
    assert (unit.key, unit.size) == (hdfs.url("/data/part-0000.json.gz"), status["length"])
    assert unit.mtime_ns == status["modificationTime"] // 1000 * 10**9  # to the second
    assert (unit.fmt.format, unit.fmt.compression) == ("JSONEachRow", "gzip")
    assert source.table_expression(unit, "a Int64") == (f"hdfs('{unit.key}', 'JSONEachRow', 'a Int64', 'gzip')")
    assert source.unchanged(unit)
    assert source.row_number_expression(unit) == "_row_number + 1"
    assert not source.needs_serial_read(unit)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/nowhere/part.json.gz", "no such file or directory"),
        ("/nowhere/", "no file under this directory"),
        ("/data/*.csv", "no file matches"),
        ("/empty", "no file under this directory"),
    ],
)
def test_missing_paths_are_one_line(
    hdfs: HdfsServer, target: str, capsys: pytest.CaptureFixture[str], path: str, message: str
) -> None:
    url = hdfs.url(path)
    code = main(["load", url, "--table", "t", "--target", target])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"chute: error: {url}: {message}"), err


def test_full_load_rerun_delta_and_reload(hdfs: HdfsServer, target: str) -> None:
    _put(hdfs, "/grow", range(10))
    url = hdfs.url("/grow/")
    report = chute.load(url, "t", target)
    assert (report.files_loaded, report.rows_loaded, report.ok) == (10, 10 * ROWS, True)
    engine = open_engine(target)
    n, ids = _expected(range(10))
    assert engine.rows("SELECT count() AS n, sum(id) AS s FROM t") == [{"n": n, "s": ids}]
    # Provenance per row: the file and line each row came from, and the file's time.
    prefix = hdfs.url("/grow/part-")
    assert engine.rows(
        f"SELECT countIf(_source != concat('{prefix}', leftPad(toString(f), 4, '0'), '.json.gz')) AS bad_source, "
        "countIf(_source_row != r) AS bad_row, countIf(_source_mtime < now() - 3600) AS old FROM t"
    ) == [{"bad_source": 0, "bad_row": 0, "old": 0}]
    status = hdfs.status("/grow/part-0004.json.gz")
    assert engine.rows(
        f"SELECT DISTINCT toUnixTimestamp(_source_mtime) AS t FROM t WHERE _source = '{prefix}0004.json.gz'"
    ) == [{"t": status["modificationTime"] // 1000}]

    again = chute.load(url, "t", target)
    assert (again.files_loaded, again.files_skipped, again.rows_loaded) == (0, 10, 0)

    _put(hdfs, "/grow", range(10, 14))
    delta = chute.load(url, "t", target)
    assert (delta.files_loaded, delta.files_skipped, delta.rows_loaded) == (4, 10, 4 * ROWS)
    n, ids = _expected(range(14))
    assert engine.rows("SELECT count() AS n, sum(id) AS s, uniqExact(_source) AS u FROM t") == [
        {"n": n, "s": ids, "u": 14}
    ]

    # A rewritten file has a new size and time: skipped with a note, or reloaded as one copy.
    hdfs.put("/grow/part-0003.json.gz", _rows(3, rows=ROWS + 1))
    skipped = chute.load(url, "t", target)
    assert skipped.rows_loaded == 0
    assert any("part-0003.json.gz: changed since it was loaded" in note for note in skipped.notes)
    reloaded = chute.load(url, "t", target, chute.LoadOptions(on_change="reload"))
    assert (reloaded.files_loaded, reloaded.rows_loaded) == (1, ROWS + 1)
    assert engine.rows("SELECT count() AS n FROM t")[0]["n"] == n + 1
    assert engine.rows(f"SELECT count() AS n FROM t WHERE _source = '{prefix}0003.json.gz'") == [{"n": ROWS + 1}]


def test_parquet_files_in_nested_directories(hdfs: HdfsServer, target: str) -> None:
    engine = open_engine(target)
    for day in range(3):
        engine.execute(
            f"INSERT INTO FUNCTION hdfs('{hdfs.url(f'/pq/day={day}/part.parquet')}', 'Parquet') "
            f"SELECT number AS id, toDate('2024-01-01') + {day} AS d, repeat('x', number % 50) AS s "
            f"FROM numbers({day * 50_000}, 50_000)"
        )
    report = chute.load(hdfs.url("/pq/**/*.parquet"), "events", target)
    assert (report.files_loaded, report.rows_loaded) == (3, 150_000)
    assert engine.rows(
        "SELECT count() AS n, sum(id) AS s, uniqExact(_source) AS u, max(_source_row) AS m, "
        "countIf(_source_row != id % 50000 + 1) AS bad_row FROM events"
    ) == [{"n": 150_000, "s": sum(range(150_000)), "u": 3, "m": 50_000, "bad_row": 0}]
    assert sorted(r["s"] for r in engine.rows("SELECT DISTINCT _source AS s FROM events")) == [
        hdfs.url(f"/pq/day={day}/part.parquet") for day in range(3)
    ]
    again = chute.load(hdfs.url("/pq/**/*.parquet"), "events", target)
    assert (again.files_loaded, again.rows_loaded) == (0, 0)


def _command(url: str, db: Path) -> list[str]:
    return [sys.executable, "-m", "chute.cli", "load", url, "--table", "t", "--target", str(db), "--batch-mb", "1"]


def _checksum(db: Path) -> tuple[int, int]:
    return table_checksum(db, CHECKSUM)


@pytest.mark.slow
def test_sigkill_during_a_load_then_rerun(hdfs: HdfsServer, tmp_path: Path) -> None:
    t0 = time.monotonic()
    _put(hdfs, "/kill", range(KILL_FILES), rows=KILL_ROWS)
    put = time.monotonic() - t0
    url = hdfs.url("/kill/")
    clean = tmp_path / "clean"
    t0 = time.monotonic()
    subprocess.run([*_command(url, clean), "--quiet"], check=True)
    full = time.monotonic() - t0
    expected = _checksum(clean)
    assert expected[0] == KILL_FILES * KILL_ROWS
    # A run with nothing to load: start-up and listing; kills aim past it, into the load.
    t0 = time.monotonic()
    subprocess.run([*_command(url, clean), "--quiet"], check=True)
    idle = time.monotonic() - t0
    assert _checksum(clean) == expected

    kills, partial = kill_trials(lambda db: [*_command(url, db), "--quiet"], tmp_path, _checksum, expected, full, idle)
    print(f"put {put:.2f} s, clean load {full:.2f} s, idle run {idle:.2f} s; {kills} kills, {partial} partial")
    assert kills >= 3
    assert partial >= 2, "kills did not land inside loads"


def test_deleted_files_are_changed_and_an_emptied_directory_is_one_line(hdfs: HdfsServer) -> None:
    hdfs.put("/gone/part-0000.json.gz", _rows(0))
    hdfs.put("/gone/part-0001.json.gz", _rows(1))
    source = HdfsSource([hdfs.url("/gone/")])
    units = source.units()
    hdfs.delete("/gone/part-0001.json.gz")
    assert not source.unchanged(next(u for u in units if u.key.endswith("0001.json.gz")))
    hdfs.delete("/gone/part-0000.json.gz")
    with pytest.raises(SourceError, match="gone/: no file under this directory"):
        HdfsSource([hdfs.url("/gone/")]).units()


def test_load_into_a_server_target(hdfs: HdfsServer, server_url: str) -> None:
    """The embedded engine reads the files and sends Native to the server (18.16 here)."""
    _put(hdfs, "/to-server", range(5))
    url = hdfs.url("/to-server/*.json.gz")
    report = chute.load(url, "t", server_url)
    assert (report.files_loaded, report.rows_loaded, report.table_rows) == (5, 5 * ROWS, 5 * ROWS)
    prefix = hdfs.url("/to-server/part-")
    assert server_query(
        server_url,
        f"SELECT countIf(_source != concat('{prefix}000', toString(f), '.json.gz')), "
        "countIf(_source_row != r), uniqExact(_source) FROM t",
    ).split() == ["0", "0", "5"]
    again = chute.load(url, "t", server_url)
    assert (again.files_loaded, again.rows_loaded) == (0, 0)
