"""Every format the engine reads goes through one path: check each, plain and compressed."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.sql import quote_str

from ..harness.data import write_with_engine

ROWS = "SELECT number AS id, concat('name_', toString(number)) AS name, number * 1.5 AS score FROM numbers(1000)"

CASES = [
    ("JSONEachRow", "json"),
    ("JSONEachRow", "jsonl"),
    ("JSONEachRow", "ndjson"),
    ("CSVWithNames", "csv"),
    ("TSVWithNames", "tsv"),
    ("Parquet", "parquet"),
    ("Native", "native"),
    ("ORC", "orc"),
    ("Avro", "avro"),
    ("Arrow", "arrow"),
]
COMPRESSIONS = [
    pytest.param(None, "", id="plain"),
    pytest.param("gzip", ".gz", id="gz"),
    pytest.param("zstd", ".zst", id="zst", marks=pytest.mark.slow),  # the same path as gzip: full runs only
]


@pytest.mark.parametrize("fmt,ext", CASES, ids=[c[1] for c in CASES])
@pytest.mark.parametrize("compression,suffix", COMPRESSIONS)
def test_each_format_loads(
    tmp_path: Path, target: str, fmt: str, ext: str, compression: str | None, suffix: str
) -> None:
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / f"data.{ext}{suffix}", fmt, ROWS, compression)
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok, report.files
    assert report.rows_loaded == 1000
    assert report.table_rows == 1000
    got = engine.rows("SELECT sum(id) AS s, countDistinct(name) AS n, sum(score) AS sc FROM t")[0]
    assert int(got["s"]) == sum(range(1000))
    assert int(got["n"]) == 1000
    assert float(got["sc"]) == pytest.approx(sum(i * 1.5 for i in range(1000)))
    # Row numbers follow the file's order in every format (ids were written in order).
    assert engine.rows("SELECT countIf(_source_row = id + 1) AS ok FROM t")[0]["ok"] == 1000


@pytest.mark.parametrize(
    "fmt,ext", [("CSVWithNames", "csv"), ("TSVWithNames", "tsv"), ("CSV", "csv"), ("Native", "native"), ("ORC", "orc")]
)
def test_row_numbers_of_a_large_file_are_exact(tmp_path: Path, target: str, fmt: str, ext: str) -> None:
    """Large enough for parallel parsing / parallel reading to kick in."""
    engine = open_engine(target)
    select = "SELECT number AS id, toString(number * 7) AS s FROM numbers(400000)"
    path = write_with_engine(engine, tmp_path / f"big.{ext}", fmt, select)
    report = chute.load([str(path)], table="t", target=target)
    assert report.rows_loaded == 400000
    key = "c1" if fmt == "CSV" else "id"  # no header: the engine names columns c1, c2, ...
    assert engine.rows(f"SELECT countIf(_source_row = {key} + 1) AS ok FROM t")[0]["ok"] == 400000


def test_format_and_compression_flags_override_extension(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    raw = write_with_engine(engine, tmp_path / "x.data", "JSONEachRow", ROWS, "zstd")
    opts = chute.LoadOptions(format="json", compression="zstd")
    report = chute.load([str(raw)], table="t", target=target, options=opts)
    assert report.rows_loaded == 1000


def test_csv_without_header_and_custom_delimiter(tmp_path: Path, target: str) -> None:
    path = tmp_path / "plain.csv"
    path.write_text("1;alpha\n2;beta\n3;gamma\n")
    report = chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(delimiter=";"))
    assert report.rows_loaded == 3
    engine = open_engine(target)
    names = [r["name"] for r in engine.rows("SELECT name FROM system.columns WHERE table = 't' ORDER BY position")]
    assert names[:2] == ["c1", "c2"]
    assert engine.rows("SELECT c2 FROM t ORDER BY c1")[1]["c2"] == "beta"


def test_csv_header_maps_columns_by_name(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    engine.execute("CREATE TABLE t (a UInt32, b String, c String DEFAULT 'dflt') ENGINE = MergeTree ORDER BY a")
    path = tmp_path / "h.csv"
    path.write_text("b,a\nx,1\ny,2\n")
    report = chute.load([str(path)], table="t", target=target)
    assert report.rows_loaded == 2
    rows = engine.rows("SELECT a, b, c FROM t ORDER BY a")
    assert rows == [{"a": 1, "b": "x", "c": "dflt"}, {"a": 2, "b": "y", "c": "dflt"}]


def test_quoted_path_with_quote_in_name(tmp_path: Path, target: str) -> None:
    odd = tmp_path / "it's here; DROP TABLE x"
    odd.mkdir()
    path = odd / "o'brien.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n')
    report = chute.load([str(path)], table="t", target=target)
    assert report.rows_loaded == 2
    engine = open_engine(target)
    assert engine.rows(f"SELECT count() AS n FROM t WHERE _source = {quote_str(str(path))}")[0]["n"] == 2
