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
PENDING_BLOCK_BYTES = 64 * 2**20
"""What a reading thread may hold in small blocks before they are joined into one (block_rows)."""
SMALL_BLOCK_COLUMN_BYTES = 6 * 2**10
"""What a block of a few rows holds per column, whatever its rows: each array of a column starts
at 4 KiB (a String's bytes and offsets, a Nullable's null map: about 1.5 arrays a column)."""


def block_rows(read_as: Sequence[Column]) -> int:
    """Rows of each block the temporary table keeps. The engine joins the blocks it inserts
    into a Memory table up to `max_block_size` rows (65,409 by default), holding each small
    block whole until then: 13,000 blocks of 5 rows, each ~190 KiB for its 4 KiB arrays, made
    1.9 GB for 10,000 files of a 20-field nested JSON (2.4 GB peak for the load; 0.6 GB
    joined every 2,048 rows, and 25 % less CPU). Tuples count a column per field."""
    columns = 2 + sum(1 + c.type.count(",") for c in read_as)  # (+ _path, _row_number)
    return max(64, min(4096, PENDING_BLOCK_BYTES // (SMALL_BLOCK_COLUMN_BYTES * columns)))


class Squash:
    """The temporary tables one batch's SELECTs read from instead of file() calls."""

    def __init__(self) -> None:
        self.tables: list[tuple[str, str, str, int]] = []
        """(name, CREATE, INSERT ... SELECT from the file() call, block_rows) per table."""

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
        self.tables.append((name, create, fill, block_rows(read_as)))
        return name

    @contextmanager
    def filled(self, ctx: LoadContext, settings: Settings, context: str) -> Iterator[None]:
        """The tables made and filled (in this thread's connection, the one the INSERT runs
        in), dropped when the block ends."""
        engine = ctx.target.engine
        reading = {k: v for k, v in settings.items() if k not in PART_WRITER_SETTINGS}
        made: list[str] = []
        try:
            for name, create, fill, rows in self.tables:
                engine.execute(create, context=context)
                made.append(name)
                engine.execute(fill, {**reading, "max_block_size": rows}, context)
            yield
        finally:
            for name in made:
                engine.execute(f"DROP TEMPORARY TABLE IF EXISTS {name}", context=context)
