"""`chute design` on Parquet: a column whose statistics count NULLs stays Nullable even where
the sample (the first rows) holds none."""

from __future__ import annotations

from pathlib import Path

import pytest

from chute.design import design_sources


def test_design_keeps_nullable_where_parquet_statistics_count_nulls(tmp_path: Path, target: str) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    n = 60_000
    late = [i if i < n - 100 else None for i in range(n)]  # NULLs past the sample only
    table = pa.table({"late": pa.array(late, pa.int64()), "never": pa.array(range(n), pa.int64())})
    pq.write_table(table, tmp_path / "z.parquet")
    proposal = design_sources([str(tmp_path / "z.parquet")], "t", target=target, sample_rows=20_000)
    assert "`late` Nullable(" in proposal.ddl
    assert "`never` Nullable(" not in proposal.ddl and "`never` " in proposal.ddl
