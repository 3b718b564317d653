"""The flow of a copy, unit by unit: ledger `started`, the source's figures, the rows into a
stage table, the stage's figures, the partition replaced, ledger `done`.

Exactly once without deduplication: a partition unit moves in with `REPLACE
PARTITION` from its stage (atomic, and the same rows twice are the same
partition), a key range unit deletes what the destination holds of its range
before its stage's parts are attached. A kill at any moment leaves at most a
stage table (dropped by the next run) and a unit `started`, copied again.

Verified before it counts: the stage must hold as many rows, with the same
checksum, as the source's unit. A source written meanwhile gives other figures:
the source is measured again (the copy may hold its newer rows), and otherwise
the unit is copied again, `tries` times in all, then reported failed with both
figures.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from chute.copy.figures import Figures, figures_sql, read_figures
from chute.copy.methods import Mover
from chute.copy.model import CopyOptions, CopyReport, ProgressCallback, UnitResult
from chute.copy.plan import CopyUnit
from chute.errors import ChuteError
from chute.formats import FileFormat
from chute.load.ledger import Ledger, LedgerEntry
from chute.schema import Column
from chute.sql import TableName, quote_str
from chute.targets.base import Target
from chute.targets.staging import Stage
from chute.units import Unit

_NATIVE = FileFormat("Native", "none")


def ledger_unit(unit: CopyUnit, figures: Figures) -> Unit:
    """The ledger's record of a copied unit: size, then `rows:checksum:parts` as its identity."""
    return Unit(unit.key, unit.bytes, 0, _NATIVE, etag=f"{figures.rows}:{figures.checksum}:{unit.signature}")


def recorded(entry: LedgerEntry) -> tuple[Figures, str] | None:
    """The figures and part signature a `done` ledger row holds."""
    pieces = entry.identity.split(":")
    if entry.state != "done" or len(pieces) != 4:
        return None
    return Figures(int(pieces[1]), int(pieces[2])), pieces[3]


class Copier:
    def __init__(
        self,
        source: Target,
        dest: Target,
        table: TableName,
        dest_table: TableName,
        columns: list[Column],
        source_types: list[str],
        mover: Mover,
        ledger: Ledger,
        options: CopyOptions,
    ) -> None:
        self.source = source
        self.dest = dest
        self.table = table
        self.dest_table = dest_table
        self.columns = columns
        self.source_types = source_types
        self.mover = mover
        self.ledger = ledger
        self.options = options
        self.load_id = uuid.uuid4().hex

    # -- figures ---------------------------------------------------------------

    def source_figures(self, unit: CopyUnit) -> Figures:
        sql = figures_sql(self.table.sql, unit.where, self.columns, self.source_types)
        return read_figures(self.source.rows(sql, context=f"measuring the source's {unit.partition}")[0])

    def stage_figures(self, stage: TableName, unit: CopyUnit) -> Figures:
        sql = figures_sql(stage.sql, "1", self.columns)
        return read_figures(self.dest.rows(sql, context=f"measuring the copy of {unit.partition}")[0])

    # -- what to copy ---------------------------------------------------------

    def sort_out(
        self, units: list[CopyUnit], entries: dict[str, LedgerEntry]
    ) -> tuple[list[CopyUnit], list[UnitResult]]:
        """The units to copy, and those unchanged since their copy (skipped). A unit whose parts
        changed is measured: the same figures as recorded (a merge) keep it skipped."""
        todo: list[CopyUnit] = []
        skipped: list[UnitResult] = []
        refreshed: list[tuple[CopyUnit, Figures]] = []
        for unit in units:
            found = entries.get(unit.key)
            was = recorded(found) if found is not None else None
            if was is None:
                todo.append(unit)
                continue
            figures, signature = was
            if signature != unit.signature or not unit.signature:
                now = self.source_figures(unit)
                if now != figures:
                    todo.append(unit)
                    continue
                refreshed.append((unit, figures))
            skipped.append(self._result(unit, "skipped", figures, figures, reason="unchanged since its copy"))
        if refreshed and not self.options.dry_run:
            # The new part names, so the next run skips these without measuring.
            for unit, figures in refreshed:
                self.ledger.record([ledger_unit(unit, figures)], "done", self.load_id, rows={unit.key: figures.rows})
        return todo, skipped

    # -- copying --------------------------------------------------------------

    def run(self, todo: list[CopyUnit], report: CopyReport, progress: ProgressCallback | None) -> None:
        workers = max(1, min(self.options.workers or 2, len(todo) or 1))
        done, rows, size = 0, 0, 0
        todo = sorted(todo, key=lambda u: -u.rows)  # the big ones first: the last to end are small
        with ThreadPoolExecutor(workers) as pool:
            for result in pool.map(self.copy_unit, todo):
                report.units.append(result)
                done += 1
                if result.state == "copied":
                    rows, size = rows + result.rows, size + result.bytes
                if progress is not None:
                    progress(done, len(todo), rows, size)

    def copy_unit(self, unit: CopyUnit) -> UnitResult:
        started = time.monotonic()
        self.ledger.record([ledger_unit(unit, Figures(0, 0))], "started", self.load_id)
        source: Figures | None = None
        copy: Figures | None = None
        error = ""
        tries = 0
        for tries in range(1, max(1, self.options.tries) + 1):
            try:
                source, copy = self._try(unit)
            except ChuteError as exc:
                if exc.terminal:
                    error = str(exc)
                    break
                error = str(exc)  # (a lost connection: once more)
                continue
            if copy == source:
                self.ledger.record([ledger_unit(unit, source)], "done", self.load_id, rows={unit.key: source.rows})
                return self._result(unit, "copied", source, copy, tries, time.monotonic() - started)
            error = f"the copy has {copy}, the source {source} (the source changed during the copy?)"
        self.ledger.record(
            [ledger_unit(unit, source or Figures(0, 0))], "failed", self.load_id, errors={unit.key: error}
        )
        reason = f"{error} after {tries} tries" if tries > 1 else error
        return self._result(unit, "failed", source, copy, tries, time.monotonic() - started, reason)

    def _try(self, unit: CopyUnit) -> tuple[Figures, Figures]:
        """One copy of the unit into a stage: (the source's figures, the stage's). The stage's
        rows move in only when they are equal."""
        context = f"copying {unit.partition}"
        before = self.source_figures(unit)
        with Stage(self.dest, self.dest_table, context, drop_sync=not self.dest.is_server) as stage:
            assert stage.table is not None  # (the destination is a MergeTree: checked before)
            self.mover.write(unit.where, stage.table, context)
            copy = self.stage_figures(stage.table, unit)
            if copy != before:
                after = self.source_figures(unit)  # rows added (or gone) since the first look
                if copy != after:
                    return after, copy
                before = after
            self._move_in(unit, stage.table, context)
        return before, copy

    def _move_in(self, unit: CopyUnit, stage: TableName, context: str) -> None:
        if unit.key_range is not None:
            condition = unit.key_range[0]
            left = self.dest.rows(f"SELECT count() AS n FROM {self.dest_table.sql} WHERE {condition}", context=context)
            if int(str(left[0]["n"])):
                # An earlier copy of this range (or rows put there otherwise): replaced, not doubled.
                self.dest.mutate(self.dest_table, f"DELETE WHERE {condition}", context)
            command = f"ATTACH PARTITION ID {quote_str(unit.partition_id)} FROM {stage.sql}"
            self.dest.execute(f"ALTER TABLE {self.dest_table.sql} {command}", context=context)
            return
        database = quote_str(stage.database) if stage.database else "currentDatabase()"
        found = self.dest.rows(
            f"SELECT DISTINCT partition_id FROM system.parts WHERE active AND database = {database} "
            f"AND table = {quote_str(stage.table)}",
            context=context,
        )
        ids = sorted({str(r["partition_id"]) for r in found} | {unit.partition_id})
        commands = ", ".join(f"REPLACE PARTITION ID {quote_str(pid)} FROM {stage.sql}" for pid in ids)
        self.dest.execute(f"ALTER TABLE {self.dest_table.sql} {commands}", context=context)

    def _result(
        self,
        unit: CopyUnit,
        state: str,
        source: Figures | None,
        copy: Figures | None,
        tries: int = 0,
        seconds: float = 0.0,
        reason: str = "",
    ) -> UnitResult:
        return UnitResult(
            unit=unit.key,
            partition=unit.partition,
            state=state,
            rows=source.rows if source is not None else unit.rows,
            bytes=unit.bytes,
            source_rows=source.rows if source is not None else None,
            source_checksum=str(source.checksum) if source is not None else None,
            dest_rows=copy.rows if copy is not None else None,
            dest_checksum=str(copy.checksum) if copy is not None else None,
            tries=tries,
            seconds=round(seconds, 3),
            reason=reason,
        )
