"""What a load can be told: `LoadOptions`, with safe defaults, and the reading settings they imply."""

from __future__ import annotations

import os
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, get_args, get_origin, get_type_hints

from chute.errors import TargetError, UsageError
from chute.load.claims import DEFAULT_LEASE_SECONDS
from chute.sizes import parse_size

ON_CHANGE = ("skip", "reload", "error")
METHODS = ("auto", "client-convert", "server-parse", "server-side", "convert", "pass-through")
METHOD_ALIASES = {"convert": "client-convert", "pass-through": "server-parse"}
"""Earlier names of two methods, still taken."""
SPARE = ("server", "client")
DEFAULT_SHARD_BY = "rand()"

# A batch is one INSERT; smaller batches lose less work to a crash. The bytes bound a batch of
# big files; the count is high, so that many small files go in few batches (each batch costs a
# dozen statements: stage, checks, books).
DEFAULT_BATCH_BYTES = 256 * 1024 * 1024
DEFAULT_BATCH_FILES = 10_000

ProgressCallback = Callable[[int, int, int], None]
"""Called with (files done, rows so far, bytes done so far) after each batch and, while one
loads, about ten times a second with the rows and bytes the engine has read (never backwards)."""


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


MIN_MEMORY_LIMIT = 4 * 2**20
MIN_SPLIT_BYTES = 4096


@dataclass(frozen=True)
class LoadOptions:
    """Everything a load can be told, with safe defaults."""

    format: str | None = None
    """Input format for every file (json, csv, tsv, parquet, native, orc, avro, arrow); default: by extension."""
    compression: str | None = None
    """Compression of every file (gzip, zstd, bz2, xz, lz4, none); default: by extension."""
    delimiter: str | None = None
    """CSV field delimiter (one character)."""
    header: bool | None = None
    """CSV/TSV: whether the first line names the columns. None: detected (by the types of the
    rows; where every column is text it cannot be, and the first line loads as a row, noted).
    True: it does. False: every line is a row."""
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
    batch_mb: int | float | None = None
    """MiB of input per insert batch, as `--batch-mb` (default 256); sets `batch_bytes`."""
    batch_bytes: int = DEFAULT_BATCH_BYTES
    """The same in bytes (the earlier name; `batch_mb` wins where both are given alike)."""
    batch_files: int = DEFAULT_BATCH_FILES
    """Files per insert batch at most, as `--batch-files`."""
    password_file: str | None = None
    """File holding the server password (for http(s) targets)."""
    insecure: bool = False
    """Skip TLS certificate checks for https targets (loudly)."""
    connections: int = 2
    """Parallel HTTP connections to a server target."""
    method: str = "auto"
    """How rows reach a server: "client-convert" (the engine here reads, casts and sends
    Native + ZSTD), "server-parse" (local files' bytes sent as they are, the server parses them
    into a stage whose provenance columns are DEFAULT expressions), "server-side" (the server
    reads http(s) URLs and s3:// objects itself), or "auto" (chute.load.serverparse.choose).
    "convert" and "pass-through" are the earlier names of the first two."""
    spare: str | None = None
    """With method "auto": "server" (parse here, the server only stores) or "client"
    (let the server parse whatever it can) when one side's cores are wanted elsewhere."""
    cluster: str | None = None
    """A cluster of the server (`remote_servers`): a table chute creates is made on every node
    (`ON CLUSTER`: a ReplicatedMergeTree `<table>_local` and a Distributed `<table>`), and so are
    its ledger and rejects. For s3:// sources, the nodes read the objects with s3Cluster()
    (server-side only; with provenance it needs `_row_number`, see `Capabilities`)."""
    nodes: tuple[str, ...] = ()
    """Nodes of the cluster as http(s)://host:port (user, password and database of the target):
    where chute writes the shards of a Distributed table. Default: the cluster's hosts at the
    target's port."""
    shard_by: str = DEFAULT_SHARD_BY
    """With `cluster`, the sharding key of the Distributed table chute creates."""
    insert_via_distributed: bool = False
    """Into a Distributed table sharded by a key: each batch is sent once, to the target node,
    whose Distributed engine routes the rows into every shard's stage (docs/targets/cluster.md)."""
    allow_missing_shards: bool = False
    """Into a Distributed table with a random key: a shard chute cannot reach is passed over
    (its batches go to the others), with a note; without it such a load fails, naming the shard."""
    design: str | None = None
    """For a table chute creates: "auto" measures a layout on a sample (`chute design`),
    or the path of a saved proposal (`chute design ... > FILE.sql`)."""
    max_errors: str | int | None = None
    """Bad rows allowed per file before the whole file fails: a count (10 or "10") or a share
    ("0.1%"); bad rows go to the `<table>_rejects` table. Default: a file fails when more than
    100 of its rows and more than 10% of them are bad (a wrong format or table stops early)."""
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
    memory_limit: int | str = field(default_factory=lambda: default_memory_limit())
    """What the engine may hold for one batch, as `--memory-limit`: "1GB" or bytes (an int; read
    back it is always bytes). Past a quarter of it, sorting by partition spills to disk."""
    worker_id: str | None = None
    """How this process is named in the claims of a server target (default: host:pid); see
    docs/concurrency.md."""
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    """How long a claim lives without a heartbeat: a worker that died holds its units this long
    (a dead process on this host holds them not at all)."""
    split_size: int | str | None = None
    """As `--split-size`: "64MB" or bytes; sets `split_bytes`."""
    split_bytes: int | None = None
    """Uncompressed CSV/TSV/JSON-lines files bigger than twice this load as byte ranges of
    about this size, each its own unit (resumable mid-file, memory bounded by the range).
    Default: a sixteenth of `memory_limit` (64 MiB at 1 GiB, at most 512 MiB), and no split into a partitioned
    table (every range would add a part to each partition it touches); 0: never split.
    (The earlier name of `split_size`, in bytes.)"""

    def __post_init__(self) -> None:
        """Values of the wrong type or numbers that cannot work are refused at once, in one line
        (not by a traceback later, deep in the load). Sizes given as the CLI takes them are
        read into bytes."""
        _check_types(self)
        _sizes_in_bytes(self)
        least = {
            "--workers": (self.workers, 1, 1, ""),
            "--connections": (self.connections, 1, 1, ""),
            "batch_files": (self.batch_files, 1, 1, ""),
            "--batch-mb": (self.batch_bytes, 2**20, 1, "MB"),
            "--lease-seconds": (self.lease_seconds, 1, 3, ""),
            "--memory-limit": (self.memory_bytes, 2**20, MIN_MEMORY_LIMIT, "MB"),
        }
        for flag, (value, unit, low, suffix) in least.items():
            if value is not None and value < low:
                shown = f"{value / unit:.3g}{suffix}" if suffix else str(value)
                raise UsageError(f"{flag} must be at least {max(1, low // unit)}{suffix}, not {shown}")
        if self.split_bytes is not None and self.split_bytes != 0 and self.split_bytes < MIN_SPLIT_BYTES:
            raise UsageError(f"--split-size must be 0 (never split) or at least 4KB, not {self.split_bytes} bytes")

    @property
    def memory_bytes(self) -> int:
        """`memory_limit` in bytes (it is, once the options are made; typed for both)."""
        return self.memory_limit if isinstance(self.memory_limit, int) else parse_size(self.memory_limit)

    def range_bytes(self, partitioned: bool) -> int | None:
        if self.split_bytes == 0 or (self.split_bytes is None and partitioned):
            return None
        return self.split_bytes or min(512 * 2**20, max(32 * 2**20, self.memory_bytes // 16))


def _sizes_in_bytes(opts: LoadOptions) -> None:
    """memory_limit "1GB" -> bytes; batch_mb and split_size (the CLI's names) -> batch_bytes and
    split_bytes, refused where the old name says otherwise."""
    object.__setattr__(opts, "memory_limit", parse_size(opts.memory_limit, "memory_limit"))
    if opts.batch_mb is not None:
        given = int(opts.batch_mb * 2**20)
        if opts.batch_bytes not in (DEFAULT_BATCH_BYTES, given):
            raise UsageError("LoadOptions takes batch_mb or batch_bytes, not both")
        object.__setattr__(opts, "batch_bytes", given)
    if opts.split_size is not None:
        split = parse_size(opts.split_size, "split_size")
        if opts.split_bytes not in (None, split):
            raise UsageError("LoadOptions takes split_size or split_bytes, not both")
        object.__setattr__(opts, "split_bytes", split)


def _check_types(opts: LoadOptions) -> None:
    """A library caller's `memory_limit="1GB"` or `workers="4"`: a UsageError naming the field."""
    if isinstance(opts.nodes, list):
        object.__setattr__(opts, "nodes", tuple(opts.nodes))
    hints = get_type_hints(LoadOptions)
    for f in fields(opts):
        value = getattr(opts, f.name)
        allowed = _allowed(hints[f.name])
        if not any(_fits(value, t) for t in allowed):
            names = " or ".join("None" if t is type(None) else getattr(t, "__name__", str(t)) for t in allowed)
            raise UsageError(
                f"LoadOptions {f.name} takes {_TYPE_HINTS.get(f.name, names)}, not {type(value).__name__} {value!r}"
            )


_TYPE_HINTS = {
    "max_errors": "a count (10) or a share as text ('0.1%')",
    "memory_limit": 'a size as "1GB" or bytes as an int (e.g. 2**30)',
    "batch_bytes": "bytes as an int (e.g. 256 * 2**20)",
    "batch_mb": "MiB as a number (e.g. 256)",
    "split_size": 'a size as "64MB", bytes as an int, 0 or None',
    "split_bytes": "bytes as an int, 0 or None",
    "nodes": "a tuple of http(s)://host:port URLs",
}


def _allowed(hint: Any) -> tuple[Any, ...]:
    return get_args(hint) if isinstance(hint, types.UnionType) else (hint,)


def _fits(value: Any, hint: Any) -> bool:
    if get_origin(hint) is tuple:
        return isinstance(value, tuple) and all(isinstance(v, get_args(hint)[0]) for v in value)
    if hint is int:  # (True is an int to Python, not a count to a user)
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def format_settings(opts: LoadOptions) -> dict[str, str | int | float]:
    """How to read input; the same for inference and for loading."""
    settings: dict[str, str | int | float] = {
        "date_time_input_format": "best_effort",
        # --no-header: every line is a row, even one that names the columns.
        "input_format_csv_detect_header": int(opts.header is not False),
        "input_format_tsv_detect_header": int(opts.header is not False),
        # Spaces and tabs around an unquoted CSV field are part of its value (RFC 4180; TSV keeps
        # them too): the engine would trim them off text.
        "input_format_csv_trim_whitespaces": 0,
        # Blank lines at the end are no rows (others go to the careful pass, which skips them too),
        # and TSV lines may end in CRLF as CSV's may (a TSV value holds a CR only escaped, `\r`).
        "input_format_csv_skip_trailing_empty_lines": 1,
        "input_format_tsv_skip_trailing_empty_lines": 1,
        "input_format_tsv_crlf_end_of_line": 1,
        # A date or time out of its type's range fails (to the careful pass) instead of being clamped.
        "date_time_overflow_behavior": "throw",
        # A URL that cuts its body: 4 tries (0.1 + 0.2 + 0.4 s apart), not the engine's 10 with up
        # to 10 s between them (about 80 s a read). Its unit then fails alone; a re-run tries again.
        "http_max_tries": 4,
    }
    if opts.delimiter:
        settings["format_csv_delimiter"] = opts.delimiter
    return settings


LAYOUT_ERRORS = frozenset({36, 43, 44, 46, 47, 62, 215})
"""Codes of a table's key refused (bad arguments, illegal type, illegal column, unknown function or
identifier, syntax, a Nullable key, not an aggregate)."""


def layout_refused(opts: LoadOptions, exc: TargetError) -> UsageError | None:
    """The user's --order-by or --partition-by refused by the server: a usage error, in one
    line without the engine's list of every column it knows (virtual ones too)."""
    given = [
        f"{option} {text!r}"
        for option, text, default in (
            ("--order-by", opts.order_by, "tuple()"),
            ("--partition-by", opts.partition_by, None),
        )
        if text != default
    ]
    if not given or exc.code not in LAYOUT_ERRORS:
        return None
    reason = re.split(r",? required columns:|\. Stack trace", str(exc))[0]
    return UsageError(f"{reason} (check {' and '.join(given)})")
