"""A new table inferred from the files: types widened across files, bad records in the sample
left to the rejects table, names no column can have refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.engine import Engine, open_engine
from chute.errors import SourceError
from chute.schema import Column, union_columns


def table_types(target: str) -> dict[str, str]:
    rows = open_engine(target).rows("SELECT name, type FROM system.columns WHERE table = 't'")
    return {r["name"]: r["type"] for r in rows if not r["name"].startswith("_")}


def select(target: str, sql: str) -> list[list[str]]:
    text = open_engine(target).text(sql)
    return [line.split("\t") for line in text.splitlines()]


def test_a_type_that_differs_between_files_is_widened_or_kept(tmp_path: Path, target: str) -> None:
    """The tester's case: a number, then text, then a float. Numbers widen (Int64 and Float64:
    Float64); text in a number column stays the number's type, its value a rejected row with a
    note: one stray "oops" does not make the column text."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.jsonl").write_text('{"id":1,"v":5,"x":1}\n')
    (d / "b.jsonl").write_text('{"id":2,"v":"text","x":2.5}\n{"id":4,"v":7,"x":4}\n')
    (d / "c.jsonl").write_text('{"id":3,"v":1.5,"w":true,"x":3}\n')
    report = chute.load([str(d)], table="t", target=target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (3, 1), report.files
    assert table_types(target) == {"id": "Int64", "v": "Float64", "x": "Float64", "w": "Nullable(Bool)"}
    assert select(target, "SELECT id, v, x, w FROM t ORDER BY id") == [
        ["1", "5", "1", "\\N"],
        ["3", "1.5", "3", "true"],
        ["4", "7", "4", "\\N"],
    ]
    assert select(target, "SELECT error FROM t_rejects") == [["column v: text does not fit Float64"]]
    assert any(n.startswith("column v Float64: files hold String values too") for n in report.notes), report.notes


@pytest.mark.parametrize(
    ("first", "later", "common"),
    [
        ("Int64", "Float64", "Float64"),  # (the engine has no common type: inference's own rule)
        ("Int64", "String", "Int64"),  # (a stray "oops" is a rejected row, not a text column)
        ("Nullable(Int64)", "String", "Nullable(Int64)"),
        ("Date", "Int64", "Date"),
        ("Date", "DateTime", "DateTime"),
        ("Int8", "Int64", "Int64"),
        ("Array(Int64)", "Array(Float64)", "Array(Float64)"),  # (`if` said Array(Int64))
        ("Map(String, Int64)", "Map(String, String)", "String"),  # (`if` said Map(String, Int64))
        ("Tuple(a Int64)", "Tuple(a Int64, b String)", "String"),  # (`if` dropped b)
    ],
)
def test_union_columns_common_types(engine: Engine, first: str, later: str, common: str) -> None:
    merged = union_columns(engine, [[Column("v", first)], [Column("v", later)]])
    assert [(c.name, c.type) for c in merged] == [("v", common)]


BAD_SAMPLES = {
    # name: (file text, rows loaded, rejected rows as (_source_row, raw), SELECT of the table, its rows)
    "ragged.csv": (
        "id,a,b\n1,2,3\n4,5\n6,7,8,9\n",
        1,
        [("2", "4,5"), ("3", "6,7,8,9")],
        "SELECT id, a, b FROM t",
        [["1", "2", "3"]],
    ),
    "not-objects.jsonl": (
        '{"id":1}\n[1,2]\n{"id":2}\n',
        2,
        [("2", "[1,2]")],
        "SELECT id FROM t ORDER BY id",
        [["1"], ["2"]],
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_SAMPLES))
def test_bad_records_in_the_sample_go_to_rejects(tmp_path: Path, target: str, name: str) -> None:
    """Inference of a new table reads past bad records; the load rejects them with their reasons,
    as it does for a table that exists."""
    text, loaded, rejected, sql, want = BAD_SAMPLES[name]
    (tmp_path / name).write_text(text)
    report = chute.load([str(tmp_path / name)], table="t", target=target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (loaded, len(rejected)), report.files
    assert select(target, sql) == want
    reasons = select(target, "SELECT _source_row, raw, error FROM t_rejects ORDER BY _source_row")
    assert [(r[0], r[1]) for r in reasons] == rejected and all(r[2] for r in reasons)
    assert any("inferred from the" in n for n in report.notes), report.notes


def test_a_trailing_blank_line_makes_a_table(tmp_path: Path, target: str) -> None:
    """A CSV file ending with a blank line (very common) is inferred from its rows. (Whether the
    blank line is a rejected row or no row at all is the load's business, not inference's.)"""
    (tmp_path / "t.csv").write_text("id,txt\n1,a\n2,b\n\n")
    report = chute.load([str(tmp_path / "t.csv")], table="t", target=target)
    assert report.ok and report.rows_loaded == 2 and report.rows_rejected <= 1, report.files
    assert table_types(target) == {"id": "Int64", "txt": "String"}
    assert select(target, "SELECT id, txt FROM t ORDER BY id") == [["1", "a"], ["2", "b"]]


def test_a_header_naming_a_field_twice_is_one_line(tmp_path: Path, target: str) -> None:
    (tmp_path / "dup.csv").write_text("a,a,b\n1,2,3\n")
    with pytest.raises(SourceError, match=r"dup\.csv: the header line names a more than once") as raised:
        chute.load([str(tmp_path / "dup.csv")], table="t", target=target)
    assert "\n" not in str(raised.value) and "[636" not in str(raised.value)


def test_a_json_field_named_empty_is_refused(tmp_path: Path, target: str) -> None:
    """No column can be named "": a new table is not made of such a file (the engine's inference
    would drop the field, then its read refuse every row); a table that exists rejects the rows,
    saying why."""
    path = tmp_path / "k.jsonl"
    path.write_text('{"id":1,"":2}\n{"id":2}\n')
    for _ in range(2):  # a re-run says the same
        with pytest.raises(SourceError, match=r'k\.jsonl: line 1 has a field named "" \(the empty key\)'):
            chute.load([str(path)], table="t", target=target)
    assert table_types(target) == {}
    open_engine(target).execute("CREATE TABLE t (id Int64) ENGINE = MergeTree ORDER BY id")
    report = chute.load([str(path)], table="t", target=target)
    assert (report.rows_loaded, report.rows_rejected) == (1, 1), report.files
    assert select(target, "SELECT _source_row, error FROM t_rejects") == [
        ["1", 'a field named "" (the empty key), which no column can be named']
    ]
