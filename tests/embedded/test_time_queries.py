"""`chute time-queries` against the real engines: chDB and the Debian server (18.16).

The times must be the engine's own (system.query_log), so each test reads the
log itself and holds the report to it, run by run.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from chute.cli import main
from chute.engine import open_engine
from chute.sql import quote_str
from chute.timing import TAG, WARMUP, QueryTiming, Run, _attach, tag, time_queries

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


def test_embedded_times_come_from_the_query_log(tmp_path: Path, target: str) -> None:
    odd = "d it's *% odd"
    folder = write_queries(tmp_path / "sql", {f"{odd}.sql": "SELECT 'x' AS v", "e_comment.sql": "-- no statement\n"})
    report = time_queries(folder, target, tries=3)

    assert [q.name for q in report.queries] == ["a_sum", "b_fail", "c_count", odd, "e_comment"]
    assert [q.state for q in report.queries] == ["ok", "failed", "ok", "ok", "failed"]
    assert report.resolution_s == 1e-6 and report.failed == 2 and not report.ok
    assert "UNKNOWN_TABLE" in report.queries[1].error and "query b_fail" in report.queries[1].error
    # chDB accepts a comment alone and logs nothing: an error, not a time from another clock.
    assert "system.query_log has no finished entry" in report.queries[4].error
    a_sum = report.queries[0]
    assert a_sum.read_rows == 3_000_000 and a_sum.memory_bytes is not None and a_sum.memory_bytes > 0

    duration = "toUnixTimestamp64Micro(event_time_microseconds) - toUnixTimestamp64Micro(query_start_time_microseconds)"
    entries = logged(open_engine(target).rows, report.run_id, duration)
    check_against_log(report, entries, tries=3)
    b_fail = [e for e in entries if e["head"].startswith(f"/* {TAG}:{report.run_id}:1:")]
    assert [int(e["kind"]) for e in b_fail] == [3]  # ExceptionBeforeStart, once: no retry after a failure


def test_cli_reports_a_failing_query_and_exits_1(tmp_path: Path) -> None:
    folder = write_queries(tmp_path / "sql")
    db = str(tmp_path / "db")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "chute.cli", "time-queries", str(folder), "--target", db, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    out = run("--json", "--tries", "2")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["ok"] is False  # a query failed
    assert report["source"] == "system.query_log" and report["tries"] == 2 and report["warmup"] == 1
    states = {q["name"]: q["state"] for q in report["queries"]}
    assert states == {"a_sum": "ok", "b_fail": "failed", "c_count": "ok"}
    assert all(len(q["runs"]) == 2 for q in report["queries"] if q["state"] == "ok")
    assert out.stderr.strip().splitlines() == [f"chute: error: {report['queries'][1]['error']}"]

    text = run("--tries", "1")
    assert text.returncode == 1 and "Traceback" not in text.stderr
    for word in ("a_sum", "b_fail", "c_count", "failed", "median s", "total", "1 failed, not counted"):
        assert word in text.stdout
    assert "UNKNOWN_TABLE" in text.stderr


def test_usage_errors(tmp_path: Path) -> None:
    assert main(["time-queries", str(tmp_path / "missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["time-queries", str(tmp_path / "empty")]) == 2
    folder = write_queries(tmp_path / "sql")
    assert main(["time-queries", str(folder), "--tries", "0"]) == 2


def test_a_run_the_log_lacks_fails_the_query() -> None:
    timing = QueryTiming("q", "q.sql")
    logged_run = Run(attempt=0, seconds=0.5, read_rows=1, read_bytes=8, memory_bytes=100, query_id="x")
    _attach(timing, [logged_run, Run(1, 0.25, 1, 8, 100, "y"), None])
    assert timing.state == "failed" and timing.median_s is None and not timing.runs
    assert "no finished entry for try 2" in timing.error


def test_tag_cannot_end_its_comment_early() -> None:
    text = tag("abc123", 4, 2, "x */ DROP TABLE t; /* ok")
    assert text.startswith(f"/* {TAG}:abc123:4:2 ") and text.endswith(" */") and text.count("*/") == 1
