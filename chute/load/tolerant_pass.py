"""Dirty JSON lines in one pass: bad records skipped by the engine and kept as rejects.

Local JSON-lines files into the embedded engine, with provenance in a stage
table whose `_source_row` can be mended, tried once per batch (chute.load.tolerant
has the engine-side pieces). When lines and records do not reconcile, nothing is
written and the files take the careful pass.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from chute.errors import ChuteError, SourceError, UsageError
from chute.load.careful import RAW, RAW_LIMIT, REASON, ROW, check_json_lines
from chute.load.checks.missing import SENTINEL_TEXT
from chute.load.commit import Commit
from chute.load.context import LoadContext, without_overflow_check
from chute.load.outcome import Plan, batch_label, done, fail, record_missing
from chute.load.reads import UNFIT_ROW, Reads
from chute.load.recovery import UNKNOWN_FIELD
from chute.load.rejects import REJECT_COLUMNS, ErrorBudget
from chute.load.sizing import Sizing
from chute.load.tolerant import SKIP_ERRORS, ErrorFiles, kept_row_to_position, scratch_path
from chute.sql import TableName, quote_str
from chute.targets.staging import MASK_COLUMN, CommitCheck
from chute.units import Unit


class Unreconciled(Exception):
    """A dirty batch whose skipped records cannot be told apart for sure: careful pass instead."""


class TolerantPass:
    def __init__(self, ctx: LoadContext, reads: Reads, sizing: Sizing, commit: Commit) -> None:
        self.ctx = ctx
        self.reads = reads
        self.sizing = sizing
        self.commit = commit

    def fits(self, batch: list[Unit], exc: ChuteError) -> bool:
        """Local JSON-lines files into the embedded engine, with provenance in a stage
        table whose `_source_row` can be mended, tried once: see chute/tolerant.py."""
        return (
            not self.ctx.opts.strict
            and all(u.fmt.format == "JSONEachRow" and not u.is_range and "://" not in u.key for u in batch)
            and not self.ctx.is_server()
            and self.ctx.fill_provenance
            and self.ctx.info.stageable
            and "_source_row" not in self.ctx.info.sorting_key
            and not isinstance(exc, (SourceError, UsageError))
            and not UNKNOWN_FIELD.search(str(exc))
            and not any(u.key in self.ctx.tolerant_tried for u in batch)
            and all(self.ctx.source.unchanged(u) for u in batch)
        )

    def run(self, batch: list[Unit], plan: Plan) -> bool:
        """Load a dirty batch in one pass that skips bad records; False (nothing written)
        when something does not reconcile and the files must take the careful way."""
        self.ctx.tolerant_tried.update(u.key for u in batch)
        errors = ErrorFiles.for_keys([u.key for u in batch])
        outcome: dict[str, Any] = {}
        # The flag of a row whose values do not fit reads the columns, not the SELECT's aliases.
        settings = {**self.sizing.settings(batch), **SKIP_ERRORS, "prefer_column_name_to_alias": 1}
        counting = self.reads.counting(batch)
        # As on the fast path: read first without the count (it costs a quarter more CPU and
        # more in wall time); a missing value fails that read, and the batch is read again
        # with the count (chute.load.checks.missing.sentinel).
        probe = counting and self.reads.probing(batch)
        counting = counting and not probe
        selects = [self.reads.flagged_select(batch, lambda u, sql: errors.wrap(u.key, sql, settings), counting, probe)]
        missing: dict[str, tuple[int, int]] | None = {} if counting else None
        value_missing = False
        try:
            self.ctx.target.write_batch(
                self.ctx.table,
                self.ctx.insert_columns() + ([MASK_COLUMN] if counting else []),
                selects,
                settings,
                count_by_source=True,
                context=f"{batch_label(batch)}, skipping bad rows",
                before_commit=self._check(batch, errors, outcome),
                missing=missing,
            )
        except Unreconciled:
            return False
        except ChuteError as exc:
            if not (probe and SENTINEL_TEXT in str(exc)):
                if not exc.terminal:
                    raise
                return False  # (an overflow the SELECT's exact casts refuse, say): the careful pass
            value_missing = True
        finally:
            errors.remove()
        if value_missing:
            with self.ctx.lock:
                self.ctx.with_missing.update(u.key for u in batch)
                self.ctx.missing_formats.update(u.fmt.format for u in batch)
            return self.run(batch, plan)  # (read again, with the count)
        record_missing(self.ctx, batch, missing)
        self._settle(batch, plan, outcome["counts"], outcome["rejected"], outcome["over"])
        return True

    def _check(self, batch: list[Unit], errors: ErrorFiles, outcome: dict[str, Any]) -> CommitCheck:
        """Before the commit: the skipped records kept as rejects, the kept rows renumbered by line,
        files over --max-errors taken out of the stage; what happened goes into `outcome`."""
        by_key = {u.key: u for u in batch}

        def check(stage: TableName | None, counts: dict[str, int]) -> None:
            self.commit.unchanged_check(batch)(stage, counts)
            assert stage is not None
            target = self.ctx.target
            skipped = {k: v for k, v in errors.positions(target.engine).items() if v}
            unfit = self._unfit(stage, skipped)
            if unfit:
                unfit_rows = f"DELETE WHERE _source_row >= {UNFIT_ROW}"
                target.mutate(stage, unfit_rows, "removing rows whose values do not fit")
                for key, positions in unfit.items():
                    counts[key] = counts.get(key, 0) - len(positions)
            bad = {k: sorted(skipped.get(k, []) + unfit.get(k, [])) for k in set(skipped) | set(unfit)}
            rejected = self._keep_rejects(bad, counts, by_key) if bad else {}
            if skipped:
                dirty = ", ".join(quote_str(k) for k in skipped)
                numbers = f"UPDATE _source_row = {kept_row_to_position(skipped)} WHERE _source IN ({dirty})"
                target.mutate(stage, numbers, "numbering the kept rows")
            budget = ErrorBudget.parse(self.ctx.opts.max_errors)
            over = {k: why for k, n in rejected.items() if (why := budget.over(n, n + counts.get(k, 0))) is not None}
            if over:
                keys = ", ".join(quote_str(k) for k in over)
                target.mutate(stage, f"DELETE WHERE _source IN ({keys})", "removing files over --max-errors")
            outcome.update(counts=counts, rejected=rejected, over=over)

        return check

    def _unfit(self, stage: TableName, skipped: dict[str, list[int]]) -> dict[str, list[int]]:
        """Key -> the line positions of the rows the parser kept but whose values do not fit
        (flagged by UNFIT_ROW; few: the error budget bounds them). Their `_source_row` is
        their number among the kept records, so the skipped records before them are added."""
        found = self.ctx.target.engine.rows(
            f"SELECT _source AS s, arraySort(groupArray(_source_row - {UNFIT_ROW})) AS kept "
            f"FROM {stage.sql} WHERE _source_row >= {UNFIT_ROW} GROUP BY _source"
        )
        unfit: dict[str, list[int]] = {}
        for got in found:
            before = skipped.get(str(got["s"]), [])
            shifted = [b - i for i, b in enumerate(before, start=1)]
            unfit[str(got["s"])] = [int(g) + sum(1 for x in shifted if x < int(g)) for g in got["kept"]]
        return unfit

    def _settle(
        self, batch: list[Unit], plan: Plan, counts: dict[str, int], rejected: dict[str, int], over: dict[str, str]
    ) -> None:
        """Results and ledger rows: files over --max-errors failed, the others done."""
        for unit in batch:
            if unit.key in over:
                message = (
                    f"{unit.key}: {over[unit.key]}; nothing of the file was loaded (see table {self.ctx.rejects.name})"
                )
                fail(self.ctx, unit, message, plan, rejected=rejected.get(unit.key, 0))
        loaded = [u for u in batch if u.key not in over]
        if loaded:
            done(
                self.ctx,
                loaded,
                plan,
                rows={u.key: counts.get(u.key, 0) for u in loaded},
                rejected={u.key: rejected.get(u.key, 0) for u in loaded},
            )

    def _keep_rejects(self, bad: dict[str, list[int]], kept: dict[str, int], by_key: dict[str, Unit]) -> dict[str, int]:
        """Read the skipped records back by line number, give each its reason, keep them in
        the rejects table; rejected rows per file. Raises Unreconciled when lines and
        records disagree (blank lines, or counts that do not add up)."""
        engine = self.ctx.target.engine
        texts, sources, rows = self._skipped(bad, kept, by_key)
        path = scratch_path()
        try:
            with open(path, "wb") as out:
                out.write(b"".join(t + b"\n" for t in texts))
            checked = check_json_lines(
                engine,
                f"file({quote_str(path)}, 'LineAsString', 'line String')",
                self.ctx.input_columns(),
                {"max_threads": 1},
                without_overflow_check(self.ctx.format_settings()),
            )
        finally:
            os.remove(path)
        try:
            if checked.total != checked.rejected:
                # A record the wide read refused is good by the checks (`1e2` for an Int64): only
                # the careful pass loads it (checks.column.fast_read, `whole_numbers`).
                raise Unreconciled("a skipped record is good")
            self.ctx.rejects.ensure()
            for key in bad:
                self.ctx.rejects.clear(by_key[key].source_name)
            self._write_rejects(checked.table, sources, rows)
        finally:
            checked.drop(engine)
        return {key: len(positions) for key, positions in bad.items()}

    def _skipped(
        self, bad: dict[str, list[int]], kept: dict[str, int], by_key: dict[str, Unit]
    ) -> tuple[list[bytes], list[str], list[int]]:
        """The skipped records' texts, with the `_source` and line number of each."""
        reads = []
        for key, positions in bad.items():
            lines = self.ctx.source.table_expression(by_key[key], "line String", "LineAsString")
            # Lines = kept + skipped records proves there are no blank lines (the parser skips
            # those without counting them); empty ones are counted to be sure.
            reads.append(
                f"SELECT {quote_str(key)} AS f, count() AS n, countIf(line = '') AS blanks, "
                "arrayMap(x -> base64Encode(x), groupArrayIf(line, (_row_number + 1) IN "
                f"({', '.join(map(str, positions))}))) AS bad FROM {lines}"
            )
        found = self.ctx.target.engine.rows(
            " UNION ALL ".join(reads),
            {"max_threads": self.ctx.workers, "input_format_parallel_parsing": 0},
            context="reading the skipped records",
        )
        texts: list[bytes] = []
        sources: list[str] = []
        rows: list[int] = []
        for got in found:
            key, positions = str(got["f"]), bad[str(got["f"])]
            lines_off = int(got["n"]) != kept.get(key, 0) + len(positions)
            if int(got["blanks"]) or lines_off or len(got["bad"]) != len(positions):
                raise Unreconciled(key)
            texts += [base64.b64decode(t) for t in got["bad"]]
            sources += [by_key[key].source_name] * len(positions)
            rows += positions
        return texts, sources, rows

    def _write_rejects(self, checked: TableName, sources: list[str], rows: list[int]) -> None:
        types = self.ctx.rejects.types()
        source_list = "[" + ", ".join(quote_str(s) for s in sources) + "]"
        row_list = "[" + ", ".join(map(str, rows)) + "]"
        self.ctx.target.write_batch(
            self.ctx.rejects.name,
            REJECT_COLUMNS,
            [
                f"SELECT CAST(arrayElement({source_list}, {ROW}), {quote_str(types['_source'])}) AS _source, "
                f"CAST(arrayElement({row_list}, {ROW}), {quote_str(types['_source_row'])}) AS _source_row, "
                f"substring({RAW}, 1, {RAW_LIMIT}) AS raw, "
                f"{REASON} AS error, "
                f"CAST({quote_str(self.ctx.load_id)}, {quote_str(types['_load_id'])}) AS _load_id, "
                f"CAST(now64(3), {quote_str(types['at'])}) AS at FROM {checked.sql}"
            ],
            {"max_threads": 1},
            count_by_source=False,
            context="writing rejects",
        )
