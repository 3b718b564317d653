"""Unsorted rows into partitioned tables, and CSV row numbers under parallel parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.errors import TargetError

from ..harness.data import CHECK, UNSORTED, table_parts, unsorted_files, write_with_engine


# Events out of time order over 400 days: a block of them spans every day.
@pytest.mark.parametrize("ext,fmt", [("csv", "CSVWithNames"), ("json", "JSONEachRow"), ("parquet", "Parquet")])
def test_unsorted_rows_into_a_day_partitioned_table(tmp_path: Path, target: str, ext: str, fmt: str) -> None:
    engine = open_engine(target)
    rows = 120_000
    path = write_with_engine(engine, tmp_path / f"events.{ext}", fmt, UNSORTED.format(rows=rows))

    # The engine alone refuses: one block would make a part in each of ~400 partitions.
    engine.execute(
        "CREATE TABLE plain_day (id UInt64, ts DateTime('UTC'), who String, n UInt8) "
        "ENGINE = MergeTree PARTITION BY toYYYYMMDD(ts) ORDER BY tuple()"
    )
    with pytest.raises(TargetError, match=r"TOO_MANY_PARTS") as refused:
        engine.execute(f"INSERT INTO plain_day SELECT * FROM file('{path}', '{fmt}')")
    assert refused.value.terminal  # a retry would not help

    day = chute.load([str(path)], "by_day", target=target, options=chute.LoadOptions(partition_by="toYYYYMMDD(ts)"))
    assert day.ok and day.rows_loaded == rows
    parts, partitions = table_parts(engine, "by_day")
    assert partitions >= 365 and parts <= 2 * partitions
    flat = chute.load([str(path)], "flat", target=target)
    assert flat.ok
    assert engine.rows(CHECK.format(table="by_day")) == engine.rows(CHECK.format(table="flat"))
    # Row numbers follow the file: the generator's id is the line number.
    assert engine.rows("SELECT countIf(_source_row != id) AS bad FROM by_day")[0]["bad"] in (0, "0")


def test_partition_aware_load_into_an_existing_table_keeps_every_row(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    data = tmp_path / "data"
    unsorted_files(engine, data, 3, 20_000, "JSONEachRow", "part{i}.json.gz", "gzip")
    engine.execute(
        "CREATE TABLE t (id UInt64, ts DateTime('UTC'), who LowCardinality(String), n UInt8, "
        "_source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, "
        "_load_id LowCardinality(String)) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (who, ts)"
    )
    report = chute.load([str(data)], "t", target=target)
    assert report.ok and report.rows_loaded == 60_000
    parts, partitions = table_parts(engine, "t")
    assert parts <= 2 * partitions
    got = engine.rows("SELECT count() AS n, uniqExact(id) AS u, max(_source_row) AS m FROM t")[0]
    assert (int(got["n"]), int(got["u"]), int(got["m"])) == (60_000, 60_000, 20_000)


@pytest.mark.parametrize("width", [10, 3000], ids=["narrow", "wide"])
def test_csv_row_numbers_under_parallel_parsing(tmp_path: Path, target: str, width: int) -> None:
    """Rows after the first block used to be numbered one too high; wide rows
    make the first parsed segment smaller than a block (the other shape)."""
    engine = open_engine(target)
    rows = 40_000
    path = write_with_engine(
        engine,
        tmp_path / "wide.csv",
        "CSVWithNames",
        f"SELECT number + 1 AS id, repeat('x', {width} + number % 7) AS pad FROM numbers({rows})",
    )
    for table, options in (
        ("flat", chute.LoadOptions()),
        ("parted", chute.LoadOptions(partition_by="id % 3")),
    ):
        report = chute.load([str(path)], table, target=target, options=options)
        assert report.ok and report.rows_loaded == rows
        got = engine.rows(f"SELECT count() AS n, countIf(_source_row != id) AS bad FROM {table}")[0]
        assert (int(got["n"]), int(got["bad"])) == (rows, 0), table


def test_wrong_guess_of_the_first_block_is_caught_and_read_again(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the first block is not where chute expects it, the stage check catches
    the bad numbers and the file is read again by one thread: right numbers."""
    from chute.load import commit as load_commit
    from chute.load import reads as load_reads

    monkeypatch.setattr(load_reads, "PARSE_SEGMENT_BYTES", 10**12)  # guesses 8192-row blocks
    engine = open_engine(target)
    path = write_with_engine(
        engine,
        tmp_path / "wide.csv",
        "CSVWithNames",
        "SELECT number + 1 AS id, repeat('x', 3000 + number % 7) AS pad FROM numbers(40000)",
    )
    seen: list[str] = []
    original = load_commit.Commit.fix_row_numbers

    def spy(self, stage, unit):  # type: ignore[no-untyped-def]
        try:
            original(self, stage, unit)
        except load_commit.RowNumbersOff:
            seen.append(unit.key)
            raise

    monkeypatch.setattr(load_commit.Commit, "fix_row_numbers", spy)
    report = chute.load([str(path)], "t", target=target)
    assert report.ok and report.rows_loaded == 40_000
    assert seen == [str(path)]
    assert engine.rows("SELECT countIf(_source_row != id) AS bad FROM t")[0]["bad"] in (0, "0")


def test_partition_key_the_table_computes_itself(tmp_path: Path, target: str) -> None:
    """A key over a MATERIALIZED column is not in the input: the load goes unsorted and still works."""
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / "e.json", "JSONEachRow", UNSORTED.format(rows=5000))
    engine.execute(
        "CREATE TABLE t (id UInt64, ts DateTime('UTC'), who String, n UInt8, month UInt32 MATERIALIZED toYYYYMM(ts), "
        "_source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, "
        "_load_id LowCardinality(String)) ENGINE = MergeTree PARTITION BY month ORDER BY tuple()"
    )
    report = chute.load([str(path)], "t", target=target)
    assert report.ok and report.rows_loaded == 5000
    got = engine.rows("SELECT count() AS c, countIf(month != toYYYYMM(ts)) AS bad FROM t")[0]
    assert (int(got["c"]), int(got["bad"])) == (5000, 0)


def test_bad_rows_among_unsorted_rows_into_a_day_partitioned_table(tmp_path: Path, target: str) -> None:
    """The careful pass (bad rows to the rejects table) groups the good rows by partition
    too: a block of them spans every day, which the engine alone refuses."""
    engine = open_engine(target)
    rows = 30_000
    path = write_with_engine(engine, tmp_path / "events.csv", "CSVWithNames", UNSORTED.format(rows=rows))
    lines = path.read_text().splitlines()
    bad = {101, 15_000, 29_999}  # row numbers; line 0 is the header
    for row in bad:
        lines[row] = lines[row].replace(",", ",not a time,", 1).rsplit(",", 1)[0]
    path.write_text("\n".join(lines) + "\n")
    engine.execute(
        "CREATE TABLE by_day (id UInt64, ts DateTime('UTC'), who String, n UInt8, _source LowCardinality(String), "
        "_source_mtime DateTime64(3, 'UTC'), _source_row UInt64, _load_id LowCardinality(String)) "
        "ENGINE = MergeTree PARTITION BY toYYYYMMDD(ts) ORDER BY tuple()"
    )
    report = chute.load([str(path)], "by_day", target=target)
    assert report.rows_loaded == rows - len(bad) and report.rows_rejected == len(bad), report.files
    parts, partitions = table_parts(engine, "by_day")
    assert partitions >= 365 and parts <= 2 * partitions
    got = engine.rows("SELECT countIf(_source_row != id) AS off, countIf(id IN (101, 15000, 29999)) AS b FROM by_day")
    assert (int(got[0]["off"]), int(got[0]["b"])) == (0, 0)
    rejected = engine.rows("SELECT _source_row AS r FROM by_day_rejects ORDER BY r")
    assert [int(r["r"]) for r in rejected] == sorted(bad)
