"""NULLs and missing values into columns that are not Nullable (issue #25): Parquet columns
are Nullable only where the files hold NULLs, and a value that takes its column's default
instead of a NULL is counted in the report. Both targets, real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine

from ..harness.data import halves_for_every_file
from ..harness.servers import server_query
from .test_fidelity import PROVENANCE, dest, rows

__all__ = ["dest"]  # the fixture: embedded and the 18.16 server


def columns(dest: str, table: str = "t") -> dict[str, str]:
    found = rows(
        dest,
        f"SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = '{table}'",
    )
    return {name: type_ for name, type_ in found if name not in PROVENANCE}


# -- Parquet nullability from the files ------------------------------------------------------


def _parquet(path: Path, data: dict[str, list[object]], required: tuple[str, ...] = ()) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    kinds = {
        "id": pa.int64(),
        "opt": pa.int64(),
        "maybe": pa.int32(),
        "s": pa.string(),
        "xs": pa.list_(pa.int32()),
        "ys": pa.list_(pa.int32()),
        "rs": pa.list_(pa.field("item", pa.int32(), nullable=False)),
    }
    fields = [pa.field(name, kinds[name], nullable=name not in required) for name in data]
    # Two row groups: the statistics of both count.
    pq.write_table(pa.table(data, schema=pa.schema(fields)), path, row_group_size=2)


def test_parquet_columns_without_nulls_are_not_nullable(tmp_path: Path, dest: str) -> None:
    first = {
        "id": [1, 2, 3],  # required
        "opt": [10, 20, 30],  # optional, no NULL in any file
        "maybe": [1, 2, 3],  # optional: NULL only in the second file
        "s": ["a", "b", None],  # optional with a NULL
        "xs": [[1, 2], [], None],  # optional elements, none NULL (an empty and a NULL list)
        "ys": [[1, None], [2], [3]],  # a NULL element
        "rs": [[1], [2, 3], []],  # required elements
    }
    second = {**first, "id": [4, 5], "opt": [40, 50], "maybe": [None, 5], "s": ["d", "e"], "xs": [[4], [5]]}
    second = {k: v[:2] for k, v in second.items()}
    _parquet(tmp_path / "a.parquet", first, required=("id", "rs"))
    _parquet(tmp_path / "b.parquet", second, required=("id", "rs"))
    report = chute.load([str(tmp_path)], table="t", target=dest)
    assert report.ok, report.files
    assert columns(dest) == {
        "id": "Int64",
        "opt": "Int64",
        "maybe": "Nullable(Int32)",  # a NULL in the second file: sampled too
        "s": "Nullable(String)",
        "xs": "Array(Int32)",
        "ys": "Array(Nullable(Int32))",
        "rs": "Array(Int32)",
    }
    [note] = [n for n in report.notes if "declare" in n]
    assert note.startswith("columns opt, xs: not Nullable")
    expected = sorted(
        [str(i), str(o), str(sum(x or []))]
        for part in (first, second)
        for i, o, x in zip(part["id"], part["opt"], part["xs"], strict=True)
    )
    assert sorted(rows(dest, "SELECT id, opt, arraySum(xs) FROM t")) == expected


def test_parquet_null_in_a_later_file_takes_the_default_and_is_counted(tmp_path: Path, dest: str) -> None:
    first = {"id": [1, 2], "opt": [10, 20], "xs": [[1], [2]]}
    later = {"id": [3, 4, 5], "opt": [None, 40, None], "xs": [[3], [4], [5]]}
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    _parquet(tmp_path / "1" / "a.parquet", first)
    _parquet(tmp_path / "2" / "b.parquet", later)
    report = chute.load([str(tmp_path / "1")], table="t", target=dest)
    assert report.ok and report.rows_defaulted == 0, report.files
    assert columns(dest)["opt"] == "Int64"
    report = chute.load([str(tmp_path / "2")], table="t", target=dest)
    assert report.ok, report.files
    nulls = sum(v is None for v in later["opt"])
    assert (report.rows_loaded, report.rows_defaulted) == (3, nulls)
    assert report.defaulted_columns == ["opt"]
    assert report.files[0].rows_defaulted == nulls
    expected = [[str(i), str(o or 0)] for i, o in zip(later["id"], later["opt"], strict=True)]
    assert rows(dest, "SELECT id, opt FROM t WHERE id >= 3 ORDER BY id") == expected


# -- missing values into columns that are not Nullable -----------------------------------------

TABLE = """CREATE TABLE t (
    id Int64, n Int32, s String, d Date, ts DateTime, f Float64, flag UInt8,
    e Enum8('low' = 1, 'high' = 2), tags Array(String), seven Int64 DEFAULT 7, maybe Nullable(Int64)
) ENGINE = MergeTree ORDER BY id"""
WATCHED = ("id", "n", "s", "d", "ts", "f", "flag", "e")
"""Not Nullable, scalar, no DEFAULT expression: a missing value there is counted."""
FULL = {"n": 5, "s": "x", "d": "2024-01-02", "ts": "2024-01-02 03:04:05", "f": 1.5, "flag": 1, "e": "high"}


def _make_table(dest: str) -> None:
    if "://" in dest:
        server_query(dest, TABLE)
    else:
        open_engine(dest).execute(TABLE)


def _json_rows(start: int, count: int, holes: bool) -> list[dict[str, object]]:
    """Rows of a JSON-lines file; with `holes`, every third row lacks a key or has a null in one,
    every fifth only in columns that are not watched (Nullable, DEFAULT, Array)."""
    names = list(FULL)
    out: list[dict[str, object]] = []
    for k in range(count):
        row: dict[str, object] = {"id": start + k, **FULL, "tags": ["a"], "seven": 1, "maybe": 2}
        if holes and k % 3 == 0:
            name = names[k % len(names)]
            if k % 2:
                row[name] = None
            else:
                del row[name]
        elif holes and k % 5 == 0:
            del row["seven"]
            row["maybe"] = None
            row["tags"] = None
        out.append(row)
    return out


def _write_jsonl(path: Path, data: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in data))


def test_json_missing_values_are_counted(tmp_path: Path, dest: str) -> None:
    _make_table(dest)
    files = {"holes.jsonl": _json_rows(1, 40, holes=True), "clean.jsonl": _json_rows(100, 10, holes=False)}
    for name, data in files.items():
        _write_jsonl(tmp_path / name, data)
    report = chute.load([str(tmp_path)], table="t", target=dest)
    assert report.ok, report.files

    def missing(row: dict[str, object]) -> set[str]:
        return {c for c in WATCHED if row.get(c) is None}

    expected = {name: sum(bool(missing(r)) for r in data) for name, data in files.items()}
    assert {Path(f.source).name: f.rows_defaulted for f in report.files} == expected
    assert expected["holes.jsonl"] > 0 and expected["clean.jsonl"] == 0
    assert report.rows_defaulted == sum(expected.values())
    named = {c for data in files.values() for r in data for c in missing(r)}
    assert set(report.defaulted_columns) == named
    assert report.to_dict()["rows_defaulted"] == report.rows_defaulted
    assert report.defaulted_line.startswith(f"{report.rows_defaulted:,} rows had a missing value")
    # The defaults themselves: the type's zero (an Enum: its first name), the table's DEFAULT.
    # (zero dates as numbers: 18.16 writes them 0000-00-00)
    dates = "if(toUInt16(d) = 0, '0', toString(d)), if(toUInt32(ts) = 0, '0', toString(ts))"
    got = rows(dest, f"SELECT id, n, s, {dates}, f, flag, toString(e), seven FROM t ORDER BY id")
    zero = {"n": "0", "s": "", "d": "0", "ts": "0", "f": "0", "flag": "0", "e": "low"}
    for line, row in zip(got, [r for data in files.values() for r in data], strict=True):
        values = dict(zip(["id", *zero, "seven"], line, strict=True))
        for c in zero:
            want = zero[c] if row.get(c) is None else str(row[c])
            assert values[c] == want, (row, values)
        assert values["seven"] == ("7" if "seven" not in row else "1")


@pytest.mark.parametrize("first_bad", [4, 0], ids=["missing-value-first", "bad-row-first"])
def test_dirty_json_missing_values_are_counted(tmp_path: Path, dest: str, first_bad: int) -> None:
    """A file with bad rows too (the one-pass way on the embedded engine, the careful pass on
    the server): the loaded rows' missing values are counted, the rejected rows' are not.
    Whichever the read meets first (a missing value, or a bad row), the count is the same."""
    _make_table(dest)
    data = _json_rows(1, 30, holes=True)
    lines = [json.dumps(r) for r in data]
    bad = {first_bad: '{"id": 1000, "n": "not a number"}', 10: '{"id": 1001, "n": null'}  # a bad value, broken JSON
    for at, line in sorted(bad.items(), reverse=True):
        lines.insert(at, line)
    (tmp_path / "dirty.jsonl").write_text("\n".join(lines) + "\n")
    report = chute.load([str(tmp_path / "dirty.jsonl")], table="t", target=dest)
    assert report.ok, report.files
    assert (report.rows_loaded, report.rows_rejected) == (len(data), len(bad))
    expected = sum(any(r.get(c) is None for c in WATCHED) for r in data)
    assert report.rows_defaulted == expected > 0


def test_parquet_with_values_that_do_not_fit_counts_the_loaded_rows(tmp_path: Path, dest: str) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    small = [1, None, 300, None, 7]  # 300 does not fit UInt8: a rejected row
    table = pa.table({"id": pa.array([1, 2, 3, 4, 5], pa.int64()), "small": pa.array(small, pa.int64())})
    pq.write_table(table, tmp_path / "s.parquet")
    ddl = (
        "CREATE TABLE t (id Int64, small UInt8, _source String, _source_mtime DateTime, _source_row UInt64, "
        "_load_id String) ENGINE = MergeTree ORDER BY id"
    )
    server_query(dest, ddl) if "://" in dest else open_engine(dest).execute(ddl)
    report = chute.load([str(tmp_path / "s.parquet")], table="t", target=dest)
    assert report.ok, report.files
    assert (report.rows_loaded, report.rows_rejected) == (4, 1)
    assert report.rows_defaulted == sum(v is None for v in small) and report.defaulted_columns == ["small"]
    assert rows(dest, "SELECT id, small FROM t ORDER BY id") == [["1", "1"], ["2", "0"], ["4", "0"], ["5", "7"]]


# -- CSV and TSV: an empty field or `\N` ------------------------------------------------------

TEXT_TABLE = """CREATE TABLE t (
    id Int64, n Int32, s String, d Date, ts DateTime, f Float64, dec Decimal(9, 2),
    seven Int64 DEFAULT 7, maybe Nullable(Int64)
) ENGINE = MergeTree ORDER BY id"""
TEXT_FULL = {"n": "5", "s": "x", "d": "2024-01-02", "ts": "2024-01-02 03:04:05", "f": "1.5", "dec": "2.25"}
TEXT_ZERO = {"n": "0", "s": "", "d": "0", "ts": "0", "f": "0", "dec": "0"}


def _text_rows(fmt: str, start: int, count: int, holes: bool) -> tuple[list[str], list[dict[str, str | None]]]:
    """Lines of a CSV/TSV file and the values each means (None: missing). With `holes`, every third
    row misses one value, in turn: an empty field, `\\N`, or in CSV a quoted empty field; every
    fifth leaves only the Nullable and DEFAULT columns empty (not counted)."""
    sep = "," if fmt == "CSV" else "\t"
    names = list(TEXT_FULL)
    lines, meant = [], []
    for k in range(count):
        fields: dict[str, str] = {"id": str(start + k), **TEXT_FULL, "seven": "1", "maybe": "2"}
        values: dict[str, str | None] = dict(fields)
        if holes and k % 3 == 0:
            name = names[(k // 3) % len(names)]
            how = (k // 3) % 3
            if name == "s" and fmt == "CSV":
                fields["s"], values["s"] = "", ""  # (an empty field is an empty string in CSV)
            elif how == 1 or (fmt == "TSV" and name == "f"):  # (TSV: an empty Float64 is a bad row)
                fields[name], values[name] = "\\N", None
            elif how == 2 and fmt == "CSV":
                fields[name], values[name] = '""', None
            elif name == "s":
                fields["s"], values["s"] = "", ""  # (TSV: an empty field is an empty string)
            else:
                fields[name], values[name] = "", None
        elif holes and k % 5 == 0:
            fields["seven"] = fields["maybe"] = "\\N"
            values["seven"], values["maybe"] = "7", None
        lines.append(sep.join(fields[c] for c in ["id", *names, "seven", "maybe"]))
        meant.append(values)
    return lines, meant


@pytest.mark.parametrize("fmt", ["CSV", "TSV"])
def test_csv_and_tsv_missing_values_are_counted(tmp_path: Path, dest: str, fmt: str) -> None:
    if "://" in dest:
        server_query(dest, TEXT_TABLE)
    else:
        open_engine(dest).execute(TEXT_TABLE)
    ext = fmt.lower()
    files = {f"holes.{ext}": _text_rows(fmt, 1, 60, holes=True), f"clean.{ext}": _text_rows(fmt, 100, 10, holes=False)}
    for name, (lines, _) in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    report = chute.load([str(tmp_path)], table="t", target=dest)
    assert report.ok, report.files
    assert report.rows_rejected == 0

    def missing(row: dict[str, str | None]) -> set[str]:
        return {c for c in TEXT_FULL if row[c] is None}

    expected = {name: sum(bool(missing(r)) for r in meant) for name, (_, meant) in files.items()}
    assert expected[f"holes.{ext}"] > 10 and expected[f"clean.{ext}"] == 0
    assert {Path(f.source).name: f.rows_defaulted for f in report.files} == expected
    assert report.rows_defaulted == sum(expected.values())
    named = {c for _, meant in files.values() for r in meant for c in missing(r)}
    assert set(report.defaulted_columns) == named
    dates = "if(toUInt16(d) = 0, '0', toString(d)), if(toUInt32(ts) = 0, '0', toString(ts))"
    got = rows(dest, f"SELECT id, n, s, {dates}, f, if(dec = 0, '0', toString(dec)), seven, maybe FROM t ORDER BY id")
    for line, row in zip(got, [r for _, meant in files.values() for r in meant], strict=True):
        values = dict(zip(["id", *TEXT_FULL, "seven", "maybe"], line, strict=True))
        for c in TEXT_FULL:
            assert values[c] == (TEXT_ZERO[c] if row[c] is None else row[c]), (row, values)
        assert values["seven"] == row["seven"]
        # (a NULL in TSVRaw: `\N`, or 18.16's `ᴺᵁᴸᴸ`)
        assert (values["maybe"] in ("\\N", "ᴺᵁᴸᴸ")) if row["maybe"] is None else values["maybe"] == row["maybe"]


@pytest.mark.parametrize("fmt", ["CSV", "TSV"])
def test_dirty_csv_and_tsv_missing_values_are_counted(tmp_path: Path, dest: str, fmt: str) -> None:
    """Bad rows as well (the careful pass, records split by the engine and checked in SQL): the
    loaded rows' missing values are counted, the rejected rows' are not; and a quote that is
    never closed (CSV) leaves the lines after it counted the same way."""
    if "://" in dest:
        server_query(dest, TEXT_TABLE)
    else:
        open_engine(dest).execute(TEXT_TABLE)
    lines, meant = _text_rows(fmt, 1, 45, holes=True)
    sep = "," if fmt == "CSV" else "\t"
    bad = {5: sep.join(["999", "not a number", *["x"] * 7]), 20: sep.join(["998", "1"])}  # a bad value, too few fields
    if fmt == "CSV":
        bad[30] = sep.join(["997", "1", '"never closed', *["x"] * 6])
    for at, line in sorted(bad.items(), reverse=True):
        lines.insert(at, line)
    (tmp_path / f"dirty.{fmt.lower()}").write_text("\n".join(lines) + "\n")
    report = chute.load([str(tmp_path)], table="t", target=dest)
    assert report.ok, report.files
    assert (report.rows_loaded, report.rows_rejected) == (len(meant), len(bad))
    expected = sum(any(r[c] is None for c in TEXT_FULL) for r in meant)
    assert report.rows_defaulted == expected > 0
    got = rows(dest, "SELECT id, n, if(toUInt16(d) = 0, '0', toString(d)) FROM t ORDER BY id")
    assert [g[0] for g in got] == [r["id"] for r in meant]
    for line, row in zip(got, meant, strict=True):
        assert line[1:] == [TEXT_ZERO[c] if row[c] is None else row[c] for c in ("n", "d")]


def test_files_the_server_parses_say_their_missing_values_are_not_counted(tmp_path: Path, server_url: str) -> None:
    """An 18.16 server that parses a file itself gives a missing value its default with no trace:
    the report says so, in one note for all such files, instead of a count of 0."""
    server_query(server_url, TABLE)
    for i in range(2):
        data = _json_rows(1 + 100 * i, 30, holes=False)
        for k, row in enumerate(data[::3]):
            del row[list(FULL)[k % len(FULL)]]  # (absent keys: 18.16's parser refuses a null there)
        _write_jsonl(tmp_path / f"holes{i}.jsonl", data)
    options = chute.LoadOptions(method="server-parse")
    report = chute.load([str(tmp_path)], table="t", target=server_url, options=options)
    assert report.ok, report.files
    assert report.methods == {"server-parse": 2}, report.files
    notes = [n for n in report.notes if "not in the defaults count" in n]
    assert len(notes) == 1 and notes[0].startswith("2 files parsed by the server"), report.notes
    assert report.rows_defaulted == 0


def test_a_file_the_server_refused_is_counted_by_the_careful_pass(tmp_path: Path, server_url: str) -> None:
    """JSON nulls into columns that are not Nullable: 18.16's parser refuses them, so the file is
    read here and checked record by record; the report says that method ran, and counts the rows."""
    server_query(server_url, TABLE)
    data = _json_rows(1, 30, holes=True)
    _write_jsonl(tmp_path / "nulls.jsonl", data)
    report = chute.load([str(tmp_path)], table="t", target=server_url, options=chute.LoadOptions(method="server-parse"))
    assert report.ok and report.rows_loaded == len(data), report.files
    assert report.methods == {"client-convert": 1}, report.method_why
    assert report.rows_defaulted == sum(any(r.get(c) is None for c in WATCHED) for r in data)


@pytest.mark.parametrize("how", ["halves", "ranges"])
@pytest.mark.parametrize("fmt", ["CSV", "TSV"])
def test_big_text_files_count_their_missing_values(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch, fmt: str, how: str
) -> None:
    """A file read as two halves at once (a partitioned table) or as byte ranges: each part that
    meets a missing value is read again with the count, and the counts add up."""
    engine = open_engine(target)
    engine.execute(TEXT_TABLE.replace("ORDER BY id", "PARTITION BY toYYYYMM(d) ORDER BY id"))
    lines, meant = _text_rows(fmt, 1, 3000, holes=True)
    path = tmp_path / f"big.{fmt.lower()}"
    path.write_text("\n".join(lines) + "\n")
    options = chute.LoadOptions(workers=2)
    halves = halves_for_every_file(monkeypatch) if how == "halves" else []
    if how == "ranges":
        options = chute.LoadOptions(workers=2, split_bytes=path.stat().st_size // 4)
    report = chute.load([str(path)], table="t", target=target, options=options)
    assert report.ok and report.rows_loaded == len(meant) and report.rows_rejected == 0, report.files
    assert halves == ([str(path)] if how == "halves" else [])
    assert report.rows_defaulted == sum(any(r[c] is None for c in TEXT_FULL) for r in meant)
    got = engine.rows("SELECT id, n FROM t ORDER BY id")
    assert [(str(g["id"]), str(g["n"])) for g in got] == [
        (r["id"], TEXT_ZERO["n"] if r["n"] is None else r["n"]) for r in meant
    ]


# -- DEFAULT expressions ---------------------------------------------------------------------


@pytest.mark.parametrize("method", ["auto", "client-convert"])
@pytest.mark.parametrize("bad_row", [False, True], ids=["clean", "bad-row"])
def test_a_missing_field_takes_its_default_expression_on_the_server(
    tmp_path: Path, server_url: str, method: str, bad_row: bool
) -> None:
    """18.16 has no `input_format_defaults_for_omitted_fields`: parsing JSON itself it gives a
    field a record lacks its type's default (0), not the DEFAULT expression. auto reads such
    files here; the careful pass computes the expression too."""
    server_query(
        server_url,
        "CREATE TABLE t (id UInt32, u32 UInt32, dflt UInt32 DEFAULT u32 * 2, _source String, "
        "_source_mtime DateTime, _source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id",
    )
    path = tmp_path / "a.json"
    path.write_text('{"id":1,"u32":5}\n' + ('{"id":2,"u32":-1}\n' if bad_row else "") + '{"id":3,"u32":4,"dflt":1}\n')
    report = chute.load([str(path)], "t", target=server_url, options=chute.LoadOptions(method=method))
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, int(bad_row)), report.files
    assert "server-parse" not in report.methods, report.method_why
    assert rows(server_url, "SELECT id, dflt FROM t ORDER BY id") == [["1", "10"], ["3", "1"]]


def test_auto_does_not_let_18_16_parse_a_table_with_a_default_expression(tmp_path: Path, server_url: str) -> None:
    """Text columns only (which the server's parser keeps as they are): auto would let the
    server parse the file, which would fill `d2` with '' where a record lacks it."""
    for table in ("t", "u"):
        server_query(
            server_url,
            f"CREATE TABLE {table} (id String, s String, d2 String DEFAULT concat('x', id), _source String, "
            "_source_mtime DateTime, _source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id",
        )
    path = tmp_path / "a.json"
    path.write_text('{"id":"1","s":"a"}\n{"id":"2","s":"b","d2":"given"}\n')
    report = chute.load([str(path)], "t", target=server_url)
    assert report.ok and report.rows_loaded == 2, report.files
    assert rows(server_url, "SELECT id, d2 FROM t ORDER BY id") == [["1", "x1"], ["2", "given"]]
    told = chute.load([str(path)], "u", target=server_url, options=chute.LoadOptions(method="server-parse"))
    assert any("d2" in n for n in told.notes), told.notes  # asked for: the note names the column
