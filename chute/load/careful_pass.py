"""The careful pass of one text file: its good rows into the table, every bad one kept as a reject.

The engine does the row work (chute.load.careful); this part writes the two
sets, applies --max-errors, and records the outcome.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from chute.load.careful import RAW, REASON, ROW, CheckedRows, check_json_lines
from chute.load.careful_delimited import check_delimited
from chute.load.checks.missing import computed, watched
from chute.load.checks.reasons import unfit
from chute.load.checks.types import strip_wrappers
from chute.load.commit import Commit
from chute.load.context import LoadContext, without_overflow_check
from chute.load.outcome import Plan, done, fail, record_missing
from chute.load.reads import UNFIT_ROW, Reads
from chute.load.rejects import REJECT_COLUMNS, ErrorBudget
from chute.load.sizing import Sizing
from chute.schema import Column, structure
from chute.sources.base import RowPositions
from chute.sql import internal, quote_ident, quote_str
from chute.targets.staging import MASK_COLUMN
from chute.units import Unit


class CarefulPass:
    def __init__(self, ctx: LoadContext, reads: Reads, commit: Commit) -> None:
        self.ctx = ctx
        self.reads = reads
        self.commit = commit

    def row_of(self, unit: Unit) -> Callable[[str], str]:
        """`_source_row` from a record's 1-based position in the unit, as the careful pass counts."""
        if isinstance(self.ctx.source, RowPositions):
            return functools.partial(self.ctx.source.row_at_position, unit)
        offset = self.ctx.row_offsets.get(unit.key, 0)
        return (lambda row: f"{row} + {offset}") if offset else str

    def run(self, unit: Unit, plan: Plan) -> None:
        """Load the good rows of `unit`; keep every bad one in the rejects table."""
        ctx = self.ctx
        if not unit.fmt.is_text:
            self._run_typed(unit, plan)
            return
        checked = self._checked(unit)
        try:
            ctx.rejects.ensure()
            if not unit.is_range:  # a range's earlier rejects went with remove_rows
                ctx.rejects.clear(unit.key)
            if checked.rejected:
                self._write_rejects(unit, checked)
            over = ErrorBudget.parse(ctx.opts.max_errors).over(checked.rejected, checked.total)
            if over is not None:
                message = f"{unit.key}: {over}; nothing of the file was loaded (see table {ctx.rejects.name})"
                fail(ctx, unit, message, plan, rejected=checked.rejected)
                return
            counts = self._write_good(unit, checked)
        finally:
            checked.drop(ctx.target.engine)
        rows = sum(counts.values())
        done(ctx, [unit], plan, rows={unit.key: rows}, rejected={unit.key: checked.rejected})

    def _checked(self, unit: Unit) -> CheckedRows:
        """Every record of the unit checked by the engine: good and bad in a scratch table."""
        ctx = self.ctx
        inputs = ctx.input_columns()
        engine = ctx.target.engine
        # Ranges of dates are checked value by value here, never by the parser.
        read_settings = without_overflow_check(ctx.format_settings())
        settings = {**read_settings, "max_threads": ctx.workers}
        lines = ctx.source.table_expression(unit, "line String", "LineAsString")
        # A format said (--format, an export's manifest): NUL bytes are text.
        given = ctx.opts.format is not None or ctx.source.declared_columns(unit) is not None
        if unit.fmt.format == "JSONEachRow":
            counting = self.reads.counting([unit])
            return check_json_lines(engine, lines, inputs, settings, read_settings, counting, given)
        # TSV: `\N` is NULL, an empty field the empty string. CSV: a Nullable text column's
        # unquoted empty field is NULL and its quoted `""` the empty string, as the fast path's
        # parser has them; other CSV fields are read as text alike.
        tsv = unit.fmt.format == "TSV"
        # (A DEFAULT expression's column too: a field the header lacks is then told from an empty one.)
        text_columns = [
            Column(
                c.name,
                "Nullable(String)" if tsv or strip_wrappers(c.type) == ("String", True) or computed(c) else "String",
            )
            for c in inputs
        ]
        delimiter = ctx.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
        expression = ctx.source.table_expression(unit, structure(text_columns))
        watched_at = tuple(i for i, c in enumerate(inputs) if watched(c, unit.fmt.format))
        return check_delimited(
            engine,
            expression,
            lines,
            inputs,
            delimiter,
            settings,
            header_lines=None if ctx.opts.header is None else int(ctx.opts.header),
            watched_at=watched_at,
            nul_ok=given,
        )

    def _write_rejects(self, unit: Unit, checked: CheckedRows) -> None:
        ctx = self.ctx
        types = ctx.rejects.types()
        ctx.target.write_batch(
            ctx.rejects.name,
            REJECT_COLUMNS,
            [checked.rejects_select(unit.source_name, ctx.load_id, types, self.row_of(unit))],
            {"max_threads": 1},
            count_by_source=False,
            context=f"{unit.key}: writing rejects",
        )

    def _write_good(self, unit: Unit, checked: CheckedRows) -> dict[str, int]:
        ctx = self.ctx
        settings: dict[str, str | int | float] = {
            "max_threads": ctx.workers,
            "max_insert_threads": ctx.workers,
            # (a wide table's parts as the fast path writes them: compact near the open-files limit)
            **Sizing(ctx, self.reads).part_writer_settings(ctx.workers),
        }
        counting = self.reads.counting([unit])
        provenance = functools.partial(self.reads.provenance, unit)
        good = [checked.good_select(ctx.input_columns(), provenance, self.row_of(unit), count_missing=counting)]
        missing: dict[str, tuple[int, int]] | None = {} if counting else None
        counts = ctx.target.write_batch(
            ctx.table,
            ctx.insert_columns() + ([MASK_COLUMN] if counting else []),
            self.reads.grouped(good, settings),
            settings,
            count_by_source=False,
            context=unit.key,
            before_commit=self.commit.unchanged_check([unit], by_line=True),
            missing=missing,
        )
        record_missing(ctx, [unit], missing)
        return counts

    # -- typed files (Parquet, ORC, Arrow, Native) ----------------------------

    def _run_typed(self, unit: Unit, plan: Plan) -> None:
        """A typed file (or database range) with values that do not fit their columns (Reads.checked_read):
        the rows whose values fit load; the others go to the rejects table, each with its
        values as a JSON object and the first column that does not fit. Two reads of the
        file, nothing held in memory: the rows are told apart by the same check."""
        ctx = self.ctx
        read_as, _, fits = self.reads.typed_columns(unit, flag_unfit=True)
        row = self.reads.row_number(unit, parallel=False)
        settings: dict[str, str | int | float] = {
            "max_threads": 1,
            "prefer_column_name_to_alias": 1,
            "enable_optimize_predicate_expression": 0,
        }
        table = ctx.source.table_expression(unit, structure(read_as), ctx.format_name(unit))
        reasons = self._typed_reasons(unit, read_as)
        raw = f"formatRowNoNewline('JSONEachRow', {', '.join(quote_ident(c.name) for c in read_as)})"
        # Numbered before the filter (rowNumberInAllBlocks() counts the rows it sees).
        fit = internal("fits")
        bad = (
            f"SELECT {ROW}, {RAW}, {REASON} FROM (SELECT ({row}) AS {ROW}, {raw} AS {RAW}, {reasons} AS {REASON}, "
            f"{' AND '.join(fits) or '1'} AS {fit} FROM {table}) WHERE NOT {fit}"
        )
        counted = ctx.target.engine.rows(
            f"SELECT count() AS n, countIf(NOT ({' AND '.join(fits) or '1'})) AS bad FROM {table}",
            settings,
            context=f"{unit.key}: checking values",
        )[0]
        total, rejected = int(counted["n"]), int(counted["bad"])
        ctx.rejects.ensure()
        ctx.rejects.clear(unit.key)
        if rejected:
            types = ctx.rejects.types()
            ctx.target.write_batch(
                ctx.rejects.name,
                REJECT_COLUMNS,
                [
                    f"SELECT CAST({quote_str(unit.source_name)}, {quote_str(types['_source'])}) AS _source, "
                    f"CAST({ROW}, {quote_str(types['_source_row'])}) AS _source_row, {RAW} AS raw, "
                    f"ifNull({REASON}, 'a value does not fit the table') AS error, "
                    f"CAST({quote_str(ctx.load_id)}, {quote_str(types['_load_id'])}) AS _load_id, "
                    f"CAST(now64(3), {quote_str(types['at'])}) AS at FROM ({bad})"
                ],
                settings,
                count_by_source=False,
                context=f"{unit.key}: writing rejects",
            )
        over = ErrorBudget.parse(ctx.opts.max_errors).over(rejected, total)
        if over is not None:
            fail(ctx, unit, f"{unit.key}: {over}; nothing of the file was loaded (see table {ctx.rejects.name})", plan)
            return
        counting = self.reads.counting([unit])
        read = self.reads.select_sql([unit], flag_unfit=True, count_missing=counting)
        if ctx.fill_provenance:
            good = f"SELECT * FROM ({read}) WHERE _source_row < {UNFIT_ROW}"
        else:
            # No `_source_row` to carry the flag: the rows that fit, by the same check (the
            # names in WHERE are the file's columns: prefer_column_name_to_alias).
            good = f"{read} WHERE {' AND '.join(fits) or '1'}"
        missing: dict[str, tuple[int, int]] | None = {} if counting else None
        counts = ctx.target.write_batch(
            ctx.table,
            ctx.insert_columns() + ([MASK_COLUMN] if counting else []),
            [good],
            {**settings, **Sizing(ctx, self.reads).part_writer_settings(1)},
            count_by_source=False,
            context=unit.key,
            before_commit=self.commit.unchanged_check([unit], by_line=True),
            missing=missing,
        )
        record_missing(ctx, [unit], missing)
        done(ctx, [unit], plan, rows={unit.key: sum(counts.values())}, rejected={unit.key: rejected})

    def _typed_reasons(self, unit: Unit, read_as: list[Column]) -> str:
        """Why a row of a typed file does not fit: the first column whose value does not."""
        parts = []
        for column, read in zip(self.ctx.input_columns(), read_as, strict=True):
            fast = self.reads.checked_read(unit, column)
            if fast is None:
                continue
            shown = f"substring(toString({quote_ident(read.name)}), 1, 200)"
            parts.append(f"NOT {fast.fits}, {unfit(column.name, shown, strip_wrappers(column.type)[0])}")
        return f"multiIf({', '.join(parts)}, 'a value does not fit the table')" if parts else "''"
