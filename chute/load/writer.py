"""Writing a batch: the fast way first, and the fallbacks of the write itself.

The chain for a batch of the convert method, in order: two halves at once (one
big file into a partitioned table), else the files sorted by partition; a file
whose row numbers came out wrong under parallel parsing is read again by one
thread; a file that held `\\N` with the NULL check off is read again with it on.
What fails after that goes to chute.load.recovery.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TypeVar

from chute.errors import ChuteError, CommitUncertain, OutOfSpace, ShardUnavailable, TransientTargetError
from chute.load.checks.missing import SENTINEL_TEXT
from chute.load.commit import Commit, RowNumbersOff
from chute.load.context import LoadContext
from chute.load.halves import Halves
from chute.load.methods import Methods
from chute.load.outcome import batch_label, record_missing
from chute.load.reads import Reads
from chute.load.serverparse import SERVER_READ_SETTINGS, TRIM_SETTING, Parsed
from chute.load.sizing import Sizing
from chute.load.squash import Squash
from chute.nullcheck import NullsInFile
from chute.targets.staging import MASK_COLUMN, SOURCE_COLUMN, copied_in
from chute.units import Unit

REPAIR_ATTEMPTS = 5
_T = TypeVar("_T")


class Writer:
    def __init__(
        self, ctx: LoadContext, reads: Reads, sizing: Sizing, commit: Commit, methods: Methods, halves: Halves
    ) -> None:
        self.ctx = ctx
        self.reads = reads
        self.sizing = sizing
        self.commit = commit
        self.methods = methods
        self.halves = halves

    def write_with_repair(self, batch: list[Unit], pass_through: bool, by_source: bool) -> dict[str, int]:
        """Write a batch; if the target failed while moving rows in, remove what may
        have got in (by `_source`) and write again, as a re-run would."""
        return self._repairing(batch, lambda: self.write(batch, pass_through, by_source))

    def parsed_with_repair(self, batch: list[Unit]) -> Parsed:
        """The server-parse write of a batch (chute.load.serverparse), repaired as any write."""

        def unchanged(units: list[Unit]) -> None:
            self.commit.unchanged_check(units)(None, {})

        return self._repairing(batch, lambda: self.methods.parse.write(batch, unchanged, self.commit.open_quote_check))

    def _repairing(self, batch: list[Unit], write: Callable[[], _T]) -> _T:
        for attempt in range(REPAIR_ATTEMPTS):
            try:
                if attempt == 0:
                    return write()
                # The same rows, the same `_load_id`: a replicated table would take their
                # parts for ones it has (and skip them), so they are copied in.
                with copied_in():
                    return write()
            except CommitUncertain:
                if not self.ctx.has_provenance or attempt == REPAIR_ATTEMPTS - 1:
                    raise
            for wait in range(REPAIR_ATTEMPTS):
                time.sleep(0.5 * 2**wait)
                try:
                    self.commit.remove_rows(batch)
                    break
                except TransientTargetError as exc:
                    # A shard of which no node answers: the batch's units fail now (what got in
                    # is removed by the re-run that loads them, as for an interrupted unit).
                    if wait == REPAIR_ATTEMPTS - 1 or isinstance(exc, ShardUnavailable):
                        raise
        raise AssertionError("unreachable")

    def write(self, batch: list[Unit], pass_through: bool, by_source: bool) -> dict[str, int]:
        server_select = self.methods.server_select(batch)
        if server_select is not None:
            settings = {k: v for k, v in self.ctx.format_settings().items() if k in SERVER_READ_SETTINGS}
            if batch[0].fmt.format == "CSV" and self.methods.parse.server().csv_keeps_spaces:
                settings[TRIM_SETTING] = 0
            if self.ctx.read_cluster is None:
                settings["max_threads"] = 1  # rowNumberInAllBlocks() follows the file with one reader
            elif batch[0].key in self.ctx.named:
                settings["input_format_parallel_parsing"] = 0  # see _parallel_parsing: _row_number is off
            try:
                counts = self.ctx.target.write_select(
                    self.ctx.table,
                    self.ctx.insert_columns(),
                    server_select,
                    settings,
                    count_by_source=by_source,
                    context=batch[0].key,
                    before_commit=self.commit.unchanged_check(batch),
                )
            except ChuteError as exc:
                raise self.methods.scrubbed(exc) from None
            self.methods.ran(batch, "server-side", "the server reads it itself")
            return counts
        if pass_through:
            counts = self.ctx.target.write_raw(
                self.ctx.table,
                self.ctx.insert_columns(),
                batch[0],
                self.ctx.format_name(batch[0]),
                self.ctx.format_settings(),
                batch[0].key,
                self.commit.unchanged_check(batch),
            )
            self.methods.ran(batch, "server-parse")
            return counts
        counts = self.converted(batch, by_source)
        self.methods.ran(batch, "client-convert")
        return counts

    def converted(self, batch: list[Unit], by_source: bool) -> dict[str, int]:
        try:
            return self._converted_planned(batch, by_source)
        except NullsInFile:
            # Read with the NULL check off, and a `\\N` turned up: the search has its verdict
            # now, so the same plan reads the file with the check on.
            return self._converted_planned(batch, by_source)

    def _converted_planned(self, batch: list[Unit], by_source: bool) -> dict[str, int]:
        halves = self.halves.plan(batch)
        if halves is not None:
            try:
                return self.halves.write(batch[0], *halves, by_source=by_source)
            except ChuteError as exc:
                if not exc.terminal or isinstance(exc, (OutOfSpace, NullsInFile)):
                    raise
                # Numbers off, bad rows, or a cut inside a value (a JSON object over several
                # lines): the whole file the usual way, which mends or reports what is wrong.
                self.ctx.unhalved.add(batch[0].key)
        try:
            return self._converted_once(batch, by_source)
        except RowNumbersOff:
            if any(u.key in self.ctx.serial_parse for u in batch):
                raise
            self.ctx.serial_parse.update(u.key for u in batch)
            return self._converted_once(batch, by_source)

    def _converted_once(self, batch: list[Unit], by_source: bool) -> dict[str, int]:
        settings = self.sizing.settings(batch)
        check_off = self.commit.null_check_off(batch, settings)
        counting = self.reads.counting(batch)
        # A clean file is read without the count; one that misses a value fails that read, and
        # is read again with it (chute.load.checks.missing.PROBED_FORMATS).
        probe = counting and self.reads.probing(batch) and not self.commit.holds_null_marker(batch)
        counting = counting and not probe
        # Several files into a table without `_source`: the stage counts each file's rows by a
        # column of its own (staging.SOURCE_COLUMN), dropped before the rows move in.
        tagged = by_source and not self.ctx.fill_provenance
        squash = Squash() if Squash.applies(self.ctx, batch) else None
        selects = self.reads.selects(batch, count_missing=counting, probe=probe, tagged=tagged, squash=squash)
        selects = self.reads.grouped(selects, settings)
        fix_rows = self.reads.row_fix(batch) and self.reads.parallel_parsing(batch)
        missing: dict[str, tuple[int, int]] | None = {} if counting else None
        try:
            with (
                self.commit.nulls_guard(batch, check_off),
                squash.filled(self.ctx, settings, batch_label(batch)) if squash else contextlib.nullcontext(),
            ):
                counts = self.ctx.target.write_batch(
                    self.ctx.table,
                    self.ctx.insert_columns()
                    + ([SOURCE_COLUMN] if tagged else [])
                    + ([MASK_COLUMN] if counting else []),
                    selects,
                    settings,
                    count_by_source=by_source,
                    context=batch_label(batch),
                    before_commit=self.commit.unchanged_check(batch, fix_rows=fix_rows, null_check_off=check_off),
                    swap_if_empty=self.ctx.single_batch,
                    missing=missing,
                    constants=self.reads.constants(batch),
                    tagged=tagged,
                )
        except ChuteError as exc:
            if not probe or SENTINEL_TEXT not in str(exc):
                raise
            with self.ctx.lock:
                self.ctx.with_missing.update(u.key for u in batch)
                self.ctx.missing_formats.update(u.fmt.format for u in batch)
            return self._converted_once(batch, by_source)
        record_missing(self.ctx, batch, missing)
        return counts
