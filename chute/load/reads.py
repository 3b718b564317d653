"""The SQL that reads units: SELECTs with the table's exact types, provenance and row numbers."""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from chute.engine import Settings
from chute.errors import ChuteError
from chute.load.checks.column import checked_read, read_as_text_by
from chute.load.checks.missing import (
    COUNTED_FORMATS,
    INPUT_ALIAS,
    PROBED_FORMATS,
    SENTINEL_TEXT,
    mask_sql,
    not_null,
    nullable_read,
    sentinel,
    text_missing,
    watched,
    without_nullable,
)
from chute.load.checks.typed import WIDE_READ_FORMATS
from chute.load.checks.typed import text_read as typed_text_read
from chute.load.checks.types import FastRead, plus_check, strip_wrappers
from chute.load.context import LoadContext
from chute.load.nullfree import NullFree
from chute.schema import Column, structure
from chute.sources.base import CheckedRead, CheckedValues, table_function
from chute.sql import quote_ident, quote_str
from chute.targets.staging import MASK_COLUMN, SOURCE_COLUMN
from chute.units import Unit

if TYPE_CHECKING:
    from chute.load.squash import Squash

ROW_FIX_BLOCK = 8192
"""Rows per parsed block for CSV/TSV with a header under parallel parsing (see `Reads.row_number`)."""
UNFIT_ROW = 2**62
"""Added to the `_source_row` of a row whose values do not fit, where such rows are flagged."""
SAMPLE_ROWS = 2000
"""Rows of a batch's first file read to tell whether its files miss values (Reads.probing)."""
PARSE_SEGMENT_BYTES = 10 * 2**20
"""The engine's min_chunk_bytes_for_parallel_parsing: the size of its first parsed segment."""


class Reads:
    """Builds the SELECTs of a load; reads nothing itself."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self._file_types: dict[str, dict[str, str]] = {}
        self._file_types_lock = threading.Lock()
        self.null_free = NullFree(ctx)

    # -- row numbers ----------------------------------------------------------

    def row_fix(self, batch: list[Unit]) -> bool:
        """CSV/TSV that may be parsed in parallel: row numbers checked (and if need
        be mended) in the stage table before the rows move in."""
        ctx = self.ctx
        return (
            ctx.fill_provenance
            and ctx.info.stageable
            and "_source_row" not in ctx.info.sorting_key
            and all(u.fmt.format in ("CSV", "TSV") for u in batch)
        )

    def parallel_parsing(self, batch: list[Unit]) -> bool:
        ctx = self.ctx
        # Many files already keep every core busy; parallel parsing then only costs.
        if len(batch) >= ctx.workers or any(u.key in ctx.serial_parse for u in batch):
            return False
        # The engine's _row_number of CSV/TSV with a header is off under parallel
        # parsing: on only where the stage check can catch and mend it.
        return not (ctx.fill_provenance and batch[0].fmt.format in ("CSV", "TSV")) or self.row_fix(batch)

    def row_number(self, unit: Unit, parallel: bool, block: int = ROW_FIX_BLOCK) -> str:
        """SQL for the row's number in its file.

        Parsing a CSV/TSV file with a header in parallel, the engine numbers the
        rows of the file's first block from 0 and later rows from 1 (the header
        line counts there). With blocks of `block` rows the first block holds
        block - 1 rows (the header takes a slot), so each row can be numbered
        right as it is read; the stage check verifies it.
        """
        if parallel and unit.key in self.ctx.named and self.ctx.fill_provenance:
            return f"_row_number + if(_row_number < {block - 1}, 1, 0)"
        return self.ctx.source.row_number_expression(unit)

    def first_block(self, batch: list[Unit]) -> int:
        """Rows per parsed block, small enough that a file's first block ends
        inside the parser's first segment (10 MiB), half of it to be safe."""
        widest = max((self.ctx.line_bytes.get(u.key, 1.0) for u in batch), default=1.0)
        return max(64, min(ROW_FIX_BLOCK, int(PARSE_SEGMENT_BYTES / widest / 2)))

    # -- SELECTs --------------------------------------------------------------

    def provenance(self, unit: Unit, row_expression: str) -> dict[str, tuple[str, str]]:
        """Provenance column -> (SQL, the table's exact type); empty when not filled."""
        ctx = self.ctx
        if not ctx.fill_provenance:
            return {}
        types = {c.name: c.type for c in ctx.info.columns}
        offset = ctx.row_offsets.get(unit.key, 0)
        values = {
            "_source": quote_str(unit.source_name),
            "_source_mtime": f"fromUnixTimestamp64Nano({unit.mtime_ns}, 'UTC')",
            "_source_row": f"({row_expression}) + {offset}" if offset else row_expression,
            "_load_id": quote_str(ctx.load_id),
        }
        wanted = set(values) | set(ctx.extra_filled())
        values.update({k: v for k, v in ctx.source.provenance_expressions(unit, row_expression).items() if k in wanted})
        return {name: (expr, types[name]) for name, expr in values.items()}

    def constants(self, batch: list[Unit]) -> dict[str, str]:
        """Provenance columns of type String with one value for the whole batch (see
        Target.write_batch): the load id, and a single file's name where it is a literal."""
        unit = batch[0]
        constant = {"_load_id": quote_str(self.ctx.load_id)}
        if len(batch) == 1:
            constant["_source"] = quote_str(unit.source_name)
        return {
            name: expr
            for name, (expr, t) in self.provenance(unit, "0").items()
            if t == "String" and constant.get(name) == expr
        }

    def counting(self, batch: list[Unit]) -> bool:
        """Whether the batch's missing values are counted (chute.load.checks.missing): its format can
        hold them, the table has columns that take a default for them, and it loads through a
        stage table (which holds the mask until it is counted)."""
        ctx = self.ctx
        if not ctx.info.stageable or not all(u.fmt.format in COUNTED_FORMATS for u in batch):
            return False
        columns = [c for c in ctx.input_columns() if any(watched(c, u.fmt.format) for u in batch)]
        return bool(columns) and not self.null_free.all_free(batch, columns)

    def probing(self, batch: list[Unit]) -> bool:
        """Whether a counted batch is read first without the count (chute.load.checks.missing.PROBED_FORMATS):
        none of its units is known to miss a value, no earlier batch of its format missed one,
        and the first lines of its first file miss none.

        A probe that fails costs a second read of the batch (0.84 s of a 1.98 s load of real
        API dumps, where keys are often absent); a sample of the first lines tells such files
        for a few milliseconds, once per format and load."""
        ctx = self.ctx
        if not all(u.fmt.format in PROBED_FORMATS and u.key not in ctx.with_missing for u in batch):
            return False
        fmt = batch[0].fmt.format
        if fmt in ctx.missing_formats:
            return False
        with ctx.lock:
            sample = fmt not in ctx.sampled_formats
            ctx.sampled_formats.add(fmt)
        if sample and self.sample_misses(batch[0]):
            with ctx.lock:
                ctx.missing_formats.add(fmt)
            return False
        return True

    def sample_misses(self, unit: Unit) -> bool:
        """Whether the first SAMPLE_ROWS rows of `unit` miss a value in a watched column (read as
        the counted read does). A sample that cannot be read says nothing: False."""
        select = self.select_sql([unit], count_missing=True)
        sql = (
            f"SELECT toUInt64(countIf({quote_ident(MASK_COLUMN)} != 0)) AS n "
            f"FROM (SELECT {quote_ident(MASK_COLUMN)} FROM ({select}) LIMIT {SAMPLE_ROWS})"
        )
        settings = {
            **self.ctx.format_settings(),
            "max_threads": 1,
            "input_format_parallel_parsing": 0,
            "max_block_size": SAMPLE_ROWS,
        }
        try:
            rows = self.ctx.target.engine.rows(sql, settings, context=f"{unit.key}: sampling")
        except ChuteError:
            return False
        return bool(rows and int(rows[0]["n"]))

    def selects(
        self,
        batch: list[Unit],
        count_missing: bool = False,
        probe: bool = False,
        tagged: bool = False,
        squash: Squash | None = None,
    ) -> list[str]:
        """The SELECTs that read a batch: one per stream the target takes (`tagged`: with each
        row's file in staging.SOURCE_COLUMN, for a table without `_source`).

        Files of one directory and format are read by a single file() call over
        their names (as `file('dir/*.json.gz')` would), which the engine
        schedules better than a UNION ALL of one call per file.
        """
        parallel, block = self.parallel_parsing(batch), self.first_block(batch)
        streams = min(max(1, self.ctx.target.parallel_streams // self.ctx.lanes), len(batch))
        selects: list[str] = []
        for group in (batch[i::streams] for i in range(streams)):
            by_format: dict[str, list[Unit]] = {}
            for unit in group:
                by_format.setdefault(self.ctx.format_name(unit), []).append(unit)
            for fmt_name, units in by_format.items():
                combined = self.ctx.source.combined_expression(units, "", fmt_name) if len(units) > 1 else None
                read = functools.partial(
                    self.select_sql,
                    parallel=parallel,
                    block=block,
                    count_missing=count_missing,
                    probe=probe,
                    squash=squash,
                )
                if combined is None:
                    selects.extend(read([u], tagged=tagged) for u in units)
                else:
                    selects.append(read(units, tagged=tagged))
        return selects

    def select_sql(
        self,
        units: list[Unit],
        parallel: bool = False,
        block: int = ROW_FIX_BLOCK,
        fmt_name: str | None = None,
        row_expression: str | None = None,
        fd: int | None = None,
        flag_unfit: bool = False,
        count_missing: bool = False,
        probe: bool = False,
        tagged: bool = False,
        squash: Squash | None = None,
    ) -> str:
        """Read `units` (one, or several that one file() call can read) with the table's types;
        with `fd`, the one unit's bytes from that descriptor (see `range_fd`). With
        `flag_unfit` (one unit), a row whose values do not fit its columns is kept, not
        refused, with UNFIT_ROW added to its `_source_row` (see chute.load.tolerant_pass).
        With `count_missing`, the last column is the mask of the row's missing values
        (chute.load.checks.missing). With `probe` (and no count), a missing value in a watched column
        fails the read (checks.missing.sentinel). With `tagged`, the column before the mask is each
        row's file (staging.SOURCE_COLUMN), whether or not the table keeps provenance. With `squash`,
        several units are read from a temporary table it fills from their file() call
        (chute.load.squash)."""
        unit = units[0]
        flags: list[tuple[int, str]] | None = [] if count_missing else None
        read_as, exprs, fits = self.typed_columns(unit, flag_unfit, flags, probe and not count_missing)
        fmt_name = fmt_name or self.ctx.format_name(unit)
        row = row_expression or self.row_number(unit, parallel, block)
        if flag_unfit and fits:
            assert len(units) == 1
            row = f"if({' AND '.join(fits)}, {row}, ({row}) + {UNFIT_ROW})"
        if len(units) == 1:
            table_expr = (
                self.ctx.source.table_expression(unit, structure(read_as), fmt_name)
                if fd is None
                else table_function("file", [str(fd)], fmt_name, structure(read_as), "none")
            )
            provenance = self.provenance(unit, row)
            source = quote_str(unit.source_name)
            if tagged:  # (a source may name its rows its own way)
                source = self.ctx.source.provenance_expressions(unit, row).get("_source", source)
        else:
            combined = self.ctx.source.combined_expression(units, structure(read_as), fmt_name)
            assert combined is not None
            table_expr, per_file = combined
            if squash is not None and per_file.get("_source") == "_path":
                table_expr = squash.table(table_expr, read_as)
            provenance = self.provenance(unit, self.row_number(unit, parallel, block))
            provenance = {name: (per_file.get(name, expr), t) for name, (expr, t) in provenance.items()}
            source = per_file["_source"]
        # Cast to the table's exact types: an old server may hold String, DateTime.
        exprs += [f"CAST({expr}, {quote_str(t)}) AS {name}" for name, (expr, t) in provenance.items()]
        if tagged:
            exprs.append(f"CAST({source}, 'String') AS {quote_ident(SOURCE_COLUMN)}")
        if flags is not None:
            exprs.append(mask_sql(flags, " AND ".join(fits) if flag_unfit and fits else None))
            table_expr += f" AS {INPUT_ALIAS}"
        return f"SELECT {', '.join(exprs)} FROM {table_expr}"

    def flagged_select(
        self, units: list[Unit], wrap: Callable[[Unit, str], str], count_missing: bool, probe: bool
    ) -> str:
        """One SELECT over `units` (JSON lines: one format, so one set of conversions) that keeps a
        row whose values do not fit, with UNFIT_ROW added to its `_source_row` (chute.load.tolerant_pass).

        Each unit is read by a small SELECT of its own (`wrap` gives it its own settings: its errors
        file), the raw columns and provenance; the conversions and checks are written once, over the
        UNION ALL of those. Written per unit, the engine analysed 20 copies of the checks: 1.5 CPU-s
        for a 20-file batch, as much as reading a third of its rows."""
        flags: list[tuple[int, str]] | None = [] if count_missing else None
        # Integers read wide: a whole number written `1e2` is refused, skipped, and sends the
        # batch to the careful pass (TolerantPass._keep_rejects); text reads cost every row.
        read_as, exprs, fits = self.typed_columns(units[0], True, flags, probe and not count_missing, False)
        raw = [quote_ident(c.name) for c in read_as]
        reads = []
        for unit in units:
            table_expr = self.ctx.source.table_expression(unit, structure(read_as), self.ctx.format_name(unit))
            provenance = self.provenance(unit, self.row_number(unit, False))
            named = [f"CAST({expr}, {quote_str(t)}) AS {name}" for name, (expr, t) in provenance.items()]
            reads.append(wrap(unit, f"SELECT {', '.join(raw + named)} FROM {table_expr}"))
        kept = " AND ".join(fits) if fits else None
        for name, (_, t) in self.provenance(units[0], "0").items():
            if name == "_source_row" and kept:
                exprs.append(f"CAST(if({kept}, _source_row, _source_row + {UNFIT_ROW}), {quote_str(t)}) AS _source_row")
            else:
                exprs.append(name)
        if flags is not None:
            exprs.append(mask_sql(flags, kept))
        return f"SELECT {', '.join(exprs)} FROM ({' UNION ALL '.join(reads)}) AS {INPUT_ALIAS}"

    def typed_columns(
        self,
        unit: Unit,
        flag_unfit: bool = False,
        flags: list[tuple[int, str]] | None = None,
        probe: bool = False,
        whole_numbers: bool | None = None,
    ) -> tuple[list[Column], list[str], list[str]]:
        """The structure to read the input with, the SELECT's column expressions, and (with
        `flag_unfit`: expressions that never fail) the conditions that the values fit. With
        `flags`, watched columns (chute.load.checks.missing) are read Nullable, their NULL taken as
        the default, and (column index, SQL: the value is missing) added to `flags`.
        `whole_numbers` (default: `flag_unfit`): see checks.column.fast_read."""
        inputs = self.ctx.input_columns()
        fmt = unit.fmt.format
        json = fmt == "JSONEachRow"
        read_as = list(inputs)
        exprs = []
        fits = []
        as_json = self.composites_as_text(unit)
        for i, col in enumerate(inputs):
            watch = flags is not None and watched(col, fmt)
            ident = quote_ident(col.name)
            if col.name in as_json:
                # An array, tuple or map of a typed file into a text column: its JSON text (a
                # server without Tuple inside Array holds `list<struct>` so). A composite value
                # is never missing: an absent list is an empty one.
                read_as[i] = Column(col.name, as_json[col.name], col.default_kind, col.default_expression)
                exprs.append(f"CAST(toJSONString({ident}), {quote_str(col.type)}) AS {ident}")
                continue
            whole = flag_unfit if whole_numbers is None else whole_numbers
            fast = self.checked_read(unit, col, counted=watch, whole_numbers=whole)
            if watch and flags is not None:
                if fast is None or fast.read_as.startswith("Nullable("):
                    flags.append((i, f"isNull({INPUT_ALIAS}.{ident})"))
                else:  # (CSV/TSV text: an empty field, or `\N`, is an empty string here)
                    flags.append((i, text_missing(f"{INPUT_ALIAS}.{ident}", json, False)))
            if fast is None and watch:
                read_as[i] = Column(col.name, nullable_read(col.type), col.default_kind, col.default_expression)
                exprs.append(f"{not_null(ident, col.type)} AS {ident}")
            elif fast is None:
                if probe and watched(col, fmt):
                    read_as[i] = Column(col.name, col.type, "DEFAULT", sentinel(col.type))
                elif fmt == "CSV" and col.type.startswith("LowCardinality("):
                    # The engine's LowCardinality CSV reader drops a value's leading spaces, even
                    # with input_format_csv_trim_whitespaces = 0: read the inner type.
                    read_as[i] = dataclasses.replace(col, type=col.type[len("LowCardinality(") : -1])
                exprs.append(ident)
            else:
                # Text parsers wrap, clamp and roll over values that do not fit: read wide or
                # as text, convert exactly (checks.column.fast_read).
                value = fast.lenient if flag_unfit else fast.value
                if probe and watched(col, fmt):
                    plain = without_nullable(fast.read_as)
                    read_as[i] = Column(col.name, plain, "DEFAULT", sentinel(plain))
                    if not json and read_as_text_by(fast):
                        # A field read as text takes no default where it is empty (TSV, a quoted
                        # CSV ""), yet converts to one: that fails the read as the sentinel does.
                        inner = strip_wrappers(col.type)[0]
                        missing = text_missing(ident, False, False)
                        checked = plus_check(value, missing, inner, quote_str(SENTINEL_TEXT))
                        value = f"CAST({checked}, {quote_str(col.type)})"
                else:
                    read_as[i] = Column(col.name, fast.read_as, col.default_kind, col.default_expression)
                exprs.append(f"{value} AS {ident}")
                fits.append(fast.fits)
        return read_as, exprs, fits

    def composites_as_text(self, unit: Unit) -> dict[str, str]:
        """Columns of a typed file (Parquet, ORC, Arrow, Native) that hold an array, tuple or map
        where the table has text: column -> the file's own type, read as that and written as its
        JSON text. The engine's readers refuse such a column as String ([53] TYPE_MISMATCH). The
        file's schema (its footer) is read once per unit, only where the table has a text column
        (never for database rows or Kafka messages: their formats are not these)."""
        texts = {c.name for c in self.ctx.input_columns() if without_nullable(c.type) == "String"}
        if unit.fmt.format not in WIDE_READ_FORMATS or not texts or unit.is_range:
            return {}
        with self._file_types_lock:
            known = self._file_types.get(unit.key)
        if known is None:
            described = self.ctx.target.engine.rows(
                f"DESCRIBE TABLE {self.ctx.source.table_expression(unit, None, unit.fmt.format)}",
                context=unit.key,
            )
            known = {str(r["name"]): str(r["type"]) for r in described}
            with self._file_types_lock:
                self._file_types[unit.key] = known
        return {
            name: t
            for name, t in known.items()
            if name in texts and re.match(r"(Nullable\()?(Array|Tuple|Map|Nested)\(", t)
        }

    def checked_read(
        self, unit: Unit, col: Column, counted: bool = False, whole_numbers: bool = False
    ) -> FastRead | CheckedRead | None:
        """How the fast path reads a column whose values the engine's reader could change (see
        chute.load.checks.column): text files (`fast_read`), typed files (`binary_read`), or what the
        source says (`CheckedValues`: a database's timestamps, dates and numerics); None: as it is.
        `counted`: a missing value shows as NULL in the column read (see checks.column.fast_read)."""
        source = self.ctx.source
        if isinstance(source, CheckedValues) and not unit.fmt.is_text:
            return source.checked_read(unit, col.name, col.type)
        if col.name in self.ctx.text_reads.get(unit.key, ()):
            return typed_text_read(col.name, col.type)  # (a type the reader would change: see checks.typed.lossy)
        fmt = unit.fmt
        return checked_read(col.name, col.type, fmt.format, fmt.is_text, col.null_marker, counted, whole_numbers)

    # -- partition order ------------------------------------------------------

    def sortable_partition(self) -> bool:
        """A PARTITION BY that the SELECT can sort by.

        The key may name columns the table computes itself (MATERIALIZED, DEFAULT
        not given): those are not in the SELECT; such an insert goes unsorted.
        """
        key = self.ctx.info.partition_key
        if not key:
            return False
        named = {quoted or plain for quoted, plain in re.findall(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)", key)}
        table_names = {c.name for c in self.ctx.info.columns}
        return not (named & table_names) - set(self.ctx.insert_columns())

    def grouped(self, selects: list[str], settings: dict[str, str | int | float]) -> list[str]:
        """Rows in partition order, so each insert block touches few partitions.

        Unsorted input (events out of time order into a table partitioned by day)
        would otherwise give every block a part in hundreds of partitions: the
        insert fails past `max_partitions_per_insert_block`, or leaves thousands
        of small parts to merge. Sorted, a partition gets one part (two where an
        insert block ends inside it). The sort spills to local disk, so memory
        stays bounded whatever the file's size (`sort_settings`).
        """
        if not self.sortable_partition():
            return selects
        limit = self.ctx.opts.memory_bytes
        block = int(settings.get("min_insert_block_size_bytes", limit))
        settings.update(sort_settings(limit, int(settings.get("max_threads", 1))))
        settings["min_insert_block_size_bytes"] = min(block, int(settings["min_insert_block_size_bytes"]))
        return [f"SELECT * FROM ({select}) ORDER BY {self.ctx.info.partition_key}" for select in selects]


SORT_SHARE = 4
"""The sort of a partition-aware load holds at most the budget divided by this, over all its
streams: each stream spills on its own, and what it holds when reading ends stays in memory while
the spilled runs merge (at half the budget per stream, 2 streams held the whole budget)."""
SORT_RUN_BUFFER = 2**16
"""Bytes of the buffers that write and read back each spilled run (the engine's default is 1 MiB;
100 runs then held 0.2 GiB more while they merged)."""
SORT_MERGE_BLOCK = 2**19
"""Bytes of the block each spilled run holds while the runs merge (256 KiB: 25% more CPU)."""
INSERT_BLOCK_SHARE = 32
"""The sorted rows go in blocks of at most the budget divided by this: the insert holds a block
being squashed, the block, and its rows split by partition at once."""


def sort_settings(limit: int, threads: int) -> dict[str, str | int | float]:
    """The sort and the insert of a partition-aware load within the memory budget `limit`
    (docs/internals/memory.md)."""
    return {
        "max_partitions_per_insert_block": 0,
        "max_bytes_before_external_sort": max(16 * 2**20, limit // SORT_SHARE // max(1, threads)),
        "max_bytes_ratio_before_external_sort": 0,
        "temporary_files_buffer_size": SORT_RUN_BUFFER,
        "prefer_external_sort_block_bytes": SORT_MERGE_BLOCK,
        "min_insert_block_size_bytes": max(16 * 2**20, limit // INSERT_BLOCK_SHARE),
    }


def settings_for_server(settings: Settings, allowed: frozenset[str]) -> dict[str, str | int | float]:
    """Only the reading settings a server of any version knows."""
    return {k: v for k, v in settings.items() if k in allowed}
