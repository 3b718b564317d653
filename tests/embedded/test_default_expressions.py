"""A table column with a DEFAULT expression that a record lacks gets the expression's value
over the row's other values, on the careful pass too (a file with a bad row), as the engine's
own read gives it on the fast path; a value the record has is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.engine import Engine

TABLE = (
    "(id UInt32, u32 UInt32, dflt UInt32 DEFAULT u32 * 2, d2 String DEFAULT concat('x', toString(id)), "
    "_source String, _source_mtime DateTime64(3), _source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id"
)
FILES = {
    "json": '{"id":1,"u32":5}\n{"id":2,"u32":-1}\n{"id":3,"u32":4,"dflt":1,"d2":"given"}\n',
    "csv": "id,u32\n1,5\n2,-1\n3,4\n",
    "tsv": "id\tu32\n1\t5\n2\t-1\n3\t4\n",
}


@pytest.mark.parametrize("bad_row", [True, False], ids=["careful-pass", "fast-path"])
@pytest.mark.parametrize("ext", sorted(FILES))
def test_a_missing_field_takes_the_column_s_default_expression(
    tmp_path: Path, target: str, engine: Engine, ext: str, bad_row: bool
) -> None:
    engine.execute(f"CREATE TABLE t {TABLE}")
    text = FILES[ext] if bad_row else "\n".join(line for line in FILES[ext].splitlines() if "-1" not in line) + "\n"
    path = tmp_path / f"a.{ext}"
    path.write_text(text)
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, int(bad_row)), report.files
    rows = [tuple(r.values()) for r in engine.rows("SELECT id, dflt, d2 FROM t ORDER BY id")]
    third = (3, 1, "given") if ext == "json" else (3, 8, "x3")
    assert rows == [(1, 10, "x1"), third]
