"""What every part of one load shares: the target, source, table, options and books.

`TableInfo` is what the load knows of its table (frozen: replaced whole when a
column is added). `LoadContext` holds it with the per-load registries that the
parts fill as they learn (row offsets of ranges, files read by one thread, ...).
Registries that pool threads touch are changed under `lock`.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from chute.cores import usable_cores
from chute.engine import Settings
from chute.errors import ChuteError
from chute.load.books import Books
from chute.load.claims import Claims
from chute.load.ledger import Ledger, LedgerEntry
from chute.load.options import LoadOptions, ProgressCallback, format_settings
from chute.load.rejects import Rejects
from chute.nullcheck import NullSearches
from chute.report import LoadReport
from chute.schema import PROVENANCE_NAMES, Column
from chute.sources.base import ServerReadable, Source
from chute.sql import TableName
from chute.targets.base import Target
from chute.units import Unit


@dataclass(frozen=True)
class TableInfo:
    """The load's table as it stands when rows start to move."""

    columns: tuple[Column, ...] = ()
    stageable: bool = False
    """A MergeTree: batches go through a stage table."""
    sorting_key: str = ""
    """Its ORDER BY (old servers: the whole DDL stands in, cautious)."""
    partition_key: str = ""
    """Its PARTITION BY: rows are grouped by it before they are written."""
    provenance_as_data: bool = False
    """Input files carry columns named like provenance (a chute export): read them as data."""


@dataclass
class LoadContext:
    target: Target
    source: Source
    table: TableName
    opts: LoadOptions
    progress: ProgressCallback | None = None
    meta: dict[str, Any] | None = None
    """The table's row of system.tables when the load started (None: no table yet)."""
    info: TableInfo = field(default_factory=TableInfo)
    load_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    claims: Claims | None = None
    """Where other workers may load the same table (a server), the claims that keep each
    unit to one of them; None for an embedded directory (its one process is alone)."""
    named: set[str] = field(default_factory=set)
    """CSV/TSV files whose first line names the columns."""
    text_reads: dict[str, frozenset[str]] = field(default_factory=dict)
    """Typed files (Parquet, ORC, Arrow, Native) -> their columns whose type is one the engine's
    reader would change on the way into the table's (text into a number, a float into an
    integer, ...): read as text and converted exactly (checks.typed.lossy). A batch holds files
    of one such set only: one file() call reads a batch with one structure."""
    line_bytes: dict[str, float] = field(default_factory=dict)
    """Average line length of CSV/TSV files with a header (sizes the first parsed block)."""
    row_offsets: dict[str, int] = field(default_factory=dict)
    """Byte ranges of a big file: the rows of the file before the range."""
    ranges_of: dict[str, list[Unit]] = field(default_factory=dict)
    ledger_latest: dict[str, LedgerEntry] = field(default_factory=dict)
    serial_parse: set[str] = field(default_factory=set)
    """Files whose row numbers came out wrong under parallel parsing: read by one thread."""
    unhalved: set[str] = field(default_factory=set)
    """Files whose halves failed (numbers off, bad rows, a value cut in two): read the sorting way."""
    nulls: NullSearches = field(default_factory=NullSearches)
    """Local CSV/TSV files (or ranges) searched for the engine's NULL, `\\N` (see chute.nullcheck)."""
    tolerant_tried: set[str] = field(default_factory=set)
    """Units whose batch took the one-pass way for dirty JSON lines (tried once)."""
    server_reach: dict[str, str | None] = field(default_factory=dict)
    """Origins a server target was probed for: why it cannot read them itself (None: it can)."""
    single_batch: bool = False
    """The load is one batch: nothing else writes the table while it commits."""
    lanes: int = 1
    """Batches written at once: they share the target's streams (chute.load.reads.Reads.selects)."""
    deferred: list[tuple[Unit, ChuteError]] = field(default_factory=list)
    """Units the engine named in a failed batch, waiting for their careful pass."""
    missing: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per unit key: rows whose missing values took their column's default, and the mask of
    those columns (chute.load.checks.missing), from the batches that committed."""
    with_missing: set[str] = field(default_factory=set)
    """Units found to hold a missing value (chute.load.checks.missing): read with the count at once."""
    missing_formats: set[str] = field(default_factory=set)
    """Formats of this load whose files were found to miss values: later batches of the
    format are read with the count at once (files of one export miss values alike)."""
    sampled_formats: set[str] = field(default_factory=set)
    """Formats whose first lines were sampled for missing values (Reads.probing)."""
    csv_delimiter: str | None = None
    """Without --delimiter: CSV fields' delimiter, found in the first lines of the first CSV file."""
    csv_trim: bool = False
    """A CSV header's names are padded with spaces (`id, name`): the engine matches names only
    trimmed, and trims values with them (chute.load.headers.Headers.header_names)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    books: Books | None = None
    """Where the books are kept, as the caller found it (None: found here)."""

    def __post_init__(self) -> None:
        self.delimiter_given = self.opts.delimiter is not None
        self.workers = self.opts.workers or usable_cores()
        if self.books is None:
            self.books = Books(self.target, self.table, self.opts.cluster)
        self.ledger = Ledger(self.target, self.table, self.books)
        self.rejects = Rejects(self.target, self.table, self.books)
        self.report = LoadReport(self.load_id, str(self.table), self.target.display_name)

    # -- what the table and options imply -------------------------------------

    @property
    def columns(self) -> list[Column]:
        return list(self.info.columns)

    def set_info(self, **changes: Any) -> None:
        self.info = dataclasses.replace(self.info, **changes)

    @property
    def has_provenance(self) -> bool:
        return {c.name for c in self.info.columns} >= PROVENANCE_NAMES

    @property
    def fill_provenance(self) -> bool:
        """Whether this load writes provenance (and so can count rows per file)."""
        return self.has_provenance and self.opts.provenance

    @functools.cached_property
    def extra_provenance(self) -> list[tuple[str, str]]:
        """Provenance columns a source adds to the four (a Kafka message's key): (name, type)."""
        return list(self.source.extra_provenance_columns()) if self.opts.provenance else []

    @functools.cached_property
    def extra_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.extra_provenance)

    def extra_filled(self) -> list[str]:
        """The source's extra provenance columns the table has (older tables may lack them)."""
        present = {c.name for c in self.info.columns}
        return [name for name, _ in self.extra_provenance if name in present] if self.fill_provenance else []

    def input_columns(self) -> list[Column]:
        if self.info.provenance_as_data and not self.opts.provenance:
            return [c for c in self.info.columns if c.insertable]
        hidden = PROVENANCE_NAMES | self.extra_names
        return [c for c in self.info.columns if c.insertable and c.name not in hidden]

    def insert_columns(self) -> list[str]:
        names = [c.name for c in self.input_columns()]
        if self.fill_provenance:
            names += ["_source", "_source_mtime", "_source_row", "_load_id", *self.extra_filled()]
        return names

    def format_settings(self) -> dict[str, str | int | float]:
        settings = format_settings(self.opts)
        if self.csv_trim:
            settings["input_format_csv_trim_whitespaces"] = 1
        return settings

    def format_name(self, unit: Unit) -> str:
        return unit.fmt.format + ("WithNames" if unit.key in self.named else "")

    def serial(self, unit: Unit) -> bool:
        """Row numbers of this unit are right only when one thread reads it."""
        return self.fill_provenance and self.source.needs_serial_read(unit)

    def is_server(self) -> bool:
        return self.target.is_server

    @property
    def read_cluster(self) -> str | None:
        """--cluster where the server's nodes read the source (s3Cluster()): a source the
        server can read; for files chute reads itself it only says where tables are made."""
        return self.opts.cluster if isinstance(self.source, ServerReadable) else None

    # -- the report -----------------------------------------------------------

    def note(self, note: str) -> None:
        """A note for the report, once per load."""
        with self.lock:
            if note not in self.report.notes:
                self.report.notes.append(note)


def without_overflow_check(settings: Settings) -> dict[str, str | int | float]:
    """Reading settings for the careful passes, which check each value's range themselves."""
    return {k: v for k, v in settings.items() if k != "date_time_overflow_behavior"}
