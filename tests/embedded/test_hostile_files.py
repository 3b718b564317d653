"""Files shaped the way real exports sometimes are, which the engine alone would read wrong:
lines ending in a bare CR (classic Mac OS, Excel's "CSV (Macintosh)"), objects nested deeper
than the engine reads a type back from a table's parts, a header ending in a delimiter, a UTF-8
BOM before a quoted header name, Parquet
columns whose type differs from the table's (the engine's reader would change their values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chute
from chute.engine import Engine, close_engines, open_engine
from chute.errors import SchemaError, SourceError

PROVENANCE = "_source String, _source_mtime DateTime64(3), _source_row UInt64, _load_id String"


@pytest.mark.parametrize("suffix", ["csv", "tsv"])
def test_bare_cr_line_ends_fail_the_file_not_its_rows(tmp_path: Path, target: str, suffix: str) -> None:
    """Read by lines, such a file is one line: a header whose names run into the rows (`b\\r1`),
    and no row at all, reported as a clean load of 0 rows. It fails, saying why."""
    sep = "," if suffix == "csv" else "\t"
    path = tmp_path / f"mac.{suffix}"
    path.write_bytes(f"a{sep}b\r1{sep}x\r2{sep}y\r".encode())
    with pytest.raises(SourceError, match=r"bare CR"):
        chute.load([str(path)], table="t", target=target)


@pytest.mark.parametrize("create_first", [False, True], ids=["new-table", "existing-table"])
def test_a_bare_cr_file_fails_alone_beside_good_ones(
    tmp_path: Path, target: str, engine: Engine, create_first: bool
) -> None:
    if create_first:
        engine.execute(f"CREATE TABLE t (a Int64, b String, {PROVENANCE}) ENGINE = MergeTree ORDER BY a")
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_bytes(b"a,b\n1,x\n")
    (data / "b.csv").write_bytes(b"a,b\r2,y\r3,z\r")
    (data / "c.csv").write_bytes(b"a,b\n4,w\n")
    report = chute.load([str(data)], table="t", target=target)
    states = {Path(f.source).name: (f.state, f.rows_read, f.error or "") for f in report.files}
    assert states["a.csv"][:2] == ("loaded", 1) and states["c.csv"][:2] == ("loaded", 1), states
    assert states["b.csv"][0] == "failed" and "bare CR" in states["b.csv"][2], states
    assert not report.ok
    columns = engine.rows("SELECT name FROM system.columns WHERE table = 't' AND name NOT LIKE '\\_%'")
    names = [r["name"] for r in columns]
    assert names == ["a", "b"]
    assert [r["a"] for r in engine.rows("SELECT a FROM t ORDER BY a")] == [1, 4]


DEEP = 160
"""Levels of nesting past what the engine's type parser reads back (149: its depth limit of 300,
two a level): a part whose column type is deeper is "broken-on-start" at the engine's next start,
and its rows are gone from the table while the ledger says the file is done."""


def _deep_object(depth: int, leaf: int) -> dict[str, object]:
    value: dict[str, object] = {"v": leaf}
    for _ in range(depth):
        value = {"n": value}
    return value


def _rows_after_restart(target: str) -> tuple[int, list[str]]:
    close_engines()  # the engine starts again from the directory, as the next chute command's does
    engine = open_engine(target)
    n = int(engine.rows("SELECT count() AS n FROM t")[0]["n"])
    broken = [str(r["name"]) for r in engine.rows("SELECT name FROM system.detached_parts WHERE table = 't'")]
    return n, broken


def test_json_objects_nested_too_deep_for_a_type_are_kept_as_their_text(tmp_path: Path, target: str) -> None:
    path = tmp_path / "deep.json"
    lines = [json.dumps({"id": i, "deep": _deep_object(DEEP, i)}) for i in range(3)]
    path.write_text("\n".join(lines) + "\n")
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and report.rows_loaded == 3, report.files
    assert any("column deep" in note for note in report.notes), report.notes
    assert _rows_after_restart(target) == (3, [])
    engine = open_engine(target)
    texts = [r["deep"] for r in engine.rows("SELECT deep FROM t ORDER BY id")]
    assert [json.loads(t) for t in texts] == [_deep_object(DEEP, i) for i in range(3)]
    again = chute.load([str(path)], table="t", target=target)
    assert again.ok and again.rows_loaded == 0 and _rows_after_restart(target) == (3, [])


def test_parquet_structs_nested_too_deep_for_a_type_are_kept_as_their_text(tmp_path: Path, target: str) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    kind = pa.struct([("v", pa.int64())])
    for _ in range(DEEP):
        kind = pa.struct([("n", kind)])
    path = tmp_path / "deep.parquet"
    values = pa.array([_deep_object(DEEP, 1), _deep_object(DEEP, 2)], kind)
    pq.write_table(pa.table({"id": [1, 2], "deep": values}), path)
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and report.rows_loaded == 2, report.files
    assert _rows_after_restart(target) == (2, [])


def test_a_table_with_a_type_too_deep_to_read_back_is_refused(tmp_path: Path, target: str, engine: Engine) -> None:
    """A table made so by hand: its rows would load, then be gone at the engine's next start."""
    deep = "Int64"
    for _ in range(DEEP):
        deep = f"Tuple(n {deep})"
    engine.execute(f"CREATE TABLE t (id Int64, deep {deep}, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({"id": 1}) + "\n")
    with pytest.raises(SchemaError, match=r"deep.*nest"):
        chute.load([str(path)], table="t", target=target)


@pytest.mark.parametrize("sep", [",", "\t", ";"], ids=["csv", "tsv", "semicolon"])
def test_a_header_ending_in_a_delimiter_names_a_new_tables_columns(tmp_path: Path, target: str, sep: str) -> None:
    """`id,name,score,` (a delimiter after every field, as many exporters write): the engine took
    the header for a row, so the table had columns c1..c4 of String and the names as its first row."""
    path = tmp_path / ("t.tsv" if sep == "\t" else "t.csv")
    path.write_text(
        "".join(sep.join(r) + sep + "\n" for r in [["id", "name", "score"], ["1", "x", "2.5"], ["2", "y", "3.5"]])
    )
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and (report.rows_read, report.rows_loaded) == (2, 2), report.files
    engine = open_engine(target)
    columns = engine.rows("SELECT name, type FROM system.columns WHERE table = 't' AND name NOT LIKE '\\_%'")
    assert [(r["name"], r["type"]) for r in columns] == [("id", "Int64"), ("name", "String"), ("score", "Float64")]
    assert [tuple(r.values()) for r in engine.rows("SELECT id, name, score FROM t ORDER BY id")] == [
        (1, "x", 2.5),
        (2, "y", 3.5),
    ]
    again = chute.load([str(path)], table="t", target=target)
    assert again.ok and again.rows_loaded == 0


def test_a_text_header_ending_in_a_delimiter_names_the_columns_with_header(tmp_path: Path, target: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text("name,city,\nx,y,\nz,w,\n")
    report = chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(header=True))
    assert report.ok and report.rows_loaded == 2, report.files
    rows = open_engine(target).rows("SELECT name, city FROM t ORDER BY name")
    assert [tuple(r.values()) for r in rows] == [("x", "y"), ("z", "w")]


def _parquet(path: Path, **columns: object) -> str:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table(columns), path)
    return str(path)


def _loaded(engine: Engine, column: str) -> list[tuple[object, ...]]:
    return [tuple(r.values()) for r in engine.rows(f"SELECT id, toString({column}) FROM t ORDER BY id")]


def _rejected(engine: Engine) -> list[tuple[object, ...]]:
    return [tuple(r.values()) for r in engine.rows("SELECT _source_row, error FROM t_rejects ORDER BY _source_row")]


def test_parquet_text_into_a_number_column_is_checked_not_nulled(tmp_path: Path, target: str, engine: Engine) -> None:
    """The first file makes `v` a number column; the second holds `v` as text. Read as the table's
    type, the engine's Parquet reader made `x` and `` NULL: values changed without a word."""
    first = _parquet(tmp_path / "a.parquet", id=[1, 2], v=[10, 20])
    second = _parquet(tmp_path / "b.parquet", id=[3, 4, 5, 6], v=["x", "12", "", None])
    report = chute.load([first, second], table="t", target=target)
    assert report.ok and (report.rows_read, report.rows_loaded, report.rows_rejected) == (6, 4, 2), report.files
    assert _loaded(engine, "v") == [(1, "10"), (2, "20"), (4, "12"), (6, None)]  # (v is Nullable(Int64))
    assert _rejected(engine) == [(1, "column v: x does not fit Int64"), (3, "column v:  does not fit Int64")]
    again = chute.load([first, second], table="t", target=target)
    assert again.ok and again.rows_loaded == 0


def test_parquet_text_into_a_column_not_nullable_counts_its_nulls(tmp_path: Path, target: str, engine: Engine) -> None:
    engine.execute(f"CREATE TABLE t (id Int64, v Int32, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    path = _parquet(tmp_path / "b.parquet", id=[1, 2, 3], v=["x", "12", None])
    report = chute.load([path], table="t", target=target)
    assert report.ok and (report.rows_loaded, report.rows_rejected, report.rows_defaulted) == (2, 1, 1), report.files
    assert _loaded(engine, "v") == [(2, "12"), (3, "0")]
    assert _rejected(engine) == [(1, "column v: x does not fit Int32")]


@pytest.mark.parametrize(
    ("table_type", "values", "loaded", "rejected"),
    [
        ("Int64", [1.5, 2.0, -0.7], [(2, "2")], [1, 3]),  # a fraction was cut off: 1, 0
        ("Enum8('a' = 1, 'b' = 2)", [1, 20000, 2], [(1, "a"), (3, "b")], [2]),  # 20000 wrapped into the enum
        ("Nullable(Float64)", ["1.5", "n/a", None], [(1, "1.5"), (3, None)], [2]),
    ],
    ids=["float-into-int", "int-into-enum", "text-into-nullable"],
)
def test_parquet_values_of_another_type_are_checked(
    tmp_path: Path, target: str, engine: Engine, table_type: str, values: list[object], loaded: object, rejected: object
) -> None:
    engine.execute(f"CREATE TABLE t (id Int64, v {table_type}, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    path = _parquet(tmp_path / "a.parquet", id=list(range(1, len(values) + 1)), v=values)
    report = chute.load([path], table="t", target=target)
    assert report.ok and report.rows_read == len(values), report.files
    assert _loaded(engine, "v") == loaded
    assert [row for row, _ in _rejected(engine)] == rejected


@pytest.mark.parametrize("create_first", [False, True], ids=["new-table", "existing-table"])
def test_a_bom_before_a_quoted_header_name(tmp_path: Path, target: str, engine: Engine, create_first: bool) -> None:
    """`\\ufeff"id","na,me"` (PowerShell's Export-Csv, Excel's CSV UTF-8 with quoted names): the
    engine's inference named the first column `\\ufeff"id"`; chute's SQL then failed on `"id"`."""
    if create_first:
        engine.execute(
            f'CREATE TABLE t (`i"d` Int64, `na,me` String, {PROVENANCE}) ENGINE = MergeTree ORDER BY tuple()'
        )
    path = tmp_path / "bom.csv"
    path.write_bytes(b'\xef\xbb\xbf"i""d","na,me"\r\n1,a\r\n2,"b,c"\r\n')
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and report.rows_loaded == 2, report.files
    rows = engine.rows('SELECT `i"d` AS i, `na,me` AS n FROM t ORDER BY i')
    assert [tuple(r.values()) for r in rows] == [(1, "a"), (2, "b,c")]


def test_parquet_nulls_into_a_string_column_take_its_default(tmp_path: Path, target: str, engine: Engine) -> None:
    """A NULL bool, integer or timestamp into a String column was `false`, `0` and
    `1970-01-01 00:00:00.000000` (the file type's zero, as text), where the column's default is ''."""
    import datetime

    engine.execute(
        f"CREATE TABLE t (id Int64, b String, i String, ts String, {PROVENANCE}) ENGINE = MergeTree ORDER BY id"
    )
    stamp = datetime.datetime(2024, 1, 2, 3, 4, 5)
    path = _parquet(tmp_path / "a.parquet", id=[1, 2], b=[True, None], i=[7, None], ts=[stamp, None])
    report = chute.load([path], table="t", target=target)
    assert report.ok and (report.rows_loaded, report.rows_defaulted) == (2, 1), report.files
    rows = engine.rows("SELECT id, b, i, ts FROM t ORDER BY id")
    assert [tuple(r.values()) for r in rows] == [(1, "true", "7", "2024-01-02 03:04:05.000000"), (2, "", "", "")]


def test_parquet_files_of_both_kinds_in_one_load(tmp_path: Path, target: str, engine: Engine) -> None:
    """Files whose `v` is a number and files whose `v` is text, interleaved: each read as its own kind
    (a batch is read with one structure: the first file's)."""
    engine.execute(f"CREATE TABLE t (id Int64, v Int32, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    paths = [
        _parquet(tmp_path / f"{i}.parquet", id=[2 * i, 2 * i + 1], v=[i, i + 1] if i % 2 else [str(i), "bad"])
        for i in range(6)
    ]
    report = chute.load(paths, table="t", target=target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (9, 3), report.files
    assert [tuple(r.values()) for r in engine.rows("SELECT id, v FROM t ORDER BY id")] == [
        (0, 0),
        (2, 1),
        (3, 2),
        (4, 2),
        (6, 3),
        (7, 4),
        (8, 4),
        (10, 5),
        (11, 6),
    ]


@pytest.mark.parametrize("indent", [None, 2], ids=["one-line-array", "pretty-printed-array"])
def test_a_json_array_file_makes_a_new_table(tmp_path: Path, target: str, engine: Engine, indent: int | None) -> None:
    """The engine reads a JSON array of objects (or objects over several lines) as rows, and did so
    into an existing table; a new table's inference refused it: "no line is a JSON object"."""
    path = tmp_path / "a.json"
    path.write_text(json.dumps([{"id": i, "s": f"x{i}"} for i in range(3)], indent=indent))
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and (report.rows_read, report.rows_loaded) == (3, 3), report.files
    rows = engine.rows("SELECT id, s, _source_row FROM t ORDER BY id")
    assert [tuple(r.values()) for r in rows] == [(0, "x0", 1), (1, "x1", 2), (2, "x2", 3)]
    again = chute.load([str(path)], table="t", target=target)
    assert again.ok and again.rows_loaded == 0


def test_a_csv_of_blank_lines_makes_no_table(tmp_path: Path, target: str, engine: Engine) -> None:
    """It made a table of one column, `c1 Nullable(String)`, and loaded nothing, as a success."""
    blank = tmp_path / "blank.csv"
    blank.write_text("\n\n  \n")
    with pytest.raises(SourceError, match="only blank lines"):
        chute.load([str(blank)], table="t", target=target)
    later = tmp_path / "later.csv"  # (blank lines past the sniffer's sample, then rows: a file like others)
    later.write_text("\n" * 40 + "id,s\n2,b\n")
    (tmp_path / "good.csv").write_text("id,s\n1,a\n")
    report = chute.load([str(blank), str(tmp_path / "good.csv")], table="t", target=target)
    assert report.ok and report.rows_loaded == 1, report.files
    assert chute.load([str(later)], table="t2", target=target).rows_loaded == 1
    columns = engine.rows("SELECT name FROM system.columns WHERE table = 't' AND name NOT LIKE '\\_%'")
    assert [r["name"] for r in columns] == ["id", "s"]
