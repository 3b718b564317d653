"""Typed files (Parquet, ORC, Arrow, Native) into narrower columns: no value changed without a word.

Read straight into the table's types, the engine wraps integers (an Int64
5000000000 into UInt32 is 705032704), drops decimal digits, makes 1e39 a Float32
inf and clamps dates and times to the type's range. chute reads such columns
wide and casts exactly: a row with a value that does not fit is a rejected row
with the column's name and the rows whose values fit load; clean files load exactly
as the engine's own read gives them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.sql import quote_str

PROVENANCE = (
    "_source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, "
    "_load_id LowCardinality(String)"
)

UNFIT = [
    ("UInt32", "toInt64(5000000000)"),
    ("UInt32", "toInt64(-1)"),
    ("Int8", "toInt64(-129)"),
    ("UInt64", "toInt64(-1)"),
    ("Int64", "toUInt64(18446744073709551615)"),
    ("Float32", "toFloat64(1e39)"),
    ("Float32", "toFloat64(1e-50)"),
    ("Decimal(5, 2)", "toDecimal64(1.999, 4)"),
    ("Decimal(5, 2)", "toDecimal64(123456.1, 4)"),
    ("Date", "toDate32('2150-01-01')"),
    ("Date", "toDate32('1960-01-01')"),
    ("DateTime", "toDateTime64('2106-02-08 00:00:00', 3, 'UTC')"),
    ("DateTime('UTC')", "toDateTime64('1969-12-31 23:59:59', 3, 'UTC')"),
]


def _write(engine_dir: Path, path: Path, select: str, fmt: str) -> None:
    """Write `select` to `path` in `fmt` with an engine of its own (not the target's)."""
    engine = open_engine(str(engine_dir))
    try:
        engine.execute(f"INSERT INTO FUNCTION file({quote_str(str(path))}, {quote_str(fmt)}) {select}")
    finally:
        engine.close()


@pytest.mark.parametrize("fmt", ["Parquet", "Native"])
@pytest.mark.parametrize("column_type,value", UNFIT, ids=[f"{t}-{v}" for t, v in UNFIT])
def test_a_value_that_does_not_fit_is_a_rejected_row_naming_the_column(
    tmp_path: Path, fmt: str, column_type: str, value: str
) -> None:
    data = tmp_path / "in"
    data.mkdir()
    path = data / f"a.{fmt.lower()}"
    # Row 2 of 3 does not fit; rows 1 and 3 are NULL (a Nullable column: those fit).
    _write(tmp_path / "writer", path, f"SELECT number AS id, if(number = 1, {value}, NULL) AS v FROM numbers(3)", fmt)
    dest = str(tmp_path / "db")
    engine = open_engine(dest)
    engine.execute(
        f"CREATE TABLE t (id UInt64, v Nullable({column_type}), {PROVENANCE}) ENGINE = MergeTree ORDER BY id"
    )
    engine.close()

    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, 1), report.files
    engine = open_engine(dest)
    assert engine.rows("SELECT id, v, _source_row FROM t ORDER BY id") == [
        {"id": 0, "v": None, "_source_row": 1},
        {"id": 2, "v": None, "_source_row": 3},
    ]
    rejects = engine.rows("SELECT _source_row, raw, error FROM t_rejects")
    assert len(rejects) == 1 and rejects[0]["_source_row"] == 2
    assert rejects[0]["error"].startswith("column v: ") and column_type.split("(")[0] in rejects[0]["error"]
    assert rejects[0]["raw"].startswith('{"id":1,"v":')
    engine.close()


@pytest.mark.parametrize("columns", ["", ", _source_row UInt64"], ids=["no-provenance", "only-source-row"])
def test_a_table_without_provenance_keeps_the_rows_that_fit(tmp_path: Path, columns: str) -> None:
    """Without `_source_row` to flag them, the rows that do not fit are told apart by the same
    check: the others load, the report and the rejects table agree."""
    path = tmp_path / "a.parquet"
    _write(
        tmp_path / "writer", path, "SELECT number AS id, [1, 2, 5000000000][number + 1] AS v FROM numbers(3)", "Parquet"
    )
    dest = str(tmp_path / "db")
    engine = open_engine(dest)
    engine.execute(f"CREATE TABLE t (id UInt64, v UInt32{columns}) ENGINE = MergeTree ORDER BY id")
    engine.close()
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, 1), report.files
    engine = open_engine(dest)
    assert engine.rows("SELECT id, v FROM t ORDER BY id") == [{"id": 0, "v": 1}, {"id": 1, "v": 2}]
    assert [r["error"] for r in engine.rows("SELECT error FROM t_rejects")] == [
        "column v: 5000000000 does not fit UInt32"
    ]
    engine.close()


def test_a_typed_file_whose_rows_all_do_not_fit_fails_and_loads_once_fixed(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    _write(tmp_path / "writer", path, "SELECT number AS id, toInt64(-1 - number) AS v FROM numbers(5)", "Parquet")
    dest = str(tmp_path / "db")
    engine = open_engine(dest)
    engine.execute(f"CREATE TABLE t (id UInt64, v UInt32, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    engine.close()
    report = chute.load([str(path)], table="t", target=dest)
    assert not report.ok and report.rows_loaded == 0 and [f.state for f in report.files] == ["failed"]
    assert "all 5 rows rejected" in report.files[0].error
    path.unlink()
    _write(tmp_path / "writer2", path, "SELECT number AS id, toInt64(number) AS v FROM numbers(5)", "Parquet")
    again = chute.load([str(path)], table="t", target=dest)
    assert again.ok and again.rows_loaded == 5


CLEAN = (
    "SELECT number AS id, (number * 7)::Int64 AS v, (number / 3)::Float64 AS f, toDecimal64(number / 4, 4) AS dec, "
    "toDateTime64('2024-03-10 01:30:00', 3, 'UTC') + number * 3600 AS ts, ts AS ts2, "
    "toDate32('2024-01-01') + number AS d, toString(toDateTime('2024-05-05 10:00:00', 'UTC') + number) AS sts, "
    "if(number % 3 = 0, NULL, number)::Nullable(Int64) AS nv, nv AS nv2 FROM numbers(1000)"
)
CLEAN_COLUMNS = (
    "id UInt64, v UInt32, f Float32, dec Decimal(9, 2), ts DateTime('Europe/Berlin'), ts2 DateTime, d Date, "
    "sts DateTime('Asia/Tokyo'), nv Nullable(UInt16), nv2 UInt16"
)


@pytest.mark.parametrize("fmt", ["Parquet", "ORC", "Arrow", "Native"])
def test_values_that_fit_load_as_the_engine_reads_them(tmp_path: Path, fmt: str) -> None:
    """Read wide and cast: the same values as the engine's own read into the same types (time
    zones, a date written as text, NULLs into a non-Nullable column)."""
    path = tmp_path / f"clean.{fmt.lower()}"
    _write(tmp_path / "writer", path, CLEAN, fmt)
    dest = str(tmp_path / "db")
    engine = open_engine(dest)
    engine.execute(f"CREATE TABLE t ({CLEAN_COLUMNS}, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and report.rows_loaded == 1000, report.files
    names = "id, v, f, dec, ts, ts2, d, sts, nv, nv2"
    direct = engine.rows(
        f"SELECT count() AS n, sum(cityHash64({names})) AS h "
        f"FROM file({quote_str(str(path))}, {quote_str(fmt)}, {quote_str(CLEAN_COLUMNS)})"
    )
    loaded = engine.rows(f"SELECT count() AS n, sum(cityHash64({names})) AS h FROM t")
    assert loaded == direct
    engine.close()


@pytest.mark.parametrize("fmt", ["Parquet", "ORC", "Arrow", "Native"])
def test_an_integer_array_element_that_does_not_fit_is_a_rejected_row(tmp_path: Path, fmt: str) -> None:
    data = tmp_path / "in"
    data.mkdir()
    path = data / f"a.{fmt.lower()}"
    arrays = "[[1, 2], [300], [], [7]]"
    nested = "[[[1]], [[2]], [[700]], [[3, NULL]]]"
    select = (
        f"SELECT number AS id, CAST({arrays}[number + 1], 'Array(Int64)') AS a, "
        f"CAST({nested}[number + 1], 'Array(Array(Nullable(Int64)))') AS n FROM numbers(4)"
    )
    _write(tmp_path / "writer", path, select, fmt)
    dest = str(tmp_path / "db")
    engine = open_engine(dest)
    engine.execute(
        "CREATE TABLE t (id UInt64, a Array(UInt8), n Array(Array(Nullable(UInt8))), "
        f"{PROVENANCE}) ENGINE = MergeTree ORDER BY id"
    )
    engine.close()

    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, 2), report.files
    engine = open_engine(dest)
    assert engine.rows("SELECT id, a, n FROM t ORDER BY id") == [
        {"id": 0, "a": [1, 2], "n": [[1]]},
        {"id": 3, "a": [7], "n": [[3, None]]},
    ]
    errors = [r["error"] for r in engine.rows("SELECT error FROM t_rejects ORDER BY _source_row")]
    assert errors == [
        "column a: [300] does not fit Array(UInt8)",
        "column n: [[700]] does not fit Array(Array(Nullable(UInt8)))",
    ]
    engine.close()


@pytest.mark.parametrize("fmt", ["Parquet", "Native"])
def test_a_timestamp_with_a_fraction_of_a_second_does_not_fit_datetime(tmp_path: Path, fmt: str) -> None:
    data = tmp_path / "in"
    data.mkdir()
    path = data / f"a.{fmt.lower()}"
    stamps = "['2024-01-01 12:00:00.5', '2024-01-01 12:00:00', '2024-01-01 12:00:01']"
    _write(
        tmp_path / "writer",
        path,
        f"SELECT number AS id, toDateTime64({stamps}[number + 1], 6, 'UTC') AS ts FROM numbers(3)",
        fmt,
    )
    dest = str(tmp_path / "db")
    engine = open_engine(dest)
    engine.execute(f"CREATE TABLE t (id UInt64, ts DateTime('UTC'), {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    engine.close()
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, 1), report.files
    engine = open_engine(dest)
    assert engine.rows("SELECT id, toString(ts) AS ts FROM t ORDER BY id") == [
        {"id": 1, "ts": "2024-01-01 12:00:00"},
        {"id": 2, "ts": "2024-01-01 12:00:01"},
    ]
    (error,) = [r["error"] for r in engine.rows("SELECT error FROM t_rejects")]
    assert error.startswith("column ts: 2024-01-01 12:00:00.5") and "DateTime" in error
    engine.close()


@pytest.mark.parametrize("fmt", ["Parquet", "ORC", "Arrow"])
def test_arrays_tuples_and_maps_into_text_columns_are_their_json_text(tmp_path: Path, fmt: str) -> None:
    """A typed file's list<struct>, struct or map into a String column (as a server without
    Tuple inside Array makes one): the engine's reader refuses it ([53] TYPE_MISMATCH); chute
    reads the file's own type and writes each value's JSON text."""
    target = str(tmp_path / "db")
    engine = open_engine(target)
    engine.execute(
        f"CREATE TABLE t (id UInt64, l String, m Nullable(String), {PROVENANCE}) ENGINE = MergeTree ORDER BY id"
    )
    path = tmp_path / f"a.{fmt.lower()}"
    engine.execute(
        f"INSERT INTO FUNCTION file({quote_str(str(path))}, {quote_str(fmt)}) SELECT number AS id, "
        "[CAST((number, concat('x\"', toString(number))), 'Tuple(a Int64, b String)')] AS l, "
        "map('k', number) AS m FROM numbers(3)"
    )
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and report.rows_loaded == 3, report.files
    got = [line.split("\t") for line in engine.text("SELECT id, l, m FROM t ORDER BY id", "TSVRaw").splitlines()]
    assert [[int(i), json.loads(lst), json.loads(m)] for i, lst, m in got] == [
        [n, [{"a": n, "b": f'x"{n}'}], {"k": n}] for n in range(3)
    ]
