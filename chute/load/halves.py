"""One big file into a partitioned table, read as two halves at once, each one block.

Sorting unsorted rows by partition costs a merge on one thread. A block holding
all the rows a stream read needs no sort: the table writes one part per
partition from it. So the file is cut in two at a row boundary and each half is
read into one block, both at once (docs/internals/halves.md).
"""

from __future__ import annotations

import dataclasses
import os

from chute.errors import ChuteError
from chute.load import reads as read_sql
from chute.load.checks.missing import SENTINEL_TEXT
from chute.load.commit import Commit
from chute.load.context import LoadContext
from chute.load.outcome import record_missing
from chute.load.reads import Reads
from chute.load.sizing import Sizing
from chute.sources.ranges import SPLIT_FORMATS, halve, range_fd
from chute.sql import TableName
from chute.targets.staging import MASK_COLUMN, CommitCheck
from chute.units import Unit

HALVES_MIN_BYTES = 64 * 2**20
"""Smallest file that a partitioned load reads as two halves at once."""
HALVES_MEMORY_PER_BYTE = 4.0
"""Peak memory per input byte of a file read as two halves, each one block (measured on a 1.35 GB
CSV of 100 columns: 3.8 GiB peak RSS into a table with its own types, 4.7 GiB into one chute
created with inferred types)."""


class Halves:
    def __init__(self, ctx: LoadContext, reads: Reads, sizing: Sizing, commit: Commit) -> None:
        self.ctx = ctx
        self.reads = reads
        self.sizing = sizing
        self.commit = commit

    def plan(self, batch: list[Unit]) -> tuple[int, int] | None:
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
        if len(batch) != 1 or self.ctx.workers < 2 or not self.ctx.target.parallel_inserts:
            return None
        unit = batch[0]
        fmt = unit.fmt
        if (
            unit.is_range
            or unit.key in self.ctx.unhalved
            or fmt.format not in SPLIT_FORMATS
            or fmt.compression != "none"
            or "://" in unit.key
            or not os.path.isfile(unit.key)
            or unit.size < HALVES_MIN_BYTES
            or unit.size * HALVES_MEMORY_PER_BYTE > self.ctx.opts.memory_bytes
            or (self.ctx.fill_provenance and "_source_row" in self.ctx.info.sorting_key)
            or not self.reads.sortable_partition()
        ):
            return None
        return halve(unit.key, fmt.format, unit.size)

    def write(self, unit: Unit, cut: int, newlines: int, by_source: bool) -> dict[str, int]:
        """Both halves; a half that meets a missing value while read without the count (a clean
        file pays nothing for it) makes both read again with it (chute.load.checks.missing)."""
        try:
            return self._write(unit, cut, newlines, by_source)
        except ChuteError as exc:
            if SENTINEL_TEXT not in str(exc) or unit.key in self.ctx.with_missing:
                raise
            with self.ctx.lock:
                self.ctx.with_missing.add(unit.key)
            return self._write(unit, cut, newlines, by_source)

    def _write(self, unit: Unit, cut: int, newlines: int, by_source: bool) -> dict[str, int]:
        """Two INSERTs at once, a half of the file each, each squashed into one block.

        The second half numbers its rows after the first half's newlines (less the
        header): right unless a value in the first half holds a newline, which the
        check before the commit finds (RowNumbersOff, and the writer loads the file
        the sorting way).

        Each half gets half the workers. With one each (two cores) a half is parsed
        by its own thread and numbered as read. With more, the engine parses each
        half in parallel and numbers rows by `_row_number` (as a whole file parsed
        in parallel, the first half's header mended the same way); every row
        number is then checked before the commit. Still one sink per INSERT, so
        still one block and one part per partition each.
        """
        header = 1 if unit.key in self.ctx.named else 0
        first_rows = newlines - header
        threads = max(1, self.ctx.workers // 2)
        parallel = threads > 1
        block = self.reads.first_block([unit])
        settings = self.sizing.settings([unit])
        check_off = self.commit.null_check_off([unit], settings)
        self._settings(settings, threads, block if parallel and header and self.ctx.fill_provenance else None)
        written: list[int] = []
        check = self._check(unit, check_off, first_rows, parallel, written)
        with range_fd(unit.key, 0, cut) as first_fd, range_fd(unit.key, cut, unit.size) as second_fd:
            first = dataclasses.replace(unit, origin=unit.key, start=0, end=cut)
            second = dataclasses.replace(unit, origin=unit.key, start=cut, end=unit.size)
            first_row = self.reads.row_number(unit, True, block) if parallel else "rowNumberInAllBlocks() + 1"
            # `_row_number` counts from 0 in a half without a header, in parallel or not.
            second_row = f"{'_row_number' if parallel else 'rowNumberInAllBlocks()'} + {first_rows + 1}"
            counting = self.reads.counting([unit])
            probe = counting and self.reads.probing([unit]) and not self.commit.holds_null_marker([unit])
            counting = counting and not probe
            selects = [
                self.reads.select_sql(
                    [first], row_expression=first_row, fd=first_fd, count_missing=counting, probe=probe
                ),
                self.reads.select_sql(
                    [second],
                    fmt_name=unit.fmt.format,
                    row_expression=second_row,
                    fd=second_fd,
                    count_missing=counting,
                    probe=probe,
                ),
            ]
            missing: dict[str, tuple[int, int]] | None = {} if counting else None
            with self.commit.nulls_guard([unit], check_off):
                counts = self.ctx.target.write_batch(
                    self.ctx.table,
                    self.ctx.insert_columns() + ([MASK_COLUMN] if counting else []),
                    selects,
                    settings,
                    count_by_source=False,  # one file: its rows are the stage's rows
                    context=unit.key,
                    before_commit=check,
                    concurrent=True,
                    swap_if_empty=self.ctx.single_batch,
                    written=written,
                    missing=missing,
                )
        record_missing(self.ctx, [unit], missing)
        return {unit.source_name: sum(counts.values())} if by_source else counts

    @staticmethod
    def _settings(settings: dict[str, str | int | float], threads: int, first_block: int | None) -> None:
        """Each half read by `threads` from its descriptor into one block (in place)."""
        settings.pop("max_block_size", None)
        if threads > 1:
            # The segment size the first block was sized for, said rather than assumed.
            settings["min_chunk_bytes_for_parallel_parsing"] = read_sql.PARSE_SEGMENT_BYTES
            if first_block is not None:
                settings["max_block_size"] = first_block  # the first block ends inside the first segment
        settings.update(
            # The halves come from descriptors (`range_fd`), read from where they stand.
            storage_file_read_method="read",
            max_threads=threads,
            max_insert_threads=1,
            input_format_parallel_parsing=int(threads > 1),
            # The second half starts with a row, not a header; the first reads as the whole file would.
            input_format_csv_detect_header=0,
            input_format_tsv_detect_header=0,
            # One block per INSERT: the table splits it into a part per partition, no sort.
            min_insert_block_size_rows=0,
            min_insert_block_size_bytes=2**62,
            max_partitions_per_insert_block=0,
        )

    def _check(self, unit: Unit, check_off: bool, first_rows: int, parallel: bool, written: list[int]) -> CommitCheck:
        unchanged = self.commit.unchanged_check([unit], null_check_off=check_off)

        def check(stage: TableName | None, counts: dict[str, int]) -> None:
            unchanged(stage, counts)
            if not self.ctx.fill_provenance or stage is None:
                return
            # The second half numbers its rows from `first_rows + 1`: right when the
            # first half read exactly `first_rows` (a newline inside one of its values
            # makes fewer). Else the numbers are checked one by one (and mended).
            if parallel or unit.fmt.format == "JSONEachRow" or written[:1] != [first_rows]:
                self.commit.fix_row_numbers(stage, unit)

        return check
