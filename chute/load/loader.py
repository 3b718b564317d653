"""The loader: plans against the ledger, then moves batch after batch through the parts.

Each batch: (claims, where others may share the job) -> ledger `started` ->
earlier rows of the units removed where they were interrupted -> the write
(chute.load.writer: fast path and its own fallbacks) -> ledger `done`. A batch
that fails goes to chute.load.recovery, which decides; the loader carries the
decision out: the tolerant pass, the named file set aside, each file alone,
then the careful pass or failure of one file.
"""

from __future__ import annotations

import contextlib
import shlex
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from chute.engine import engine_progress
from chute.errors import AttachedLate, ChuteError, NotText, ShardUnavailable, SourceError
from chute.formats import refuse_unreadable
from chute.load.careful_pass import CarefulPass
from chute.load.claims import ClaimLost, Claims
from chute.load.commit import Commit
from chute.load.context import LoadContext
from chute.load.halves import Halves
from chute.load.ledger import LedgerEntry
from chute.load.methods import Methods
from chute.load.outcome import Plan, done, fail
from chute.load.plan import batches, place_range, plan_units, rotated
from chute.load.reads import Reads
from chute.load.recovery import Recovery, Step
from chute.load.sharing import Sharing
from chute.load.sizing import Sizing
from chute.load.table import SELF_DESCRIBING, TableSetup
from chute.load.tolerant_pass import TolerantPass
from chute.load.writer import Writer
from chute.report import FileState, LoadReport
from chute.sql import quote_ident, quote_str
from chute.units import Unit

PARSED_LANES = 3
"""Batches of files the server parses that load at once (each posts its files at once)."""


class Loader:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.reads = Reads(ctx)
        self.sizing = Sizing(ctx, self.reads)
        self.commit = Commit(ctx)
        self.methods = Methods(ctx)
        self.halves = Halves(ctx, self.reads, self.sizing, self.commit)
        self.writer = Writer(ctx, self.reads, self.sizing, self.commit, self.methods, self.halves)
        self.table = TableSetup(ctx)
        self.recovery = Recovery(ctx)
        self.tolerant = TolerantPass(ctx, self.reads, self.sizing, self.commit)
        self.careful = CarefulPass(ctx, self.reads, self.commit)
        self.sharing: Sharing | None = None

    def run(
        self,
        units: list[Unit],
        on_plan: Callable[[int, int], None] | None,
        on_ddl: Callable[[str], None] | None,
        latest: dict[str, LedgerEntry] | None = None,
        unchanged: set[str] | None = None,
    ) -> LoadReport:
        """Plan against the ledger (`latest`, when the caller read it already, and the units it
        found unchanged against it, when it did) and load."""
        ctx = self.ctx
        if ctx.table.database:
            known = ctx.target.rows(
                f"SELECT count() AS n FROM system.databases WHERE name = {quote_str(ctx.table.database)}"
            )
            if not int(known[0]["n"]):
                ctx.note(f"database {ctx.table.database} did not exist: created (was its name right?)")
            ctx.target.execute(f"CREATE DATABASE IF NOT EXISTS {quote_ident(ctx.table.database)}")
            if ctx.opts.cluster and ctx.target.is_server and ctx.meta is None:  # chute makes the table on every node
                ctx.target.execute(
                    f"CREATE DATABASE IF NOT EXISTS {quote_ident(ctx.table.database)} "
                    f"ON CLUSTER {quote_ident(ctx.opts.cluster)}",
                    {"distributed_ddl_task_timeout": 30},
                )
        ctx.ledger.ensure()
        if ctx.target.shared:
            ctx.claims = Claims(ctx.target, ctx.table, ctx.opts.worker_id, ctx.opts.lease_seconds, ctx.books)
            ctx.claims.ensure()
            ctx.target.guard_commits(ctx.claims.load, ctx.claims.guard)
            self.sharing = Sharing(ctx, ctx.claims)
            self.sharing.drop_stale_stages()
        else:
            ctx.target.prepare(ctx.table)
        ctx.ledger_latest = ctx.ledger.latest() if latest is None else latest
        if ctx.meta is None and any(e.state != "dropped" for e in ctx.ledger_latest.values()):
            forgotten = ctx.ledger.forget_dropped_table(ctx.load_id)
            if forgotten:
                ctx.report.notes.append(
                    f"table {ctx.table} was not there, yet the ledger had {forgotten} unit(s) loaded into it "
                    "(a dropped table): they load again"
                )
                ctx.ledger_latest = ctx.ledger.latest()
        for unit in units:
            if unit.is_range:
                ctx.ranges_of.setdefault(unit.origin, []).append(unit)
        for ranges in ctx.ranges_of.values():
            ranges.sort(key=lambda u: u.start)
        # (`unchanged` was told against `latest`: not once the ledger was read again)
        plan = plan_units(ctx, units, ctx.ledger_latest, unchanged if ctx.ledger_latest is latest else None)
        if on_plan:
            on_plan(len(plan.load), sum(u.size for u in plan.load))
        table_there = self.table.settle(plan, on_ddl)
        try:
            self._load_all(plan)
        except ChuteError as exc:
            exc.partial = self._stopped(plan, units, exc)
            raise
        ctx.report.files = [plan.results[u.key] for u in units]
        if table_there and any(r.state == "loaded" for r in ctx.report.files):
            ctx.target.settle(ctx.table)  # every replica has the rows before the report says so
        if table_there:
            ctx.report.table_rows, ctx.report.table_bytes_on_disk = ctx.target.table_stats(ctx.table)
            self._note_emptied()
        return ctx.report

    def _stopped(self, plan: Plan, units: list[Unit], exc: ChuteError) -> LoadReport:
        """The report of a load that stopped on `exc`: what it committed before (loaded files and
        their rows), the units it had yet to load as failed with the reason."""
        for unit in plan.load:
            result, entry = plan.results[unit.key], self.ctx.ledger_latest.get(unit.key)
            settled = entry is not None and entry.state == "done" and unit.matches(entry.identity)
            if result.state == "skipped" and not settled:  # (planned, not finished; not another's)
                result.state, result.error = FileState.FAILED, f"not loaded: the load stopped ({exc})"
        self.ctx.report.files = [plan.results[u.key] for u in units]
        return self.ctx.report

    def _note_emptied(self) -> None:
        """A table with no rows whose ledger says files were loaded into it: truncated, most
        likely. Rows can also go by TTL or a user's DELETE, so the files are not loaded again
        unasked: a note says how."""
        ctx = self.ctx
        if ctx.report.table_rows != 0:
            return
        loaded = [r for r in ctx.report.files if r.state == "skipped" and self._rows_loaded(r.source)]
        if loaded:
            ctx.report.notes.append(
                f"table {ctx.table} holds no rows, yet the ledger says {len(loaded)} skipped file(s) were "
                "loaded into it (was it truncated?); to load them again, forget them first: "
                f"chute forget {' '.join(shlex.quote(r.source) for r in loaded[:3])}"
                f"{' ...' if len(loaded) > 3 else ''} --table {ctx.table}"
            )

    def _rows_loaded(self, key: str) -> int:
        entry = self.ctx.ledger_latest.get(key)
        return entry.rows_loaded if entry is not None else 0

    def _keep_changed(self, plan: Plan) -> None:
        """--on-change reload into a table without provenance columns: a changed file's old rows
        cannot be found, so loading it again would double them. It fails, with the reason; the
        ledger keeps it loaded (a re-run does not take it for an interrupted one)."""
        ctx = self.ctx
        for unit in [u for u in plan.load if u.key in plan.replace]:
            entry = ctx.ledger_latest.get(unit.key)
            if entry is None or entry.state != "done":
                continue
            plan.load.remove(unit)
            plan.replace.discard(unit.key)
            result = plan.results[unit.key]
            result.state = FileState.FAILED
            result.error = (
                "changed since it was loaded (size, mtime or content), and the table has no provenance columns: its "
                "old rows cannot be found to replace them; load it into a table with provenance, or delete "
                "them yourself, then `chute forget FILE --keep-rows` makes the next load load it again"
            )

    # -- batches --------------------------------------------------------------

    def _load_all(self, plan: Plan) -> None:
        ctx = self.ctx
        if not plan.load:
            return
        if plan.replace and not ctx.has_provenance:
            self._keep_changed(plan)
        if plan.replace and not ctx.has_provenance:
            ctx.report.notes.append(
                "the table has no provenance columns: rows of interrupted or changed files cannot be "
                "found to replace them; they are loaded again"
            )
        ready = [u for u in plan.load if self._precheck(u, plan)]
        self.methods.balance(ready)  # (auto: which files go which way)
        found = batches(ctx, self.methods, ready)
        ctx.single_batch = len(found) == 1 and ctx.claims is None
        # Files the server parses: one request each, as many at once as keep its cores busy
        # (batches of several files post theirs at once themselves; a few such batches at a
        # time, so that one's books overlap the others' parsing).
        passed = found and all(self.methods.pass_through(b) for b in found)
        streams = 1
        if passed:
            single = all(len(b) == 1 for b in found)
            streams = self.methods.parse.streams(len(found)) if single else min(PARSED_LANES, len(found))
        elif not any(b[0].is_range for b in found):
            # Batches this engine reads: as many at once as the target has streams, each on its
            # share of them, so that one's round trips (claims, stage, ATTACH, ledger) overlap
            # the other's rows on the wire (a file's byte ranges go in order, one at a time).
            streams = ctx.lanes = max(1, min(ctx.target.parallel_streams, len(found)))
        progress = _Progress(ctx, plan)

        def one(batch: list[Unit]) -> None:
            progress.add(self._one(batch, plan))

        with (
            ctx.claims.heartbeat() if ctx.claims is not None else contextlib.nullcontext(),
            engine_progress(progress.live) if ctx.progress else contextlib.nullcontext(),
        ):
            try:
                if self.sharing is not None:
                    found = rotated(found)
                if streams == 1:
                    for batch in found:
                        one(batch)
                else:
                    with ThreadPoolExecutor(streams) as pool:
                        for future in [pool.submit(one, b) for b in found]:
                            future.result()
                ctx.lanes = 1
                if self.sharing is not None:
                    self.sharing.load_waiting(one, lambda units: batches(ctx, self.methods, units))
            finally:
                ctx.lanes = 1
                self.methods.parse.close()  # its posting threads end; its stages are dropped
        if self.sharing is not None:
            self.sharing.drop_stale_stages()  # a worker killed meanwhile left its stage behind

    def _one(self, batch: list[Unit], plan: Plan) -> list[Unit]:
        """Load one batch (under claims where others may share the job); the units it settled."""
        sharing = self.sharing
        if sharing is not None:
            parsed = self.ctx.fill_provenance and self.methods.pass_through(batch)
            batch = sharing.claimed(batch, plan, engine_reads=not parsed)
        try:
            if batch:
                self._load_batch(batch, plan)
                self._run_deferred(plan)
        except AttachedLate as exc:
            assert sharing is not None
            # Only the part of the batch that went in late: files of it that an earlier part loaded
            # (done, in the ledger and the report) keep their rows (issue 46 item 9).
            self.commit.remove_own([u for u in batch if plan.results[u.key].state != "loaded"])
            self.ctx.note(f"{exc}: taken out again and left to it")
            sharing.wait_for([u for u in batch if plan.results[u.key].state != "loaded"])
        except ClaimLost as exc:
            assert sharing is not None
            self.ctx.note(f"{exc}: left to it")
            sharing.wait_for([u for u in batch if plan.results[u.key].state != "loaded"])
        finally:
            if self.ctx.claims is not None:
                self.ctx.claims.release(u.key for u in batch)
        return [u for u in batch if sharing is None or not sharing.is_waiting(u)]

    def _precheck(self, unit: Unit, plan: Plan) -> bool:
        """Per-file checks that need no row parsing; a failure marks the unit failed."""
        try:
            why = self.ctx.source.unreadable(unit)
            if why:
                raise SourceError(why)
            if unit.size == 0:
                raise SourceError(f"{unit.key}: empty file (0 bytes), nothing to load: remove it or leave it out")
            refuse_unreadable(unit.key, unit.fmt)
            self.ctx.source.verify(unit)
            if unit.fmt.format in SELF_DESCRIBING or self.ctx.opts.add_columns:
                self.table.check_fields(unit)
            if unit.fmt.format in ("CSV", "TSV") and self.table.headers.header_names(unit):
                self.ctx.named.add(unit.key)
        except ChuteError as exc:
            fail(self.ctx, unit, str(exc), plan)
            return False
        return True

    def _load_batch(self, batch: list[Unit], plan: Plan) -> None:
        ctx = self.ctx
        if batch[0].is_range and not place_range(ctx, batch[0], plan):
            return
        if ctx.claims is not None:
            ctx.claims.guard(local_only=True)  # (a lapsed claim writes no `started` over another's `done`)
        ctx.ledger.record(batch, "started", ctx.load_id)
        replace = [u for u in batch if u.key in plan.replace]
        if replace and ctx.has_provenance:
            self.commit.remove_rows(replace)
        elif replace:  # (rows without provenance cannot be found; their rejects can)
            self.commit.remove_rejects(replace)
        # (A batch of several files into a table without provenance is counted per file too:
        # plan.batches makes one only where the stage can tag the rows.)
        by_source = ctx.fill_provenance or len(batch) > 1
        pass_through = self.methods.pass_through(batch)
        if pass_through and by_source:
            self._load_parsed(batch, plan)
            return
        try:
            counts = self.writer.write_with_repair(batch, pass_through, by_source)
        except ShardUnavailable as exc:
            # No row's fault, and nothing of the batch is anywhere (every shard's stage is
            # filled before any is attached): its units fail; a re-run loads them.
            for unit in batch:
                fail(ctx, unit, f"{unit.key}: {exc}", plan)
            return
        except ChuteError as exc:
            self._after_batch_failure(batch, exc, plan)
            return
        if pass_through or batch[0].is_range:
            by_source = False
        done(ctx, batch, plan, rows=counts if by_source else {batch[0].key: sum(counts.values())})

    def _load_parsed(self, batch: list[Unit], plan: Plan) -> None:
        """server-parse with provenance: the units the server parsed are done; those it
        refused (a parse error, row numbers off) load again, read here (client-convert),
        with the usual fallbacks for bad rows."""
        ctx = self.ctx
        try:
            parsed = self.writer.parsed_with_repair(batch)
        except ChuteError as exc:
            self._after_batch_failure(batch, exc, plan)  # nothing of the batch got in
            return
        loaded = [u for u in batch if u.key in parsed.rows]
        if loaded:
            done(ctx, loaded, plan, rows=parsed.rows)
            self.methods.ran(loaded, "server-parse")
        for unit in batch:
            refusal = parsed.refused.get(unit.key)
            if refusal is None:
                continue
            self.methods.parse.refuse(unit)
            first = str(refusal).splitlines()[0] if str(refusal) else type(refusal).__name__
            ctx.note(f"server-parse: {first[:300]}; read here instead")
            self._load_batch([unit], plan)

    # -- when a batch fails: recovery decides, the loader carries it out -------

    def _after_batch_failure(self, batch: list[Unit], exc: ChuteError, plan: Plan) -> None:
        decision = self.recovery.decide(batch, exc, self.tolerant.fits(batch, exc))
        if decision.step is Step.TOLERANT:
            if self.tolerant.run(batch, plan):
                return
            decision = self.recovery.decide(batch, exc, tolerant_fits=False)
        if decision.step is Step.RAISE:
            raise exc
        if decision.step is Step.DEFER_CULPRIT:
            assert decision.culprit is not None and decision.error is not None
            with self.ctx.lock:
                self.ctx.deferred.append((decision.culprit, decision.error))
            self._load_batch([u for u in batch if u is not decision.culprit], plan)
        elif decision.step is Step.SPLIT:
            self.ctx.single_batch = False  # several batches now: none may swap the table
            parts = self.recovery.split_parts(batch)
            with ThreadPoolExecutor(min(self.ctx.workers, len(parts))) as pool:
                for future in [pool.submit(self._load_batch, part, plan) for part in parts]:
                    future.result()
        else:
            self._after_failure(batch[0], exc, plan)

    def _run_deferred(self, plan: Plan) -> None:
        """Files set aside by the recovery: their careful passes, `workers` at a time."""
        with self.ctx.lock:
            deferred, self.ctx.deferred = self.ctx.deferred, []
        if not deferred:
            return
        with ThreadPoolExecutor(min(self.ctx.workers, len(deferred))) as pool:
            for future in [pool.submit(self._after_failure, unit, exc, plan) for unit, exc in deferred]:
                future.result()

    def _after_failure(self, unit: Unit, exc: ChuteError, plan: Plan) -> None:
        """A file the fast path could not load: a careful pass if it is text, else it fails."""
        decision = self.recovery.for_unit(unit, exc)
        if decision.step is Step.FAIL:
            fail(self.ctx, unit, str(decision.error), plan)
            return
        try:
            self.careful.run(unit, plan)
            if plan.results[unit.key].state == "loaded":
                self.methods.ran([unit], "client-convert", "bad rows: read here and checked record by record")
        except ChuteError as careful_exc:
            if not careful_exc.terminal and not self.recovery.source_failed([unit], careful_exc):
                raise
            # The careful pass could not read it either (truncated archive, I/O): the first error says most,
            # unless the file is not text at all.
            fail(self.ctx, unit, f"{unit.key}: {careful_exc}" if isinstance(careful_exc, NotText) else str(exc), plan)


class _Progress:
    """Units settled so far, and how far the engine has read the batches under way, told to
    the progress callback after each batch and about ten times a second within one."""

    def __init__(self, ctx: LoadContext, plan: Plan) -> None:
        self.ctx = ctx
        self.plan = plan
        self.lock = threading.Lock()
        self.files = self.settled_rows = self.settled_bytes = 0
        """Sums over the units settled so far (kept as they come: a sum over them all after
        each batch made a load of 20,000 files in 313 batches spend a second summing)."""
        self.reading: dict[int, tuple[int, int]] = {}
        """Per engine connection: (bytes, rows) its statement has read of the files it reads."""
        self.told = (0, 0)
        self.total = sum(u.size for u in plan.load)

    def add(self, units: list[Unit]) -> None:
        with self.lock:
            self.files += len(units)
            self.settled_rows += sum(self.plan.results[u.key].rows_loaded for u in units)
            self.settled_bytes += sum(u.size for u in units)
            self.reading.clear()
            # A batch's own figures replace what was read of it (a sample read twice, rejects).
            self.told = (self.told[0], self.settled_rows)
            self._tell()

    def live(self, connection: int, payload: Mapping[str, int]) -> None:
        """The engine's progress of a statement. Only reads of files count (their total bytes
        are known; reads of tables are the books and counts), each capped at its files' size
        (a compressed file's read bytes can pass it)."""
        total = int(payload.get("total_bytes_to_read", 0))
        if total <= 0:
            return
        with self.lock:
            self.reading[connection] = (min(int(payload.get("read_bytes", 0)), total), int(payload.get("read_rows", 0)))
            self._tell()

    def _tell(self) -> None:
        """Bytes never go backwards; rows read give way to the rows loaded when a batch is done."""
        if not self.ctx.progress:
            return
        total = self.total
        live_bytes = self.settled_bytes + sum(b for b, _ in self.reading.values())
        live_rows = self.settled_rows + sum(r for _, r in self.reading.values())
        told_bytes, told_rows = self.told
        self.told = (max(told_bytes, min(live_bytes, total)), max(told_rows, live_rows))
        self.ctx.progress(self.files, self.told[1], self.told[0])
