"""Files shaped the way real exports sometimes are, which the engine alone would read wrong:
lines ending in a bare CR (classic Mac OS, Excel's "CSV (Macintosh)")."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.engine import Engine
from chute.errors import SourceError

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
