"""Checks just before a batch's rows move into the table, and removing what earlier tries left.

Each check runs against the stage table: the files are unchanged, the NULL
search found nothing where the engine's NULL check was off, and row numbers of
a parallel parse are exactly 1..n (mended where one gap is off by one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from chute.errors import ChuteError, CommitUncertain, SourceError, TargetError
from chute.load.checks.types import strip_wrappers
from chute.load.context import LoadContext
from chute.load.outcome import batch_label
from chute.nullcheck import CHECKED_FORMATS, BlankLineSearch, NullsInFile, Place, scalar_type
from chute.sql import TableName, internal, quote_ident, quote_str, sources_filter
from chute.targets.staging import CommitCheck
from chute.units import Unit


class BlankLines(TargetError):
    """A JSON-lines file with blank lines: the engine numbers its rows by record, so the
    careful pass, which numbers them by line, loads it."""


class OpenQuote(TargetError):
    """A CSV file whose last record holds a quote never closed: the parser took the rest of
    the file as that one field, so the careful pass splits it (chute.load.careful)."""


class RowNumbersOff(TargetError):
    """Row numbers from a parallel parse that cannot be mended: read the file again by one thread."""


def sum_to(n: int) -> int:
    return n * (n + 1) // 2


def sum_of_squares(n: int) -> int:
    return n * (n + 1) * (2 * n + 1) // 6


class Commit:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx

    def unchanged_check(
        self, batch: list[Unit], fix_rows: bool = False, null_check_off: bool = False, by_line: bool = False
    ) -> CommitCheck:
        """The checks before a batch commits; `by_line`: its rows are numbered by line already.
        The search for blank lines starts now, while the engine reads the batch."""
        blank_lines = None if by_line else self.blank_line_search(batch)

        def check(stage: TableName | None, _counts: dict[str, int]) -> None:
            for unit in batch:
                if not self.ctx.source.unchanged(unit):
                    raise SourceError(f"{unit.key}: changed or removed during the load; run again to load it")
            nulls = self.nulls_read_with_check_off(batch, null_check_off)
            if nulls is not None:
                raise nulls
            if blank_lines is not None and blank_lines.blank():
                raise BlankLines(f"{batch[0].key}: blank lines; rows numbered by line in a careful pass")
            if not by_line and stage is not None:
                self.open_quote_check(stage, batch)
            if fix_rows and stage is not None:
                for unit in batch:
                    self.fix_row_numbers(stage, unit)

        return check

    def fix_row_numbers(self, stage: TableName, unit: Unit) -> None:
        """Check a CSV/TSV file's row numbers in the stage table, and mend them.

        They must be exactly 1..n: checked by min, max, count, sum and sum of
        squares (one pass, no set). A single gap (the engine's off-by-one after
        the first block, when it was not numbered right as read) is closed by
        shifting the rows after it; any other shape raises RowNumbersOff, and
        the batch is read again by one thread.
        """
        key = quote_str(unit.source_name)
        offset = self.ctx.row_offsets.get(unit.key, 0)  # a range's rows follow the file's earlier ranges
        row = f"(_source_row - {offset})" if offset else "_source_row"
        got = self.ctx.target.rows(
            f"SELECT min({row}) AS lo, max({row}) AS hi, count() AS n, "
            f"toString(sum({row})) AS s, toString(sum({row} * {row})) AS q "
            f"FROM {stage.sql} WHERE _source = {key}"
        )[0]
        lo, hi, n = int(got["lo"]), int(got["hi"]), int(got["n"])
        # The squares are summed in UInt64 on every server version: compare modulo 2**64.
        total, squares = int(got["s"]), int(got["q"])
        if n == 0 or (lo, hi, total, squares) == (1, n, sum_to(n), sum_of_squares(n) % 2**64):
            return
        gap = sum_to(n + 1) - total
        if lo == 1 and hi == n + 1 and 1 <= gap <= n and squares == (sum_of_squares(n + 1) - gap * gap) % 2**64:
            self.ctx.target.mutate(
                stage,
                f"UPDATE _source_row = _source_row - 1 WHERE _source = {key} AND _source_row > {gap + offset}",
                f"{unit.key}: fixing row numbers",
            )
            return
        raise RowNumbersOff(f"{unit.key}: row numbers from the parallel parser are not 1..{n}")

    def blank_line_search(self, batch: list[Unit]) -> BlankLineSearch | None:
        """A search of the batch's local uncompressed JSON-lines bytes for blank lines: the engine
        numbers rows by record, so a file with one takes the careful pass (BlankLines), which
        numbers them by line, as in the rejects. Compressed and remote files are not searched
        (docs/loading.md)."""
        if not self.ctx.fill_provenance:
            return None
        places = []
        for unit in batch:
            path = unit.origin or unit.key
            if unit.fmt.format == "JSONEachRow" and unit.fmt.compression == "none" and "://" not in path:
                places.append((path, unit.start, unit.end if unit.is_range else unit.size))
        return BlankLineSearch(places) if places else None

    def open_quote_check(self, stage: TableName, batch: list[Unit]) -> None:
        """OpenQuote for a CSV unit whose last record ran to the end of the file in a quote.

        The engine reads an unclosed quote in the last field as a field that ends with
        the file: no error, the lines after it gone. Only then is the last record's text
        field several lines long; only then is the file read again, to count its quotes
        (odd: one is never closed). The cost on clean files is one scan of `_source_row`;
        without provenance, one scan of the text columns.
        """
        ctx = self.ctx
        texts = [c.name for c in ctx.input_columns() if strip_wrappers(c.type)[0] == "String"]
        units = {u.source_name: u for u in batch if u.fmt.format == "CSV"}
        if not texts or not units or not ctx.info.stageable:
            return
        multiline = " OR ".join(f"position({quote_ident(n)}, '\\n') > 0" for n in texts)
        if not ctx.fill_provenance:
            # No row numbers to find each file's last record by: any text over several lines
            # in the batch has its files' quotes counted.
            some = ctx.target.rows(f"SELECT 1 AS {internal('found')} FROM {stage.sql} WHERE {multiline} LIMIT 1")
            self._count_quotes(list(units.values()) if some else [])
            return
        names = ", ".join(quote_str(n) for n in units)
        last = ctx.target.rows(
            f"SELECT _source AS s, max(_source_row) AS r FROM {stage.sql} WHERE _source IN ({names}) GROUP BY _source"
        )
        if not last:
            return
        rows = ", ".join(str(int(got["r"])) for got in last)
        pairs = ", ".join(f"({quote_str(str(got['s']))}, {int(got['r'])})" for got in last)
        # PREWHERE on the row number: the text columns are read for the last rows alone.
        where = f"PREWHERE _source_row IN ({rows}) WHERE (_source, _source_row) IN ({pairs}) AND ({multiline})"
        # (An alias no column has: `AS s` named the file, not the column `s`, in the WHERE.)
        source = internal("source")
        query = f"SELECT DISTINCT _source AS {source} FROM {stage.sql} {where}"
        self._count_quotes([units[str(got[source])] for got in ctx.target.rows(query)])

    def _count_quotes(self, units: list[Unit]) -> None:
        """OpenQuote where a unit's quotes are odd in number: one is never closed."""
        ctx = self.ctx
        for unit in units:
            lines = ctx.source.table_expression(unit, "line String", "LineAsString")
            quotes = ctx.target.engine.rows(
                f"SELECT sum(countSubstrings(line, '\"')) % 2 AS odd FROM {lines}",
                {"input_format_parallel_parsing": 0},
                context=f"{unit.key}: counting quotes",
            )
            if int(quotes[0]["odd"] or 0):
                raise OpenQuote(f"{unit.key}: a quote in the last record is never closed")

    # -- the NULL check (chute.nullcheck) --------------------------------------

    def null_places(self, batch: list[Unit]) -> list[Place] | None:
        """The batch's bytes, where all are local uncompressed CSV/TSV (see chute.nullcheck)."""
        places = []
        for unit in batch:
            path = unit.origin or unit.key
            if unit.fmt.format not in CHECKED_FORMATS or unit.fmt.compression != "none" or "://" in path:
                return None
            places.append((path, unit.start, unit.end if unit.is_range else unit.size, unit.identity))
        return places

    def null_check_off(self, batch: list[Unit], settings: dict[str, str | int | float]) -> bool:
        """Turn the engine's NULL check off for this INSERT where the bytes and types allow."""
        scalar = all(scalar_type(c.type) for c in self.ctx.input_columns())
        off = scalar and self.ctx.nulls.check_off(self.null_places(batch))
        if off:
            settings["input_format_null_as_default"] = 0
        return off

    def holds_null_marker(self, batch: list[Unit]) -> bool:
        """Whether the batch's CSV/TSV bytes are known to hold `\\N` (a NULL, most likely a missing
        value: such a batch is read with the missing-value count at once, chute.load.checks.missing)."""
        return self.ctx.nulls.known_to_hold(self.null_places(batch))

    @contextlib.contextmanager
    def nulls_guard(self, batch: list[Unit], check_off: bool) -> Iterator[None]:
        """A failed INSERT read with the NULL check off, of a file that holds `\\N`: NullsInFile."""
        try:
            yield
        except (NullsInFile, CommitUncertain):
            raise  # (a commit was begun: the search had found nothing by then)
        except ChuteError as exc:
            nulls = self.nulls_read_with_check_off(batch, check_off)
            if nulls is not None:
                raise nulls from exc
            raise

    def nulls_read_with_check_off(self, batch: list[Unit], check_off: bool) -> NullsInFile | None:
        """NullsInFile when the batch was read with the NULL check off and holds `\\N` (waits for the search)."""
        if check_off and self.ctx.nulls.holds_nulls(self.null_places(batch) or []):
            return NullsInFile(f"{batch[0].key}: holds \\N; read again with NULLs as defaults")
        return None

    # -- repair ---------------------------------------------------------------

    def remove_rows(self, units: list[Unit]) -> None:
        """Remove what earlier attempts left of these units (rows and rejects).

        Only the rows of loads the ledger names for the units are removed, read before this
        worker's claims are checked once more: a worker that wins a unit after this one's lease
        ended writes its rows under a load the list cannot hold, so this delete, however late
        it reaches the server, never takes them (docs/concurrency.md)."""
        ctx = self.ctx
        loads = sorted({*ctx.ledger.load_ids(units), ctx.load_id})
        if ctx.claims is not None:
            ctx.claims.guard()
        files = [u.key for u in units if not u.is_range]
        if files and not self._none_left(files, loads):
            ctx.target.delete_sources(ctx.table, files, loads)
        for key in files:
            ctx.rejects.clear(key, loads)
        for unit in units:
            if unit.is_range:
                self._remove_range(unit, loads)

    def remove_rejects(self, units: list[Unit]) -> None:
        """The rejects earlier attempts left of these units, in a table without provenance
        columns (whose rows cannot be found): the rejects table always names its rows' file
        and load, so a file that now loads keeps only this load's rejects."""
        ctx = self.ctx
        earlier = ctx.ledger.load_ids(units)
        for key in dict.fromkeys(u.key for u in units if not u.is_range):
            ctx.rejects.clear(key, sorted({*earlier, ctx.load_id}))
        before = sorted(set(earlier) - {ctx.load_id})  # (this load's rejects of earlier ranges stay)
        for origin in dict.fromkeys(u.origin for u in units if u.is_range):
            if before:  # (no loads given would clear every load's)
                ctx.rejects.clear(origin, before)

    def remove_own(self, units: list[Unit]) -> None:
        """This load's rows (and rejects) of `units`, which went in after its claim on them may
        have ended: another worker may have loaded them since, under a load of its own, which
        this delete cannot take. A range's: its rows and the file's later ones (ranges load in
        order, so this load has none of those yet)."""
        ctx = self.ctx
        if not ctx.has_provenance:
            ctx.note(
                f"{batch_label(units)}: went in after this worker's claim may have ended; without provenance "
                "columns its rows cannot be told from another worker's: look for doubles"
            )
            return
        mine = [ctx.load_id]
        files = [u.key for u in units if not u.is_range]
        if files:
            ctx.target.delete_sources(ctx.table, files, mine)
        for unit in units:
            if unit.is_range:
                where = f"{sources_filter([unit.origin], mine)} AND _source_row > {ctx.row_offsets.get(unit.key, 0)}"
                ctx.target.mutate(ctx.table, f"DELETE WHERE {where}", f"{unit.key}: taking its rows out again")
            ctx.rejects.clear(unit.origin if unit.is_range else unit.key, mine)

    def _none_left(self, files: list[str], loads: Sequence[str]) -> bool:
        """Units of a dropped table (the table made anew for this load): a count, not a
        mutation, which costs even when it matches nothing. Only for them: elsewhere a
        count could read a replica that lags behind the write it is to undo."""
        ctx = self.ctx
        if not all(getattr(ctx.ledger_latest.get(f), "state", "") == "dropped" for f in files):
            return False
        where = sources_filter(files, loads)
        return int(ctx.target.rows(f"SELECT count() AS n FROM {ctx.table.sql} WHERE {where}")[0]["n"]) == 0

    def _remove_range(self, unit: Unit, loads: Sequence[str]) -> None:
        """This range's rows and those of any later range of the file: they load in order."""
        ctx = self.ctx
        where = f"{sources_filter([unit.origin], loads)} AND _source_row > {ctx.row_offsets.get(unit.key, 0)}"
        tables = [ctx.table, ctx.rejects.name] if ctx.rejects.exists() else [ctx.table]
        for table in tables:
            # A mutation costs even when it matches nothing: look first.
            found = ctx.target.rows(f"SELECT count() AS n FROM {table.sql} WHERE {where}")
            if int(found[0]["n"]):
                ctx.target.mutate(table, f"DELETE WHERE {where}", f"{unit.key}: removing earlier rows")
