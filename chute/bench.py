"""`chute bench`: which load method is fastest for *your* data and target?

Each method loads the same files into its own scratch table, the row count is
checked against the input before its time counts, and the scratch tables (and
their ledger rows) are dropped afterwards.
"""

from __future__ import annotations

import html
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chute.engine import MEMORY, Engine, open_engine
from chute.errors import ChuteError, UsageError
from chute.load import LoadOptions, load
from chute.load.ledger import LEDGER_TABLE
from chute.report import LoadReport, human_bytes
from chute.schema import (
    INFER_FILES,
    INFER_MORE_ROWS,
    Column,
    create_table_sql,
    describe,
    spread,
    structure,
    union_columns,
)
from chute.sources.files import FileSource
from chute.sql import TableName, quote_str
from chute.targets import DEFAULT_TARGET, Target, is_server, open_target, target_spec
from chute.units import Unit

SCRATCH_PREFIX = "chute_bench_"
# Formats a server parses itself from raw bytes (the pass-through method).
PASS_THROUGH = {"JSONEachRow", "CSV", "TSV", "Native"}


@dataclass
class MethodResult:
    method: str
    seconds: float
    rows: int
    bytes_in: int
    bytes_sent: int
    table_bytes: int
    ratio: float = 0.0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


@dataclass
class BenchReport:
    target: str
    rows: int
    bytes_in: int
    results: list[MethodResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True,  # (a method that fails or miscounts raises: no report)
            "target": self.target,
            "rows": self.rows,
            "bytes_in": self.bytes_in,
            "results": [{**asdict(r), "rows_per_s": r.rows_per_s} for r in self.results],
        }


Progress = Callable[[str], None]


def bench(
    sources: Sequence[str],
    target: str | None = None,
    options: LoadOptions | None = None,
    progress: Progress | None = None,
) -> BenchReport:
    """Run every applicable load method on `sources`; fastest first."""
    opts = options or LoadOptions()
    say = progress or (lambda _msg: None)
    units = FileSource(list(sources), opts.format, opts.compression).units()
    if not units:
        raise UsageError("no files to benchmark")
    # (no target given and no ./chute.db: the bench makes one, on the disk a load would use, and
    # removes it again rather than leave an empty database where the user ran it)
    made = not is_server(target) and not target_spec(target) and not os.path.exists(DEFAULT_TARGET)
    try:
        return _bench(sources, target, opts, say, units)
    finally:
        if made and os.path.isdir(DEFAULT_TARGET):
            open_engine(DEFAULT_TARGET).close()
            shutil.rmtree(DEFAULT_TARGET, ignore_errors=True)


def _bench(
    sources: Sequence[str], target: str | None, opts: LoadOptions, say: Progress, units: list[Unit]
) -> BenchReport:
    tgt = open_target(target, opts.password_file, opts.insecure, opts.connections)
    bytes_in = sum(u.size for u in units)
    run_id = uuid.uuid4().hex[:8]
    results: list[MethodResult] = []
    server = tgt.engine.path == MEMORY
    embedded_dir = tempfile.mkdtemp(prefix="chute-bench-") if server else tgt.engine.path
    expected = _count_rows(embedded_dir, sources, opts)
    say(f"{len(units)} files, {expected:,} rows, {human_bytes(bytes_in)}")

    def scratch(name: str) -> str:
        return f"{SCRATCH_PREFIX}{name}_{run_id}"

    say("bare engine: INSERT INTO t SELECT * FROM file(...)")
    results.append(_bare_engine(embedded_dir, [u.key for u in units], scratch("engine"), expected, opts, bytes_in))
    say("chute, embedded")
    results.append(
        _chute(embedded_dir, sources, scratch("chute_embedded"), expected, opts, "chute -> embedded", bytes_in)
    )
    if server:
        tgt = open_target(target, opts.password_file, opts.insecure, opts.connections)
        say("chute -> server (Native + zstd)")
        results.append(_chute(target, sources, scratch("chute_server"), expected, opts, "chute -> server", bytes_in))
        formats = {u.fmt for u in units}
        only = next(iter(formats))
        if len(formats) == 1 and only.format in PASS_THROUGH and only.compression in ("gzip", "none"):
            say("raw pass-through POST (server parses)")
            results.append(_pass_through(tgt, [u.key for u in units], scratch("raw"), expected, opts, bytes_in))
    if server:
        open_engine(embedded_dir).close()
        shutil.rmtree(embedded_dir, ignore_errors=True)
    fastest = min(r.seconds for r in results)
    for r in results:
        r.ratio = r.seconds / fastest
    results.sort(key=lambda r: r.seconds)
    return BenchReport(tgt.display_name, expected, bytes_in, results)


def _count_rows(directory: str, sources: Sequence[str], opts: LoadOptions) -> int:
    """Rows in the input, counted by the engine (the honesty check for every method)."""
    engine = open_engine(directory)
    source = FileSource(list(sources), opts.format, opts.compression)
    total = 0
    for unit in source.units():
        row = engine.rows(f"SELECT count() AS n FROM {source.table_expression(unit, None)}")
        total += int(row[0]["n"])
    return total


def _check(got: int, expected: int, method: str, why: str = "") -> None:
    if got != expected:
        because = f": {why}" if why else ""
        raise ChuteError(f"{method}: {got} rows in the table, {expected} in the input{because}; result not reported")


def _why(report: LoadReport) -> str:
    """Why a load holds fewer rows than its input: files failed (the first one's error), rows rejected."""
    failed = [f for f in report.files if f.state == "failed"]
    parts = []
    if failed:
        parts.append(f"{len(failed)} file(s) failed, e.g. {failed[0].error}")
    if report.rows_rejected:
        parts.append(f"{report.rows_rejected:,} rows rejected")
    return "; ".join(parts)


def _input_columns(engine: Engine, source: FileSource, units: list[Unit]) -> tuple[list[Column], bool]:
    """The columns of the input as a load makes its table (the first file's, and fields of later
    files: schema.union_columns), and whether every file read has the first one's."""
    first = describe(engine, source.table_expression(units[0], None), "bench")
    per_file = [first]
    for index in spread(len(units) - 1, INFER_FILES - 1)[: INFER_FILES - 1]:
        expression = source.table_expression(units[index + 1], None)
        per_file.append(describe(engine, expression, "bench", INFER_MORE_ROWS))
    columns = union_columns(engine, per_file)
    return columns, columns == first


def _bare_engine(
    directory: str, paths: list[str], table: str, expected: int, opts: LoadOptions, bytes_in: int
) -> MethodResult:
    engine = open_engine(directory)
    source = FileSource(paths, opts.format, opts.compression)
    units = source.units()
    columns, same = _input_columns(engine, source, units)
    name = TableName(None, table)
    engine.execute(create_table_sql(name, columns, "tuple()", None))
    # Files that differ in their fields are read with the table's structure (a missing field: NULL).
    shape = None if same else structure(columns)
    try:
        # One statement, engine defaults: what a user would type.
        union = " UNION ALL ".join(f"SELECT * FROM {source.table_expression(u, shape)}" for u in units)
        t0 = time.perf_counter()
        engine.execute(f"INSERT INTO {name.sql} {union}")
        seconds = time.perf_counter() - t0
        got = int(engine.rows(f"SELECT count() AS n FROM {name.sql}")[0]["n"])
        _check(got, expected, "bare engine")
        size = _size(engine.rows, name)
    finally:
        engine.execute(f"DROP TABLE IF EXISTS {name.sql} SYNC")
    return MethodResult("engine INSERT SELECT file()", seconds, got, bytes_in, 0, size)


def _chute(
    target: str | None,
    sources: Sequence[str],
    table: str,
    expected: int,
    opts: LoadOptions,
    label: str,
    bytes_in: int,
) -> MethodResult:
    t0 = time.perf_counter()
    report = load(list(sources), table, target=target, options=opts)
    seconds = time.perf_counter() - t0
    tgt = open_target(target, opts.password_file, opts.insecure, opts.connections)
    name = TableName(None, table)
    try:
        _check(report.table_rows, expected, label, _why(report))
        size = report.table_bytes_on_disk
    finally:
        _drop(tgt, name)
    return MethodResult(label, seconds, report.rows_loaded, bytes_in, report.bytes_sent, size)


def _pass_through(
    tgt: Target, paths: list[str], table: str, expected: int, opts: LoadOptions, bytes_in: int
) -> MethodResult:
    """The seed's method: each file's bytes POSTed as they are, the server parses."""
    from chute.targets.server import ServerTarget

    assert isinstance(tgt, ServerTarget)
    source = FileSource(paths, opts.format, opts.compression)
    units = source.units()
    engine = tgt.engine
    columns, _ = _input_columns(engine, source, units)
    caps = tgt.capabilities
    columns = [Column(c.name, caps.adapt_type(c.type)) for c in columns]
    name = TableName(None, table)
    tgt.execute(create_table_sql(name, columns, "tuple()", None))
    sent = 0

    # The engine's inference names header columns; positional ones are c1, c2, ...
    header = not all(c.name == f"c{i + 1}" for i, c in enumerate(columns))
    fmt = units[0].fmt.format
    if header and fmt in ("CSV", "TSV"):
        fmt += "WithNames"

    def post(unit_index: int) -> int:
        unit = units[unit_index]
        data = Path(unit.key).read_bytes()
        encoding = "gzip" if unit.fmt.compression == "gzip" else None
        tgt.client.insert(
            f"INSERT INTO {name.sql} FORMAT {fmt}",
            [data],
            settings={"date_time_input_format": "best_effort"},
            context=unit.key,
            content_encoding=encoding,
        )
        return len(data)

    try:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            sent = sum(pool.map(post, range(len(units))))
        seconds = time.perf_counter() - t0
        got = int(tgt.rows(f"SELECT count() AS n FROM {name.sql}")[0]["n"])
        _check(got, expected, "raw pass-through")
        size = tgt.table_stats(name)[1]
    finally:
        tgt.execute(f"DROP TABLE IF EXISTS {name.sql}")
    return MethodResult("raw POST, 4 parallel (server parses)", seconds, got, bytes_in, sent, size)


def _drop(tgt: Target, name: TableName) -> None:
    tgt.execute(f"DROP TABLE IF EXISTS {name.sql}")
    tgt.execute(f"DROP TABLE IF EXISTS {name.with_suffix('_rejects').sql}")
    ledger = TableName(None, LEDGER_TABLE)
    if tgt.table_columns(ledger) is not None:
        tgt.execute(f"ALTER TABLE {ledger.sql} DELETE WHERE `table` = {quote_str(str(name))}")


def _size(rows: Callable[..., list[dict[str, Any]]], name: TableName) -> int:
    got = rows(
        "SELECT sum(bytes_on_disk) AS b FROM system.parts WHERE active AND database = currentDatabase() "
        f"AND table = {quote_str(name.table)}"
    )
    return int(got[0]["b"] or 0)


def render_rows(report: BenchReport) -> list[list[str]]:
    rows = []
    for r in report.results:
        rows.append(
            [
                r.method,
                f"{r.seconds:.2f}",
                f"{r.rows_per_s:,.0f}",
                f"{r.bytes_in / 2**20 / r.seconds:.1f}" if r.seconds else "-",
                human_bytes(r.bytes_sent) if r.bytes_sent else "-",
                human_bytes(r.table_bytes),
                f"{r.ratio:.2f}x",
            ]
        )
    return rows


HEADERS = ["method", "seconds", "rows/s", "MiB/s in", "bytes sent", "table on disk", "vs fastest"]


CHART_KINDS = (".html", ".htm", ".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp")
"""HTML (no dependency), else what matplotlib writes."""


def check_chart(path: str) -> None:
    """Refuse a chart that cannot be written, before the benchmark runs for minutes (a file of a
    kind no writer knows, a folder that is not there, a folder given for the file)."""
    import importlib.util
    import os

    if not path.lower().endswith(CHART_KINDS):
        raise UsageError(f"--chart {path}: give a file named .html (no dependency), .png, .svg or .pdf")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        why = "is a directory" if os.path.isdir(path) else f"cannot be written in {folder}"
        raise UsageError(f"--chart {path}: {why}; give a file in a directory you may write")
    if path.lower().endswith((".html", ".htm")):
        return
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(
            f"--chart {path}: a PNG chart needs matplotlib: pip install 'chute[chart]', or give a .html path"
        )


def write_chart(report: BenchReport, path: str) -> None:
    """Seconds and table size per method, as PNG (matplotlib) or HTML (no dependency)."""
    if path.lower().endswith((".html", ".htm")):
        Path(path).write_text(_html(report), encoding="utf-8")
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("a PNG chart needs matplotlib: pip install 'chute[chart]', or give a .html path") from None
    names = [r.method for r in report.results]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.6 * len(names) + 2))
    left.barh(names, [r.seconds for r in report.results], color="#4c78a8")
    left.set_xlabel("seconds (lower is better)")
    left.invert_yaxis()
    right.barh(names, [r.table_bytes / 2**20 for r in report.results], color="#f58518")
    right.set_xlabel("table size on disk, MiB")
    right.invert_yaxis()
    right.set_yticklabels([])
    fig.suptitle(f"chute bench: {report.rows:,} rows, {human_bytes(report.bytes_in)} in")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _html(report: BenchReport) -> str:
    longest = max(r.seconds for r in report.results) or 1.0
    rows = []
    for r in report.results:
        width = 400 * r.seconds / longest
        bar = f"<div style='background:#4c78a8;height:14px;width:{width:.0f}px'></div>"
        rows.append(
            f"<tr><td>{html.escape(r.method)}</td><td>{bar}</td><td>{r.seconds:.2f} s</td>"
            f"<td>{human_bytes(r.table_bytes)}</td></tr>"
        )
    summary = f"{report.rows:,} rows, {human_bytes(report.bytes_in)} in, target {html.escape(report.target)}"
    return (
        "<!doctype html><meta charset='utf-8'><title>chute bench</title>"
        f"<h1>chute bench</h1><p>{summary}</p><table>{''.join(rows)}</table>"
    )


def scratch_tables(target: str | None, opts: LoadOptions | None = None) -> list[str]:
    """Scratch tables still present (a test checks there are none)."""
    o = opts or LoadOptions()
    tgt = open_target(target, o.password_file, o.insecure, o.connections)
    rows = tgt.rows(
        "SELECT name FROM system.tables WHERE database = currentDatabase() "
        f"AND startsWith(name, {quote_str(SCRATCH_PREFIX)})"
    )
    return [r["name"] for r in rows]
