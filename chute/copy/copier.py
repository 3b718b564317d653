"""The flow of a copy, unit by unit: the rows into a stage table while the source is measured,
the stage measured, the partition replaced from the stage, the unit `done` in the ledger.

Exactly once without deduplication: a partition unit moves in with `REPLACE
PARTITION` from its stage (atomic, and the same rows twice are the same
partition), a key range unit deletes what the destination holds of its range
before its stage's parts are attached. A kill at any moment leaves at most a
stage table (dropped by the next run) and units not yet `done`, copied again
(replacing a partition by the same rows changes nothing). So `done` rows are
written in batches, and no `started` row is needed.

Verified before it counts: the stage must hold as many rows, with the same
checksum, as the source's unit. A source written meanwhile gives other figures:
the source is measured again (the copy may hold its newer rows), and otherwise
the unit is copied again, `tries` times in all, then reported failed with both
figures.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from chute.copy.figures import Figures, figures_sql, read_figures
from chute.copy.guard import RunGuard
from chute.copy.methods import Mover
from chute.copy.model import CopyOptions, CopyReport, ProgressCallback, UnitResult
from chute.copy.plan import CopyUnit
from chute.copy.shards import DestShards
from chute.errors import ChuteError
from chute.formats import FileFormat
from chute.load.ledger import Ledger, LedgerEntry
from chute.schema import Column
from chute.sql import TableName, quote_str
from chute.targets.base import Target
from chute.targets.staging import Stage
from chute.units import Unit

_NATIVE = FileFormat("Native", "none")
SERVER_WORKERS = 4
"""Units copied at once into a server: each waits on both servers in turn (a read, an insert, two
measures), so more than the cores keeps them busy (2 M rows over 24 partitions on 2 cores,
loopback: 4 workers about 15% faster than 2)."""
LEDGER_SECONDS = 2.0
"""How often the ledger gets the units copied since its last insert (and at the end)."""


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
        guard: RunGuard | None = None,
        shards: DestShards | None = None,
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
        self.guard = guard
        """This run's claims on the destination (a server's): other copies into it wait."""
        self.owner = guard.owner if guard is not None else ""
        self.shards = shards
        """A Distributed destination's shards: each unit written by shard (None: one table)."""
        self.load_id = uuid.uuid4().hex
        self.shared: TableName | None = None
        """The stage the partition units share (None: each unit makes its own)."""
        self.measures: ThreadPoolExecutor | None = None
        self.seen: dict[str, LedgerEntry] = {}
        """The ledger's rows as this run first read them (see `copied_meanwhile`)."""
        self._pending: list[tuple[Unit, str, int, str]] = []
        self._pending_lock = threading.Lock()
        self._flushed = time.monotonic()

    # -- figures ---------------------------------------------------------------

    def source_figures(self, unit: CopyUnit) -> Figures:
        sql = figures_sql(self.table.sql, unit.where, self.columns, self.source_types)
        return read_figures(self.source.rows(sql, context=f"measuring the source's {unit.partition}")[0])

    def stage_figures(self, stage: TableName, unit: CopyUnit, held: str = "1", dest: Target | None = None) -> Figures:
        sql = figures_sql(stage.sql, held, self.columns)
        return read_figures((dest or self.dest).rows(sql, context=f"measuring the copy of {unit.partition}")[0])

    # -- what to copy ---------------------------------------------------------

    def sort_out(
        self, units: list[CopyUnit], entries: dict[str, LedgerEntry], held: dict[str, int]
    ) -> tuple[list[CopyUnit], list[UnitResult]]:
        """The units to copy, and those unchanged since their copy (skipped). A unit whose parts
        changed is measured: the same figures as recorded (a merge) keep it skipped. A partition
        the destination no longer holds as copied (`held`: its rows per partition; dropped,
        truncated) is copied again."""
        self.seen = dict(entries)
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
            if unit.replaces_partition and held.get(unit.partition_id, 0) != figures.rows:
                todo.append(unit)
                continue
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
        default = SERVER_WORKERS if self.dest.is_server else 2
        workers = max(1, min(self.options.workers or default, len(todo) or 1))
        done, rows, size = 0, 0, 0
        todo = sorted(todo, key=lambda u: -u.rows)  # the big ones first: the last to end are small
        if self.guard is not None:
            todo = self.guard.first(self._not_copied_meanwhile(todo, report))
        # Partitions of one table share a stage (each unit has its partition in it): no table
        # made and dropped per unit. Not where a cast may give the rows other partition ids.
        shares = any(u.replaces_partition for u in todo) and self.columns_as_source and self.shards is None
        context = "copying into a stage"
        # (merges of the stage's parts would take cores from the copy: they move on whole)
        sync = not self.dest.is_server
        stage = (
            Stage(self.dest, self.dest_table, context, drop_sync=sync, hold_merges=True, owner=self.owner)
            if shares
            else None
        )
        with (
            stage or contextlib.nullcontext(),
            ThreadPoolExecutor(workers) as pool,
            ThreadPoolExecutor(workers) as self.measures,
        ):
            self.shared = stage.table if stage is not None else None
            try:
                for result in pool.map(self.copy_unit, todo):
                    report.units.append(result)
                    done += 1
                    if result.state == "copied":
                        rows, size = rows + result.rows, size + result.bytes
                    if progress is not None:
                        progress(done, len(todo), rows, size)
            finally:
                self.flush(force=True)

    @property
    def columns_as_source(self) -> bool:
        return all(c.type == t for c, t in zip(self.columns, self.source_types, strict=True))

    def copy_unit(self, unit: CopyUnit) -> UnitResult:
        started = time.monotonic()
        source: Figures | None = None
        copy: Figures | None = None
        error = ""
        tries = 0
        if self.guard is not None:
            theirs = self.guard.take(unit, lambda: self.copied_meanwhile(unit), lambda: self.flush(force=True))
            if theirs is not None:
                reason = "copied by another run of chute copy meanwhile"
                return self._result(unit, "skipped", theirs, theirs, seconds=time.monotonic() - started, reason=reason)
        for tries in range(1, max(1, self.options.tries) + 1):
            try:
                source, copy = self._try(unit, again=tries > 1)
            except ChuteError as exc:
                if exc.terminal:
                    error = str(exc)
                    break
                error = str(exc)  # (a lost connection: once more)
                continue
            if copy == source:
                self.note(unit, "done", source)
                return self._result(unit, "copied", source, copy, tries, time.monotonic() - started)
            error = f"the copy has {copy}, the source {source} (the source changed during the copy?)"
        self.note(unit, "failed", source or Figures(0, 0), error)
        reason = f"{error} after {tries} tries" if tries > 1 else error
        return self._result(unit, "failed", source, copy, tries, time.monotonic() - started, reason)

    def _not_copied_meanwhile(self, todo: list[CopyUnit], report: CopyReport) -> list[CopyUnit]:
        """Of the units claimed at the start, those another run copied since this one read the
        ledger are skipped (one read of the ledger for all)."""
        assert self.guard is not None
        mine = [u for u in todo if u.key in self.guard.mine]
        fresh = self.ledger.latest([u.key for u in mine]) if mine else {}
        left, theirs = [], []
        for unit in todo:
            figures = self._newer_done(unit, fresh.get(unit.key)) if unit.key in fresh else None
            if figures is None:
                left.append(unit)
                continue
            theirs.append(unit.key)
            reason = "copied by another run of chute copy meanwhile"
            report.units.append(self._result(unit, "skipped", figures, figures, reason=reason))
        if theirs:
            self.guard.mine.difference_update(theirs)
            self.guard.release(theirs)
        return left

    def _newer_done(self, unit: CopyUnit, entry: LedgerEntry | None) -> Figures | None:
        """The figures of a `done` ledger row newer than the one this run first read, written
        from the parts the unit has now (by another run); else None."""
        if entry is None:
            return None
        seen = self.seen.get(unit.key)
        if seen is not None and seen.seq == entry.seq:
            return None  # the row this run read first (a copy the destination no longer holds)
        was = recorded(entry)
        if was is None or not unit.signature or was[1] != unit.signature:
            return None
        return was[0]

    def copied_meanwhile(self, unit: CopyUnit) -> Figures | None:
        """The figures the ledger now has for the unit `done` from the parts it has now (by
        another run), else None."""
        return self._newer_done(unit, self.ledger.latest([unit.key]).get(unit.key))

    def note(self, unit: CopyUnit, state: str, figures: Figures, error: str = "") -> None:
        """A unit's outcome into the ledger, in batches: one insert every LEDGER_SECONDS, not one
        per unit. A copy whose `done` row a kill lost is copied again, which changes nothing
        (its partition is replaced by the same rows)."""
        with self._pending_lock:
            self._pending.append((ledger_unit(unit, figures), state, figures.rows, error))
        self.flush()

    def flush(self, force: bool = False) -> None:
        with self._pending_lock:
            if not self._pending or (not force and time.monotonic() - self._flushed < LEDGER_SECONDS):
                return
            pending, self._pending = self._pending, []
            self._flushed = time.monotonic()
        for state in ("done", "failed"):
            rows = [p for p in pending if p[1] == state]
            if rows:
                self.ledger.record(
                    [p[0] for p in rows],
                    state,
                    self.load_id,
                    rows={p[0].key: p[2] for p in rows},
                    errors={p[0].key: p[3] for p in rows if p[3]},
                )
        if self.guard is not None:
            # (after the ledger row: a run that waited on these reads it)
            self.guard.release([p[0].key for p in pending])

    def _try(self, unit: CopyUnit, again: bool) -> tuple[Figures, Figures]:
        """One copy of the unit into a stage: (the source's figures, the stage's). The stage's
        rows move in only when they are equal. The source is measured while its rows are read."""
        context = f"copying {unit.partition}"
        if self.shards is not None:
            return self._try_by_shard(unit, context)
        shared = self.shared if unit.replaces_partition else None
        if shared is not None:
            if again:  # (what the last try left of this partition)
                self.dest.execute(
                    f"ALTER TABLE {shared.sql} DROP PARTITION ID {quote_str(unit.partition_id)}", context=context
                )
            return self._copy_into(unit, shared, unit.partition_filter, context)
        with Stage(self.dest, self.dest_table, context, drop_sync=not self.dest.is_server, owner=self.owner) as stage:
            assert stage.table is not None  # (the destination is a MergeTree: checked before)
            return self._copy_into(unit, stage.table, "1", context)

    def _copy_into(self, unit: CopyUnit, stage: TableName, held: str, context: str) -> tuple[Figures, Figures]:
        if self.measures is None:
            before = self.source_figures(unit)
            self.mover.write(unit.where, stage, context, parts=unit.signature)
        else:
            measuring = self.measures.submit(self.source_figures, unit)
            try:
                self.mover.write(unit.where, stage, context, parts=unit.signature)
            finally:
                before = measuring.result()
        copy = self.stage_figures(stage, unit, held)
        if copy != before:
            after = self.source_figures(unit)  # rows added (or gone) since the first look
            if copy != after:
                return after, copy
            before = after
        self._move_in(unit, stage, context)
        return before, copy

    def _try_by_shard(self, unit: CopyUnit, context: str) -> tuple[Figures, Figures]:
        """One copy of the unit into a stage on each shard it has rows for (see chute.copy.shards);
        the stages' figures summed must equal the source's before any shard's partition moves."""
        assert self.shards is not None
        places = self.shards.places
        conditions = self.shards.conditions(unit)
        with contextlib.ExitStack() as stack:
            stages: list[TableName | None] = []
            for place, condition in zip(places, conditions, strict=True):
                made = None
                if condition is not None:
                    stage = Stage(place.target, place.table, context, drop_sync=False, owner=self.owner)
                    made = stack.enter_context(stage).table
                stages.append(made)
            measuring = self.measures.submit(self.source_figures, unit) if self.measures is not None else None
            try:
                for place, condition, made in zip(places, conditions, stages, strict=True):
                    if made is not None:
                        self.mover.write(
                            f"({unit.where}) AND ({condition})", made, context, place.target, unit.signature
                        )
            finally:
                before = measuring.result() if measuring is not None else self.source_figures(unit)
            counts = [
                self.stage_figures(made, unit, dest=place.target) if made is not None else Figures(0, 0)
                for place, made in zip(places, stages, strict=True)
            ]
            copy = Figures(sum(f.rows for f in counts), sum(f.checksum for f in counts) % 2**64)
            if copy != before:
                after = self.source_figures(unit)
                if copy != after:
                    return after, copy
                before = after
            for place, made, figures in zip(places, stages, counts, strict=True):
                if made is not None and figures.rows:
                    self._move_in(unit, made, context, place.target, place.table)
                else:
                    self._clear(unit, place.target, place.table, context)
            return before, copy

    def _clear(self, unit: CopyUnit, dest: Target, table: TableName, context: str) -> None:
        """A shard that gets none of the unit's rows: what it holds of the unit goes."""
        if self.guard is not None:
            self.guard.check()
        if unit.key_range is None:
            dest.execute(f"ALTER TABLE {table.sql} DROP PARTITION ID {quote_str(unit.partition_id)}", context=context)
            return
        condition = unit.key_range[0]
        left = dest.rows(f"SELECT count() AS n FROM {table.sql} WHERE {condition}", context=context)
        if int(str(left[0]["n"])):
            dest.mutate(table, f"DELETE WHERE {condition}", context)

    def _move_in(
        self,
        unit: CopyUnit,
        stage: TableName,
        context: str,
        target: Target | None = None,
        table: TableName | None = None,
    ) -> None:
        if self.guard is not None:
            self.guard.check()  # (a run whose claim lapsed may no longer write the unit)
        dest, dest_table = target or self.dest, table or self.dest_table
        if unit.key_range is None and stage == self.shared:
            # A stage of rows as the source's types: the same partition id.
            command = f"REPLACE PARTITION ID {quote_str(unit.partition_id)} FROM {stage.sql}"
            dest.execute(f"ALTER TABLE {dest_table.sql} {command}", context=context)
            return
        if unit.key_range is not None:
            condition = unit.key_range[0]
            left = dest.rows(f"SELECT count() AS n FROM {dest_table.sql} WHERE {condition}", context=context)
            if int(str(left[0]["n"])):
                # An earlier copy of this range (or rows put there otherwise): replaced, not doubled.
                dest.mutate(dest_table, f"DELETE WHERE {condition}", context)
            command = f"ATTACH PARTITION ID {quote_str(unit.partition_id)} FROM {stage.sql}"
            dest.execute(f"ALTER TABLE {dest_table.sql} {command}", context=context)
            return
        database = quote_str(stage.database) if stage.database else "currentDatabase()"
        found = dest.rows(
            f"SELECT DISTINCT partition_id FROM system.parts WHERE active AND database = {database} "
            f"AND table = {quote_str(stage.table)}",
            context=context,
        )
        ids = sorted({str(r["partition_id"]) for r in found} | {unit.partition_id})
        commands = ", ".join(f"REPLACE PARTITION ID {quote_str(pid)} FROM {stage.sql}" for pid in ids)
        dest.execute(f"ALTER TABLE {dest_table.sql} {commands}", context=context)

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
