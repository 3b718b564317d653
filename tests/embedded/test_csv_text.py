"""CSV/TSV text as written: spaces around unquoted values, blank lines, quoted commas in a
header, a header with an unnamed column, and TSV lines ending in CRLF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import chute
from chute.engine import Engine
from chute.errors import SchemaError

PROVENANCE = "_source String, _source_mtime DateTime64(3), _source_row UInt64, _load_id String"


def _write(path: Path, text: str) -> str:
    path.write_bytes(text.encode())
    return str(path)


def _rows(engine: Engine, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) for r in engine.rows(sql)]


@pytest.mark.parametrize("create_first", [False, True], ids=["new-table", "existing-table"])
def test_spaces_around_unquoted_csv_text_are_kept(
    tmp_path: Path, target: str, engine: Engine, create_first: bool
) -> None:
    if create_first:
        engine.execute(f"CREATE TABLE t (id Int64, s String, n Int64, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    path = _write(tmp_path / "ws.csv", 'id,s,n\n1,  padded  , 7 \n2,\ttab\t,8\n3," q ",9\n')
    report = chute.load([path], table="t", target=target)
    assert report.ok and report.rows_loaded == 3, report.files
    assert _rows(engine, "SELECT id, s, n FROM t ORDER BY id") == [
        (1, "  padded  ", 7),
        (2, "\ttab\t", 8),
        (3, " q ", 9),
    ]


def test_padded_numbers_still_infer_as_numbers(tmp_path: Path, target: str, engine: Engine) -> None:
    path = _write(tmp_path / "p.csv", "id,f,s\n 1 , 1.5 , x \n2,2.5,y\n")
    report = chute.load([path], table="t", target=target)
    assert report.ok and report.rows_loaded == 2, report.files
    types = {r["name"]: r["type"] for r in engine.rows("SELECT name, type FROM system.columns WHERE table = 't'")}
    assert (types["id"], types["f"], types["s"]) == ("Int64", "Float64", "String")
    assert _rows(engine, "SELECT id, f, s FROM t ORDER BY id") == [(1, 1.5, " x "), (2, 2.5, "y")]


def test_a_header_with_padded_names_still_names_the_columns(tmp_path: Path, target: str, engine: Engine) -> None:
    """The engine matches padded names only when it trims: that load trims values too, and says so."""
    path = _write(tmp_path / "h.csv", "id, s ,n\n1, a , 2\n")
    report = chute.load([path], table="t", target=target)
    assert report.ok and report.rows_loaded == 1, report.files
    assert _rows(engine, "SELECT id, s, n FROM t") == [(1, "a", 2)]
    assert any("trimmed" in note for note in report.notes), report.notes


@pytest.mark.parametrize("ext,sep", [("csv", ","), ("tsv", "\t")])
@pytest.mark.parametrize("create_first", [False, True], ids=["new-table", "existing-table"])
def test_blank_lines_are_no_rows(
    tmp_path: Path, target: str, engine: Engine, ext: str, sep: str, create_first: bool
) -> None:
    """Blank lines, at the end or between rows, are skipped as in JSON lines; a row keeps its
    line's number (the header aside)."""
    if create_first:
        engine.execute(f"CREATE TABLE t (id Int64, txt String, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    trailing = _write(tmp_path / f"trailing.{ext}", f"id{sep}txt\n1{sep}a\n2{sep}b\n\n")
    between = _write(tmp_path / f"between.{ext}", f"id{sep}txt\n3{sep}c\n\n4{sep}d\n \n\n")
    report = chute.load([trailing, between], table="t", target=target)
    assert report.ok, report.files
    assert (report.rows_read, report.rows_loaded, report.rows_rejected) == (4, 4, 0)
    got = _rows(engine, "SELECT id, txt, _source_row FROM t ORDER BY id")
    assert got == [(1, "a", 1), (2, "b", 2), (3, "c", 1), (4, "d", 3)]


def test_a_quoted_comma_in_a_header_is_one_name(tmp_path: Path, target: str, engine: Engine) -> None:
    path = _write(tmp_path / "q.csv", 'a,b,"x,y"\n1,2,3\n')
    report = chute.load([path], table="t", target=target)
    assert report.ok and report.rows_loaded == 1, report.files
    assert _rows(engine, "SELECT a, b, `x,y` FROM t") == [(1, 2, 3)]


@pytest.mark.parametrize("add_columns", [False, True])
def test_a_quoted_record_naming_columns_is_data_and_alters_nothing(
    tmp_path: Path, target: str, engine: Engine, add_columns: bool
) -> None:
    engine.execute(f"CREATE TABLE t (id Int64, txt String, n Int64, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    path = _write(tmp_path / "d.csv", '1,"id,txt,n",2\n3,q,4\n')
    report = chute.load([path], table="t", target=target, options=chute.LoadOptions(add_columns=add_columns))
    assert report.ok and report.rows_loaded == 2, report.files
    assert _rows(engine, "SELECT id, txt, n FROM t ORDER BY id") == [(1, "id,txt,n", 2), (3, "q", 4)]
    names = [r["name"] for r in engine.rows("SELECT name FROM system.columns WHERE table = 't' ORDER BY position")]
    assert names[:3] == ["id", "txt", "n"] and not {"c1", "c2", "c3", "x", "y"} & set(names)


@pytest.mark.parametrize("text", ["a,,b\n1,2,3\n", ",a,b\nx,2,3\n"])
def test_a_header_with_an_unnamed_column_is_an_error(tmp_path: Path, target: str, engine: Engine, text: str) -> None:
    path = _write(tmp_path / "e.csv", text)
    with pytest.raises(SchemaError, match="names no column at position"):
        chute.load([path], table="t", target=target)
    assert not engine.rows("SELECT name FROM system.tables WHERE name = 't'")


@pytest.mark.parametrize("create_first", [False, True], ids=["new-table", "existing-table"])
def test_tsv_with_crlf_line_ends(tmp_path: Path, target: str, engine: Engine, create_first: bool) -> None:
    if create_first:
        engine.execute(f"CREATE TABLE t (a Int64, b String, {PROVENANCE}) ENGINE = MergeTree ORDER BY a")
    path = _write(tmp_path / "w.tsv", "a\tb\r\n1\tx\r\n2\ty\r\n")
    report = chute.load([path], table="t", target=target)
    assert report.ok and report.rows_loaded == 2, report.files
    assert _rows(engine, "SELECT a, b, _source_row FROM t ORDER BY a") == [(1, "x", 1), (2, "y", 2)]


@pytest.mark.parametrize("type_sql", ["LowCardinality(String)", "LowCardinality(Nullable(String))"])
def test_spaces_kept_in_a_low_cardinality_column(tmp_path: Path, target: str, engine: Engine, type_sql: str) -> None:
    """The engine's LowCardinality CSV reader drops leading spaces even untrimmed: read as the inner type."""
    engine.execute(f"CREATE TABLE t (id Int64, s {type_sql}, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    path = _write(tmp_path / "lc.csv", "id,s\n1,  padded  \n2,\ttab\t\n")
    report = chute.load([path], table="t", target=target)
    assert report.ok and report.rows_loaded == 2, report.files
    assert _rows(engine, "SELECT id, s FROM t ORDER BY id") == [(1, "  padded  "), (2, "\ttab\t")]


def test_header_says_an_all_text_first_line_names_the_columns(tmp_path: Path, target: str, engine: Engine) -> None:
    """Every column text: the first line loads as a row unless --header says it names them."""
    csv = _write(tmp_path / "people.csv", "name,city\nalice,paris\nbob,rome\n")
    tsv = _write(tmp_path / "more.tsv", "name\tcity\ncarol\toslo\n")
    guessed = chute.load([csv], table="guessed", target=target)
    assert guessed.ok and guessed.rows_loaded == 3 and any("--header" in n for n in guessed.notes)
    told = chute.load([csv, tsv], table="t", target=target, options=chute.LoadOptions(header=True))
    assert told.ok and (told.rows_read, told.rows_loaded) == (3, 3), told.files
    assert _rows(engine, "SELECT name, city, _source_row FROM t ORDER BY name") == [
        ("alice", "paris", 1),
        ("bob", "rome", 2),
        ("carol", "oslo", 1),
    ]
    other = _write(tmp_path / "other.csv", "nom,ville\ndave,rome\n")
    # Its header names no column of the table: refused before anything is loaded (chute.load.shapes).
    with pytest.raises(chute.UsageError, match="CSV: nom, ville"):
        chute.load([other], table="t", target=target, options=chute.LoadOptions(header=True))


def test_no_header_loads_every_line_as_a_row(tmp_path: Path, target: str, engine: Engine) -> None:
    path = _write(tmp_path / "n.csv", "id,v\n1,a\n2,b\n")
    report = chute.load([path], table="t", target=target, options=chute.LoadOptions(header=False))
    assert report.ok and report.rows_loaded == 3, report.files
    assert _rows(engine, "SELECT c1, c2, _source_row FROM t ORDER BY _source_row") == [
        ("id", "v", 1),
        ("1", "a", 2),
        ("2", "b", 3),
    ]
    # Into a table whose columns the first line names: still a row, rejected as one.
    engine.execute(f"CREATE TABLE u (id Int64, v String, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    into = chute.load([path], table="u", target=target, options=chute.LoadOptions(header=False))
    assert into.ok and (into.rows_loaded, into.rows_rejected) == (2, 1), into.files


def test_a_file_without_a_header_after_one_with_it_fills_the_same_columns(
    tmp_path: Path, target: str, engine: Engine
) -> None:
    """Inference reads later files too: one without a header named its fields c1, c2, which
    became columns of their own (Nullable, every other column too) and its rows failed."""
    d = tmp_path / "h"
    d.mkdir()
    _write(d / "h1.csv", "id,s\n1,a\n2,b\n")
    _write(d / "h2.csv", "3,c\n4,d\n")
    report = chute.load([str(d)], table="t", target=target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (4, 0), report.files
    types = {r["name"]: r["type"] for r in engine.rows("SELECT name, type FROM system.columns WHERE table = 't'")}
    assert (types["id"], types["s"]) == ("Int64", "String") and "c1" not in types
    assert _rows(engine, "SELECT id, s FROM t ORDER BY id") == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


@pytest.mark.parametrize("delimiter", [",", ";"])
def test_a_rejected_csv_row_keeps_the_quotes_its_fields_need(
    tmp_path: Path, target: str, engine: Engine, delimiter: str
) -> None:
    """A rejected record's `raw` is rebuilt from its fields: one holding the delimiter, a quote
    or a line end is quoted again (`2,"c,d",x` was kept as `2,c,d,x`, four fields, not three)."""
    engine.execute(f"CREATE TABLE t (id Int64, s String, n Int64, {PROVENANCE}) ENGINE = MergeTree ORDER BY id")
    d = delimiter
    text = f'id{d}s{d}n\n1{d}ab{d}5\n2{d}"c{d}d"{d}x\n3{d}"say ""hi"""{d}y\n4{d}"two\nlines"{d}z\n5{d}plain{d}w\n'
    path = _write(tmp_path / "q.csv", text)
    report = chute.load([path], table="t", target=target, options=chute.LoadOptions(delimiter=d))
    assert report.rows_loaded == 1 and report.rows_rejected == 4, report.files
    raws = [r["raw"] for r in engine.rows("SELECT raw FROM t_rejects ORDER BY _source_row")]
    assert raws == [f'2{d}"c{d}d"{d}x', f'3{d}"say ""hi"""{d}y', f'4{d}"two\nlines"{d}z', f"5{d}plain{d}w"]
