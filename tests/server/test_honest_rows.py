"""Rows and values a loader must never lose or change without a word.

Ground truth is computed here, from the lines the test wrote, never by chute:
an unclosed quote that would swallow the rest of a CSV file, a file whose rows
are all bad, the default error budget, and dates out of their type's range.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.load.careful_delimited import UNCLOSED_QUOTE
from chute.load.rejects import ErrorBudget
from chute.sql import quote_str

from ..harness.servers import server_query
from . import test_fidelity
from .servers import ClickHouseServer
from .test_fidelity import rows

TYPED = (
    "CREATE TABLE t (id UInt32, n UInt8, s String, d Date, x Float64, "
    "_source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, "
    "_load_id LowCardinality(String)) ENGINE = MergeTree ORDER BY id"
)

dest = test_fidelity.dest  # the fixture: embedded and the 18.16 server


def _unclosed_file(path: Path, good_after: int, second_bad_at: int | None = None) -> tuple[list[int], dict[int, str]]:
    """A header, two good rows, a row whose quote never closes, then `good_after` good rows
    (one more unclosed quote at row `second_bad_at` if given). Returns (good ids, {row: raw})."""
    lines = ["id,n,s,d,x", "1,1,ok,2024-01-01,1.5", "2,1,ok,2024-01-01,1.5", '3,1,"abc,2024-01-01,1.5']
    good = [1, 2]
    bad = {3: lines[3]}
    for i in range(4, 4 + good_after):
        if i == second_bad_at:
            lines.append(f'{i},1,"never closed,2024-01-01,1.5')
            bad[i] = lines[-1]
        else:
            lines.append(f'{i},{i % 200},"quoted, with a comma",2024-01-01,{i}.5')
            good.append(i)
    path.write_text("\n".join(lines) + "\n")
    return good, bad


def _check_table(rows: list[dict[str, object]], good: list[int]) -> None:
    assert [int(r["id"]) for r in rows] == good  # type: ignore[call-overload]
    # _source_row is the record's number in the file (the header is not a record).
    assert all(int(r["_source_row"]) == int(r["id"]) for r in rows)  # type: ignore[call-overload]


@pytest.mark.parametrize("split", [None, 60_000])
def test_an_unclosed_quote_rejects_its_line_and_keeps_the_rest(tmp_path: Path, target: str, split: int | None) -> None:
    engine = open_engine(target)
    engine.execute(TYPED)
    path = tmp_path / "quotes.csv"
    good, bad = _unclosed_file(path, 10_000, second_bad_at=7_000)
    options = chute.LoadOptions(split_bytes=split) if split else chute.LoadOptions()
    report = chute.load([str(path)], table="t", target=target, options=options)
    assert report.ok, [f.error for f in report.files]
    assert report.rows_loaded == len(good)
    assert report.rows_rejected == len(bad)
    assert report.rows_read == len(good) + len(bad)
    engine = open_engine(target)
    _check_table(engine.rows("SELECT id, _source_row FROM t ORDER BY id"), good)
    rejects = engine.rows("SELECT _source_row, raw, error FROM t_rejects ORDER BY _source_row")
    assert {int(r["_source_row"]): r["raw"] for r in rejects} == bad
    assert all(r["error"] == UNCLOSED_QUOTE for r in rejects)


def test_an_unclosed_quote_on_the_server(tmp_path: Path, server_url: str, clickhouse_server: ClickHouseServer) -> None:
    database = server_url.rsplit("/", 1)[1]
    clickhouse_server.query(
        "CREATE TABLE t (id UInt32, n UInt8, s String, d Date, x Float64, _source String, "
        "_source_mtime DateTime, _source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id",
        database=database,
    )
    path = tmp_path / "quotes.csv"
    good, bad = _unclosed_file(path, 3_000)
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.ok and report.rows_loaded == len(good) and report.rows_rejected == len(bad)
    ids = clickhouse_server.query("SELECT id FROM t ORDER BY id FORMAT TSV", database=database).split()
    assert [int(i) for i in ids] == good


def test_a_file_with_every_row_bad_fails_and_loads_once_fixed(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    engine.execute(TYPED)
    path = tmp_path / "wrong.csv"
    path.write_text("id,n,s,d,x\n" + "".join(f"{i},1,ok,2024-01-01,1.5\n" for i in range(1, 1158)))
    wrong = chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(format="json"))
    assert not wrong.ok
    assert (
        wrong.files[0].state == "failed" and "all 1158 rows rejected" in wrong.files[0].error
    )  # the header line is a record too, as JSON
    assert wrong.rows_loaded == 0
    assert int(open_engine(target).rows("SELECT count() AS n FROM t")[0]["n"]) == 0
    # The ledger did not mark it done: with the right format the same file loads, once.
    right = chute.load([str(path)], table="t", target=target)
    assert right.ok and right.rows_loaded == 1157 and right.rows_rejected == 0
    again = chute.load([str(path)], table="t", target=target)
    assert again.rows_loaded == 0
    assert int(open_engine(target).rows("SELECT count() AS n FROM t")[0]["n"]) == 1157


def test_the_default_error_budget() -> None:
    default = ErrorBudget.parse(None)
    assert default.allows(100, 120)  # up to 100 bad rows always
    assert default.allows(1_000, 10_000)  # or up to 10%
    assert not default.allows(1_001, 10_000)
    assert "over the default limit" in (default.over(1_001, 10_000) or "")
    assert not default.allows(1, 1)  # no good row: fails whatever the budget
    assert not ErrorBudget.parse("100%").allows(5, 5)
    assert ErrorBudget.parse("100%").allows(4, 5)


def test_many_bad_rows_fail_the_file_by_default(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    engine.execute(TYPED)
    path = tmp_path / "dirty.csv"
    # 2,000 rows, every other one with text in an integer column: 1,000 bad rows (50%).
    path.write_text("id,n,s,d,x\n" + "".join(f"{i},{'x' if i % 2 else 1},ok,2024-01-01,1.5\n" for i in range(2000)))
    report = chute.load([str(path)], table="t", target=target)
    assert not report.ok and "over the default limit" in report.files[0].error
    assert int(open_engine(target).rows("SELECT count() AS n FROM t")[0]["n"]) == 0
    allowed = chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(max_errors="60%"))
    assert allowed.ok and allowed.rows_loaded == 1000 and allowed.rows_rejected == 1000


DATES = [
    # (d, t, what is wrong or None)
    ("2024-01-01", "2024-01-01 10:00:00", None),
    ("2024-13-45", "2024-01-01 10:00:00", "column d"),
    ("2024-02-30", "2024-01-01 10:00:00", "column d"),
    ("2150-01-01", "2024-01-01 10:00:00", "column d"),
    ("1969-12-31", "2024-01-01 10:00:00", "column d"),
    ("0000-00-00", "2024-01-01 10:00:00", "column d"),
    ("2024-02-29", "2024-01-01 25:61:61", "column t"),
    ("2024-02-28", "2106-02-08 00:00:00", "column t"),
    ("2024-03-01", "2024-02-30 10:00:00", "column t"),
    ("2024-00-10", "2024-01-01 10:00:00", "column d"),  # month 00: the parser takes January
    ("2024-01-00", "2024-01-01 10:00:00", "column d"),  # day 00: the parser takes the 1st
    ("2024-01-02", "2024-00-10 10:00:00", "column t"),
    ("2024-01-03", "2024-01-15 10:20:30.5", "column t"),  # DateTime holds whole seconds
    ("2149-06-06", "2106-02-07 06:28:15", None),
    ("1970-01-01", "1970-01-01 00:00:00", None),
]


def test_dates_out_of_range_are_rejected_never_clamped(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    engine.execute(
        "CREATE TABLE t (id UInt32, d Date, t DateTime('UTC'), _source LowCardinality(String), "
        "_source_mtime DateTime64(3, 'UTC'), _source_row UInt64, _load_id LowCardinality(String)) "
        "ENGINE = MergeTree ORDER BY id"
    )
    path = tmp_path / "dates.csv"
    path.write_text("id,d,t\n" + "".join(f"{i},{d},{t}\n" for i, (d, t, _) in enumerate(DATES, 1)))
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok
    engine = open_engine(target)
    loaded = {
        int(r["id"]): (r["d"], r["t"]) for r in engine.rows("SELECT id, toString(d) AS d, toString(t) AS t FROM t")
    }
    expected = {i: (d, t) for i, (d, t, bad) in enumerate(DATES, 1) if bad is None}
    assert loaded == expected  # every loaded value is its input, unchanged
    rejects = {int(r["_source_row"]): r["error"] for r in engine.rows("SELECT _source_row, error FROM t_rejects")}
    assert {i for i, (_, _, bad) in enumerate(DATES, 1) if bad} == set(rejects)
    for i, (_, _, bad) in enumerate(DATES, 1):
        if bad:
            assert rejects[i].startswith(bad), rejects[i]


def test_a_date_out_of_range_alone_is_not_clamped(tmp_path: Path, target: str) -> None:
    """The fast path itself refuses an out-of-range date (the file then takes the careful pass)."""
    engine = open_engine(target)
    engine.execute(
        "CREATE TABLE t (id UInt32, d Date, _source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), "
        "_source_row UInt64, _load_id LowCardinality(String)) ENGINE = MergeTree ORDER BY id"
    )
    path = tmp_path / "dates.jsonl"
    rows = [f'{{"id": {i}, "d": "2024-01-{1 + i % 28:02d}"}}' for i in range(500)] + ['{"id": 500, "d": "2150-01-01"}']
    path.write_text("\n".join(rows) + "\n")
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and report.rows_loaded == 500 and report.rows_rejected == 1
    engine = open_engine(target)
    assert engine.rows("SELECT count() AS n FROM t WHERE d > '2149-01-01'")[0]["n"] == 0
    assert os.path.exists(path)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_an_unknown_enum_name_is_a_rejected_row_not_a_failed_file(tmp_path: Path, target: str, fmt: str) -> None:
    engine = open_engine(target)
    engine.execute(
        "CREATE TABLE t (id UInt32, e Enum8('a' = 1, 'b' = 2), _source LowCardinality(String), "
        "_source_mtime DateTime64(3, 'UTC'), _source_row UInt64, _load_id LowCardinality(String)) "
        "ENGINE = MergeTree ORDER BY id"
    )
    values = ["a" if i % 2 else "b" for i in range(1000)] + ["zzz"]
    path = tmp_path / f"enums.{fmt}"
    if fmt == "csv":
        path.write_text("id,e\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values, 1)))
    else:
        path.write_text("".join(f'{{"id": {i}, "e": "{v}"}}\n' for i, v in enumerate(values, 1)))
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok, [f.error for f in report.files]
    assert report.rows_loaded == 1000 and report.rows_rejected == 1
    engine = open_engine(target)
    got = engine.rows("SELECT toString(e) AS e, count() AS n FROM t GROUP BY e ORDER BY e")
    assert [(r["e"], int(r["n"])) for r in got] == [("a", 500), ("b", 500)]
    rejects = engine.rows("SELECT _source_row, error FROM t_rejects")
    assert [int(r["_source_row"]) for r in rejects] == [1001] and "column e" in rejects[0]["error"]


# (column type, a good value as text, its value as the table shows it, a value the engine's
# own parser would change without a word)
SILENT = [
    ("UInt32", "7", "7", "18446744073709551617"),  # wraps to 1
    ("UInt64", "7", "7", "99999999999999999999"),  # wraps
    ("Int64", "-7", "-7", "9223372036854775808"),  # wraps to the minimum
    ("Int8", "-7", "-7", "300"),
    ("Decimal(5, 2)", "1.25", "1.25", "1.999"),  # truncated to 1.99
    ("Decimal(5, 2)", "1.25", "1.25", "123456.1"),  # more digits than the precision
    ("Float32", "1.5", "1.5", "1e39"),  # inf
    ("Float64", "1.5", "1.5", "1e400"),  # inf
    ("Float64", "1.5", "1.5", "-1e400"),  # -inf
    ("Date", "2024-01-31", "2024-01-31", "2024-02-30"),  # rolls over to 2024-03-01
    ("Date", "2024-01-31", "2024-01-31", "2024-13-45"),  # 1970-01-01
    ("DateTime('UTC')", "2024-01-31 23:59:59", "2024-01-31 23:59:59", "2024-01-01 25:61:61"),  # next day
    ("DateTime('UTC')", "2024-01-31T10:00:00Z", "2024-01-31 10:00:00", "2024-01-31T10:61:00Z"),
    ("DateTime('UTC')", "2024-01-31T10:00:00Z", "2024-01-31 10:00:00", "2024-02-30T10:00:00Z"),  # March 1st
    ("DateTime('UTC')", "2024-01-31 23:59:59", "2024-01-31 23:59:59", "2106-02-08 00:00:00"),  # clamped
    ("DateTime64(3, 'UTC')", "2024-01-31 23:59:59.250", "2024-01-31 23:59:59.250", "2024-01-31 23:59:60.250"),
    ("DateTime64(3, 'UTC')", "2024-01-31 23:59:59.250", "2024-01-31 23:59:59.250", "2024-01-31 10:00:00.1239"),
    ("DateTime('UTC')", "2024-01-31 23:59:59", "2024-01-31 23:59:59", "2024-01-31 10:00:00.5"),  # fraction cut
    ("Date", "2024-01-31", "2024-01-31", "2024-00-10"),  # January 10th
    ("Date", "2024-01-31", "2024-01-31", "2024-01-00"),  # January 1st
    # an hour the clocks skip there: moved back an hour
    ("DateTime('America/New_York')", "2024-03-10 01:30:00", "2024-03-10 01:30:00", "2024-03-10 02:30:00"),
    ("DateTime64(3, 'America/New_York')", "2024-03-10 03:30:00.000", "2024-03-10 03:30:00.000", "2024-03-10 02:30:00"),
]


def execute(dest: str, sql: str) -> None:
    if "://" in dest:
        server_query(dest, sql)
    else:
        open_engine(dest).execute(sql)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("case", range(len(SILENT)), ids=[f"{t}:{bad}" for t, _, _, bad in SILENT])
def test_a_value_the_parser_would_change_alone_is_rejected(tmp_path: Path, dest: str, fmt: str, case: int) -> None:
    """One such value in an otherwise clean file: the fast path itself must refuse it, so the
    file takes the careful pass and the value is a rejected row, never a changed one."""
    type_sql, good, shown, bad = SILENT[case]
    if "://" in dest and type_sql.startswith("DateTime64"):
        pytest.skip("18.16 has no DateTime64")
    execute(
        dest,
        f"CREATE TABLE t (id UInt32, c {type_sql}, _source LowCardinality(String), "
        "_source_mtime DateTime64(3, 'UTC'), _source_row UInt64, _load_id LowCardinality(String)) "
        "ENGINE = MergeTree ORDER BY id"
        if "://" not in dest
        else f"CREATE TABLE t (id UInt32, c {type_sql}, _source String, _source_mtime DateTime, "
        "_source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id",
    )
    values = [good] * 300 + [bad] + [good] * 10
    path = tmp_path / f"values.{fmt}"
    if fmt == "csv":
        path.write_text("".join(f"{i},{v}\n" for i, v in enumerate(values, 1)))
    else:
        quote = '"' if type_sql.startswith(("Date", "Decimal")) else ""
        path.write_text("".join(f'{{"id": {i}, "c": {quote}{v}{quote}}}\n' for i, v in enumerate(values, 1)))
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (310, 1), [f.error for f in report.files]
    assert rows(dest, "SELECT DISTINCT toString(c) FROM t") == [[shown]]
    rejects = rows(dest, "SELECT _source_row, raw, error FROM t_rejects")
    assert [r[0] for r in rejects] == ["301"]
    assert rejects[0][2].startswith("column c: ") and bad in rejects[0][1], rejects


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_float64_infinities_load_and_numbers_past_the_range_are_rejected(tmp_path: Path, dest: str, fmt: str) -> None:
    """The engine parses `1e400` as inf, as it does `inf`: only the second is an infinity in
    the input. nan and the largest finite numbers load as they are."""
    execute(
        dest,
        "CREATE TABLE t (id UInt32, x Float64, y Nullable(Float64), _source String, _source_mtime DateTime, "
        "_source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id",
    )
    values = [("inf", "-inf"), ("-inf", "nan"), ("1e400", "1"), ("1.7976931348623157e308", "1e-300"), ("2", "-1e400")]
    path = tmp_path / f"floats.{fmt}"
    if fmt == "csv":
        path.write_text("".join(f"{i},{x},{y}\n" for i, (x, y) in enumerate(values, 1)))
    else:
        number = {"inf": '"inf"', "-inf": '"-inf"', "nan": '"nan"'}
        path.write_text(
            "".join(
                f'{{"id": {i}, "x": {number.get(x, x)}, "y": {number.get(y, y)}}}\n'
                for i, (x, y) in enumerate(values, 1)
            )
        )
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (3, 2), [f.error for f in report.files]
    assert rows(dest, "SELECT id, toString(x), toString(y) FROM t ORDER BY id") == [
        ["1", "inf", "-inf"],
        ["2", "-inf", "nan"],
        ["4", "1.7976931348623157e308", "1e-300"],
    ]
    rejects = rows(dest, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row")
    assert rejects == [["3", "column x: 1e400 does not fit Float64"], ["5", "column y: -1e400 does not fit Float64"]]


def test_json_empty_string_into_an_integer_is_rejected_and_missing_keeps_the_default(tmp_path: Path, dest: str) -> None:
    execute(
        dest,
        "CREATE TABLE t (id UInt32, n Int8, m Nullable(Int8), _source String, _source_mtime DateTime, "
        "_source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id",
    )
    lines = ['{"id": 1, "n": 5, "m": 5}', '{"id": 2}', '{"id": 3, "n": null, "m": null}', '{"id": 4, "n": ""}']
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    report = chute.load([str(tmp_path / "a.jsonl")], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (3, 1)
    assert rows(dest, "SELECT id, n, ifNull(toString(m), 'null') FROM t ORDER BY id") == [
        ["1", "5", "5"],
        ["2", "0", "null"],
        ["3", "0", "null"],
    ]
    assert rows(dest, "SELECT _source_row, error FROM t_rejects") == [["4", 'column n: "" does not fit Int8']]


@pytest.mark.parametrize("with_a_bad_row", [False, True])
def test_json_whole_numbers_with_a_point_or_exponent_load_whatever_else_the_file_holds(
    tmp_path: Path, dest: str, with_a_bad_row: bool
) -> None:
    """`1.0` and `1e2` (pandas writes an integer column with gaps so) are whole numbers: they
    loaded into Int32 on the fast path but were rejected by the careful pass, so a value's fate
    hung on another row of its file. Now both load them; a fraction is rejected either way."""
    execute(
        dest,
        "CREATE TABLE t (id UInt32, a Int32, b Int64, _source String, _source_mtime DateTime, "
        "_source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id",
    )
    lines = [
        '{"id": 1, "a": 1e2, "b": 1e2}',
        '{"id": 2, "a": 1.0, "b": -3.00}',
        '{"id": 3, "a": 2E+1, "b": 1.5e1}',
        '{"id": 4, "a": 7, "b": 9007199254740993}',
    ]
    if with_a_bad_row:
        lines += ['{"id": 5, "a": 1.5, "b": 1}', '{"id": 6, "a": 1, "b": 1e-40}']
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    report = chute.load([str(tmp_path / "a.jsonl")], table="t", target=dest)
    assert report.ok and report.rows_loaded == 4, [f.error for f in report.files]
    assert report.rows_rejected == (2 if with_a_bad_row else 0)
    assert rows(dest, "SELECT id, a, b FROM t ORDER BY id") == [
        ["1", "100", "100"],
        ["2", "1", "-3"],
        ["3", "20", "15"],
        ["4", "7", "9007199254740993"],
    ]
    if with_a_bad_row:
        assert rows(dest, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row") == [
            ["5", "column a: 1.5 does not fit Int32"],
            ["6", "column b: 1e-40 does not fit Int64"],
        ]


# (column type, values at the very edge of what it holds: each must load unchanged)
EDGES = [
    ("Decimal(18, 4)", ["99999999999999.9999", "-99999999999999.9999", "0.0001"]),
    ("Decimal(38, 10)", ["9999999999999999999999999999.9999999999", "-9999999999999999999999999999.9999999999"]),
    ("Decimal(9, 2)", ["9999999.99", "-9999999.99"]),
    ("Decimal(4, 4)", ["0.9999", "-0.9999"]),
    ("Int8", ["-128", "127"]),
    ("UInt64", ["18446744073709551615", "0"]),
    ("Int64", ["-9223372036854775808", "9223372036854775807"]),
]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("case", range(len(EDGES)), ids=[t for t, _ in EDGES])
def test_values_at_the_edge_of_their_type_load_unchanged(tmp_path: Path, dest: str, fmt: str, case: int) -> None:
    """99999999999999.9999 fits Decimal(18, 4): it was rejected, its Float64 being 1e14."""
    type_sql, edges = EDGES[case]
    execute(
        dest,
        f"CREATE TABLE t (id UInt32, c {type_sql}, _source String, _source_row UInt64) ENGINE = MergeTree ORDER BY id",
    )
    path = tmp_path / f"edges.{fmt}"
    if fmt == "csv":
        path.write_text("".join(f"{i},{v}\n" for i, v in enumerate(edges, 1)))
    else:
        path.write_text("".join(f'{{"id": {i}, "c": "{v}"}}\n' for i, v in enumerate(edges, 1)))
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (len(edges), 0), [f.error for f in report.files]
    assert [r[0] for r in rows(dest, "SELECT c FROM t ORDER BY id")] == edges


# (element type, a good array as JSON, as the table shows it, an array with an element that does not fit)
ARRAYS = [
    ("Int8", "[1, -128]", "[1,-128]", "[128]"),  # wraps to -128
    ("UInt32", "[7]", "[7]", "[4294967296]"),  # wraps to 0
    ("UInt32", "[7]", "[7]", "[18446744073709551617]"),  # wraps to 1
    ("Decimal(9, 2)", "[1.25]", "[1.25]", "[1.999]"),  # cut to 1.99
    ("Float32", "[1.5]", "[1.5]", "[1e39]"),  # inf
    ("Date", '["2024-01-31"]', "['2024-01-31']", '["2024-02-30"]'),  # rolls over to March 1st
    ("Array(UInt8)", "[[1, 2], []]", "[[1,2],[]]", "[[300]]"),  # wraps to 44
    ("UInt8", "[1]", "[1]", "[x]"),  # no number: failed the whole CSV file
]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("case", range(len(ARRAYS)), ids=[f"{t}:{bad}" for t, _, _, bad in ARRAYS])
def test_an_array_element_that_does_not_fit_is_a_rejected_row(tmp_path: Path, dest: str, fmt: str, case: int) -> None:
    """Array elements were read by the engine's own parsers: `[128]` into Array(Int8) became
    [-128] without a word, and an unreadable element in CSV failed the whole file."""
    element, good, shown, bad = ARRAYS[case]
    if fmt == "jsonl" and bad == "[x]":
        pytest.skip("not JSON: the line is a bad record anyway")
    execute(
        dest,
        f"CREATE TABLE t (id UInt32, a Array({element}), _source String, _source_row UInt64) "
        "ENGINE = MergeTree ORDER BY id",
    )
    values = [good] * 20 + [bad] + [good] * 5
    path = tmp_path / f"arrays.{fmt}"
    if fmt == "csv":
        quoted = ['"' + v.replace('"', "'").replace("'", "'") + '"' for v in values]
        path.write_text("".join(f"{i},{v}\n" for i, v in enumerate(quoted, 1)))
    else:
        path.write_text("".join(f'{{"id": {i}, "a": {v}}}\n' for i, v in enumerate(values, 1)))
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (25, 1), [f.error for f in report.files]
    assert rows(dest, "SELECT DISTINCT toString(a) FROM t") == [[shown]]
    rejects = rows(dest, "SELECT _source_row, error FROM t_rejects")
    assert [r[0] for r in rejects] == ["21"] and rejects[0][1].startswith("column a: "), rejects


@pytest.mark.parametrize("new_table", [True, False])
def test_an_unclosed_quote_in_the_last_field_named_like_the_check_s_alias(
    tmp_path: Path, dest: str, new_table: bool
) -> None:
    """The check that finds a last record running to the end of the file named the file `s`,
    and a column `s` was then read as the file's name: the lines after the quote were lost."""
    if not new_table:
        execute(
            dest,
            "CREATE TABLE t (id Int64, s String) ENGINE = MergeTree ORDER BY id",  # (no provenance)
        )
    path = tmp_path / "b.csv"
    path.write_text('id,s\n1,a\n2,"unterm\n3,ok\n4,ok\n')
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_read, report.rows_loaded, report.rows_rejected) == (4, 3, 1)
    assert rows(dest, "SELECT id, s FROM t ORDER BY id") == [["1", "a"], ["3", "ok"], ["4", "ok"]]
    if new_table:
        assert rows(dest, "SELECT _source_row FROM t ORDER BY id") == [["1"], ["3"], ["4"]]
    assert rows(dest, "SELECT _source_row, raw FROM t_rejects") == [["2", '2,"unterm']]


def test_csv_nulls_of_a_nullable_string_stay_null_in_the_careful_pass(tmp_path: Path, dest: str) -> None:
    """An empty field and `\\N` of a Nullable(String) column are NULL on the fast path; a bad row
    elsewhere in the file (the careful pass) made them empty strings."""
    execute(dest, "CREATE TABLE t (a Nullable(Int32), c Nullable(String)) ENGINE = MergeTree ORDER BY tuple()")
    path = tmp_path / "n.csv"
    path.write_text("a,c\n1,x\n2,\n3,\\N\nbad,y\n")
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (3, 1)
    assert rows(dest, "SELECT a, isNull(c) FROM t ORDER BY a") == [["1", "0"], ["2", "1"], ["3", "1"]]


def test_a_quoted_empty_field_of_a_nullable_string_is_the_same_on_both_passes(tmp_path: Path, dest: str) -> None:
    """A quoted `""` is the empty string on the fast path; a bad row elsewhere in the file sent it
    through the careful pass, which made it NULL: a value's fate hung on its neighbours."""
    seen = []
    for name, bad in (("clean", ""), ("dirty", "bad,y\n")):
        execute(
            dest, f"CREATE TABLE {name} (a Nullable(Int32), c Nullable(String)) ENGINE = MergeTree ORDER BY tuple()"
        )
        path = tmp_path / f"{name}.csv"
        path.write_text(f'a,c\n1,""\n2,\n3,x\n{bad}')
        report = chute.load([str(path)], table=name, target=dest)
        assert report.ok and report.rows_loaded == 3
        seen.append(rows(dest, f"SELECT a, ifNull(c, '(null)'), isNull(c) FROM {name} ORDER BY a"))
    assert seen[0] == seen[1] == [["1", "", "0"], ["2", "(null)", "1"], ["3", "x", "0"]]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_fixed_string_too_long_in_a_delimited_file_is_a_rejected_row(tmp_path: Path, dest: str, fmt: str) -> None:
    """The careful pass took the text under the check's NULL and failed the whole file."""
    execute(dest, "CREATE TABLE t (id UInt8, fs FixedString(2)) ENGINE = MergeTree ORDER BY id")
    sep = "," if fmt == "csv" else "\t"
    path = tmp_path / f"fs.{fmt}"
    path.write_text("".join(f"{i}{sep}{v}\n" for i, v in [(1, "ab"), (2, "abc"), (3, "cd")]))
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, 1), [f.error for f in report.files]
    assert rows(dest, "SELECT id, fs FROM t ORDER BY id") == [["1", "ab"], ["3", "cd"]]
    assert rows(dest, "SELECT _source_row, error FROM t_rejects") == [
        ["2", "column fs: abc does not fit FixedString(2)"]
    ]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_new_table_keeps_zip_codes_phone_numbers_and_long_integers_as_written(
    tmp_path: Path, dest: str, fmt: str
) -> None:
    """Inferred as Int64 and Float64, `00123`, `+4930` and `99999999999999999999` were stored 123,
    4930 and 1e20: such columns are text now; plain numbers stay numbers."""
    sep = "," if fmt == "csv" else "\t"
    lines = [
        ["zip", "big", "phone", "n", "f"],
        ["00123", "99999999999999999999", "+15551234", "5", "1.5"],
        ["02134", "12345678901234567890123", "+4930", "0", "-0.25"],
    ]
    path = tmp_path / f"people.{fmt}"
    path.write_text("".join(sep.join(line) + "\n" for line in lines))
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and report.rows_loaded == 2, [f.error for f in report.files]
    assert rows(dest, "SELECT zip, big, phone, toString(n), toString(f) FROM t ORDER BY _source_row") == lines[1:]
    types = dict(rows(dest, "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 't'"))
    assert "Int" in types["n"] and "Float" in types["f"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_nested_row_with_arrays_of_different_lengths_is_a_rejected_row(tmp_path: Path, dest: str, fmt: str) -> None:
    """The engine refuses such a row, and with it the whole insert: the file failed on every run."""
    execute(dest, "CREATE TABLE t (id UInt8, n Nested(x UInt8, y String)) ENGINE = MergeTree ORDER BY id")
    records = [(1, [1, 2], ["a", "b"]), (2, [1], ["a", "b"]), (3, [3], ["c"]), (4, [300], ["d"])]
    path = tmp_path / f"nested.{fmt}"
    if fmt == "csv":
        path.write_text(
            "id,n.x,n.y\n"
            + "".join(f'{i},"{x}","[{",".join(repr(v) for v in y)}]"\n'.replace(" ", "") for i, x, y in records)
        )
    else:
        path.write_text("".join(json.dumps({"id": i, "n.x": x, "n.y": y}) + "\n" for i, x, y in records))
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_read, report.rows_loaded, report.rows_rejected) == (4, 2, 2)
    assert rows(dest, "SELECT id, toString(n.x), toString(n.y) FROM t ORDER BY id") == [
        ["1", "[1,2]", "['a','b']"],
        ["3", "[3]", "['c']"],
    ]
    errors = rows(dest, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row")
    assert errors == [
        ["2", "the arrays of Nested n (n.x, n.y) differ in length"],
        ["4", "column n.x: [300] does not fit Array(UInt8)"],
    ]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_negative_zero_keeps_its_sign(tmp_path: Path, dest: str, fmt: str) -> None:
    """The exact read's check added 0 to the value: -0 + 0 is +0 (Float32 of Parquet files)."""
    execute(dest, "CREATE TABLE t (id UInt8, f Float32, g Float64) ENGINE = MergeTree ORDER BY id")
    path = tmp_path / f"zeros.{fmt}"
    if fmt == "parquet":
        open_engine(str(tmp_path / "maker")).execute(
            f"INSERT INTO FUNCTION file({quote_str(str(path))}, 'Parquet', 'id UInt8, f Float32, g Float64') "
            "VALUES (1, -0., -0.), (2, 1.5, 2.5)"
        )
    elif fmt == "jsonl":
        path.write_text('{"id": 1, "f": -0.0, "g": -0.0}\n{"id": 2, "f": 1.5, "g": 2.5}\n')
    else:
        path.write_text("1,-0.0,-0.0\n2,1.5,2.5\n")
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and report.rows_loaded == 2, [f.error for f in report.files]
    assert rows(dest, "SELECT id, 1 / f, 1 / g FROM t ORDER BY id") == [
        ["1", "-inf", "-inf"],
        ["2", "0.6666666666666666", "0.4"],
    ]


def test_a_parquet_map_the_server_cannot_hold_is_its_json_text(tmp_path: Path, server_url: str) -> None:
    """18.16 has no Map: the column was made String, which the Parquet reader could not fill (every
    run failed on the table chute had just made; then it was refused). Now the map is read as the
    file's own type and stored as its JSON text (issue #46 item 5)."""
    path = tmp_path / "m.parquet"
    open_engine(str(tmp_path / "maker")).execute(
        f"INSERT INTO FUNCTION file({quote_str(str(path))}, 'Parquet', 'id Int32, mp Map(String, Int64)') "
        "VALUES (1, map('a', 1))"
    )
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.ok and report.rows_loaded == 1, [f.error for f in report.files]
    assert rows(server_url, "SELECT id, mp FROM t") == [["1", '{"a":1}']]


def test_a_header_ending_with_a_delimiter_loads_and_an_unnamed_value_is_refused(tmp_path: Path, dest: str) -> None:
    """`id,s,` (a trailing comma, as many exporters write) named a field "": the load asked for
    --add-columns, which then added c1, c2, c3 and failed again."""
    execute(dest, "CREATE TABLE t (id UInt8, s String) ENGINE = MergeTree ORDER BY id")
    (tmp_path / "a.csv").write_text("id,s,\n1,a,\n2,b,\n")
    report = chute.load([str(tmp_path / "a.csv")], table="t", target=dest)
    assert report.ok and report.rows_loaded == 2, [f.error for f in report.files]
    (tmp_path / "b.csv").write_text("id,s,n,\n3,c,5,\n")
    added = chute.load([str(tmp_path / "b.csv")], table="t", target=dest, options=chute.LoadOptions(add_columns=True))
    assert added.ok and f"added column n Int64 (from {tmp_path / 'b.csv'})" in added.notes, added.notes
    (tmp_path / "c.csv").write_text("id,s,\n4,d,lost\n")
    refused = chute.load([str(tmp_path / "c.csv")], table="t", target=dest)
    assert not refused.ok and "names no field at position 3" in refused.files[0].error
    assert rows(dest, "SELECT id, s, n FROM t ORDER BY id") == [["1", "a", "0"], ["2", "b", "0"], ["3", "c", "5"]]


def test_reasons_name_the_column_or_the_twice_given_field(tmp_path: Path, dest: str) -> None:
    """A Bool `"yes"` and a key given twice were "a value does not fit the table"."""
    boolean = "UInt8" if "://" in dest else "Bool"  # (18.16 has no Bool)
    execute(dest, f"CREATE TABLE t (id UInt8, b UInt8, ok {boolean}, s String) ENGINE = MergeTree ORDER BY id")
    lines = [
        {"id": 1, "b": 1, "ok": True, "s": "x"},
        '{"id": 2, "b": 1, "ok": "yes", "s": "x"}',
        '{"id": 3, "b": 1, "ok": true, "s": "a", "s": "b"}',
        {"id": 4, "b": 1, "ok": False, "s": "y"},
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, 2)
    assert rows(dest, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row") == [
        ["2", f"column ok: yes does not fit {boolean}"],
        ["3", "a field appears twice: s"],
    ]


def test_the_report_names_tuple_and_map_columns_left_unchecked(tmp_path: Path) -> None:
    """Elements of tuples and maps are the engine reader's (300 into a UInt8 there is 44): the
    report says so, since no value may change without a word."""
    target = str(tmp_path / "db")
    open_engine(target).execute(
        "CREATE TABLE t (id UInt8, t Tuple(a UInt8, b String), m Map(String, UInt8), s String) "
        "ENGINE = MergeTree ORDER BY id"
    )
    (tmp_path / "a.jsonl").write_text('{"id": 1, "t": {"a": 300, "b": "x"}, "m": {"k": 1}, "s": "y"}\n')
    report = chute.load([str(tmp_path / "a.jsonl")], table="t", target=target)
    assert report.ok and any(n.startswith("columns t, m: numbers, dates and times inside tuples") for n in report.notes)
