"""NULLs and missing values into columns that are not Nullable (issue #25): Parquet columns
are Nullable only where the files hold NULLs, and a value that takes its column's default
instead of a NULL is counted in the report. Both targets, real files."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.engine import open_engine

from ..harness.servers import server_query

PROVENANCE = ("_source", "_source_mtime", "_source_row", "_load_id")


@pytest.fixture(params=["embedded", "server"])
def dest(request: pytest.FixtureRequest, target: str) -> str:
    """The load's target: the embedded directory, or a fresh database on the 18.16 server."""
    if request.param == "server":
        return str(request.getfixturevalue("server_url"))
    return target


def rows(dest: str, sql: str) -> list[list[str]]:
    remote = "://" in dest
    text = server_query(dest, sql + " FORMAT TSVRaw") if remote else open_engine(dest).text(sql, "TSVRaw")
    return [line.split("\t") for line in text.splitlines() if line]


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
