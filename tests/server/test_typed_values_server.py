"""A Parquet file into narrower columns of an 18.16 server: the same checks as the embedded target.

The embedded engine reads the file wide and casts exactly before the rows are sent; a row
with a value that does not fit is a rejected row in the server's rejects table.
"""

from __future__ import annotations

from pathlib import Path

import chute
from chute.engine import open_engine
from chute.sql import quote_str

from ..harness.servers import server_query


def test_parquet_values_that_do_not_fit_are_rejected_rows_on_the_server(tmp_path: Path, server_url: str) -> None:
    path = tmp_path / "a.parquet"
    writer = open_engine(str(tmp_path / "writer"))
    writer.execute(
        f"INSERT INTO FUNCTION file({quote_str(str(path))}, 'Parquet') SELECT number AS id, "
        "[7, 5000000000, -1, 9][number + 1]::Int64 AS v, "
        "[toDecimal64(1.5, 4), 2, toDecimal64(1.999, 4), 3][number + 1] AS dec, "
        "toDate32(['2024-01-01', '2024-01-02', '2024-01-03', '2150-01-01'][number + 1]) AS d FROM numbers(4)"
    )
    writer.close()
    server_query(
        server_url,
        "CREATE TABLE t (id UInt64, v UInt32, dec Decimal(5, 2), d Date, _source String, _source_mtime DateTime, "
        "_source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id",
    )
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (1, 3), report.files
    assert (
        server_query(server_url, "SELECT id, v, dec, d, _source_row FROM t FORMAT TSV") == "0\t7\t1.50\t2024-01-01\t1\n"
    )
    rejects = server_query(server_url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row FORMAT TSV")
    assert rejects.splitlines() == [
        "2\tcolumn v: 5000000000 does not fit UInt32",
        "3\tcolumn v: -1 does not fit UInt32",
        "4\tcolumn d: 2150-01-01 does not fit Date",
    ]
