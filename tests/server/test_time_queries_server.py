"""`chute time-queries` against a ClickHouse 18.16 server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chute.timing import time_queries

from ..embedded.test_time_queries import check_against_log, logged, write_queries
from ..harness.servers import ClickHouseServer


def test_server_1816_times_come_from_the_query_log(tmp_path: Path, server_url: str) -> None:
    folder = write_queries(tmp_path / "sql")
    report = time_queries(folder, server_url, tries=2)

    assert [q.state for q in report.queries] == ["ok", "failed", "ok"]
    assert report.resolution_s == 1e-3  # 18.16 logs query_duration_ms only
    assert "doesn't exist" in report.queries[1].error

    base, database = server_url.rsplit("/", 1)

    def rows(sql: str) -> list[dict[str, Any]]:
        text = ClickHouseServer.query_url(base, sql + " FORMAT JSONEachRow", database)
        return [json.loads(line) for line in text.splitlines()]

    entries = logged(rows, report.run_id, "query_duration_ms * 1000")
    check_against_log(report, entries, tries=2)
