"""User columns named like the names chute's own SQL uses (issue 46, item 1).

A CSV column `row` and one bad row made every loaded row's `_source_row` the user's `row`
value; columns `k` or `reason` (CSV) or `overflow` (JSON) failed a whole file on one bad value.
Here a table has a column named after every alias and scratch column chute's passes use
(`row`, `k`, `reason`, `raw`, `overflow`, `v0`, `p1`, `f0`, ...), and files with bad rows go
through every pass: fast, careful (CSV, TSV, JSON), tolerant (JSON, embedded), typed files
(Parquet) and server-parse (the 18.16 server). Each good row loads with its own values and
its line number, each bad one is a reject with its line number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.sql import quote_ident

from ..harness.data import write_with_engine
from .test_fidelity import dest, rows

_ = dest  # (the fixture: embedded and the 18.16 server)

NAMES = (
    "row", "k", "reason", "raw", "overflow", "error", "at", "ok", "blank", "blanks", "fits", "bad", "n", "s", "q",
    "lo", "hi", "l", "p", "b", "x", "i", "acc", "odd", "lines", "line", "width", "first", "kept", "start", "before",
    "breaks", "records", "good_lines", "offset", "size", "rows", "f", "v", "c", "id2", "v0", "v1", "v2", "p0", "p1",
    "p2", "f0", "f1", "f2", "h0", "time", "database", "table", "__chute_row", "__chute_in", "__chute_source",
    "__chute_found", "__chute_v",
)  # fmt: skip
"""Names chute's passes give their own values in SQL beside the user's columns."""
TEXT = frozenset({"raw", "error", "line", "s"})
"""Columns of type String (the others are UInt16)."""
DEFAULTED = "p1"
"""A column with a DEFAULT expression (its `p{i}` flag once met a user column of that name)."""
BAD = {3: "row", 5: "k", 7: "reason", 9: "overflow", 11: "v0", 13: "__chute_row", 15: "n"}
"""Line (= id) -> the column holding a value that does not fit, in that row."""
ROWS = 24


def _ddl() -> str:
    columns = ["id UInt32"]
    for name in NAMES:
        kind = "String" if name in TEXT else "UInt16"
        default = " DEFAULT toUInt16(id + 1000)" if name == DEFAULTED else ""
        columns.append(f"{quote_ident(name)} {kind}{default}")
    columns += ["_source String", "_source_mtime DateTime", "_source_row UInt64", "_load_id String"]
    return f"CREATE TABLE t ({', '.join(columns)}) ENGINE = MergeTree ORDER BY id"


def _value(row: int, j: int, name: str) -> str | int:
    return f"t{row}_{j}" if name in TEXT else (row * 100 + j) % 65536


def _record(row: int) -> dict[str, str | int]:
    record: dict[str, str | int] = {"id": row}
    for j, name in enumerate(NAMES):
        record[name] = _value(row, j, name)
    if row in BAD:
        record[BAD[row]] = "not a number"
    return record


def _create(dest: str) -> None:
    if "://" in dest:
        from ..harness.servers import server_query

        server_query(dest, _ddl())
    else:
        open_engine(dest).execute(_ddl())


def _write(tmp_path: Path, fmt: str, dirty: bool, omit: bool = True) -> Path:
    lines = [_record(r) for r in range(1, ROWS + 1) if dirty or r not in BAD]
    if fmt == "json":
        path = tmp_path / "names.jsonl"
        # (the DEFAULT column's key left out of some lines: its expression fills them)
        text = [
            json.dumps({k: v for k, v in rec.items() if not (omit and k == DEFAULTED and int(rec["id"]) % 4 == 0)})
            for rec in lines
        ]
        path.write_text("\n".join(text) + "\n")
        return path
    sep = "," if fmt == "csv" else "\t"
    path = tmp_path / f"names.{fmt}"
    header = sep.join(["id", *NAMES])
    body = [sep.join(str(rec[k]) for k in ["id", *NAMES]) for rec in lines]
    path.write_text("\n".join([header, *body]) + "\n")
    return path


def _check(
    dest: str, report: chute.LoadReport, fmt: str, dirty: bool, blank_line: bool = False, omit: bool = True
) -> None:
    assert report.ok, [f.error for f in report.files]
    good = [r for r in range(1, ROWS + 1) if r not in BAD]  # (a clean file: the dirty one without its bad rows)
    assert report.rows_loaded == len(good)
    assert report.rows_rejected == (len(BAD) if dirty else 0)
    got = rows(dest, f"SELECT id, _source_row, {', '.join(quote_ident(n) for n in NAMES)} FROM t ORDER BY id")
    assert [int(r[0]) for r in got] == good
    # The row's line number: its record's number (CSV/TSV: the header is no record), a blank
    # line counted (JSON: numbered by line).
    shift = (lambda r: r + 1 if r >= 2 else r) if blank_line else (lambda r: r)
    for line in got:
        row = int(line[0])
        assert int(line[1]) == shift(row if dirty else good.index(row) + 1), (row, line[1])
        for j, name in enumerate(NAMES):
            expected = _value(row, j, name)
            if omit and name == DEFAULTED and fmt == "json" and row % 4 == 0:
                expected = row + 1000
            assert line[2 + j] == str(expected), (row, name)
    if dirty:
        rejected = rows(dest, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row")
        assert [int(r[0]) for r in rejected] == [shift(r) for r in BAD]
        for (_, error), column in zip(rejected, BAD.values(), strict=True):
            assert column in error, error


@pytest.mark.parametrize(
    "fmt, dirty",
    [("csv", False), ("csv", True), ("tsv", True), ("json", False), ("json", True)],
)
def test_columns_named_like_internal_names_load_on_every_text_pass(
    tmp_path: Path, dest: str, fmt: str, dirty: bool
) -> None:
    """fast (clean), careful (CSV/TSV dirty; JSON dirty on the server), tolerant (JSON dirty, embedded)."""
    _create(dest)
    report = chute.load([str(_write(tmp_path, fmt, dirty))], table="t", target=dest)
    _check(dest, report, fmt, dirty)


def test_internal_names_on_the_careful_json_pass(tmp_path: Path, dest: str) -> None:
    """A blank line: the tolerant pass cannot reconcile lines and records, the careful one reads the file."""
    _create(dest)
    path = _write(tmp_path, "json", True)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "", *lines[1:]]) + "\n")
    report = chute.load([str(path)], table="t", target=dest)
    _check(dest, report, "json", True, blank_line=True)


def test_internal_names_on_the_typed_pass(tmp_path: Path, dest: str) -> None:
    """Parquet with values too big for their UInt16 columns: the typed pass rejects those rows."""
    _create(dest)
    selects = []
    for r in range(1, ROWS + 1):
        values = [f"toUInt32({r}) AS id"]
        for j, name in enumerate(NAMES):
            if name in TEXT:
                values.append(f"'{_value(r, j, name)}' AS {quote_ident(name)}")
            else:
                big = 70000 if BAD.get(r) == name else _value(r, j, name)
                values.append(f"toInt32({big}) AS {quote_ident(name)}")
        selects.append(f"SELECT {', '.join(values)}")
    path = tmp_path / "names.parquet"
    select = f"SELECT * FROM ({' UNION ALL '.join(selects)}) ORDER BY id"
    write_with_engine(open_engine(str(tmp_path / "gen")), path, "Parquet", select)
    report = chute.load([str(path)], table="t", target=dest)
    _check(dest, report, "parquet", True)


@pytest.mark.parametrize("dirty", [False, True])
@pytest.mark.parametrize("fmt, method", [("json", "server-parse"), ("csv", "server-parse"), ("json", "auto")])
def test_internal_names_with_server_parse(tmp_path: Path, server_url: str, fmt: str, dirty: bool, method: str) -> None:
    """The server parses the file; auto with --spare-client checks its values against chute's
    read (chute.load.verify); a dirty file is read here. (Every key present: a server before
    19.x gives a missing field its type's default, as --method server-parse's note says.)"""
    _create(server_url)
    path = _write(tmp_path, fmt, dirty, omit=False)
    options = chute.LoadOptions(method=method, spare="client" if method == "auto" else None)
    report = chute.load([str(path)], table="t", target=server_url, options=options)
    if not dirty:  # (a dirty file is read here: its bad rows are rejects)
        assert report.methods == {"server-parse": 1}, (report.methods, report.method_why)
    _check(server_url, report, fmt, dirty, omit=False)
