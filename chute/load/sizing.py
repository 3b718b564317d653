"""How much an INSERT may hold: threads, block sizes and part-writer buffers within the memory budget.

The measurements behind these numbers are in docs/internals/memory.md.
"""

from __future__ import annotations

import os
import resource

from chute.load.context import LoadContext
from chute.load.reads import Reads
from chute.units import Unit

COMPRESSED_EXPANSION = 4
"""A rough in-memory size of a compressed input per byte of it (gzip JSON lines: ~4.8)."""
ROW_GROUP_FORMATS = frozenset({"Parquet", "ORC", "Arrow"})
"""Formats the engine decodes a row group (stripe, record batch) at a time, per reader thread."""
READER_THREAD_BYTES = 2**30
"""Budget per reader thread of a ROW_GROUP_FORMATS file (a 1 M-row group of 100 columns: ~600 MiB with its parts)."""
PART_WRITER_BUFFERS = 5
"""Buffers of `max_compress_block_size` the MergeTree writer holds per column and insert thread."""
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
no sparse columns, one stream per String column, no marks per substream, plain marks. Less CPU per
small part; the table keeps its own settings (docs/internals/packed-parts.md)."""
SORT_ALONE = 2
"""A partition-aware load of input over this many times the budget sorts on one thread (Sizing.settings)."""
ROW_SIZED_FORMATS = frozenset({"PostgreSQL", "MySQL"})
"""Units of these sources carry a row count, not a byte count, in `Unit.size`."""


class Sizing:
    """The settings of one batch's INSERT."""

    def __init__(self, ctx: LoadContext, reads: Reads) -> None:
        self.ctx = ctx
        self.reads = reads

    def settings(self, batch: list[Unit]) -> dict[str, str | int | float]:
        ctx = self.ctx
        threads = 1 if any(ctx.serial(u) for u in batch) else ctx.workers
        if any(u.fmt.format in ROW_SIZED_FORMATS for u in batch):
            # A database's rows arrive over a socket: with a second thread the engine reads on
            # while the first converts and writes, even on one core (the server would otherwise
            # wait on a full socket). 3 M rows from PostgreSQL on one client core: 4.0 s, not 4.4.
            threads = max(threads, 2)
        if any(u.fmt.format in ROW_GROUP_FORMATS for u in batch):
            threads = max(1, min(threads, ctx.opts.memory_bytes // READER_THREAD_BYTES))
        big = self.expanded(batch) > SORT_ALONE * ctx.opts.memory_bytes
        if big and self.reads.sortable_partition() and not any(u.fmt.format in ROW_SIZED_FORMATS for u in batch):
            # Sorted by partition with spills, each stream spills runs of its own share of the budget,
            # and every run holds ~4 MiB while they merge: one stream makes half the runs. A 4.7 GiB
            # CSV at 1 GiB: 1,173 MiB peak on 2 threads, 991 MiB on one (161 CPU-s, not 162; 160 s, not 103).
            threads = 1
        parallel_parsing = self.reads.parallel_parsing(batch)
        settings: dict[str, str | int | float] = {
            **ctx.format_settings(),
            "max_threads": threads,
            "max_insert_threads": threads,
            "input_format_parallel_parsing": int(parallel_parsing),
            "input_format_skip_unknown_fields": 0,
            # Read files with pread, not mmap: as fast here, and a mapped 5 GB file would
            # count in the process's memory (RSS, cgroup limits) while it is read.
            "storage_file_read_method": "pread",
            # Parquet: decoded row groups held at once, and insert blocks, within the budget.
            "input_format_parquet_memory_high_watermark": max(64 * 2**20, ctx.opts.memory_bytes // 4),
            "min_insert_block_size_bytes": self.insert_block_bytes(batch, threads),
            **self.part_writer_settings(threads),
        }
        if parallel_parsing and any(u.key in ctx.named for u in batch) and ctx.fill_provenance:
            settings["max_block_size"] = self.reads.first_block(batch)
        return settings

    def insert_block_bytes(self, batch: list[Unit], threads: int) -> int:
        """Bytes per written part: within the memory budget, and small enough that
        each insert thread writes a part or two while the readers still parse.

        The engine's default (about 1 M rows) makes a load of one million rows one
        block, written by one thread after parsing ends: a serial tail. A block per
        thread keeps the cores busy.
        """
        limit = self.ctx.opts.memory_bytes
        budget = min(256 * 2**20, max(16 * 2**20, limit // 8))
        # A columnar file's reader holds decoded row groups beside the block: smaller blocks.
        if any(u.fmt.format in ROW_GROUP_FORMATS for u in batch):
            return min(budget, max(16 * 2**20, limit // 64))
        # Ranges of a big file load one after another: one part each keeps merges (and memory) down.
        if any(u.fmt.format in ROW_SIZED_FORMATS or u.is_range for u in batch):
            return budget
        return max(16 * 2**20, min(budget, self.expanded(batch) // max(1, threads)))

    @staticmethod
    def expanded(batch: list[Unit]) -> int:
        """A rough size of the batch's input once decompressed (COMPRESSED_EXPANSION)."""
        return sum(u.size * (1 if u.fmt.compression == "none" else COMPRESSED_EXPANSION) for u in batch)

    def part_writer_settings(self, threads: int) -> dict[str, int | str]:
        """How the stage writes its parts: smaller compressed blocks where wide rows would not
        fit the budget, and small parts of a partition-aware load packed into one file, in
        the basic part format (SMALL_PART_FORMAT).

        The part writer's buffers grow with columns x insert threads, not rows: on a
        100-column table they alone outgrow a 1 GiB budget at the default 1 MiB
        blocks. An eighth of the budget goes to them; the blocks stay >= 64 KiB.
        """
        settings: dict[str, int | str] = {}
        if self.reads.sortable_partition():
            settings["min_bytes_for_full_part_storage"] = PACKED_PART_BYTES
            settings.update(SMALL_PART_FORMAT)
        columns = max(1, len(self.ctx.info.columns))
        if 2 * columns * threads > open_files_limit() // 2:
            # A wide part keeps two files a column open while it is written (data and marks): a
            # 10,000-column part passed the process's 20,000 (EMFILE). A compact part is one file.
            settings["min_bytes_for_wide_part"] = 2**60
        per_buffer = self.ctx.opts.memory_bytes // (8 * PART_WRITER_BUFFERS * columns * threads)
        if per_buffer < 2**20:
            block = max(2**16, 1 << (per_buffer.bit_length() - 1)) if per_buffer > 0 else 2**16
            settings.update(max_compress_block_size=block, min_compress_block_size=min(2**16, block))
        return settings


def open_files_limit() -> int:
    """The process's soft limit on open files (the engine runs in this process)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 2**31 if soft < 0 or soft == resource.RLIM_INFINITY else soft


def uncompressed_size(unit: Unit) -> int | None:
    """The bytes the server parses: a plain file's size; a gzip file's from its trailer (ISIZE,
    exact for one member under 4 GiB); None where it cannot be told."""
    if unit.fmt.compression == "none":
        return unit.size
    if unit.fmt.compression != "gzip" or unit.size >= 2**32 or unit.size < 18:
        return None
    try:
        with open(unit.key, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            size = int.from_bytes(fh.read(4), "little")
    except OSError:
        return None
    # A multi-member file's trailer tells its last member only: a size below the compressed one is not believed;
    # nor one above what deflate makes of these bytes (1032:1 at most): a file cut short ends in deflate data.
    return size if unit.size // 2 <= size <= unit.size * DEFLATE_MAX_RATIO else None


DEFLATE_MAX_RATIO = 1032
"""The most bytes deflate makes of one compressed byte (a run of one byte, at best)."""
