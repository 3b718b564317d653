"""`chute time-queries` against a ClickHouse 18.16 server."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from chute.sql import quote_str
from chute.timing import TAG, WARMUP, tag, time_queries

from ..harness.servers import ClickHouseServer

QUERIES = {
    "a_sum.sql": "SELECT sum(number) FROM numbers(3000000);\n",
    "b_fail.sql": "SELECT * FROM nowhere;",
    "c_count.sql": "SELECT count() FROM numbers(100000) WHERE number % 7 = 0 ;; \n\n",
}


def write_queries(folder: Path, extra: dict[str, str] | None = None) -> Path:
    folder.mkdir()
    for name, sql in {**QUERIES, **(extra or {})}.items():
        (folder / name).write_text(sql)
    return folder


def logged(rows: Any, run_id: str, duration: str) -> list[dict[str, Any]]:
    """Every log entry of a run, whatever its type, read independently of chute.timing."""
    prefix = f"/* {TAG}:{run_id}:"
    return list(
        rows(
            f"SELECT query_id, toUInt8(type) AS kind, {duration} AS us, read_rows, substring(query, 1, 100) AS head "
            f"FROM system.query_log WHERE substring(query, 1, {len(prefix)}) = {quote_str(prefix)}"
        )
    )


def check_against_log(report: Any, entries: list[dict[str, Any]], tries: int) -> None:
    finished = {e["query_id"]: e for e in entries if int(e["kind"]) == 2}
    for index, q in enumerate(report.queries):
        mine = [e for e in entries if e["head"].startswith(f"/* {TAG}:{report.run_id}:{index}:")]
        if q.state == "failed":
            # Reported, not hidden: the engine logged the failure, and no try ran after it.
            assert q.error and "\n" not in q.error
            assert q.min_s is None and q.median_s is None and not q.runs
            continue
        assert len(q.runs) == tries and q.warmup is not None and q.warmup.attempt == 0
        assert [r.attempt for r in q.runs] == list(range(WARMUP, WARMUP + tries))
        runs = WARMUP + tries  # each logged once at its start (1) and once at its finish (2)
        assert sorted(int(e["kind"]) for e in mine) == [1] * runs + [2] * runs
        for run in [q.warmup, *q.runs]:
            entry = finished[run.query_id]
            assert entry["head"].startswith(tag(report.run_id, index, run.attempt, q.name))
            assert run.seconds == int(entry["us"]) / 1e6
            assert run.read_rows == int(entry["read_rows"])
        durations = [int(finished[r.query_id]["us"]) / 1e6 for r in q.runs]
        assert (q.min_s, q.median_s, q.max_s) == (min(durations), statistics.median(durations), max(durations))
    assert report.total_median_s == sum(q.median_s for q in report.queries if q.median_s is not None)


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
