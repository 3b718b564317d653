"""`chute.load()`: plan units against the ledger, load them in batches, report.

Python plans and keeps the books; the engine does every row: it reads and
parses each file, casts to the table's types through the file() structure,
adds the provenance columns, and writes the parts.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import datetime
import functools
import os
import random
import re
import resource
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from chute.capabilities import Capabilities
from chute.careful import RAW_LIMIT, check_delimited, check_json_lines, widened
from chute.claims import DEFAULT_LEASE_SECONDS, ClaimLost, Claims
from chute.engine import MEMORY, say_doing
from chute.errors import (
    ChuteError,
    CommitUncertain,
    NotText,
    OutOfSpace,
    SchemaError,
    SourceError,
    TargetError,
    TransientTargetError,
    UsageError,
)
from chute.ledger import Ledger, LedgerEntry
from chute.nullcheck import CHECKED_FORMATS, NullSearches, NullsInFile, Place, scalar_type
from chute.parquetmeta import nullable_note
from chute.rejects import REJECT_COLUMNS, ErrorBudget, Rejects, refuse_rejects_clash, refuse_reserved
from chute.report import FileResult, LoadReport
from chute.schema import (
    PROVENANCE_NAMES,
    Column,
    create_table_sql,
    describe,
    structure,
    with_provenance,
)
from chute.scratch import scratch_file
from chute.scratch import sweep as sweep_scratch
from chute.sniff import Head, refuse_binary
from chute.sources import Source, SourceOptions, Unit, open_source, table_function
from chute.sources.files import ROW_NUMBER_FORMATS
from chute.sources.ranges import SPLIT_FORMATS, halve, range_fd
from chute.sql import TableName, quote_ident, quote_str
from chute.targets import Target, open_target
from chute.targets.staging import CommitCheck
from chute.tolerant import SKIP_ERRORS, ErrorFiles, kept_row_to_position, scratch_path

ON_CHANGE = ("skip", "reload", "error")
METHODS = ("auto", "convert", "pass-through", "server-side")
REPAIR_ATTEMPTS = 5

# A batch is one INSERT; smaller batches lose less work to a crash.
DEFAULT_BATCH_BYTES = 256 * 1024 * 1024
DEFAULT_BATCH_FILES = 64

SHARED_BATCHES = 8
"""Where several workers may share a job (a server target), its units go in at least this many
batches (claims are taken a batch at a time), so that a worker that starts later gets some."""

# Formats that describe themselves: reading their schema costs no row parsing.
SELF_DESCRIBING = frozenset({"Parquet", "ORC", "Arrow", "ArrowStream", "Avro", "Native"})

# Reading settings a server of any version knows, for the server-side path.
SERVER_READ_SETTINGS = frozenset({"date_time_input_format", "format_csv_delimiter"})

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FILE_IN_ERROR = re.compile(r"\(in file/uri ([^)]+)\)")
UNKNOWN_FIELD = re.compile(r"Unknown field found while parsing \w+ format: ([^:\s]+)")

ROW_FIX_BLOCK = 8192
"""Rows per parsed block for CSV/TSV with a header under parallel parsing (see `_row_number`)."""
PARSE_SEGMENT_BYTES = 10 * 2**20
"""The engine's min_chunk_bytes_for_parallel_parsing: the size of its first parsed segment."""
COMPRESSED_EXPANSION = 4
"""A rough in-memory size of a compressed input per byte of it (gzip JSON lines: ~4.8)."""

ROW_GROUP_FORMATS = frozenset({"Parquet", "ORC", "Arrow"})
"""Formats the engine decodes a row group (stripe, record batch) at a time, per reader thread."""
READER_THREAD_BYTES = 2**30
"""Budget per reader thread of a ROW_GROUP_FORMATS file (a 1 M-row group of 100 columns: ~600 MiB with its parts)."""
PART_WRITER_BUFFERS = 5
"""Buffers of `max_compress_block_size` the MergeTree writer holds per column and insert thread (measured on
100 columns, one thread: 812 MiB at 1 MiB blocks, 446 MiB at 256 KiB, 382 MiB at 64 KiB)."""

PACKED_PART_BYTES = 10 * 2**20
"""Parts of a partition-aware load under this size (uncompressed; the engine's line between compact
and wide parts) are written packed, one file each: the packed writer holds a part in memory."""
SMALL_PART_FORMAT: dict[str, int | str] = {
    "ratio_of_defaults_for_sparse_serialization": 1,
    "write_marks_for_substreams_in_compact_parts": 0,
    "string_serialization_version": "single_stream",
    "serialization_info_version": "basic",
    "compress_marks": 0,
    "compress_primary_key": 0,
}
"""The engine's basic part format for the many small parts of a partition-aware load (stage only):
no sparse columns, one stream per String column, no marks per substream, plain marks; the format
of engines before these settings. A 1 M-row block of the 100-column P4 rows into 400 parts:
1.57 user CPU-s against 1.85 (medians of 6), mostly from the sparse check and conversion. Same
rows. The table keeps its settings; a merge writes its own format, but takes its sparse columns
from its parts' kinds, so sparse columns come back one merge later."""

HALVES_MIN_BYTES = 64 * 2**20
"""Smallest file that a partitioned load reads as two halves at once (see `_halves`)."""
HALVES_MEMORY_PER_BYTE = 4.0
"""Peak memory per input byte of a file read as two halves, each one block (measured on a 1.35 GB
CSV of 100 columns: 3.8 GiB peak RSS into a table with its own types, 4.7 GiB into one chute
created with inferred types)."""

# Units of these sources carry a row count, not a byte count, in `Unit.size`.
ROW_SIZED_FORMATS = frozenset({"PostgreSQL", "MySQL"})

# Formats whose bad rows can be told apart from good ones by a careful pass.
CAREFUL_FORMATS = frozenset({"JSONEachRow", "CSV", "TSV"})


def default_memory_limit() -> int:
    """A quarter of the machine's memory (cgroup limit included): loads share machines."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 4 * 2**30
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            text = fh.read().strip()
        if text.isdigit():
            total = min(total, int(text))
    except OSError:
        pass
    return max(256 * 2**20, total // 4)


@dataclass(frozen=True)
class LoadOptions:
    """Everything a load can be told, with safe defaults."""

    format: str | None = None
    """Input format for every file (json, csv, tsv, parquet, native, orc, avro, arrow); default: by extension."""
    compression: str | None = None
    """Compression of every file (gzip, zstd, bz2, xz, lz4, none); default: by extension."""
    delimiter: str | None = None
    """CSV field delimiter (one character)."""
    workers: int | None = None
    """Engine threads; default: all cores."""
    order_by: str = "tuple()"
    """ORDER BY of a table chute creates."""
    partition_by: str | None = None
    """PARTITION BY of a table chute creates."""
    provenance: bool = True
    """Add _source, _source_mtime, _source_row, _load_id to a table chute creates, and fill them."""
    add_columns: bool = False
    """Add input fields the table lacks with ALTER TABLE ... ADD COLUMN instead of failing."""
    on_change: str = "skip"
    """What to do with a loaded file whose size or mtime changed: skip, reload, error."""
    batch_bytes: int = DEFAULT_BATCH_BYTES
    batch_files: int = DEFAULT_BATCH_FILES
    password_file: str | None = None
    """File holding the server password (for http(s) targets)."""
    insecure: bool = False
    """Skip TLS certificate checks for https targets (loudly)."""
    connections: int = 2
    """Parallel HTTP connections to a server target."""
    method: str = "auto"
    """How rows reach a server: "convert" (the engine reads, casts and sends Native),
    "pass-through" (file bytes sent as they are; the server parses; no provenance),
    "server-side" (the server reads http(s) URLs and s3:// objects itself),
    or "auto" (server-side or pass-through where they apply, else convert)."""
    cluster: str | None = None
    """For s3:// sources into a server: read with s3Cluster(cluster, ...) by the nodes of this
    cluster (server-side only). With provenance it needs `_row_number` (see `Capabilities`)."""
    design: str | None = None
    """For a table chute creates: "auto" measures a layout on a sample (`chute design`),
    or the path of a saved proposal (`chute design ... > FILE.sql`)."""
    max_errors: str | None = None
    """Bad rows allowed per file before the whole file fails: a count ("10") or a share ("0.1%").
    Default: no limit; every bad row goes to the `<table>_rejects` table."""
    strict: bool = False
    """No bad row allowed: a file with one fails whole (no careful pass, no rejects)."""
    s3_endpoint: str | None = None
    """For s3:// sources: an S3-compatible endpoint (http(s)://host:port) instead of AWS."""
    split_by: str | None = None
    """For database sources: the column whose ranges make the units (default: the primary key)."""
    where: str | None = None
    """For database sources: a filter every unit applies (ClickHouse SQL over the source's columns;
    simple comparisons are pushed down to the source server)."""
    cursor: str | None = None
    """For database sources: a column that only grows (e.g. updated_at); each run loads the rows past
    the largest value loaded before."""
    memory_limit: int = field(default_factory=lambda: default_memory_limit())
    """Bytes the engine may hold for one batch: past half of it, sorting by partition spills to disk."""
    worker_id: str | None = None
    """How this process is named in the claims of a server target (default: host:pid); see
    docs/concurrency.md."""
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    """How long a claim lives without a heartbeat: a worker that died holds its units this long
    (a dead process on this host holds them not at all)."""
    split_bytes: int | None = None
    """Uncompressed CSV/TSV/JSON-lines files bigger than twice this load as byte ranges of
    about this size, each its own unit (resumable mid-file, memory bounded by the range).
    Default: a sixteenth of `memory_limit` (64 MiB at 1 GiB, at most 512 MiB), and no split into a partitioned
    table (every range would add a part to each partition it touches); 0: never split."""

    def range_bytes(self, partitioned: bool) -> int | None:
        if self.split_bytes == 0 or (self.split_bytes is None and partitioned):
            return None
        return self.split_bytes or min(512 * 2**20, max(32 * 2**20, self.memory_limit // 16))


def _table_meta(target: Target, table: TableName) -> dict[str, Any] | None:
    """The table's row of system.tables (engine, keys, DDL), None when it does not exist."""
    database = quote_str(table.database) if table.database else "currentDatabase()"
    # Old servers lack the key columns: all columns there, the few needed elsewhere.
    modern = target.capabilities.version >= (20, 1, 0)
    columns = "engine, partition_key, sorting_key, create_table_query" if modern else "*"
    try:
        found = target.rows(
            f"SELECT {columns} FROM system.tables WHERE database = {database} AND name = {quote_str(table.table)}"
        )
    except ChuteError:
        return None
    return found[0] if found else None


def _partitioned(meta: dict[str, Any] | None) -> bool:
    """Whether an existing table has a PARTITION BY (old servers: from its DDL)."""
    if meta is None:
        return False
    if "partition_key" in meta:
        return bool(meta["partition_key"])
    return "PARTITION BY" in str(meta.get("create_table_query", "")).upper()


class _Unreconciled(Exception):
    """A dirty batch whose skipped records cannot be told apart for sure: careful pass instead."""


def _rotated(batches: list[list[Unit]]) -> list[list[Unit]]:
    """The batches from a random one on, where several workers may take the same job: each
    starts elsewhere, so they rarely want the same unit at once. A file's byte ranges stay
    in order (a rotation starts at a whole file or a file's first range)."""
    starts = [i for i, b in enumerate(batches) if not b[0].is_range or b[0].start == 0]
    if len(starts) < 2:
        return batches
    at = random.choice(starts)
    return batches[at:] + batches[:at]


def _origin(unit: Unit) -> str:
    """scheme://host[:port] of a URL unit; s3://bucket of an object."""
    parts = urllib.parse.urlsplit(unit.key)
    return f"{parts.scheme}://{parts.netloc}"


class RowNumbersOff(TargetError):
    """Row numbers from a parallel parse that cannot be mended: read the file again by one thread."""


def _sum(n: int) -> int:
    return n * (n + 1) // 2


def _sum_squares(n: int) -> int:
    return n * (n + 1) * (2 * n + 1) // 6


@dataclass
class _Plan:
    load: list[Unit] = field(default_factory=list)
    replace: set[str] = field(default_factory=set)
    results: dict[str, FileResult] = field(default_factory=dict)


ProgressCallback = Callable[[int, int, int], None]
"""Called after each batch with (files done, rows loaded so far, bytes done so far)."""


def load(
    sources: Sequence[str] | str,
    table: str,
    target: str | None = None,
    options: LoadOptions | None = None,
    progress: ProgressCallback | None = None,
    on_plan: Callable[[int, int], None] | None = None,
    on_ddl: Callable[[str], None] | None = None,
) -> LoadReport:
    """Load files into `table`, exactly once; returns the report.

    Raises UsageError/SourceError before anything is written when the request
    itself is wrong; files that fail while loading are reported in the returned
    report (``report.ok`` is false) and leave nothing of themselves behind.
    """
    opts = options or LoadOptions()
    if opts.method not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}")
    if opts.on_change not in ON_CHANGE:
        raise UsageError(f"--on-change must be one of {', '.join(ON_CHANGE)}")
    if opts.delimiter is not None and len(opts.delimiter) != 1:
        raise UsageError("--delimiter must be a single character")
    ErrorBudget.parse(opts.max_errors)
    started = time.monotonic()
    sweep_scratch()
    table_name = TableName.parse(table)
    if table_name.table.startswith("_chute_"):
        raise UsageError(f"table names starting with _chute_ are reserved: {table}")
    refuse_reserved(table_name)
    if opts.cluster is not None:
        if not opts.cluster.strip():
            raise UsageError("--cluster needs a cluster name")
        if opts.method in ("convert", "pass-through"):
            raise UsageError(f"--cluster reads on the server's nodes: it does not go with --method {opts.method}")
    tgt = open_target(target, opts.password_file, opts.insecure, opts.connections)
    if opts.cluster is not None and getattr(tgt, "address", None) is None:
        raise UsageError("--cluster needs a server target (--target http(s)://host:port)")
    say_doing(f"loading {table_name}")
    exclude = [tgt.engine.path] if tgt.engine.path != MEMORY else []
    ledger = Ledger(tgt, table_name)
    has_ledger = ledger.exists()
    latest = ledger.latest() if has_ledger else {}
    refuse_rejects_clash(tgt, table_name, ledger.name if has_ledger else None)
    meta = _table_meta(tgt, table_name)
    known = tuple((k, e.state) for k, e in latest.items())
    patterns = [sources] if isinstance(sources, str) else list(sources)
    source = open_source(
        patterns,
        SourceOptions(
            opts.format,
            opts.compression,
            tuple(exclude),
            s3_endpoint=opts.s3_endpoint,
            split_bytes=opts.range_bytes(bool(opts.partition_by) or _partitioned(meta)),
            split_by=opts.split_by,
            where=opts.where,
            cursor=opts.cursor,
            password_file=opts.password_file,
            loaded=known,
        ),
    )
    units = source.units()
    _check_cluster(opts, tgt, source, units)
    loader = _Loader(tgt, source, table_name, opts, progress, meta)
    try:
        report = loader.run(units, on_plan, on_ddl, latest)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
    report.notes.extend(getattr(source, "notes", []))
    report.seconds = time.monotonic() - started
    report.bytes_sent = tgt.bytes_sent
    report.peak_rss_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return report


def _batch_label(batch: list[Unit]) -> str:
    """How errors of a batch name it: by its files, never as "a batch"."""
    if len(batch) == 1:
        return batch[0].key
    return f"{batch[0].key} (with {len(batch) - 1} more file{'s' if len(batch) > 2 else ''})"


def _told_of(exc: ChuteError, batch: list[Unit], unit: Unit) -> ChuteError:
    """A batch's error, told as the error of the one file the engine named in it."""
    label = _batch_label(batch)
    if str(exc).startswith(label):
        exc.args = (unit.key + str(exc)[len(label) :],)
    return exc


class ServerRead(NamedTuple):
    """How a server target reads one unit itself."""

    expression: str
    """The table function call (url(), s3(), s3Cluster()); probed once per origin."""
    select: str
    """The SELECT of `INSERT INTO table (columns) SELECT ...`."""


def server_side_select(
    source: Source,
    unit: Unit,
    fmt_name: str,
    inputs: Sequence[Column],
    capabilities: Capabilities,
    provenance: Mapping[str, str] | None = None,
    load_id: str = "",
    cluster: str | None = None,
) -> ServerRead | None:
    """The SELECT with which a server reads `unit` itself and fills provenance; None
    when the source cannot hand the unit over (its `server_blocker` says why).

    `provenance` maps the provenance columns to the table's types, when they are
    filled. `_source` and `_source_mtime` are constants: one unit per statement.
    `_source_row`: a url()/s3() read numbers rows in file order when one thread reads
    (max_threads 1); across a cluster only the node reading the object knows a row's
    place in it, so `_row_number`, which callers check first (`s3_row_number`).
    """
    expression_of = getattr(source, "server_expression", None)
    if expression_of is None:
        return None
    # Old servers take names in a structure string only bare (`a` would name a field "`a`").
    plain = ", ".join(f"{c.name if _PLAIN_NAME.match(c.name) else quote_ident(c.name)} {c.type}" for c in inputs)
    expression = expression_of(unit, plain, fmt_name, capabilities, cluster)
    if expression is None:
        return None
    exprs = [quote_ident(c.name) for c in inputs]
    if provenance is not None:
        values = {
            "_source": quote_str(unit.source_name),
            "_source_mtime": _server_time(unit.mtime_ns, capabilities),
            "_source_row": "_row_number + 1" if cluster is not None else "rowNumberInAllBlocks() + 1",
            "_load_id": quote_str(load_id),
        }
        exprs += [f"CAST({v}, {quote_str(provenance[n])}) AS {n}" for n, v in values.items()]
    return ServerRead(expression, f"SELECT {', '.join(exprs)} FROM {expression}")


def _server_time(mtime_ns: int, capabilities: Capabilities) -> str:
    """A time as a literal the server parses: to the nanosecond where it has DateTime64,
    as the embedded path stores it; else to the second (DateTime is all such a table holds)."""
    seconds, fraction = divmod(mtime_ns, 10**9)
    if not capabilities.datetime64:
        return f"toDateTime({seconds}, 'UTC')"
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return f"toDateTime64('{stamp:%Y-%m-%d %H:%M:%S}.{fraction:09d}', 9, 'UTC')"


def _check_cluster(opts: LoadOptions, target: Target, source: Source, units: list[Unit]) -> None:
    """--cluster: refused at once, in one line, where it cannot be honoured."""
    if opts.cluster is None or not units:
        return
    blocker_of = getattr(source, "server_blocker", None)
    if blocker_of is None:
        raise UsageError("--cluster reads s3:// sources only")
    caps = target.capabilities
    blocker = blocker_of(units[0], caps, opts.cluster)
    if blocker is not None:
        raise UsageError(blocker if blocker.startswith("--cluster") else f"--cluster: {blocker}")
    if not opts.provenance:
        return
    if not caps.s3_row_number:
        raise UsageError(
            f"--cluster with provenance needs _row_number from s3Cluster() (server 26.9+, this one is "
            f"{caps.version_text}): pass --no-provenance, or load without --cluster"
        )
    numberless = next((u for u in units if u.fmt.format not in ROW_NUMBER_FORMATS), None)
    if numberless is not None:
        raise UsageError(
            f"--cluster with provenance: {numberless.key}: {numberless.fmt.format} objects carry no "
            "_row_number; pass --no-provenance, or load without --cluster"
        )


class _Loader:
    def __init__(
        self,
        target: Target,
        source: Source,
        table: TableName,
        opts: LoadOptions,
        progress: ProgressCallback | None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.meta = meta
        """The table's row of system.tables when the load started (None: no table yet)."""
        self.target = target
        self.source = source
        self.table = table
        self.opts = opts
        self.progress = progress
        self.workers = opts.workers or os.cpu_count() or 1
        self.load_id = uuid.uuid4().hex
        self.ledger = Ledger(target, table)
        self.rejects = Rejects(target, table)
        self.deferred: list[tuple[Unit, ChuteError]] = []
        """Units the engine named in a failed batch, waiting for their careful pass."""
        self.stageable = False
        self.server_reach: dict[str, str | None] = {}
        """Origins a server target was probed for: why it cannot read them itself (None: it can)."""
        self.row_offsets: dict[str, int] = {}
        """Byte ranges of a big file: the rows of the file before the range."""
        self.ranges_of: dict[str, list[Unit]] = {}
        self.ledger_latest: dict[str, LedgerEntry] = {}
        self.line_bytes: dict[str, float] = {}
        """Average line length of CSV/TSV files with a header (sizes the first parsed block)."""
        self.serial_parse: set[str] = set()
        """Files whose row numbers came out wrong under parallel parsing: read by one thread."""
        self.unhalved: set[str] = set()
        """Files whose halves failed (numbers off, bad rows, a value cut in two): read the sorting way."""
        self.nulls = NullSearches()
        """Local CSV/TSV files (or ranges) searched for the engine's NULL, `\\N` (see chute.nullcheck)."""
        self.single_batch = False
        """The load is one batch: nothing else writes the table while it commits."""
        self.tolerant_tried: set[str] = set()
        """Units whose batch took the one-pass way for dirty JSON lines (tried once)."""
        self.partition_key = ""
        """The table's PARTITION BY: rows are grouped by it before they are written."""
        self.sorting_key = ""
        self.named: set[str] = set()
        """CSV/TSV files whose first line names the columns."""
        self.columns: list[Column] = []
        self.delimiter_given = opts.delimiter is not None
        self.csv_delimiter: str | None = None
        """Without --delimiter: CSV fields' delimiter, found in the first lines of the first CSV file."""
        self.provenance_as_data = False
        """Input files carry columns named like provenance (a chute export): read them as data."""
        self.report = LoadReport(self.load_id, str(table), target.display_name)
        self.claims: Claims | None = None
        """Where other workers may load the same table (a server), the claims that keep each
        unit to one of them; None for an embedded directory (its one process is alone)."""
        self.waiting: dict[str, Unit] = {}
        """Units another worker held when this one wanted them: looked at again at the end."""
        self._waiting_lock = threading.Lock()

    # -- planning -----------------------------------------------------------

    def run(
        self,
        units: list[Unit],
        on_plan: Callable[[int, int], None] | None,
        on_ddl: Callable[[str], None] | None,
        latest: dict[str, LedgerEntry] | None = None,
    ) -> LoadReport:
        """Plan against the ledger (`latest`, when the caller read it already) and load."""
        if self.table.database:
            self.target.execute(f"CREATE DATABASE IF NOT EXISTS {quote_ident(self.table.database)}")
        self.ledger.ensure()
        if self.target.shared:
            self.claims = Claims(self.target, self.table, self.opts.worker_id, self.opts.lease_seconds)
            self.claims.ensure()
            self.target.guard_commits(self.claims.load, self.claims.guard)
        self._drop_stale_stages()
        self.ledger_latest = self.ledger.latest() if latest is None else latest
        for unit in units:
            if unit.is_range:
                self.ranges_of.setdefault(unit.origin, []).append(unit)
        for ranges in self.ranges_of.values():
            ranges.sort(key=lambda u: u.start)
        plan = self._plan(units, self.ledger_latest)
        if on_plan:
            on_plan(len(plan.load), sum(u.size for u in plan.load))
        existing = self.target.table_columns(self.table)
        if existing is None and plan.load:
            existing = self._create_table(plan, on_ddl)
        self.columns = existing or []
        if plan.load and not self.opts.provenance:
            declared = self.source.declared_columns(plan.load[0])
            if declared and {c.name for c in declared} >= PROVENANCE_NAMES:
                self.provenance_as_data = True
        if existing is not None:
            meta = self.meta if self.meta is not None else _table_meta(self.target, self.table)
            self.stageable = meta is not None and "MergeTree" in meta["engine"]
            # Old servers have no sorting_key column: the whole DDL then stands in (cautious).
            self.sorting_key = str(meta.get("sorting_key", meta.get("create_table_query", ""))) if meta else ""
            # Old servers do not say; their inserts have no partition limit either.
            self.partition_key = str(meta.get("partition_key", "")) if meta else ""
        self._load_all(plan)
        self.report.files = [plan.results[u.key] for u in units]
        if existing is not None:
            self.report.table_rows, self.report.table_bytes_on_disk = self.target.table_stats(self.table)
        return self.report

    def _plan(self, units: list[Unit], ledger: dict[str, LedgerEntry]) -> _Plan:
        plan = _Plan()
        for unit in units:
            entry = ledger.get(unit.key)
            # Database units count rows in `size`, not bytes: they add nothing to "bytes in".
            sized_in_rows = unit.fmt.format in ROW_SIZED_FORMATS
            result = FileResult(unit.key, "skipped", bytes_in=0 if sized_in_rows else unit.size)
            plan.results[unit.key] = result
            if entry is None:
                plan.load.append(unit)
            elif entry.state == "done" and entry.identity == unit.identity:
                result.rows_loaded = 0
            elif entry.state == "done":
                if self.opts.on_change == "skip":
                    self.report.notes.append(f"{unit.key}: changed since it was loaded; skipped (--on-change)")
                elif self.opts.on_change == "error":
                    result.state = "failed"
                    result.error = "changed since it was loaded (size or mtime); use --on-change reload"
                else:
                    plan.load.append(unit)
                    plan.replace.add(unit.key)
            else:  # started (interrupted) or failed: remove whatever got in, load again
                plan.load.append(unit)
                plan.replace.add(unit.key)
        return plan

    def _infer(self, unit: Unit) -> list[Column]:
        """The unit's columns; for JSON lines with broken lines, from its valid lines."""
        declared = self.source.declared_columns(unit)
        if declared is not None:
            return declared
        if unit.fmt.format in ("CSV", "TSV"):
            names = self._header_only(unit, self._head(unit))
            if names is not None:
                return [Column(n, "String") for n in names]
        context = f"{unit.key}: cannot infer the schema"
        expression = self.source.table_expression(unit, None)
        try:
            return describe(self.target.engine, expression, context, format_settings=self._format_settings())
        except ChuteError:
            if unit.fmt.format != "JSONEachRow":
                raise
        engine = self.target.engine
        sample = scratch_file("sample", ".jsonl")
        lines = self.source.table_expression(unit, "line String", "LineAsString")
        try:
            engine.execute(
                f"INSERT INTO FUNCTION file({quote_str(sample)}, 'LineAsString', 'line String') "
                f"SELECT line FROM {lines} WHERE isValidJSON(line) LIMIT 25000",
                context=context,
            )
            if not os.path.getsize(sample):
                raise SourceError(f"{context}: no line is a JSON object")
            return describe(engine, f"file({quote_str(sample)}, 'JSONEachRow')", context, None, self._format_settings())
        except ChuteError as exc:  # the sample is chute's copy: name the user's file
            exc.args = (str(exc).replace(sample, unit.key),)
            raise
        finally:
            with contextlib.suppress(OSError):
                os.remove(sample)

    def _designed_ddl(self, plan: _Plan) -> str:
        """The CREATE TABLE of --design: measured now ("auto") or from a saved file."""
        from chute.design import load_ddl_file, propose

        assert self.opts.design is not None
        if self.opts.design != "auto":
            return load_ddl_file(self.opts.design, table=str(self.table))
        if not self.target.capabilities.codecs:
            raise UsageError(
                f"--design auto proposes column codecs, which server {self.target.capabilities.version_text} "
                "does not have (19.1+); create the table yourself or drop --design"
            )
        expressions = [self.source.table_expression(u, None) for u in plan.load if u.size > 0]
        if not expressions:
            raise SourceError("--design auto: every file is empty; nothing to measure")
        proposal = propose(
            self.target.engine,
            expressions,
            str(self.table),
            format_settings=self._format_settings(),
            provenance=self.opts.provenance,
        )
        return proposal.ddl

    def _create_table(self, plan: _Plan, on_ddl: Callable[[str], None] | None) -> list[Column] | None:
        """Infer the schema from the first readable unit and create the table."""
        if self.opts.design:
            first_csv = next((u for u in plan.load if u.fmt.format == "CSV" and u.size > 0), None)
            if first_csv is not None:  # its delimiter, for the measured sample too
                with contextlib.suppress(ChuteError):  # (the file's pre-check will say what is wrong)
                    self._head(first_csv)
            ddl = self._designed_ddl(plan)
            self.target.execute(ddl, context=f"creating table {self.table} (--design)")
            self.report.ddl = ddl
            if on_ddl:
                on_ddl(ddl)
            return self.target.table_columns(self.table)
        last_error: ChuteError | None = None
        for unit in plan.load:
            if unit.size == 0:
                continue
            try:
                columns = self._infer(unit)
            except ChuteError as exc:
                last_error = exc
                continue
            if unit.fmt.format == "Parquet":
                with contextlib.suppress(ChuteError):  # (a hint only)
                    metadata = self.source.table_expression(unit, None, "ParquetMetadata")
                    note = nullable_note(self.target.engine, metadata, unit.key, columns)
                    self.report.notes.extend([note] if note else [])
            clash = [c.name for c in columns if c.name in PROVENANCE_NAMES | self._extra_names]
            if clash and self.opts.provenance:
                raise SchemaError(
                    f"{unit.key}: input fields {clash} clash with provenance columns; use --no-provenance"
                )
            # An export of a table with provenance: with --no-provenance those columns are data.
            self.provenance_as_data = bool(clash)
            if self.opts.provenance:
                columns = with_provenance(columns, self._extra_provenance)
            columns = self._adapted(columns)
            ddl = create_table_sql(
                self.table,
                columns,
                self.opts.order_by,
                self.opts.partition_by,
                codecs=self.target.capabilities.codecs and self.opts.provenance,
            )
            self.target.execute(ddl, context=f"creating table {self.table}")
            self.report.ddl = ddl
            if on_ddl:
                on_ddl(ddl)
            return self.target.table_columns(self.table)
        if last_error is not None:
            raise last_error
        return None

    def _adapted(self, columns: list[Column]) -> list[Column]:
        """`columns` with types the target has; each changed type gets a note in the report."""
        adapted = []
        for c in columns:
            type_sql, why = self.target.capabilities.adapt_type_noted(c.type)
            if why and c.name not in PROVENANCE_NAMES | self._extra_names:
                inferred = re.sub(r"\s+", " ", c.type).replace("( ", "(")
                self.report.notes.append(f"column {c.name}: {inferred} is created as {type_sql} ({why})")
            adapted.append(Column(c.name, type_sql))
        return adapted

    def _head(self, unit: Unit) -> Head:
        """The first lines of a text unit; NotText for a binary file. Decides the CSV delimiter."""
        lines = self.source.table_expression(unit, "line String", "LineAsString")
        head = refuse_binary(self.target.engine, lines, unit.key)
        if unit.fmt.format != "CSV" or self.delimiter_given:
            return head
        found = head.delimiter()
        if found == "\t":  # the engine refuses CSV with tabs ("use CustomSeparated")
            raise SourceError(f"{unit.key}: fields separated by tabs: load it with --format tsv")
        if self.csv_delimiter is None:
            self.csv_delimiter = found or ","
            if found and found != ",":
                self.opts = dataclasses.replace(self.opts, delimiter=found)
                self.report.notes.append(
                    f"CSV fields separated by {found!r}, as the first lines of {unit.key} show (--delimiter overrides)"
                )
        elif found is not None and found != self.csv_delimiter:
            raise SourceError(
                f"{unit.key}: fields separated by {found!r}, not {self.csv_delimiter!r} as in the first CSV file; "
                "load it on its own, or with --delimiter"
            )
        return head

    def _header_only(self, unit: Unit, head: Head) -> list[str] | None:
        """A CSV/TSV file of one line that names columns: those names (the file has no rows)."""
        names = head.names_only(self.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t"))
        if names is not None:
            self.report.notes.append(
                f"{unit.key}: one line, taken as the column names (type String; no data rows to infer types from)"
            )
        return names

    # -- loading ------------------------------------------------------------

    @property
    def _has_provenance(self) -> bool:
        names = {c.name for c in self.columns}
        return names >= PROVENANCE_NAMES

    @property
    def _fill_provenance(self) -> bool:
        """Whether this load writes provenance (and so can count rows per file)."""
        return self._has_provenance and self.opts.provenance

    def _input_columns(self) -> list[Column]:
        if self.provenance_as_data and not self.opts.provenance:
            return [c for c in self.columns if c.insertable]
        return [c for c in self.columns if c.insertable and c.name not in PROVENANCE_NAMES | self._extra_names]

    @functools.cached_property
    def _extra_provenance(self) -> list[tuple[str, str]]:
        """Provenance columns a source adds to the four (a Kafka message's key): (name, type)."""
        extra = getattr(self.source, "extra_provenance_columns", None)
        return list(extra()) if extra is not None and self.opts.provenance else []

    @functools.cached_property
    def _extra_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self._extra_provenance)

    def _extra_filled(self) -> list[str]:
        """The source's extra provenance columns the table has (older tables may lack them)."""
        present = {c.name for c in self.columns}
        return [name for name, _ in self._extra_provenance if name in present] if self._fill_provenance else []

    def _batches(self, units: list[Unit]) -> list[list[Unit]]:
        batches: list[list[Unit]] = []
        current: list[Unit] = []
        size = 0
        files = self.opts.batch_files
        if self.claims is not None:
            # Other workers may share the job: enough batches for each to take some.
            files = min(files, max(1, -(-len(units) // SHARED_BATCHES)))
        for unit in units:
            if current and (
                unit.fmt != current[0].fmt
                or len(current) >= files
                or size + unit.size > self.opts.batch_bytes
                or not self._fill_provenance
                or self._server_side_possible(unit)
                or self._server_side_possible(current[0])
                or self._serial(unit)
                or unit.is_range
                or current[0].is_range
            ):
                batches.append(current)
                current, size = [], 0
            current.append(unit)
            size += unit.size
        if current:
            batches.append(current)
        return batches

    def _load_all(self, plan: _Plan) -> None:
        if not plan.load:
            return
        if plan.replace and not self._has_provenance:
            self.report.notes.append(
                "the table has no provenance columns: rows of interrupted or changed files cannot be "
                "found to replace them; they are loaded again"
            )
        ready = [u for u in plan.load if self._precheck(u, plan)]
        batches = self._batches(ready)
        self.single_batch = len(batches) == 1 and self.claims is None
        # Files passed through go one per request: as many at once as the target takes.
        streams = self.target.parallel_streams if batches and all(self._pass_through(b) for b in batches) else 1
        done: list[Unit] = []
        done_lock = threading.Lock()

        def one(batch: list[Unit]) -> None:
            if self.claims is not None:
                batch = self._claimed(batch, plan)
            try:
                if batch:
                    self._load_batch(batch, plan)
                    self._run_deferred(plan)
            except ClaimLost as exc:
                self._note(f"{exc}: left to it")
                self._wait_for([u for u in batch if plan.results[u.key].state != "loaded"])
            finally:
                if self.claims is not None:
                    self.claims.release(u.key for u in batch)
            batch = [u for u in batch if u.key not in self.waiting]
            with done_lock:
                done.extend(batch)
                if self.progress:
                    loaded = [plan.results[u.key] for u in done]
                    self.progress(len(done), sum(r.rows_loaded for r in loaded), sum(u.size for u in done))

        with self.claims.heartbeat() if self.claims is not None else contextlib.nullcontext():
            if self.claims is not None:
                batches = _rotated(batches)
            if streams == 1:
                for batch in batches:
                    one(batch)
            else:
                with ThreadPoolExecutor(streams) as pool:
                    for future in [pool.submit(one, b) for b in batches]:
                        future.result()
            self._load_waiting(one)
        if self.claims is not None:
            self._drop_stale_stages()  # a worker killed meanwhile left its stage behind

    def _drop_stale_stages(self) -> None:
        """Stage tables of runs that ended without dropping them (killed): all of them, or
        where others may load now, those of workers that hold no live claim."""
        claims = self.claims
        if claims is None:
            self.target.prepare(self.table)
            return
        self.target.prepare(self.table, lambda: {h.token.split(".", 1)[0] for h in claims.all_live()})

    def _wait_for(self, units: Sequence[Unit]) -> None:
        with self._waiting_lock:
            for unit in units:
                self.waiting[unit.key] = unit

    def _claimed(self, batch: list[Unit], plan: _Plan) -> list[Unit]:
        """The units of `batch` this worker now holds and still has to load.

        Units another worker holds wait for the end. The ledger is read again for
        the rest: another worker may have loaded them since the plan was made, or
        died while loading them (then they are repaired: their rows removed first).
        """
        assert self.claims is not None
        won, _busy = self.claims.claim([u.key for u in batch])
        mine = set(won)
        self._wait_for([u for u in batch if u.key not in mine])
        with self._waiting_lock:
            for key in mine:
                self.waiting.pop(key, None)
        units = [u for u in batch if u.key in mine]
        fresh = self.ledger.latest([u.key for u in units])
        load: list[Unit] = []
        settled: list[str] = []
        for unit in units:
            entry, earlier = fresh.get(unit.key), self.ledger_latest.get(unit.key)
            if entry is not None:
                self.ledger_latest[unit.key] = entry
            changed_here = entry is not None and (earlier is None or earlier.seq != entry.seq)
            if entry is None:
                load.append(unit)
            elif entry.state == "done" and entry.identity == unit.identity:
                settled.append(unit.key)  # loaded, by another worker since the plan if changed_here
                plan.results[unit.key].state = "skipped"
            elif entry.state == "done" and not changed_here:
                load.append(unit)  # changed since it was loaded; the plan said reload
            elif entry.state == "failed" and changed_here:
                settled.append(unit.key)  # another worker failed it during this run: not again
                result = plan.results[unit.key]
                result.state, result.error = "failed", entry.error
                result.rows_rejected = entry.rows_rejected
            elif entry.state == "done":
                settled.append(unit.key)  # loaded again by another worker in this run
            else:
                plan.replace.add(unit.key)  # started by a worker that is gone, or failed before
                load.append(unit)
        for unit in list(load):
            if unit.is_range and not self._earlier_ranges_done(unit):
                load.remove(unit)
                settled.append(unit.key)
                self._wait_for([unit])
        self.claims.release(settled)
        return load

    def _earlier_ranges_done(self, unit: Unit) -> bool:
        """Whether the ranges before `unit` of its file are all loaded (read afresh): a
        range numbers its rows after theirs, so it waits while another worker loads them."""
        earlier = [r.key for r in self.ranges_of.get(unit.origin, []) if r.start < unit.start]
        if not earlier:
            return True
        fresh = self.ledger.latest(earlier)
        self.ledger_latest.update(fresh)
        if all(k in fresh and fresh[k].state == "done" for k in earlier):
            return True
        # Failed for good, or nobody's: the range goes on, and `_place_range` says why it cannot load.
        assert self.claims is not None
        held = self.claims.holders(earlier)
        return not held and not any(k in self.waiting for k in earlier)

    def _load_waiting(self, one: Callable[[list[Unit]], None]) -> None:
        """Units other workers held: done when they are done; taken over when their claims end."""
        if self.claims is None:
            return
        rng = random.Random()
        while self.waiting:
            with self._waiting_lock:
                waiting = sorted(self.waiting.values(), key=lambda u: (u.origin, u.start, u.key))
            held = self.claims.holders([u.key for u in waiting])
            free = [u for u in waiting if u.key not in held]
            if free:
                for batch in self._batches(free):
                    one(batch)
                if len(self.waiting) < len(waiting):
                    continue
            # Nothing moved: wait a moment (apart from other workers) before looking again.
            time.sleep(min(1.0, self.opts.lease_seconds / 10) * rng.uniform(0.5, 1.5))

    def _precheck(self, unit: Unit, plan: _Plan) -> bool:
        """Per-file checks that need no row parsing; a failure marks the unit failed."""
        result = plan.results[unit.key]
        try:
            if unit.size == 0:
                raise SourceError(f"{unit.key}: empty file (0 bytes)")
            if unit.fmt.format in SELF_DESCRIBING or self.opts.add_columns:
                self._check_fields(unit)
            if unit.fmt.format in ("CSV", "TSV") and self._header_names(unit):
                self.named.add(unit.key)
        except ChuteError as exc:
            result.state = "failed"
            result.error = str(exc)
            self.ledger.record([unit], "failed", self.load_id, errors={unit.key: str(exc)})
            return False
        return True

    def _header_names(self, unit: Unit) -> bool:
        """A first line naming table columns: read as CSVWithNames (faster than detecting)."""
        head = self._head(unit)
        delimiter = self.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
        lines = self.source.table_expression(unit, "line String", "LineAsString")
        fields = head.fields(delimiter)
        named = bool(fields) and set(fields) <= {c.name for c in self._input_columns()}
        if named:
            sample = self.target.engine.rows(
                f"SELECT avg(length(line)) + 1 AS width FROM (SELECT line FROM {lines} LIMIT 2000)"
            )
            self.line_bytes[unit.key] = float(sample[0]["width"] or 1) if sample else 1.0
        return named

    def _format_name(self, unit: Unit) -> str:
        return unit.fmt.format + ("WithNames" if unit.key in self.named else "")

    def _check_fields(self, unit: Unit) -> None:
        """Input fields the table lacks: an error naming them, or new columns."""
        sample = None if unit.fmt.format in SELF_DESCRIBING else 1000
        fields = describe(
            self.target.engine,
            self.source.table_expression(unit, None),
            context=f"{unit.key}: cannot read the schema",
            sample_rows=sample,
            format_settings=self._format_settings(),
        )
        known = {c.name for c in self.columns}
        extra = [f for f in fields if f.name not in known]
        if not extra:
            return
        if not self.opts.add_columns:
            names = ", ".join(f.name for f in extra)
            raise SchemaError(
                f"{unit.key}: input fields not in table {self.table}: {names} (use --add-columns to add them)"
            )
        for col in extra:
            self.target.execute(
                f"ALTER TABLE {self.table.sql} ADD COLUMN IF NOT EXISTS {quote_ident(col.name)} {col.type}",
                context=f"adding column {col.name}",
            )
            self.report.notes.append(f"added column {col.name} {col.type} (from {unit.key})")
        self.columns = self.target.table_columns(self.table) or self.columns

    def _provenance(self, unit: Unit, row_expression: str) -> dict[str, tuple[str, str]]:
        """Provenance column -> (SQL, the table's exact type); empty when not filled."""
        if not self._fill_provenance:
            return {}
        types = {c.name: c.type for c in self.columns}
        offset = self.row_offsets.get(unit.key, 0)
        values = {
            "_source": quote_str(unit.source_name),
            "_source_mtime": f"fromUnixTimestamp64Nano({unit.mtime_ns}, 'UTC')",
            "_source_row": f"({row_expression}) + {offset}" if offset else row_expression,
            "_load_id": quote_str(self.load_id),
        }
        per_row = getattr(self.source, "provenance_expressions", None)
        if per_row is not None:
            wanted = set(values) | set(self._extra_filled())
            values.update({k: v for k, v in per_row(unit, row_expression).items() if k in wanted})
        return {name: (expr, types[name]) for name, expr in values.items()}

    def _selects(self, batch: list[Unit]) -> list[str]:
        """The SELECTs that read a batch: one per stream the target takes.

        Files of one directory and format are read by a single file() call over
        their names (as `file('dir/*.json.gz')` would), which the engine
        schedules better than a UNION ALL of one call per file.
        """
        parallel, block = self._parallel_parsing(batch), self._first_block(batch)
        streams = min(self.target.parallel_streams, len(batch))
        groups = [batch[i::streams] for i in range(streams)]
        selects: list[str] = []
        for group in groups:
            by_format: dict[str, list[Unit]] = {}
            for unit in group:
                by_format.setdefault(self._format_name(unit), []).append(unit)
            for fmt_name, units in by_format.items():
                combined = self.source.combined_expression(units, "", fmt_name) if len(units) > 1 else None
                if combined is None:
                    selects.extend(self._select_sql([u], parallel, block) for u in units)
                else:
                    selects.append(self._select_sql(units, parallel, block))
        return selects

    def _select_sql(
        self,
        units: list[Unit],
        parallel: bool = False,
        block: int = ROW_FIX_BLOCK,
        fmt_name: str | None = None,
        row_expression: str | None = None,
        fd: int | None = None,
    ) -> str:
        """Read `units` (one, or several that one file() call can read) with the table's types;
        with `fd`, the one unit's bytes from that descriptor (see `range_fd`)."""
        unit = units[0]
        inputs = self._input_columns()
        read_as = list(inputs)
        exprs = []
        for i, col in enumerate(inputs):
            wide = widened(col.type) if unit.fmt.is_text else None
            if wide is None:
                exprs.append(quote_ident(col.name))
            else:
                # Text parsers wrap integers that do not fit; read wide, cast exactly.
                read_as[i] = Column(col.name, wide, col.default_kind, col.default_expression)
                exprs.append(f"accurateCast({quote_ident(col.name)}, {quote_str(col.type)}) AS {quote_ident(col.name)}")
        fmt_name = fmt_name or self._format_name(unit)
        if len(units) == 1:
            table_expr = (
                self.source.table_expression(unit, structure(read_as), fmt_name)
                if fd is None
                else table_function("file", [str(fd)], fmt_name, structure(read_as), "none")
            )
            provenance = self._provenance(unit, row_expression or self._row_number(unit, parallel, block))
        else:
            combined = self.source.combined_expression(units, structure(read_as), fmt_name)
            assert combined is not None
            table_expr, per_file = combined
            provenance = self._provenance(unit, self._row_number(unit, parallel, block))
            provenance = {name: (per_file.get(name, expr), t) for name, (expr, t) in provenance.items()}
        # Cast to the table's exact types: an old server may hold String, DateTime.
        exprs += [f"CAST({expr}, {quote_str(t)}) AS {name}" for name, (expr, t) in provenance.items()]
        return f"SELECT {', '.join(exprs)} FROM {table_expr}"

    def _insert_columns(self) -> list[str]:
        names = [c.name for c in self._input_columns()]
        if self._fill_provenance:
            names += ["_source", "_source_mtime", "_source_row", "_load_id", *self._extra_filled()]
        return names

    def _format_settings(self) -> dict[str, str | int | float]:
        """How to read input; the same for inference and for loading."""
        settings: dict[str, str | int | float] = {
            "date_time_input_format": "best_effort",
            "input_format_csv_detect_header": 1,
            # A date or time out of its type's range fails (to the careful pass) instead of being clamped.
            "date_time_overflow_behavior": "throw",
        }
        if self.opts.delimiter:
            settings["format_csv_delimiter"] = self.opts.delimiter
        return settings

    def _row_fix(self, batch: list[Unit]) -> bool:
        """CSV/TSV that may be parsed in parallel: row numbers checked (and if need
        be mended) in the stage table before the rows move in."""
        return (
            self._fill_provenance
            and self.stageable
            and "_source_row" not in self.sorting_key
            and all(u.fmt.format in ("CSV", "TSV") for u in batch)
        )

    def _parallel_parsing(self, batch: list[Unit]) -> bool:
        # Many files already keep every core busy; parallel parsing then only costs.
        if len(batch) >= self.workers or any(u.key in self.serial_parse for u in batch):
            return False
        # The engine's _row_number of CSV/TSV with a header is off under parallel
        # parsing: on only where the stage check can catch and mend it.
        return not (self._fill_provenance and batch[0].fmt.format in ("CSV", "TSV")) or self._row_fix(batch)

    def _row_number(self, unit: Unit, parallel: bool, block: int = ROW_FIX_BLOCK) -> str:
        """SQL for the row's number in its file.

        Parsing a CSV/TSV file with a header in parallel, the engine numbers the
        rows of the file's first block from 0 and later rows from 1 (the header
        line counts there). With blocks of `block` rows the first block holds
        block - 1 rows (the header takes a slot), so each row can be numbered
        right as it is read; the stage check verifies it.
        """
        if parallel and unit.key in self.named and self._fill_provenance:
            return f"_row_number + if(_row_number < {block - 1}, 1, 0)"
        return self.source.row_number_expression(unit)

    def _serial(self, unit: Unit) -> bool:
        """Row numbers of this unit are right only when one thread reads it."""
        return self._fill_provenance and self.source.needs_serial_read(unit)

    def _settings(self, batch: list[Unit]) -> dict[str, str | int | float]:
        threads = 1 if any(self._serial(u) for u in batch) else self.workers
        if any(u.fmt.format in ROW_GROUP_FORMATS for u in batch):
            threads = max(1, min(threads, self.opts.memory_limit // READER_THREAD_BYTES))
        parallel_parsing = self._parallel_parsing(batch)
        settings: dict[str, str | int | float] = {
            **self._format_settings(),
            "max_threads": threads,
            "max_insert_threads": threads,
            "input_format_parallel_parsing": int(parallel_parsing),
            "input_format_skip_unknown_fields": 0,
            # Read files with pread, not mmap: as fast here, and a mapped 5 GB file would
            # count in the process's memory (RSS, cgroup limits) while it is read.
            "storage_file_read_method": "pread",
            # Parquet: decoded row groups held at once, and insert blocks, within the budget.
            "input_format_parquet_memory_high_watermark": max(64 * 2**20, self.opts.memory_limit // 4),
            "min_insert_block_size_bytes": self._insert_block_bytes(batch, threads),
            **self._part_writer_settings(threads),
        }
        if parallel_parsing and any(u.key in self.named for u in batch) and self._fill_provenance:
            settings["max_block_size"] = self._first_block(batch)
        return settings

    def _null_places(self, batch: list[Unit]) -> list[Place] | None:
        """The batch's bytes, where all are local uncompressed CSV/TSV (see chute.nullcheck)."""
        places = []
        for unit in batch:
            path = unit.origin or unit.key
            if unit.fmt.format not in CHECKED_FORMATS or unit.fmt.compression != "none" or "://" in path:
                return None
            places.append((path, unit.start, unit.end if unit.is_range else unit.size, unit.identity))
        return places

    def _null_check_off(self, batch: list[Unit], settings: dict[str, str | int | float]) -> bool:
        """Turn the engine's NULL check off for this INSERT where the bytes and types allow (chute.nullcheck)."""
        scalar = all(scalar_type(c.type) for c in self._input_columns())
        off = scalar and self.nulls.check_off(self._null_places(batch))
        if off:
            settings["input_format_null_as_default"] = 0
        return off

    @contextlib.contextmanager
    def _nulls_guard(self, batch: list[Unit], check_off: bool) -> Iterator[None]:
        """A failed INSERT read with the NULL check off, of a file that holds `\\N`: NullsInFile."""
        try:
            yield
        except (NullsInFile, CommitUncertain):
            raise  # (a commit was begun: the search had found nothing by then)
        except ChuteError as exc:
            nulls = self._nulls_read_with_check_off(batch, check_off)
            if nulls is not None:
                raise nulls from exc
            raise

    def _nulls_read_with_check_off(self, batch: list[Unit], check_off: bool) -> NullsInFile | None:
        """NullsInFile when the batch was read with the NULL check off and holds `\\N` (waits for the search)."""
        if check_off and self.nulls.holds_nulls(self._null_places(batch) or []):
            return NullsInFile(f"{batch[0].key}: holds \\N; read again with NULLs as defaults")
        return None

    def _insert_block_bytes(self, batch: list[Unit], threads: int) -> int:
        """Bytes per written part: within the memory budget, and small enough that
        each insert thread writes a part or two while the readers still parse.

        The engine's default (about 1 M rows) makes a load of one million rows one
        block, written by one thread after parsing ends: a serial tail of ~15% of
        the load on the streams set. A block per thread keeps the cores busy.
        """
        budget = min(256 * 2**20, max(16 * 2**20, self.opts.memory_limit // 8))
        # A columnar file's reader holds decoded row groups beside the block: smaller blocks.
        if any(u.fmt.format in ROW_GROUP_FORMATS for u in batch):
            return min(budget, max(16 * 2**20, self.opts.memory_limit // 64))
        # Ranges of a big file load one after another: one part each keeps merges (and memory) down.
        if any(u.fmt.format in ROW_SIZED_FORMATS or u.is_range for u in batch):
            return budget
        expanded = sum(u.size * (1 if u.fmt.compression == "none" else COMPRESSED_EXPANSION) for u in batch)
        return max(16 * 2**20, min(budget, expanded // max(1, threads)))

    def _part_writer_settings(self, threads: int) -> dict[str, int | str]:
        """How the stage writes its parts: smaller compressed blocks where wide rows would not
        fit the budget, and small parts of a partition-aware load packed into one file, in
        the basic part format (SMALL_PART_FORMAT).

        The part writer's buffers grow with columns x insert threads, not rows: on a
        100-column table they alone outgrow a 1 GiB budget at the default 1 MiB
        blocks. An eighth of the budget goes to them; the blocks stay >= 64 KiB.

        A partition-aware load writes a part per partition: 800 for 400 days of
        unsorted events read as two halves. Packed (`data.packed`), a compact part is
        2 inodes instead of 12. That matters where new inodes are dear: ext4 without a
        journal skips inodes freed in the last minutes, and after 10,000 files were
        deleted the load took 0.2-0.7 s (2.5-8%) less packed. Stage setting only: the
        target keeps its own, and its merges write parts the usual way.
        """
        settings: dict[str, int | str] = {}
        if self._sortable_partition():
            settings["min_bytes_for_full_part_storage"] = PACKED_PART_BYTES
            settings.update(SMALL_PART_FORMAT)
        per_buffer = self.opts.memory_limit // (8 * PART_WRITER_BUFFERS * max(1, len(self.columns)) * threads)
        if per_buffer < 2**20:
            block = max(2**16, 1 << (per_buffer.bit_length() - 1)) if per_buffer > 0 else 2**16
            settings.update(max_compress_block_size=block, min_compress_block_size=min(2**16, block))
        return settings

    def _first_block(self, batch: list[Unit]) -> int:
        """Rows per parsed block, small enough that a file's first block ends
        inside the parser's first segment (10 MiB), half of it to be safe."""
        widest = max((self.line_bytes.get(u.key, 1.0) for u in batch), default=1.0)
        return max(64, min(ROW_FIX_BLOCK, int(PARSE_SEGMENT_BYTES / widest / 2)))

    def _unchanged_check(self, batch: list[Unit], fix_rows: bool = False, null_check_off: bool = False) -> CommitCheck:
        def check(stage: TableName | None, _counts: dict[str, int]) -> None:
            for unit in batch:
                if not self.source.unchanged(unit):
                    raise SourceError(f"{unit.key}: changed or removed during the load; run again to load it")
            nulls = self._nulls_read_with_check_off(batch, null_check_off)
            if nulls is not None:
                raise nulls
            if fix_rows and stage is not None:
                for unit in batch:
                    self._fix_row_numbers(stage, unit)

        return check

    def _fix_row_numbers(self, stage: TableName, unit: Unit) -> None:
        """Check a CSV/TSV file's row numbers in the stage table, and mend them.

        They must be exactly 1..n: checked by min, max, count, sum and sum of
        squares (one pass, no set). A single gap (the engine's off-by-one after
        the first block, when it was not numbered right as read) is closed by
        shifting the rows after it; any other shape raises RowNumbersOff, and
        the batch is read again by one thread.
        """
        key = quote_str(unit.source_name)
        offset = self.row_offsets.get(unit.key, 0)  # a range's rows follow the file's earlier ranges
        row = f"(_source_row - {offset})" if offset else "_source_row"
        got = self.target.rows(
            f"SELECT min({row}) AS lo, max({row}) AS hi, count() AS n, "
            f"toString(sum({row})) AS s, toString(sum({row} * {row})) AS q "
            f"FROM {stage.sql} WHERE _source = {key}"
        )[0]
        lo, hi, n = int(got["lo"]), int(got["hi"]), int(got["n"])
        # The squares are summed in UInt64 on every server version: compare modulo 2**64.
        total, squares = int(got["s"]), int(got["q"])
        if n == 0 or (lo, hi, total, squares) == (1, n, _sum(n), _sum_squares(n) % 2**64):
            return
        gap = _sum(n + 1) - total
        if lo == 1 and hi == n + 1 and 1 <= gap <= n and squares == (_sum_squares(n + 1) - gap * gap) % 2**64:
            self.target.mutate(
                stage,
                f"UPDATE _source_row = _source_row - 1 WHERE _source = {key} AND _source_row > {gap + offset}",
                f"{unit.key}: fixing row numbers",
            )
            return
        raise RowNumbersOff(f"{unit.key}: row numbers from the parallel parser are not 1..{n}")

    def _load_batch(self, batch: list[Unit], plan: _Plan) -> None:
        if batch[0].is_range and not self._place_range(batch[0], plan):
            return
        self.ledger.record(batch, "started", self.load_id)
        replace = [u for u in batch if u.key in plan.replace]
        if replace and self._has_provenance:
            self._remove_rows(replace)
        by_source = self._fill_provenance
        pass_through = self._pass_through(batch)
        try:
            counts = self._write_with_repair(batch, pass_through, by_source)
        except ChuteError as exc:
            self._after_batch_failure(batch, exc, plan)
            return
        if pass_through or batch[0].is_range:
            by_source = False
        rows = counts if by_source else {batch[0].key: sum(counts.values())}
        for unit in batch:
            result = plan.results[unit.key]
            result.state = "loaded"
            result.rows_loaded = rows.get(unit.key, 0)
        self.ledger.record(batch, "done", self.load_id, rows=rows)
        self._units_done(batch)

    def _units_done(self, units: list[Unit]) -> None:
        """Tell the source (Kafka commits its group's offsets for information)."""
        hook = getattr(self.source, "unit_done", None)
        if hook is not None:
            hook(units)

    def _place_range(self, unit: Unit, plan: _Plan) -> bool:
        """The row number a range starts after: the rows of the file's earlier ranges.

        Ranges of a file load in order; a range whose predecessors did not all
        load cannot number its rows and waits for the next run.
        """
        before = 0
        for other in self.ranges_of.get(unit.origin, []):
            if other.start >= unit.start:
                break
            result = plan.results.get(other.key)
            entry = self.ledger_latest.get(other.key)
            if result is not None and result.state == "loaded":
                before += result.rows_loaded + result.rows_rejected
            elif result is not None and result.state == "skipped" and entry and entry.state == "done":
                before += entry.rows_loaded + entry.rows_rejected
            else:
                self._fail(
                    unit, f"{unit.origin}: bytes {unit.start}-{unit.end} wait for an earlier part of the file", plan
                )
                return False
        self.row_offsets[unit.key] = before
        return True

    def _remove_rows(self, units: list[Unit]) -> None:
        """Remove what earlier attempts left of these units (rows and rejects)."""
        files = [u.key for u in units if not u.is_range]
        if files:
            self.target.delete_sources(self.table, files)
            for key in files:
                self.rejects.clear(key)
        for unit in units:
            if unit.is_range:
                # This range and any later one of the file: they load in order.
                where = f"_source = {quote_str(unit.origin)} AND _source_row > {self.row_offsets.get(unit.key, 0)}"
                tables = [self.table, self.rejects.name] if self.rejects.exists() else [self.table]
                for table in tables:
                    # A mutation costs even when it matches nothing: look first.
                    found = self.target.rows(f"SELECT count() AS n FROM {table.sql} WHERE {where}")
                    if int(found[0]["n"]):
                        self.target.mutate(table, f"DELETE WHERE {where}", f"{unit.key}: removing earlier rows")

    def _write_with_repair(self, batch: list[Unit], pass_through: bool, by_source: bool) -> dict[str, int]:
        """Write a batch; if the target failed while moving rows in, remove what may
        have got in (by `_source`) and write again, as a re-run would."""
        for attempt in range(REPAIR_ATTEMPTS):
            try:
                return self._write(batch, pass_through, by_source)
            except CommitUncertain:
                if not self._has_provenance or attempt == REPAIR_ATTEMPTS - 1:
                    raise
            for wait in range(REPAIR_ATTEMPTS):
                time.sleep(0.5 * 2**wait)
                try:
                    self._remove_rows(batch)
                    break
                except TransientTargetError:
                    if wait == REPAIR_ATTEMPTS - 1:
                        raise
        raise AssertionError("unreachable")

    def _write(self, batch: list[Unit], pass_through: bool, by_source: bool) -> dict[str, int]:
        server_select = self._server_select(batch)
        if server_select is not None:
            settings = {k: v for k, v in self._format_settings().items() if k in SERVER_READ_SETTINGS}
            if self.opts.cluster is None:
                settings["max_threads"] = 1  # rowNumberInAllBlocks() follows the file with one reader
            elif batch[0].key in self.named:
                settings["input_format_parallel_parsing"] = 0  # see _parallel_parsing: _row_number is off
            try:
                return self.target.write_select(
                    self.table,
                    self._insert_columns(),
                    server_select,
                    settings,
                    count_by_source=by_source,
                    context=batch[0].key,
                    before_commit=self._unchanged_check(batch),
                )
            except ChuteError as exc:
                raise self._scrubbed(exc) from None
        if pass_through:
            return self.target.write_raw(
                self.table,
                self._insert_columns(),
                batch[0],
                self._format_name(batch[0]),
                self._format_settings(),
                batch[0].key,
                self._unchanged_check(batch),
            )
        return self._write_converted(batch, by_source)

    def _scrubbed(self, exc: ChuteError) -> ChuteError:
        """`exc` with its message cleaned of source secrets (server-side SQL carries them)."""
        scrub = getattr(self.source, "scrub", None)
        text = scrub(str(exc)) if scrub is not None else str(exc)
        if text == str(exc):
            return exc
        clean = copy.copy(exc)
        clean.args = (text,)
        return clean

    def _server_side_possible(self, unit: Unit) -> bool:
        """Whether a server target may read `unit` itself (before any probe): such units
        load one per statement, so that each is its own ledger entry."""
        blocker_of = getattr(self.source, "server_blocker", None)
        return (
            self.opts.method in ("auto", "server-side")
            and getattr(self.target, "address", None) is not None
            and blocker_of is not None
            and blocker_of(unit, self.target.capabilities, self.opts.cluster) is None
        )

    def _server_select(self, batch: list[Unit]) -> str | None:
        """The SELECT a server target runs to read a URL or an S3 object itself (the third
        path), or None.

        Chosen by --method auto or server-side (or --cluster) when the target is a server,
        the source can hand the server the unit (url(), s3(), s3Cluster()), and the server
        reaches it (probed once per origin). The server parses straight into the table's
        types and fills provenance. Where it cannot, auto converts here with a note;
        server-side and --cluster fail the unit, saying why.
        """
        unit = batch[0]
        cluster = self.opts.cluster
        asked = self.opts.method == "server-side" or cluster is not None
        blocker_of = getattr(self.source, "server_blocker", None)
        if (
            self.opts.method not in ("auto", "server-side")
            or blocker_of is None
            or getattr(self.target, "address", None) is None
        ):
            if asked:
                option = "--cluster" if cluster is not None else "--method server-side"
                raise UsageError(f"{unit.key}: {option} needs a server target and an http(s):// or s3:// source")
            return None
        caps = self.target.capabilities
        blocker = blocker_of(unit, caps, cluster)
        if blocker is None:
            if len(batch) != 1:  # not batched when the server may read them (_server_side_possible)
                return None
            fmt_name = self._format_name(unit)
            if fmt_name.endswith("WithNames") and not caps.reads_header_files:
                if asked:
                    raise UsageError(
                        f"{unit.key}: server {caps.version_text} loses a row of "
                        "files with a header line when it reads them itself; use --method convert"
                    )
                return None
            types = {c.name: c.type for c in self.columns} if self._fill_provenance else None
            read = server_side_select(
                self.source, unit, fmt_name, self._input_columns(), caps, types, self.load_id, cluster
            )
            if read is None:
                return None
            blocker = self._server_unreached(read.expression, unit)
            if blocker is None:
                return read.select
        if asked:
            raise UsageError(f"{unit.key}: the server cannot read it itself ({blocker})")
        self._note(f"{_origin(unit)}: the server cannot read it itself ({blocker}); converted here")
        return None

    def _note(self, note: str) -> None:
        """A note for the report, once per load."""
        if note not in self.report.notes:
            self.report.notes.append(note)

    def _server_unreached(self, expression: str, unit: Unit) -> str | None:
        """Why the server cannot read `unit` (its error, without secrets), None when it can.
        Probed once per origin (scheme, host, port; an S3 bucket): reaching one object
        there means reaching the rest."""
        origin = _origin(unit)
        if origin not in self.server_reach:
            try:
                self.target.rows(f"SELECT 1 AS ok FROM {expression} LIMIT 1", context=f"{unit.key}: probing")
                self.server_reach[origin] = None
            except ChuteError as exc:
                self.server_reach[origin] = str(self._scrubbed(exc))
        return self.server_reach[origin]

    def _pass_through(self, batch: list[Unit]) -> bool:
        """Send the file's bytes as they are: asked for, or chosen where nothing is lost."""
        # Only local files can be sent as they are (write_raw opens the path).
        if self.opts.method == "convert" or len(batch) != 1 or batch[0].is_range or "://" in batch[0].key:
            return False
        possible = not self._fill_provenance and self.target.accepts_raw(batch[0].fmt)
        if self.opts.method == "pass-through" and not possible:
            raise UsageError(
                f"{batch[0].key}: --method pass-through needs a server that parses {batch[0].fmt.format} "
                f"({batch[0].fmt.compression}) itself and no provenance columns (--no-provenance)"
            )
        return possible

    def _sortable_partition(self) -> bool:
        """A PARTITION BY that the SELECT can sort by.

        The key may name columns the table computes itself (MATERIALIZED, DEFAULT
        not given): those are not in the SELECT; such an insert goes unsorted.
        """
        if not self.partition_key:
            return False
        named = {
            quoted or plain for quoted, plain in re.findall(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)", self.partition_key)
        }
        table_names = {c.name for c in self.columns}
        return not (named & table_names) - set(self._insert_columns())

    def _grouped(self, selects: list[str], settings: dict[str, str | int | float]) -> list[str]:
        """Rows in partition order, so each insert block touches few partitions.

        Unsorted input (events out of time order into a table partitioned by day)
        would otherwise give every block a part in hundreds of partitions: the
        insert fails past `max_partitions_per_insert_block`, or leaves thousands
        of small parts to merge. Sorted, a partition gets one part (two where an
        insert block ends inside it). The sort spills to local disk past half the
        memory budget, so memory stays bounded whatever the file's size.
        """
        if not self._sortable_partition():
            return selects
        settings["max_partitions_per_insert_block"] = 0
        settings["max_bytes_before_external_sort"] = self.opts.memory_limit // 2
        settings["max_bytes_ratio_before_external_sort"] = 0
        # Merging the spilled runs reads a block of each per column: small blocks keep that within
        # the budget (a 4.7 GiB CSV at 1 GiB: 1.5 GiB peak RSS with 1 MiB blocks, 2.0 GiB at the default 16 MiB).
        settings["prefer_external_sort_block_bytes"] = max(2**18, min(16 * 2**20, self.opts.memory_limit // 1024))
        return [f"SELECT * FROM ({select}) ORDER BY {self.partition_key}" for select in selects]

    def _write_converted(self, batch: list[Unit], by_source: bool) -> dict[str, int]:
        try:
            return self._write_converted_planned(batch, by_source)
        except NullsInFile:
            # Read with the NULL check off, and a `\\N` turned up: the search has its verdict
            # now, so the same plan reads the file with the check on.
            return self._write_converted_planned(batch, by_source)

    def _write_converted_planned(self, batch: list[Unit], by_source: bool) -> dict[str, int]:
        halves = self._halves(batch)
        if halves is not None:
            try:
                return self._write_halves(batch[0], *halves, by_source=by_source)
            except ChuteError as exc:
                if not exc.terminal or isinstance(exc, (OutOfSpace, NullsInFile)):
                    raise
                # Numbers off, bad rows, or a cut inside a value (a JSON object over several
                # lines): the whole file the usual way, which mends or reports what is wrong.
                self.unhalved.add(batch[0].key)
        try:
            return self._write_converted_once(batch, by_source)
        except RowNumbersOff:
            if any(u.key in self.serial_parse for u in batch):
                raise
            self.serial_parse.update(u.key for u in batch)
            return self._write_converted_once(batch, by_source)

    def _write_converted_once(self, batch: list[Unit], by_source: bool) -> dict[str, int]:
        settings = self._settings(batch)
        check_off = self._null_check_off(batch, settings)
        selects = self._grouped(self._selects(batch), settings)
        with self._nulls_guard(batch, check_off):
            return self.target.write_batch(
                self.table,
                self._insert_columns(),
                selects,
                settings,
                count_by_source=by_source,
                context=_batch_label(batch),
                before_commit=self._unchanged_check(
                    batch, fix_rows=self._row_fix(batch) and self._parallel_parsing(batch), null_check_off=check_off
                ),
                swap_if_empty=self.single_batch,
            )

    def _halves(self, batch: list[Unit]) -> tuple[int, int] | None:
        """(cut, newlines before it) when one big file into a partitioned table loads as two halves.

        Sorting unsorted rows by partition costs a merge on one thread (1.5 CPU
        seconds of 11 on 2 M rows of 100 columns). A block holding all the rows
        a stream read needs no sort: the table writes one part per partition
        from it. So the file is cut in two at a row boundary and each half is
        read by one thread into one block, both at once: two parts per
        partition, and no serial tail. It takes the rows in memory, hence only
        where they fit the budget; and local uncompressed text only, where a cut
        costs a count of bytes.
        """
        if len(batch) != 1 or self.workers < 2 or not self.target.parallel_inserts:
            return None
        unit = batch[0]
        fmt = unit.fmt
        if (
            unit.is_range
            or unit.key in self.unhalved
            or fmt.format not in SPLIT_FORMATS
            or fmt.compression != "none"
            or "://" in unit.key
            or not os.path.isfile(unit.key)
            or unit.size < HALVES_MIN_BYTES
            or unit.size * HALVES_MEMORY_PER_BYTE > self.opts.memory_limit
            or (self._fill_provenance and "_source_row" in self.sorting_key)
            or not self._sortable_partition()
        ):
            return None
        return halve(unit.key, fmt.format, unit.size)

    def _write_halves(self, unit: Unit, cut: int, newlines: int, by_source: bool) -> dict[str, int]:
        """Two INSERTs at once, a half of the file each, each squashed into one block.

        The second half numbers its rows after the first half's newlines (less the
        header): right unless a value in the first half holds a newline, which the
        check before the commit finds (RowNumbersOff, and `_write_converted` loads
        the file the sorting way).

        Each half gets half the workers. With one each (two cores) a half is parsed
        by its own thread and numbered as read. With more, the engine parses each
        half in parallel and numbers rows by `_row_number` (as a whole file parsed
        in parallel, the first half's header mended the same way); every row
        number is then checked before the commit. Still one sink per INSERT, so
        still one block and one part per partition each.
        """
        header = 1 if unit.key in self.named else 0
        first_rows = newlines - header
        first = dataclasses.replace(unit, origin=unit.key, start=0, end=cut)
        second = dataclasses.replace(unit, origin=unit.key, start=cut, end=unit.size)
        threads = max(1, self.workers // 2)
        parallel = threads > 1
        block = self._first_block([unit])
        settings = self._settings([unit])
        settings.pop("max_block_size", None)
        check_off = self._null_check_off([unit], settings)
        if parallel:
            # The segment size `block` was sized for, said rather than assumed.
            settings["min_chunk_bytes_for_parallel_parsing"] = PARSE_SEGMENT_BYTES
            if header and self._fill_provenance:
                settings["max_block_size"] = block  # the first block ends inside the first segment
        settings.update(
            # The halves come from descriptors (`range_fd`), read from where they stand.
            storage_file_read_method="read",
            max_threads=threads,
            max_insert_threads=1,
            input_format_parallel_parsing=int(parallel),
            # The second half starts with a row, not a header; the first reads as the whole file would.
            input_format_csv_detect_header=0,
            input_format_tsv_detect_header=0,
            # One block per INSERT: the table splits it into a part per partition, no sort.
            min_insert_block_size_rows=0,
            min_insert_block_size_bytes=2**62,
            max_partitions_per_insert_block=0,
        )
        unchanged = self._unchanged_check([unit], null_check_off=check_off)
        written: list[int] = []

        def check(stage: TableName | None, counts: dict[str, int]) -> None:
            unchanged(stage, counts)
            if not self._fill_provenance or stage is None:
                return
            # The second half numbers its rows from `first_rows + 1`: right when the
            # first half read exactly `first_rows` (a newline inside one of its values
            # makes fewer). Else the numbers are checked one by one (and mended).
            if parallel or unit.fmt.format == "JSONEachRow" or written[:1] != [first_rows]:
                self._fix_row_numbers(stage, unit)

        with range_fd(unit.key, 0, cut) as first_fd, range_fd(unit.key, cut, unit.size) as second_fd:
            selects = [
                self._select_sql(
                    [first],
                    row_expression=self._row_number(unit, True, block) if parallel else "rowNumberInAllBlocks() + 1",
                    fd=first_fd,
                ),
                self._select_sql(
                    [second],
                    fmt_name=unit.fmt.format,
                    # `_row_number` counts from 0 in a half without a header, in parallel or not.
                    row_expression=f"{'_row_number' if parallel else 'rowNumberInAllBlocks()'} + {first_rows + 1}",
                    fd=second_fd,
                ),
            ]
            with self._nulls_guard([unit], check_off):
                counts = self.target.write_batch(
                    self.table,
                    self._insert_columns(),
                    selects,
                    settings,
                    count_by_source=False,  # one file: its rows are the stage's rows
                    context=unit.key,
                    before_commit=check,
                    concurrent=True,
                    swap_if_empty=self.single_batch,
                    written=written,
                )
        return {unit.source_name: sum(counts.values())} if by_source else counts

    def _after_batch_failure(self, batch: list[Unit], exc: ChuteError, plan: _Plan) -> None:
        """A batch that did not load: transient errors go up, else isolate and retry.

        A full disk is no row's fault: one file goes up at once; a batch is tried a
        file at a time (an insert reserves room for its whole block), never row by row.
        """
        full = isinstance(exc, OutOfSpace)
        if not exc.terminal or (full and len(batch) == 1):
            raise exc
        if not full and self._tolerant_fits(batch, exc) and self._load_tolerant(batch, plan):
            return
        culprit = None if full else self._culprit(exc, batch)
        if len(batch) > 1 and culprit is not None:
            # The engine named the file: it alone takes the slow way; the rest retry together.
            self.deferred.append((culprit, _told_of(exc, batch, culprit)))
            self._load_batch([u for u in batch if u is not culprit], plan)
            return
        if len(batch) > 1:
            # Find the culprit(s): each file alone, `workers` at a time; the good ones load.
            self.single_batch = False  # several batches now: none may swap the table
            with ThreadPoolExecutor(min(self.workers, len(batch))) as pool:
                for future in [pool.submit(self._load_batch, [unit], plan) for unit in batch]:
                    future.result()
            return
        self._after_failure(batch[0], exc, plan)

    def _tolerant_fits(self, batch: list[Unit], exc: ChuteError) -> bool:
        """Local JSON-lines files into the embedded engine, with provenance in a stage
        table whose `_source_row` can be mended, tried once: see chute/tolerant.py."""
        return (
            not self.opts.strict
            and all(u.fmt.format == "JSONEachRow" and not u.is_range and "://" not in u.key for u in batch)
            and getattr(self.target, "address", None) is None
            and self._fill_provenance
            and self.stageable
            and "_source_row" not in self.sorting_key
            and not isinstance(exc, (SourceError, UsageError))
            and not UNKNOWN_FIELD.search(str(exc))
            and not any(u.key in self.tolerant_tried for u in batch)
            and all(self.source.unchanged(u) for u in batch)
        )

    def _load_tolerant(self, batch: list[Unit], plan: _Plan) -> bool:
        """Load a dirty batch in one pass that skips bad records; False (nothing written)
        when something does not reconcile and the files must take the careful way."""
        self.tolerant_tried.update(u.key for u in batch)
        errors = ErrorFiles.for_keys([u.key for u in batch])
        by_key = {u.key: u for u in batch}
        outcome: dict[str, Any] = {}

        def check(stage: TableName | None, counts: dict[str, int]) -> None:
            self._unchanged_check(batch)(stage, counts)
            assert stage is not None
            bad = {k: v for k, v in errors.positions(self.target.engine).items() if v}
            rejected = self._tolerant_rejects(bad, counts, by_key) if bad else {}
            if bad:
                dirty = ", ".join(quote_str(k) for k in bad)
                self.target.mutate(
                    stage,
                    f"UPDATE _source_row = {kept_row_to_position(bad)} WHERE _source IN ({dirty})",
                    "numbering the kept rows",
                )
            budget = ErrorBudget.parse(self.opts.max_errors)
            over = {k: why for k, n in rejected.items() if (why := budget.over(n, n + counts.get(k, 0))) is not None}
            if over:
                keys = ", ".join(quote_str(k) for k in over)
                self.target.mutate(stage, f"DELETE WHERE _source IN ({keys})", "removing files over --max-errors")
            outcome.update(counts=counts, rejected=rejected, over=over)

        settings = {**self._settings(batch), **SKIP_ERRORS}
        selects = [errors.wrap(u.key, self._select_sql([u]), settings) for u in batch]
        try:
            self.target.write_batch(
                self.table,
                self._insert_columns(),
                selects,
                settings,
                count_by_source=True,
                context=f"{_batch_label(batch)}, skipping bad rows",
                before_commit=check,
            )
        except _Unreconciled:
            return False
        except ChuteError as exc:
            if not exc.terminal:
                raise
            return False  # (an overflow the SELECT's exact casts refuse, say): the careful pass
        finally:
            errors.remove()
        counts, rejected, over = outcome["counts"], outcome["rejected"], outcome["over"]
        loaded = [u for u in batch if u.key not in over]
        for unit in batch:
            result = plan.results[unit.key]
            result.rows_rejected = rejected.get(unit.key, 0)
            if unit.key in over:
                self._fail(
                    unit,
                    f"{unit.key}: {over[unit.key]}; nothing of the file was loaded (see table {self.rejects.name})",
                    plan,
                    rejected=result.rows_rejected,
                )
            else:
                result.state = "loaded"
                result.rows_loaded = counts.get(unit.key, 0)
        if loaded:
            self.ledger.record(
                loaded,
                "done",
                self.load_id,
                rows={u.key: counts.get(u.key, 0) for u in loaded},
                rejected={u.key: rejected.get(u.key, 0) for u in loaded},
            )
            self._units_done(loaded)
        return True

    def _tolerant_rejects(
        self, bad: dict[str, list[int]], kept: dict[str, int], by_key: dict[str, Unit]
    ) -> dict[str, int]:
        """Read the skipped records back by line number, give each its reason, keep them in
        the rejects table; rejected rows per file. Raises _Unreconciled when lines and
        records disagree (blank lines, or counts that do not add up)."""
        engine = self.target.engine
        reads = []
        for key, positions in bad.items():
            lines = self.source.table_expression(by_key[key], "line String", "LineAsString")
            # Lines = kept + skipped records proves there are no blank lines (the parser skips
            # those without counting them); empty ones are counted to be sure.
            reads.append(
                f"SELECT {quote_str(key)} AS f, count() AS n, countIf(line = '') AS blanks, "
                "arrayMap(x -> base64Encode(x), groupArrayIf(line, (_row_number + 1) IN "
                f"({', '.join(map(str, positions))}))) AS bad FROM {lines}"
            )
        found = engine.rows(
            " UNION ALL ".join(reads),
            {"max_threads": self.workers, "input_format_parallel_parsing": 0},
            context="reading the skipped records",
        )
        texts: list[bytes] = []
        sources: list[str] = []
        rows: list[int] = []
        for got in found:
            key, positions = str(got["f"]), bad[str(got["f"])]
            if (
                int(got["blanks"])
                or int(got["n"]) != kept.get(key, 0) + len(positions)
                or len(got["bad"]) != len(positions)
            ):
                raise _Unreconciled(key)
            texts += [base64.b64decode(t) for t in got["bad"]]
            sources += [by_key[key].source_name] * len(positions)
            rows += positions
        path = scratch_path()
        try:
            with open(path, "wb") as out:
                out.write(b"".join(t + b"\n" for t in texts))
            checked = check_json_lines(
                engine,
                f"file({quote_str(path)}, 'LineAsString', 'line String')",
                self._input_columns(),
                {"max_threads": 1},
                self._format_settings(),
            )
        finally:
            os.remove(path)
        try:
            self.rejects.ensure()
            for key in bad:
                self.rejects.clear(by_key[key].source_name)
            types = self.rejects.types()
            source_list = "[" + ", ".join(quote_str(s) for s in sources) + "]"
            row_list = "[" + ", ".join(map(str, rows)) + "]"
            self.target.write_batch(
                self.rejects.name,
                REJECT_COLUMNS,
                [
                    f"SELECT CAST(arrayElement({source_list}, row), {quote_str(types['_source'])}) AS _source, "
                    f"CAST(arrayElement({row_list}, row), {quote_str(types['_source_row'])}) AS _source_row, "
                    f"substring(raw, 1, {RAW_LIMIT}) AS raw, "
                    "if(reason = '', 'the JSON parser refused the record', reason) AS error, "
                    f"CAST({quote_str(self.load_id)}, {quote_str(types['_load_id'])}) AS _load_id, "
                    f"CAST(now64(3), {quote_str(types['at'])}) AS at FROM {checked.table.sql}"
                ],
                {"max_threads": 1},
                count_by_source=False,
                context="writing rejects",
            )
        finally:
            checked.drop(engine)
        return {key: len(positions) for key, positions in bad.items()}

    @staticmethod
    def _culprit(exc: ChuteError, batch: list[Unit]) -> Unit | None:
        """The unit an engine error names ("in file/uri PATH"), if it is a data error."""
        if isinstance(exc, SourceError):
            return None
        named = FILE_IN_ERROR.search(str(exc))
        if not named:
            return None
        name = named.group(1)
        # The engine names S3 objects as bucket/key and ranges of big files by their loopback URL.
        return next((u for u in batch if name in (u.key, u.source_name) or u.key == f"s3://{name}"), None)

    def _run_deferred(self, plan: _Plan) -> None:
        """Files set aside by `_culprit`: their careful passes, `workers` at a time."""
        deferred, self.deferred = self.deferred, []
        if not deferred:
            return
        with ThreadPoolExecutor(min(self.workers, len(deferred))) as pool:
            for future in [pool.submit(self._after_failure, unit, exc, plan) for unit, exc in deferred]:
                future.result()

    def _fail(self, unit: Unit, message: str, plan: _Plan, rejected: int = 0) -> None:
        scrub = getattr(self.source, "scrub", None)
        if scrub is not None:  # a second line of defence: no source secret in the report or ledger
            message = scrub(message)
        result = plan.results[unit.key]
        result.state = "failed"
        result.error = message
        result.rows_rejected = rejected
        self.ledger.record([unit], "failed", self.load_id, errors={unit.key: message}, rejected={unit.key: rejected})

    def _after_failure(self, unit: Unit, exc: ChuteError, plan: _Plan) -> None:
        """A file the fast path could not load: a careful pass if it is text, else it fails."""
        careful = (
            unit.fmt.format in CAREFUL_FORMATS
            and not self.opts.strict
            and not isinstance(exc, (SourceError, UsageError))
            and self.source.unchanged(unit)
        )
        unknown = UNKNOWN_FIELD.search(str(exc))
        if unknown:
            # A field the table lacks is a schema question, not a bad row.
            careful = False
            exc = SchemaError(
                f"{unit.key}: input field {unknown.group(1)} is not in table {self.table} (use --add-columns to add it)"
            )
        if not careful:
            self._fail(unit, str(exc), plan)
            return
        try:
            self._careful(unit, plan)
        except ChuteError as careful_exc:
            if not careful_exc.terminal:
                raise
            # The careful pass could not read it either (truncated archive, I/O): the first error says most,
            # unless the file is not text at all.
            self._fail(unit, f"{unit.key}: {careful_exc}" if isinstance(careful_exc, NotText) else str(exc), plan)

    def _row_of(self, unit: Unit) -> Callable[[str], str]:
        """`_source_row` from a record's 1-based position in the unit, as the careful pass counts."""
        by_source = getattr(self.source, "row_at_position", None)
        if by_source is not None:
            return functools.partial(by_source, unit)
        offset = self.row_offsets.get(unit.key, 0)
        return (lambda row: f"{row} + {offset}") if offset else str

    def _careful(self, unit: Unit, plan: _Plan) -> None:
        """Load the good rows of `unit`; keep every bad one in the rejects table."""
        inputs = self._input_columns()
        engine = self.target.engine
        settings = {**self._format_settings(), "max_threads": self.workers}
        settings.pop("date_time_overflow_behavior")  # ranges are checked value by value here
        if unit.fmt.format == "JSONEachRow":
            lines = self.source.table_expression(unit, "line String", "LineAsString")
            read_settings = self._format_settings()
            read_settings.pop("date_time_overflow_behavior")
            checked = check_json_lines(engine, lines, inputs, settings, read_settings)
        else:
            text_columns = [Column(c.name, "String") for c in inputs]
            delimiter = self.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
            expression = self.source.table_expression(unit, structure(text_columns))
            lines = self.source.table_expression(unit, "line String", "LineAsString")
            checked = check_delimited(engine, expression, lines, inputs, delimiter, settings)
        try:
            budget = ErrorBudget.parse(self.opts.max_errors)
            self.rejects.ensure()
            if not unit.is_range:  # a range's earlier rejects went with _remove_rows
                self.rejects.clear(unit.key)
            if checked.rejected:
                types = self.rejects.types()
                self.target.write_batch(
                    self.rejects.name,
                    REJECT_COLUMNS,
                    [checked.rejects_select(unit.source_name, self.load_id, types, self._row_of(unit))],
                    {"max_threads": 1},
                    count_by_source=False,
                    context=f"{unit.key}: writing rejects",
                )
            over = budget.over(checked.rejected, checked.total)
            if over is not None:
                self._fail(
                    unit,
                    f"{unit.key}: {over}; nothing of the file was loaded (see table {self.rejects.name})",
                    plan,
                    rejected=checked.rejected,
                )
                return
            good_settings: dict[str, str | int | float] = {
                "max_threads": self.workers,
                "max_insert_threads": self.workers,
            }
            good = [checked.good_select(inputs, functools.partial(self._provenance, unit), self._row_of(unit))]
            counts = self.target.write_batch(
                self.table,
                self._insert_columns(),
                self._grouped(good, good_settings),
                good_settings,
                count_by_source=False,
                context=unit.key,
                before_commit=self._unchanged_check([unit]),
            )
        finally:
            checked.drop(engine)
        result = plan.results[unit.key]
        result.state = "loaded"
        result.rows_loaded = sum(counts.values())
        result.rows_rejected = checked.rejected
        self.ledger.record(
            [unit], "done", self.load_id, rows={unit.key: result.rows_loaded}, rejected={unit.key: checked.rejected}
        )
        self._units_done([unit])
