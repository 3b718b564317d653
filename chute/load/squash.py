"""Many small files: their rows read into one temporary table first, then converted and checked.

The engine reads each file as blocks of its own, and every expression of the SELECT (the
casts and value checks: dozens of functions) runs once per block, whatever its rows. 20,000
JSON-lines files of 5 lines: the SELECT with its checks cost 8.9 CPU-s, the plain read 3.4 s.
Read first, as they are, into a temporary table of this connection's session (Memory: no
parts, no compression), the rows come back in big blocks and the expressions run a few times:
that read 4.6 s, then the checks over it 0.15 s (docs/internals/small-files.md).

Only for batches of many small files read by this engine into the embedded target: the
temporary table lives in the session of the connection that runs the INSERT, and holds the
batch's rows in memory (bounded here by a share of --memory-limit).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from chute.engine import Settings
from chute.load.context import LoadContext
from chute.load.sizing import COMPRESSED_EXPANSION
from chute.schema import Column
from chute.sources.base import ROW_NUMBER_FORMATS
from chute.sql import quote_ident
from chute.targets.staging import PART_WRITER_SETTINGS
from chute.units import Unit

SQUASH_MIN_FILES = 16
"""Fewer files than this are read straight: their blocks are few."""
SQUASH_MAX_AVERAGE = 256 * 2**10
"""Files bigger than this on average make blocks of thousands of rows: read straight."""
VIRTUAL_COLUMNS = frozenset({"_path", "_row_number"})
"""The file() call's virtual columns the SELECT reads, kept in the temporary table as columns."""
SQUASH_MEMORY_SHARE = 4
"""The batch's rows (as its bytes, compressed ones times COMPRESSED_EXPANSION) stay under the
memory budget divided by this."""


class Squash:
    """The temporary tables one batch's SELECTs read from instead of file() calls."""

    def __init__(self) -> None:
        self.tables: list[tuple[str, str, str]] = []
        """(name, CREATE, INSERT ... SELECT from the file() call) per table."""

    @staticmethod
    def applies(ctx: LoadContext, batch: Sequence[Unit]) -> bool:
        """Whether `batch` is many small files that the embedded engine reads into itself."""
        if ctx.target.is_server or len(batch) < SQUASH_MIN_FILES:
            return False
        if any(u.is_range or u.fmt.format not in ROW_NUMBER_FORMATS or "://" in u.key for u in batch):
            return False
        if any(c.name in VIRTUAL_COLUMNS for c in ctx.input_columns()):
            return False  # (the temporary table keeps the engine's own under these names)
        size = sum(u.size for u in batch)
        expanded = sum(u.size * (1 if u.fmt.compression == "none" else COMPRESSED_EXPANSION) for u in batch)
        return size <= SQUASH_MAX_AVERAGE * len(batch) and expanded <= ctx.opts.memory_bytes // SQUASH_MEMORY_SHARE

    def table(self, table_expr: str, read_as: Sequence[Column]) -> str:
        """The name of a temporary table that will hold what `table_expr` (a file() call over
        several files, read with `read_as`) gives, with `_path` and `_row_number` as columns."""
        name = f"_chute_squash_{uuid.uuid4().hex[:12]}"
        columns = [f"{quote_ident(c.name)} {c.type}" for c in read_as] + ["`_path` String", "`_row_number` UInt64"]
        create = f"CREATE TEMPORARY TABLE {name} ({', '.join(columns)}) ENGINE = Memory"
        fill = f"INSERT INTO {name} SELECT *, _path, _row_number FROM {table_expr}"
        self.tables.append((name, create, fill))
        return name

    @contextmanager
    def filled(self, ctx: LoadContext, settings: Settings, context: str) -> Iterator[None]:
        """The tables made and filled (in this thread's connection, the one the INSERT runs
        in), dropped when the block ends."""
        engine = ctx.target.engine
        reading = {k: v for k, v in settings.items() if k not in PART_WRITER_SETTINGS}
        made: list[str] = []
        try:
            for name, create, fill in self.tables:
                engine.execute(create, context=context)
                made.append(name)
                engine.execute(fill, reading, context)
            yield
        finally:
            for name in made:
                engine.execute(f"DROP TEMPORARY TABLE IF EXISTS {name}", context=context)
