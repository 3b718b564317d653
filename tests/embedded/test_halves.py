"""One big file into a partitioned table as two halves at once, and the empty table swapped.

The halves path starts at 64 MiB; the tests lower that bar to their small files.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.load import commit as load_commit
from chute.load import halves as load_halves
from chute.load import reads as load_reads
from chute.sources.ranges import halve
from chute.targets.staging import _table_settings

from ..harness.data import CHECK, UNSORTED, table_parts, unsorted_files, write_with_engine

ROWS = 60_000
DAY = chute.LoadOptions(partition_by="toYYYYMMDD(ts)", workers=2)


@pytest.fixture()
def halves_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Lower the size bar; record each file loaded as halves."""
    monkeypatch.setattr(load_halves, "HALVES_MIN_BYTES", 1)
    seen: list[str] = []
    original = load_halves.Halves.write

    def spy(self, unit, cut, newlines, by_source):  # type: ignore[no-untyped-def]
        seen.append(unit.key)
        return original(self, unit, cut, newlines, by_source)

    monkeypatch.setattr(load_halves.Halves, "write", spy)
    checked = load_commit.Commit.fix_row_numbers

    def row_check(self, stage, unit):  # type: ignore[no-untyped-def]
        seen.append("row check")
        return checked(self, stage, unit)

    monkeypatch.setattr(load_commit.Commit, "fix_row_numbers", row_check)
    return seen


EVENT_COLUMNS = (
    "(id UInt64, ts DateTime('UTC'), who String, n UInt8, _source String, _source_mtime DateTime64(3, 'UTC'), "
    "_source_row UInt64, _load_id String)"
)


def _events_table(engine, table: str, partition: str, rest: str = "ORDER BY tuple()") -> None:  # type: ignore[no-untyped-def]
    """A table of the test events with provenance columns, made before chute loads into it."""
    engine.execute(f"CREATE TABLE {table} {EVENT_COLUMNS} ENGINE = MergeTree PARTITION BY {partition} {rest}")


def _uuid(engine, table: str) -> str:  # type: ignore[no-untyped-def]
    """Where the table keeps its data: a swap gives the name the stage's table and directory."""
    return str(engine.rows(f"SELECT toString(data_paths) AS u FROM system.tables WHERE name = '{table}'")[0]["u"])


@pytest.mark.parametrize("workers", [2, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    "ext,fmt",
    [
        ("csv", "CSVWithNames"),
        pytest.param("csv", "CSV", marks=pytest.mark.slow),
        pytest.param("tsv", "TSVWithNames", marks=pytest.mark.slow),
        ("json", "JSONEachRow"),
    ],
)
def test_halves_load_the_rows_of_the_sorting_way(
    tmp_path: Path,
    target: str,
    halves_on: list[str],
    monkeypatch: pytest.MonkeyPatch,
    ext: str,
    fmt: str,
    workers: int,
) -> None:
    """Two workers: a thread per half. Four: each half parsed in parallel by two, numbered by
    `_row_number` (a headed first half mended as a whole file would be), every number checked."""
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / f"events.{ext}", fmt, UNSORTED.format(rows=ROWS))
    if fmt == "CSV":  # no header: the table names the columns
        for table in ("halves", "sorted"):
            _events_table(engine, table, "toYYYYMMDD(ts)", "ORDER BY id")
    if workers > 2:  # parallel parsing cuts a half into segments; small ones make several here
        monkeypatch.setattr(load_reads, "PARSE_SEGMENT_BYTES", 2**18)
    days = dataclasses.replace(DAY, workers=workers)
    report = chute.load([str(path)], "halves", target=target, options=days)
    assert report.ok and report.rows_loaded == ROWS
    # Two workers: CSV and TSV rows as many as their newlines, no row-by-row check; JSON lines get one.
    assert halves_on == [str(path)] + (["row check"] if fmt == "JSONEachRow" or workers > 2 else [])
    # Two parts per day at most: each half wrote one part per day, all right away.
    parts, partitions = table_parts(engine, "halves")
    assert partitions >= 365 and partitions < parts <= 2 * partitions

    monkeypatch.setattr(load_halves, "HALVES_MIN_BYTES", 2**62)
    halves_on.clear()
    assert chute.load([str(path)], "sorted", target=target, options=DAY).ok
    assert str(path) not in halves_on
    assert engine.rows(CHECK.format(table="halves")) == engine.rows(CHECK.format(table="sorted"))
    # The second half's numbers follow the first half's rows: the generator's id is the row number.
    assert engine.rows("SELECT countIf(_source_row != id) AS bad FROM halves")[0]["bad"] in (0, "0")

    # Loaded once: a second run skips the file.
    again = chute.load([str(path)], "halves", target=target, options=days)
    assert again.ok and again.rows_loaded == 0
    assert int(engine.rows("SELECT count() AS n FROM halves")[0]["n"]) == ROWS


def _quoted_newlines_csv(path: Path, rows: int, newline_rows: set[int]) -> Path:
    """CSV with a header; rows in `newline_rows` hold a newline inside a quoted value."""
    lines = ["id,ts,who,n"]
    for i in range(1, rows + 1):
        who = f'"line one\nline two {i}"' if i in newline_rows else f'"user {i}, ""quoted"""'
        month = 1 + (i * 7919) % 12
        lines.append(f"{i},2025-{month:02d}-01 00:00:00,{who},{i % 97}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("workers", [2, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.parametrize("where", ["first half", "second half", "at the middle"])
def test_quoted_newlines_keep_row_numbers(
    tmp_path: Path, target: str, halves_on: list[str], monkeypatch: pytest.MonkeyPatch, where: str, workers: int
) -> None:
    """A newline inside a value: the cut stays outside quotes, and a first half with
    one numbers its rows by what was read, or loads the sorting way. One in the
    second half changes no number, so with a thread per half nothing is checked
    row by row (halves parsed in parallel are always checked)."""
    if workers > 2:
        monkeypatch.setattr(load_reads, "PARSE_SEGMENT_BYTES", 2**16)
    rows = 20_000
    marks = {"first half": {10, 5000}, "second half": {15_000, 19_999}, "at the middle": set(range(9_990, 10_010))}
    path = _quoted_newlines_csv(tmp_path / "q.csv", rows, marks[where])
    size = os.path.getsize(path)
    cut, _ = halve(str(path), "CSV", size) or (0, 0)
    data = path.read_bytes()
    assert data[cut - 1 : cut] == b"\n" and data[:cut].count(b'"') % 2 == 0
    engine = open_engine(target)
    _events_table(engine, "t", "toYYYYMM(ts)")
    report = chute.load([str(path)], "t", target=target, options=chute.LoadOptions(workers=workers))
    assert report.ok and report.rows_loaded == rows
    # Fewer rows than newlines in the first half: the numbers are checked one by one.
    first_half_rows = data[:cut].count(b"\n") - 1
    in_first_half = any(i <= first_half_rows for i in marks[where])
    if in_first_half or workers > 2:
        assert halves_on[:2] == [str(path), "row check"]
    else:
        assert halves_on == [str(path)]
    got = engine.rows(
        "SELECT count() AS c, uniqExact(id) AS u, countIf(_source_row != id) AS bad, "
        "countIf(position(who, '\n') > 0) AS multi FROM t"
    )[0]
    assert (int(got["c"]), int(got["u"]), int(got["bad"]), int(got["multi"])) == (rows, rows, 0, len(marks[where]))


@pytest.mark.slow
def test_swap_keeps_the_table_definition(tmp_path: Path, target: str, halves_on: list[str]) -> None:
    """An empty table takes the stage's place; its settings (the part-writer ones the
    stage changed, too) and comment stay as they were. A table with rows gets ATTACH.
    The small parts come packed (one file each) in the basic format (no sparse
    columns, one stream per String); merges write the table's own."""
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / "e.csv", "CSVWithNames", UNSORTED.format(rows=ROWS))
    _events_table(
        engine,
        "t",
        "toYYYYMMDD(ts)",
        "ORDER BY (who, id) SETTINGS index_granularity = 4096, min_compress_block_size = 4096, "
        "min_bytes_for_full_part_storage = 0, string_serialization_version = 'with_size_stream', "
        "ratio_of_defaults_for_sparse_serialization = 0.005 COMMENT 'events: compress_marks = 0'",
    )

    def ddl() -> str:
        query = str(engine.rows("SELECT create_table_query AS q FROM system.tables WHERE name = 't'")[0]["q"])
        return query.split(" ", 3)[3]

    before, uuid = ddl(), _uuid(engine, "t")
    # A small budget: the stage writes smaller compressed blocks (a table setting) than the table.
    small = chute.LoadOptions(workers=2, memory_limit=400 * 2**20)
    report = chute.load([str(path)], "t", target=target, options=small)
    assert report.ok and report.rows_loaded == ROWS and halves_on == [str(path)]
    assert _uuid(engine, "t") != uuid  # swapped, not attached
    assert ddl() == before
    assert not engine.rows("SELECT name FROM system.tables WHERE name LIKE '\\_chute\\_stage%'")

    # Rows there already: the parts move in by ATTACH; the table stays itself.
    second = write_with_engine(
        engine, tmp_path / "f.csv", "CSVWithNames", UNSORTED.format(rows=ROWS).replace("number + 1", "number + 1000001")
    )
    uuid = _uuid(engine, "t")
    report = chute.load([str(second)], "t", target=target, options=small)
    assert report.ok and report.rows_loaded == ROWS and halves_on == [str(path), str(second)]
    assert _uuid(engine, "t") == uuid and ddl() == before
    got = engine.rows("SELECT count() AS c, uniqExact(id) AS u, countIf(_source_row != id % 1000000) AS bad FROM t")[0]
    assert (int(got["c"]), int(got["u"]), int(got["bad"])) == (2 * ROWS, 2 * ROWS, 0)
    assert _storage(engine, "t") == {"Packed"}
    assert _sparse_columns(engine, "t") == 0
    rows = engine.rows(CHECK.format(table="t"))
    engine.execute("OPTIMIZE TABLE t FINAL")
    assert _storage(engine, "t") == {"Full"}
    # A merge takes its sparse columns from its parts' kinds: the next one writes them.
    # (`n` is 1% zeros: sparse at the table's ratio, 0.5%.)
    assert _sparse_columns(engine, "t") == 0
    engine.execute("OPTIMIZE TABLE t FINAL")
    assert _sparse_columns(engine, "t") > 0
    assert engine.rows(CHECK.format(table="t")) == rows


def test_table_settings_are_read_from_the_settings_clause_only() -> None:
    """The values put back on a stage before a swap: quoted text (a comment, a column
    name) that reads like a setting is not one."""
    ddl = (
        "CREATE TABLE t (`a SETTINGS x = 1` UInt8) ENGINE = MergeTree ORDER BY tuple() SETTINGS "
        "index_granularity = 4096, string_serialization_version = 'with_size_stream', "
        "ratio_of_defaults_for_sparse_serialization = 0.5 COMMENT 'SETTINGS compress_marks = 0, \\' b = 2'"
    )
    assert _table_settings(ddl) == {
        "index_granularity": "4096",
        "string_serialization_version": "'with_size_stream'",
        "ratio_of_defaults_for_sparse_serialization": "0.5",
    }
    assert _table_settings("CREATE TABLE t (a UInt8) ENGINE = MergeTree ORDER BY a COMMENT 'x = 1'") == {}


def _sparse_columns(engine, table: str) -> int:  # type: ignore[no-untyped-def]
    """Columns stored sparse in the table's active parts."""
    return int(
        engine.rows(
            f"SELECT count() AS n FROM system.parts_columns WHERE table = '{table}' AND active "
            "AND serialization_kind = 'Sparse'"
        )[0]["n"]
    )


def _storage(engine, table: str) -> set[str]:  # type: ignore[no-untyped-def]
    """How the table's active parts keep their files: Packed (one file) or Full."""
    return {
        str(r["s"])
        for r in engine.rows(
            f"SELECT DISTINCT part_storage_type AS s FROM system.parts WHERE table = '{table}' AND active"
        )
    }


def test_no_swap_under_a_view(tmp_path: Path, target: str, halves_on: list[str]) -> None:
    """A materialized view reads from the table: it stays the same table (ATTACH)."""
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / "e.json", "JSONEachRow", UNSORTED.format(rows=ROWS))
    _events_table(engine, "t", "toYYYYMMDD(ts)")
    engine.execute("CREATE MATERIALIZED VIEW per_who ENGINE = SummingMergeTree ORDER BY who AS SELECT who, n FROM t")
    uuid = _uuid(engine, "t")
    report = chute.load([str(path)], "t", target=target, options=chute.LoadOptions(workers=2))
    assert report.ok and report.rows_loaded == ROWS and halves_on == [str(path), "row check"]
    assert _uuid(engine, "t") == uuid
    assert int(engine.rows("SELECT count() AS n FROM t")[0]["n"]) == ROWS


def test_big_files_beyond_the_budget_load_the_sorting_way(tmp_path: Path, target: str, halves_on: list[str]) -> None:
    """Two halves hold their rows in memory: a file too big for the budget is sorted (and spills)."""
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / "e.csv", "CSVWithNames", UNSORTED.format(rows=ROWS))
    budget = int(os.path.getsize(path) * load_halves.HALVES_MEMORY_PER_BYTE) - 1
    options = chute.LoadOptions(partition_by="toYYYYMMDD(ts)", workers=2, memory_limit=budget)
    report = chute.load([str(path)], "t", target=target, options=options)
    assert report.ok and report.rows_loaded == ROWS and str(path) not in halves_on
    assert _storage(engine, "t") == {"Packed"}  # a part per partition there too


@pytest.mark.slow
def test_sigkill_during_halves_then_rerun(tmp_path: Path) -> None:
    """Killed at any point (inserting, checking, swapping), a re-run gives the clean run's table."""
    engine = open_engine(str(tmp_path / "gen"))
    path = write_with_engine(engine, tmp_path / "e.csv", "CSVWithNames", UNSORTED.format(rows=400_000))
    engine.close()
    check = "SELECT count() AS c, sum(cityHash64(id, ts, who, n, _source, _source_row)) AS h FROM t"

    def command(db: Path) -> list[str]:
        code = (
            "import sys; from chute.load import halves; halves.HALVES_MIN_BYTES = 1; from chute.cli import main; "
            "sys.exit(main(sys.argv[1:]))"
        )
        load = ["load", str(path), "--table", "t", "--target", str(db), "--partition-by", "toYYYYMMDD(ts)"]
        return [sys.executable, "-c", code, *load, "--workers", "2", "--quiet"]

    def checksum(db: Path) -> str:
        code = f"import sys; from chute.engine import open_engine; print(open_engine(sys.argv[1]).rows({check!r}))"
        return subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True).stdout

    clean = tmp_path / "clean"
    t0 = time.monotonic()
    subprocess.run(command(clean), check=True)
    seconds = time.monotonic() - t0
    expected = checksum(clean)
    assert "400000" in expected
    engine = open_engine(str(clean))
    parts, partitions = table_parts(engine, "t")
    engine.close()
    assert partitions < parts <= 2 * partitions  # loaded as halves
    rng = random.Random(7)
    for trial in range(3):
        db = tmp_path / f"trial{trial}"
        proc = subprocess.Popen(command(db))
        time.sleep(rng.uniform(0.4, 1.0) * seconds)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        subprocess.run(command(db), check=True)
        assert checksum(db) == expected, trial


def test_files_loaded_one_by_one_after_a_failed_batch_never_swap(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed batch loads again without the file the engine named, which loads alone
    later: at most the first commit swaps the empty table, and every good row lands once."""
    from chute.targets.staging import Stage

    swaps: list[bool] = []
    original = Stage._swapped

    def spy(self):  # type: ignore[no-untyped-def]
        swapped = original(self)
        swaps.append(swapped)
        return swapped

    monkeypatch.setattr(Stage, "_swapped", spy)
    engine = open_engine(target)
    data = tmp_path / "data"
    unsorted_files(engine, data, 4, 1000, "CSVWithNames", "good{i}.csv")
    (data / "bad.csv").write_text("id,ts,who,n\n1,2025-01-01 00:00:00,x,1\nnot a number,2025-01-01 00:00:00,y,2\n")
    _events_table(engine, "t", "toYYYYMM(ts)")
    report = chute.load([str(data)], "t", target=target)
    assert report.rows_loaded == 4001 and report.rows_rejected == 1
    assert int(engine.rows("SELECT count() AS n FROM t")[0]["n"]) == 4001
    assert swaps and not any(swaps[1:])  # the whole batch may swap; the files alone never


@pytest.mark.parametrize("case", ["json objects over several lines", "a bad row"])
def test_halves_that_fail_load_the_usual_way(tmp_path: Path, target: str, halves_on: list[str], case: str) -> None:
    """A cut inside a value (JSON objects over several lines) or a bad row fails the halves:
    the file loads the usual way, which reads it whole and keeps bad rows as rejects."""
    engine = open_engine(target)
    rows = 4000
    _events_table(engine, "t", "toYYYYMM(ts)")
    if case == "a bad row":
        path = write_with_engine(engine, tmp_path / "e.csv", "CSVWithNames", UNSORTED.format(rows=rows))
        text = path.read_text().splitlines(keepends=True)
        text[3000] = "oops," + text[3000].split(",", 1)[1]  # row 2999: an id that is not a number
        path.write_text("".join(text))
        expected, rejected = rows - 1, 1
    else:
        path = tmp_path / "e.json"
        records = [
            f'{{\n  "id": {i},\n  "ts": "2025-{1 + i % 12:02d}-01 00:00:00",\n  "who": "w{i}",\n  "n": {i % 97}\n}}\n'
            for i in range(1, rows + 1)
        ]
        path.write_text("".join(records))
        expected, rejected = rows, 0
    report = chute.load([str(path)], "t", target=target, options=chute.LoadOptions(workers=2))
    assert halves_on[0] == str(path)
    assert (report.rows_loaded, report.rows_rejected) == (expected, rejected)
    got = engine.rows("SELECT count() AS c, uniqExact(id) AS u FROM t")[0]
    assert (int(got["c"]), int(got["u"])) == (expected, expected)
    if case != "a bad row":
        parts, partitions = table_parts(engine, "t")
        assert parts == partitions  # written the sorting way, not as two halves
