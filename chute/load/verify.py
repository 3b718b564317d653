"""Verified server-parse: the server parses a file, and chute checks what it stored.

A server's text parsers wrap integers and roll dates over without a word (chute.load.checks.column), so
`--method auto` used to read such files here. Where each of those columns has an integer form that
every server version computes alike (integers up to 64 bits, Date, DateTime), the server parses the
file into its stage while chute reads the same file itself and checks those columns as its own
read does. Both sides sum a hash of each value with its row number; the stage moves in only when
the sums, the row count and the count of values that do not fit (none) agree. Otherwise its file is
read here, where a value that does not fit is a rejected row with its reason.

The check costs this process a read of the file and the checks (~3 CPU-s per 1 M rows of the
streams set against ~4.3 for client-convert, which also makes and compresses Native), while the
server parses it: on two machines both work at once (bench/README.md, issue 29).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from chute.cores import usable_cores
from chute.errors import ChuteError
from chute.load.checks.missing import INPUT_ALIAS, SENTINEL_TEXT, mask_sql, watched
from chute.load.checks.textproof import proof_layers, provable
from chute.load.checks.types import FastRead, strip_wrappers
from chute.load.context import LoadContext
from chute.load.reads import Reads
from chute.schema import Column, structure
from chute.sql import TableName, internal, quote_ident
from chute.targets.base import Target
from chute.targets.staging import MASK_COLUMN
from chute.units import Unit

_INTEGER = re.compile(r"^U?Int(8|16|32|64)$")
_DATETIME = re.compile(r"^DateTime(\(\s*'[^']*'\s*\))?$")
ALIAS = internal("")
"""The prefix of the aliases in the checks' queries: no column of a user's table is named so
(a column `_chute_n` met an alias `_chute_n` and failed the query; chute.sql.internal)."""
_NULL_MARK = 11400714819323198485
"""Mixed into a NULL's hash, so that NULL and the type's default differ."""


class ValuesDiffer(ChuteError):
    """The server stored values of a file that differ from chute's read of it, or the file
    holds values that do not fit: its stage is not moved in, the file is read here."""


def canonical(expr: str, type_sql: str) -> str | None:
    """SQL of the value as a UInt64 that 18.16 and the embedded engine compute alike, or None
    where the type has none here (wider integers, Date32, DateTime64, decimals, floats)."""
    inner, nullable = strip_wrappers(type_sql)
    plain = f"assumeNotNull({expr})" if nullable else expr
    if _INTEGER.match(inner):
        value = f"toUInt64({plain})"
    elif inner == "Date":
        value = f"toUInt64(toUInt16({plain}))"
    elif _DATETIME.match(inner):
        value = f"toUInt64(toUInt32({plain}))"
    else:
        return None
    return f"bitXor({value}, toUInt64(isNull({expr})) * {_NULL_MARK})" if nullable else value


def hash_sums(values: list[tuple[str, str]], row: str) -> list[str]:
    """`toString(sum(...)) AS <ALIAS>hJ` per (SQL, type): each value hashed with its row number (UInt64
    sums wrap alike on every version)."""
    sums = []
    for j, (expr, type_sql) in enumerate(values):
        value = canonical(expr, type_sql)
        assert value is not None
        sums.append(f"toString(sum(intHash64({value} + intHash64(toUInt64({row}) * 64 + {j})))) AS {ALIAS}h{j}")
    return sums


@dataclass(frozen=True)
class Fingerprint:
    rows: int
    unfit: int
    sums: tuple[str, ...]
    missing: tuple[int, int]
    """Rows that miss a value, and the mask of the columns missing one (chute.load.checks.missing)."""
    counted: bool = True
    """Whether `missing` counts every column (False: the cheap proof, chute.load.checks.textproof)."""


class Verifier:
    """Which files' values chute checks after the server parsed them, and its own read of them."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.reads = Reads(ctx)

    def columns(self, unit: Unit, unchecked: list[str]) -> list[Column] | None:
        """The columns to check of a text file whose `unchecked` columns the server would change
        without a word: all of them, or None when one has no integer form (read here, then)."""
        if unit.fmt.format != "JSONEachRow":
            return None
        found = [c for c in self.ctx.input_columns() if c.name in unchecked]
        return None if any(canonical("x", c.type) is None for c in found) else found

    @staticmethod
    def server_sums(columns: list[Column]) -> list[str]:
        """The stage's side: its stored values, numbered by `_source_row`."""
        return hash_sums([(quote_ident(c.name), c.type) for c in columns], "_source_row")

    def client(self, units: list[Unit], columns: list[Column]) -> dict[str, Fingerprint | ChuteError]:
        """chute's own read of `units`: the cheap proof first (chute.load.checks.textproof), then the full
        read of the files it did not prove (one query for all; one per unit where that fails)."""
        proved = self._proved(units, columns)
        rest = [u for u in units if u.key not in proved]
        return {**proved, **self._full(rest, columns)} if rest else proved

    def _proved(self, units: list[Unit], columns: list[Column]) -> dict[str, Fingerprint | ChuteError]:
        """The fingerprints of the files whose every row the cheap proof takes
        (chute.load.checks.textproof); {} where it does not apply or fails."""
        ctx = self.ctx
        if not units or units[0].fmt.format != "JSONEachRow" or not all(provable(c.name, c.type) for c in columns):
            return {}
        parts = []
        for i, one in enumerate(units):
            table = ctx.source.table_expression(one, "line String", "LineAsString")
            parts.append(f"SELECT {i} AS i, line, {self.reads.row_number(one, False)} AS r FROM {table}")
        rows, values, proved = proof_layers(
            [c.name for c in columns], [c.type for c in columns], " UNION ALL ".join(parts), "i, r"
        )
        sums = hash_sums([(v, c.type) for v, c in zip(values, columns, strict=True)], "r")
        sql = (
            f"SELECT i AS {ALIAS}i, count() AS {ALIAS}n, countIf(NOT {proved}) AS {ALIAS}unproved, "
            f"{', '.join(sums)} FROM ({rows}) GROUP BY i"
        )
        settings = {"input_format_parallel_parsing": 0, "max_threads": usable_cores()}
        try:
            found_rows = ctx.target.engine.rows(sql, settings, context=f"{units[0].key}: proving the server's values")
        except ChuteError:
            return {}
        found: dict[str, Fingerprint | ChuteError] = {}
        for got in found_rows:
            if not int(got[f"{ALIAS}unproved"]):
                sums_got = tuple(str(got[f"{ALIAS}h{j}"]) for j in range(len(columns)))
                found[units[int(got[f"{ALIAS}i"])].key] = Fingerprint(int(got[f"{ALIAS}n"]), 0, sums_got, (0, 0), False)
        return found

    def _full(self, units: list[Unit], columns: list[Column]) -> dict[str, Fingerprint | ChuteError]:
        """chute's own full read of `units` (one query for all; one per unit where that fails)."""
        try:
            try:
                return self._read(units, columns, counting=False)
            except ChuteError as exc:
                if SENTINEL_TEXT not in str(exc):
                    raise
                return self._read(units, columns, counting=True)  # a value is missing: counted now
        except ChuteError:
            if len(units) == 1:
                return {units[0].key: ValuesDiffer(f"{units[0].key}: chute's check of its values failed")}
        found: dict[str, Fingerprint | ChuteError] = {}
        for unit in units:
            found.update(self._full([unit], columns))
        return found

    def _read(self, units: list[Unit], columns: list[Column], counting: bool) -> dict[str, Fingerprint | ChuteError]:
        """Read as the fast path reads: first with a missing value failing the read (no cost on
        a clean file), then, `counting`, with the columns it counts read Nullable."""
        ctx, unit = self.ctx, units[0]
        fmt = unit.fmt.format
        flags: list[tuple[int, str]] = []
        read_as, _, _ = self.reads.typed_columns(unit, True, flags if counting else None, not counting, False)
        reads: list[FastRead] = []
        for column in columns:
            counted = counting and watched(column, fmt)
            fast = self.reads.checked_read(unit, column, counted=counted, whole_numbers=False)
            assert isinstance(fast, FastRead)
            reads.append(fast)
        raw = ", ".join(quote_ident(c.name) for c in read_as)
        parts = []
        for i, one in enumerate(units):
            table = ctx.source.table_expression(one, structure(read_as), ctx.format_name(one))
            parts.append(f"SELECT {i} AS {ALIAS}i, {raw}, {self.reads.row_number(one, False)} AS {ALIAS}r FROM {table}")
        values = [(f.lenient, c.type) for f, c in zip(reads, columns, strict=True)]
        fits = " AND ".join(f"({f.fits})" for f in reads)
        mask = mask_sql(flags)  # (named MASK_COLUMN)
        sql = (
            f"SELECT {ALIAS}i, count() AS {ALIAS}n, countIf(NOT ({fits})) AS {ALIAS}unfit, "
            f"countIf(({mask}) != 0) AS {ALIAS}missing_rows, toString(groupBitOr({MASK_COLUMN})) AS {ALIAS}mask, "
            f"{', '.join(hash_sums(values, f'{ALIAS}r'))} "
            f"FROM ({' UNION ALL '.join(parts)}) AS {INPUT_ALIAS} GROUP BY {ALIAS}i"
        )
        settings = {**ctx.format_settings(), "input_format_parallel_parsing": 0, "max_threads": usable_cores()}
        found: dict[str, Fingerprint | ChuteError] = {}
        for got in ctx.target.engine.rows(sql, settings, context=f"{unit.key}: checking the server's values"):
            found[units[int(got[f"{ALIAS}i"])].key] = Fingerprint(
                int(got[f"{ALIAS}n"]),
                int(got[f"{ALIAS}unfit"]),
                tuple(str(got[f"{ALIAS}h{j}"]) for j in range(len(columns))),
                (int(got[f"{ALIAS}missing_rows"]), int(got[f"{ALIAS}mask"])),
            )
        for one in units:  # an empty file has no group
            found.setdefault(one.key, Fingerprint(0, 0, tuple("0" for _ in columns), (0, 0)))
        return found


def missing_values(
    batch: list[Unit], rows: Mapping[str, int], mine: Mapping[str, Fingerprint | ChuteError]
) -> dict[str, tuple[int, int]]:
    """The missing values chute counted in the files whose stages moved in, by `_source`
    (chute.load.outcome.record_missing)."""
    found = {}
    for unit in batch:
        counted = mine.get(unit.key)
        if unit.key in rows and isinstance(counted, Fingerprint) and counted.missing[0]:
            found[unit.source_name] = counted.missing
    return found


def compare(unit: Unit, rows: int, sums: tuple[str, ...], mine: Fingerprint | ChuteError) -> ChuteError | None:
    """Why the stage of `unit` may not move in (None: it may)."""
    if isinstance(mine, ChuteError):
        return mine
    if mine.unfit:
        return ValuesDiffer(f"{unit.key}: {mine.unfit} value(s) do not fit their columns")
    if mine.rows != rows or mine.sums != sums:
        return ValuesDiffer(f"{unit.key}: the values the server parsed differ from chute's read of the file")
    return None


class RowNumbersWrong(ChuteError):
    """A stage whose `_source_row` is not 1..n (the body was cut into several blocks)."""


def checked_stages(
    target: Target,
    batch: list[Unit],
    stages: dict[str, TableName],
    refused: dict[str, ChuteError],
    expected: Mapping[str, Fingerprint | ChuteError],
    columns: list[Column],
) -> dict[str, int]:
    """Rows per filled stage whose `_source_row` is exactly 1..n and, for the units in `expected`,
    whose values match chute's read (one query for all); the others go to `refused`."""
    filled = [u for u in batch if u.key not in refused and u.key in stages]
    if not filled:
        return {}
    sums = Verifier.server_sums(columns) if expected else []
    parts = []
    for i, unit in enumerate(filled):
        mine = sums if unit.key in expected else [f"'' AS {ALIAS}h{j}" for j in range(len(sums))]
        parts.append(
            f"SELECT {i} AS {ALIAS}i, count() AS {ALIAS}n, min(_source_row) AS {ALIAS}lo, "
            f"max(_source_row) AS {ALIAS}hi, toString(sum(_source_row)) AS {ALIAS}s, "
            f"toString(sum(_source_row * _source_row)) AS {ALIAS}q"
            + "".join(f", {h}" for h in mine)
            + f" FROM {stages[unit.key].sql}"
        )
    rows: dict[str, int] = {}
    for got in target.rows(" UNION ALL ".join(parts), context=filled[0].key):
        unit = filled[int(got[f"{ALIAS}i"])]
        n = int(got[f"{ALIAS}n"])
        # Squares summed in UInt64 on every server version: compared modulo 2**64.
        exact = (int(got[f"{ALIAS}lo"]), int(got[f"{ALIAS}hi"]), int(got[f"{ALIAS}s"]), int(got[f"{ALIAS}q"])) == (
            1,
            n,
            n * (n + 1) // 2,
            (n * (n + 1) * (2 * n + 1) // 6) % 2**64,
        )
        if n and not exact:
            refused[unit.key] = RowNumbersWrong(f"{unit.key}: row numbers from the server are not 1..{n}")
            continue
        differs = (
            compare(unit, n, tuple(str(got[f"{ALIAS}h{j}"]) for j in range(len(sums))), expected[unit.key])
            if unit.key in expected
            else None
        )
        if differs is not None:
            refused[unit.key] = differs
        else:
            rows[unit.key] = n
    return rows
