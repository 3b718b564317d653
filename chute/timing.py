"""`chute time-queries`: time SQL files by the engine's own clock, its query log.

A Python wall clock would add the connection, the HTTP round trip and result
parsing to every run; `system.query_log` holds what the engine measured. Each
run is tagged with a leading comment, `/* chute-time-queries:<run>:<n>:<try> */`:
every version logs the query text as sent (18.16 has no `log_comment`), so the
run is found again by that prefix. A run the log lacks is an error, never
filled in from another clock.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chute.calls import public_call
from chute.engine import Settings, open_engine
from chute.errors import ChuteError, TargetError, UsageError
from chute.sql import one_statement, quote_str
from chute.targets import Target, open_target
from chute.targets.embedded import EmbeddedTarget

TAG = "chute-time-queries"
WARMUP = 1
"""Runs per query before the measured tries: caches and first-use costs."""

# chDB keeps no query log unless the config it starts with has <query_log>; a
# Memory table keeps the log off the user's database directory.
EMBEDDED_QUERY_LOG_CONFIG = """<clickhouse>
    <query_log>
        <database>system</database>
        <table>query_log</table>
        <engine>ENGINE = Memory</engine>
        <flush_interval_milliseconds>60000</flush_interval_milliseconds>
    </query_log>
</clickhouse>
"""

_TAG_RE = re.compile(rf"^/\* {TAG}:(?P<run>[0-9a-f]+):(?P<index>\d+):(?P<attempt>\d+) ")
_QUERY_FINISH = 2  # `type`: UInt8 on 18.16, Enum8 'QueryFinish' = 2 later


@dataclass(frozen=True)
class Run:
    """One tagged execution as the query log recorded it."""

    attempt: int
    """0 is the warm-up; 1..tries are measured."""
    seconds: float
    read_rows: int
    read_bytes: int
    memory_bytes: int
    query_id: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "try": self.attempt,
            "seconds": self.seconds,
            "read_rows": self.read_rows,
            "read_bytes": self.read_bytes,
            "memory_bytes": self.memory_bytes,
            "query_id": self.query_id,
        }


@dataclass
class QueryTiming:
    name: str
    path: str
    state: str = "ok"  # ok | failed
    error: str = ""
    warmup: Run | None = None
    runs: list[Run] = field(default_factory=list)

    def _seconds(self) -> list[float]:
        return [r.seconds for r in self.runs] if self.state == "ok" else []

    @property
    def min_s(self) -> float | None:
        return min(self._seconds(), default=None)

    @property
    def median_s(self) -> float | None:
        s = self._seconds()
        return statistics.median(s) if s else None

    @property
    def max_s(self) -> float | None:
        return max(self._seconds(), default=None)

    @property
    def read_rows(self) -> int | None:
        return max((r.read_rows for r in self.runs), default=None) if self.state == "ok" else None

    @property
    def read_bytes(self) -> int | None:
        return max((r.read_bytes for r in self.runs), default=None) if self.state == "ok" else None

    @property
    def memory_bytes(self) -> int | None:
        """Peak memory of the hungriest try."""
        return max((r.memory_bytes for r in self.runs), default=None) if self.state == "ok" else None

    def fail(self, error: str) -> None:
        self.state = "failed"
        self.error = " ".join(error.split())

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "state": self.state,
            "error": self.error,
            "min_s": self.min_s,
            "median_s": self.median_s,
            "max_s": self.max_s,
            "read_rows": self.read_rows,
            "read_bytes": self.read_bytes,
            "memory_bytes": self.memory_bytes,
            "warmup": self.warmup.to_dict() if self.warmup else None,
            "runs": [r.to_dict() for r in self.runs],
        }


@dataclass
class TimingReport:
    run_id: str
    target: str
    tries: int
    resolution_s: float
    """Clock step of the log: 0.001 where only query_duration_ms exists (18.16)."""
    queries: list[QueryTiming] = field(default_factory=list)
    warmup: int = WARMUP
    source: str = "system.query_log"

    @property
    def failed(self) -> int:
        return sum(1 for q in self.queries if q.state == "failed")

    @property
    def ok(self) -> bool:
        return self.failed == 0

    @property
    def total_median_s(self) -> float:
        """Sum of the medians of the queries that succeeded."""
        return sum(q.median_s for q in self.queries if q.median_s is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "run_id": self.run_id,
            "target": self.target,
            "source": self.source,
            "resolution_s": self.resolution_s,
            "warmup": self.warmup,
            "tries": self.tries,
            "queries": [q.to_dict() for q in self.queries],
            "queries_failed": self.failed,
            "total_median_s": self.total_median_s,
        }


def read_queries(directory: str | os.PathLike[str]) -> list[tuple[str, Path, str]]:
    """(name, path, sql) of every `*.sql` file, sorted by name; trailing `;` removed."""
    folder = Path(directory)
    if not folder.is_dir():
        raise UsageError(f"{directory}: not a directory of .sql files")
    files = sorted(p for p in folder.glob("*.sql") if p.is_file())
    if not files:
        raise UsageError(f"{directory}: no .sql files in it")
    queries = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
        try:
            queries.append((path.stem, path, one_statement(text)))
        except UsageError as exc:
            raise UsageError(f"{path}: {exc}") from None
    return queries


def tag(run_id: str, index: int, attempt: int, name: str) -> str:
    """The comment that marks one run; the name is only for people reading the log."""
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60]
    return f"/* {TAG}:{run_id}:{index}:{attempt} {label} */"


@public_call
def time_queries(
    directory: str | os.PathLike[str],
    target: str | None = None,
    tries: int = 3,
    password_file: str | None = None,
    insecure: bool = False,
    progress: Callable[[str], None] | None = None,
) -> TimingReport:
    """Run each query file once to warm up, then `tries` times; times from the query log.

    A query that fails is marked failed with the engine's message and the rest
    still run; so is a query whose runs the log does not hold. The embedded
    engine is restarted with an in-memory query log, which stays on for the
    rest of the process.
    """
    if tries < 1:
        raise UsageError("--tries must be at least 1")
    queries = read_queries(directory)
    run_id = uuid.uuid4().hex[:12]
    with _opened(target, password_file, insecure) as tgt:
        # The embedded engine logs by default; a SETTINGS clause appended to the
        # user's SQL could clash with its own FORMAT or SETTINGS. Servers take
        # settings as URL parameters, and 18.16 logs nothing without this one.
        settings: Settings | None = None if isinstance(tgt, EmbeddedTarget) else {"log_queries": 1}
        started = tgt.rows("SELECT toString(today()) AS d", context="reading the engine's date")[0]["d"]
        timings: list[QueryTiming] = []
        for index, (name, path, sql) in enumerate(queries):
            timing = QueryTiming(name, str(path))
            timings.append(timing)
            if not sql:
                timing.fail(f"{path}: the file holds no SQL")
                continue
            for attempt in range(WARMUP + tries):
                if progress:
                    step = "warm-up" if attempt < WARMUP else f"try {attempt - WARMUP + 1}/{tries}"
                    progress(f"{name}: {step}")
                try:
                    tgt.execute(f"{tag(run_id, index, attempt, name)}\n{sql}", settings, context=f"query {name}")
                except ChuteError as exc:
                    timing.fail(str(exc))
                    break
        wanted = {(i, a) for i, t in enumerate(timings) if t.state == "ok" for a in range(WARMUP + tries)}
        log, resolution = _flushed_log(tgt, run_id, started, wanted)
    for index, timing in enumerate(timings):
        if timing.state == "ok":
            _attach(timing, [log.get((index, a)) for a in range(WARMUP + tries)])
    return TimingReport(run_id, tgt.display_name, tries, resolution, timings)


def _attach(timing: QueryTiming, runs: list[Run | None]) -> None:
    """Give a query its logged runs, or fail it naming the first run the log lacks."""
    missing = [a for a, r in enumerate(runs) if r is None]
    if missing:
        which = "the warm-up" if missing[0] < WARMUP else f"try {missing[0] - WARMUP + 1}"
        timing.fail(
            f"query {timing.name}: system.query_log has no finished entry for {which} "
            f"({len(missing)} of {len(runs)} runs missing): the engine did not log it "
            "(query logging off for this user, or the file holds no statement)"
        )
        return
    logged = [r for r in runs if r is not None]
    timing.warmup = logged[WARMUP - 1] if WARMUP else None
    timing.runs = logged[WARMUP:]


LOG_READS = 10
"""Flushes and reads of the query log before a run it lacks counts as not logged."""
LOG_WAIT_S = 0.3


def _flushed_log(
    tgt: Target, run_id: str, started: str, wanted: set[tuple[int, int]]
) -> tuple[dict[tuple[int, int], Run], float]:
    """`_read_log` after a flush, again while a run of `wanted` is not there: a server answers a
    query before it queues the query's log entry (18.16 on a busy machine: the last run was not
    in the log the flush wrote, and its query was failed as "not logged")."""
    for read in range(LOG_READS):
        tgt.execute("SYSTEM FLUSH LOGS", context="flushing the query log")
        log, resolution = _read_log(tgt, run_id, started)
        if wanted <= log.keys() or read == LOG_READS - 1:
            return log, resolution
        time.sleep(LOG_WAIT_S)
    raise AssertionError("unreachable")


def _read_log(tgt: Target, run_id: str, started: str) -> tuple[dict[tuple[int, int], Run], float]:
    """The finished runs of `run_id` by (query index, attempt), and the log's resolution."""
    columns = {
        r["name"]
        for r in tgt.rows(
            "SELECT name FROM system.columns WHERE database = 'system' AND table = 'query_log'",
            context="reading the query log's columns",
        )
    }
    if not columns:
        raise TargetError(
            f"{tgt.display_name} keeps no system.query_log: enable <query_log> in the server config "
            "(nothing was timed with another clock)"
        )
    if {"query_start_time_microseconds", "event_time_microseconds"} <= columns:
        duration_us = (
            "toUnixTimestamp64Micro(event_time_microseconds) - toUnixTimestamp64Micro(query_start_time_microseconds)"
        )
        resolution = 1e-6
    else:
        duration_us = "query_duration_ms * 1000"
        resolution = 1e-3
    prefix = f"/* {TAG}:{run_id}:"
    rows = tgt.rows(
        f"SELECT query_id, substring(query, 1, 100) AS head, {duration_us} AS duration_us, "
        "read_rows, read_bytes, memory_usage FROM system.query_log "
        f"WHERE event_date >= toDate({quote_str(started)}) AND toUInt8(type) = {_QUERY_FINISH} "
        f"AND is_initial_query = 1 AND substring(query, 1, {len(prefix)}) = {quote_str(prefix)}",
        context="reading system.query_log",
    )
    log: dict[tuple[int, int], Run] = {}
    for r in rows:
        match = _TAG_RE.match(r["head"])
        if not match:
            continue
        attempt = int(match["attempt"])
        log[(int(match["index"]), attempt)] = Run(
            attempt=attempt,
            seconds=max(0, int(r["duration_us"])) / 1e6,
            read_rows=int(r["read_rows"]),
            read_bytes=int(r["read_bytes"]),
            memory_bytes=int(r["memory_usage"]),
            query_id=str(r["query_id"]),
        )
    return log, resolution


@contextlib.contextmanager
def _opened(spec: str | None, password_file: str | None, insecure: bool) -> Iterator[Target]:
    """The target, with a query log armed if it is the embedded engine."""
    tgt = open_target(spec, password_file, insecure)
    if not isinstance(tgt, EmbeddedTarget):
        yield tgt
        return
    # chDB reads its config once, when the first connection of the process
    # starts the engine: restart it with a config that has a query log. The
    # target's own connection then shares that engine, which stays armed.
    with tempfile.TemporaryDirectory(prefix="chute-query-log-") as tmp:
        config = Path(tmp) / "query_log.xml"
        config.write_text(EMBEDDED_QUERY_LOG_CONFIG, encoding="utf-8")
        open_engine(tgt.path, config_file=str(config))
        yield EmbeddedTarget(tgt.path)
