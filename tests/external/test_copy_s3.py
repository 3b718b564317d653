"""`chute copy --method files` through an S3 prefix (a real S3 server) between two databases of
the session's 18.16 server."""

from __future__ import annotations

import uuid

import pytest

from chute.copy import CopyOptions, copy

from ..harness import servers


def test_copy_through_s3(clickhouse_server, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from ..harness.extservers import S3Server

    if not S3Server.available():
        pytest.skip(str(S3Server.missing()))
    server = S3Server.create()
    try:
        server.start()
        server.credentials_in(monkeypatch)
        ends = []
        for _ in range(2):
            database = f"test_{uuid.uuid4().hex[:10]}"
            clickhouse_server.query(f"CREATE DATABASE {database}")
            ends.append(f"{clickhouse_server.url}/{database}")
        source, dest = ends
        servers.server_query(
            source, "CREATE TABLE t (id UInt64, day Date, s String) ENGINE = MergeTree PARTITION BY day ORDER BY id"
        )
        servers.server_query(
            source,
            "INSERT INTO t SELECT number, toDate('2025-01-01') + number % 4, toString(number) FROM numbers(5000)",
        )
        via = f"s3://{server.bucket}/copies/t/"
        options = CopyOptions(method="files", via=via, s3_endpoint=server.endpoint)
        report = copy("t", source, dest, options)
        assert report.ok and report.method == "files" and len(report.copied) == 4 and report.wire_bytes > 0
        exact = "SELECT * FROM t ORDER BY id FORMAT TSV"
        assert servers.server_query(dest, exact) == servers.server_query(source, exact)
        assert not copy("t", source, dest, options).copied
    finally:
        server.remove()
