"""A new table inferred from the files: types widened across files."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.engine import Engine, open_engine
from chute.schema import Column, union_columns


def table_types(target: str) -> dict[str, str]:
    rows = open_engine(target).rows("SELECT name, type FROM system.columns WHERE table = 't'")
    return {r["name"]: r["type"] for r in rows if not r["name"].startswith("_")}


def select(target: str, sql: str) -> list[list[str]]:
    text = open_engine(target).text(sql)
    return [line.split("\t") for line in text.splitlines()]


def test_a_type_that_differs_between_files_is_widened(tmp_path: Path, target: str) -> None:
    """The tester's case: a number, then text, then a float; every file's rows load."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.jsonl").write_text('{"id":1,"v":5,"x":1}\n')
    (d / "b.jsonl").write_text('{"id":2,"v":"text","x":2.5}\n')
    (d / "c.jsonl").write_text('{"id":3,"v":1.5,"w":true,"x":3}\n')
    report = chute.load([str(d)], table="t", target=target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (3, 0), report.files
    assert table_types(target) == {"id": "Int64", "v": "String", "x": "Float64", "w": "Nullable(Bool)"}
    assert select(target, "SELECT id, v, x, w FROM t ORDER BY id") == [
        ["1", "5", "1", "\\N"],
        ["2", "text", "2.5", "\\N"],
        ["3", "1.5", "3", "true"],
    ]
    assert any(n.startswith("column v String: Int64 in ") for n in report.notes), report.notes


@pytest.mark.parametrize(
    ("first", "later", "common"),
    [
        ("Int64", "Float64", "Float64"),  # (the engine has no common type: inference's own rule)
        ("Int64", "String", "String"),
        ("Nullable(Int64)", "String", "Nullable(String)"),
        ("Date", "Int64", "String"),
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
