"""`time-queries` reads a server's query log until it holds every run: a server answers a query
before it queues the query's log entry, so one flush may come before the last run's entry
(18.16 on a busy machine failed that query as "not logged")."""

from __future__ import annotations

from typing import Any

import pytest

from chute import timing
from chute.timing import WARMUP, _flushed_log, tag


class LateLog:
    """A target whose query log gets the last run's entry only at the second flush."""

    def __init__(self, run_id: str, runs: int) -> None:
        self.entries = [tag(run_id, 0, a, "q") for a in range(runs)]
        self.flushes = 0

    def execute(self, sql: str, settings: Any = None, context: str = "") -> None:
        assert sql == "SYSTEM FLUSH LOGS"
        self.flushes += 1

    def rows(self, sql: str, settings: Any = None, context: str = "") -> list[dict[str, Any]]:
        if "system.columns" in sql:
            return [{"name": "query_duration_ms"}]
        shown = self.entries if self.flushes > 1 else self.entries[:-1]
        return [
            {"query_id": str(i), "head": h, "duration_us": 1000, "read_rows": 1, "read_bytes": 8, "memory_usage": 0}
            for i, h in enumerate(shown)
        ]


def test_the_log_is_read_again_until_it_holds_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "LOG_WAIT_S", 0)
    runs = WARMUP + 2
    target = LateLog("abc123", runs)
    log, _ = _flushed_log(target, "abc123", "2026-11-29", {(0, a) for a in range(runs)})  # type: ignore[arg-type]
    assert sorted(log) == [(0, a) for a in range(runs)] and target.flushes == 2


def test_a_run_the_log_never_gets_is_left_out_after_the_last_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "LOG_WAIT_S", 0)
    target = LateLog("abc123", 2)
    log, _ = _flushed_log(target, "abc123", "2026-11-29", {(0, 0), (0, 1), (0, 2)})  # type: ignore[arg-type]
    assert sorted(log) == [(0, 0), (0, 1)] and target.flushes == timing.LOG_READS
