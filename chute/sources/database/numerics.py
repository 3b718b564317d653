"""PostgreSQL numerics without precision: the type a table needs, measured when a run plans.

The engine reads `numeric` (no precision) as Decimal(38, 19): a value with 20 digits after
the point (`numeric(12, 2) / 7` is 0.14285714285714285714) or 20 before it fits no such
column. So, when a run has rows to load, the server itself measures each such column (one
scan, one row back): the most digits after the point (`scale(x)`) and before it. The column
is then Decimal(38, S) where both fit in 38 digits (an 18.16 server holds it), else
Decimal(76, S) (a server without Decimal256 makes it String, with its own note), else String
holding each number's text, with a note. NaN and the infinities are left out of the measure:
they fit no Decimal and stay rejected rows with their reason.

Arrays of such numerics are measured the same way over their elements: where every element
fits Decimal(38, 19) the engine's reading is exact and stays; else the column is String
holding the array's text as the server writes it (`{1.5,NULL}`), with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from chute.sources.database.columns import SourceColumn, split_nullable
from chute.sources.database.exact import decimal
from chute.sources.dbplan import pg_ident
from chute.sql import quote_ident

ENGINE_DECIMAL = (38, 19)
"""What the engine's PostgreSQL reader makes of a numeric without precision."""


@dataclass(frozen=True)
class Measured:
    """Digits after the point (`scale`) and before it (`whole`), over the values that are numbers."""

    values: int
    scale: int
    whole: int


def measure_query(schema: str, table: str, scalars: list[str], arrays: list[str]) -> tuple[str, list[str]]:
    """One query the server runs: per column, the count of its finite values, their largest scale
    and their most whole digits (`n<i>`, `s<i>`, `w<i>`, columns in the order scalars then arrays),
    as text; and the names it returns (`id` first, as chute.sources.database.table.server_rows needs)."""
    source = f"{pg_ident(schema)}.{pg_ident(table)}"

    def measure(i: int, x: str) -> list[str]:
        # scale() is NULL for NaN and the infinities; the whole digits of |x| < 1 are none.
        whole = f"CASE WHEN scale({x}) IS NULL OR abs({x}) < 1 THEN 0 ELSE length(trunc(abs({x}))::text) END"
        return [
            f"count(scale({x}))::text AS n{i}",
            f"coalesce(max(scale({x})), 0)::text AS s{i}",
            f"coalesce(max({whole}), 0)::text AS w{i}",
        ]

    scalar_measures = [m for i, column in enumerate(scalars) for m in measure(i, pg_ident(column))]
    inner = f"SELECT {', '.join(scalar_measures)} FROM {source}" if scalars else "SELECT 1"
    # Each array column's elements in a scan of their own (unnest flattens any dimensions).
    laterals = [
        f"CROSS JOIN LATERAL (SELECT {', '.join(measure(j, 'e'))} "
        f"FROM {source} CROSS JOIN LATERAL unnest({pg_ident(column)}) AS e) AS a{j}"
        for j, column in enumerate(arrays, start=len(scalars))
    ]
    count = len(scalars) + len(arrays)
    names = ["id"] + [f"{k}{i}" for i in range(count) for k in ("n", "s", "w")]
    query = f"SELECT '1' AS id, {', '.join(names[1:])} FROM ({inner}) AS q {' '.join(laterals)}"
    return query, names


def measured(row: dict[str, str], count: int) -> list[Measured]:
    """The `count` columns' measures from the query's row."""
    return [Measured(int(row[f"n{i}"]), int(row[f"s{i}"]), int(row[f"w{i}"])) for i in range(count)]


def scalar_type(found: Measured) -> str | None:
    """The Decimal that holds every measured value (None: String). No value: the engine's own."""
    if not found.values:
        return "Decimal({}, {})".format(*ENGINE_DECIMAL)
    if found.scale + found.whole <= 38:
        return f"Decimal(38, {found.scale})"
    if found.scale + found.whole <= 76:
        return f"Decimal(76, {found.scale})"
    return None


def engine_reads_exactly(found: Measured) -> bool:
    """Every element fits the engine's Decimal(38, 19): its reading of the array is exact."""
    precision, scale = ENGINE_DECIMAL
    return found.scale <= scale and found.whole <= precision - scale


def with_measured_types(
    columns: list[SourceColumn],
    place: tuple[str, str],
    free: tuple[list[str], list[str]],
    run: Callable[[str, list[str]], dict[str, str]],
    where: bool,
) -> tuple[list[SourceColumn], list[str]]:
    """`columns` with the types their measured values need (see the module's docstring), and the
    report's notes. `place` is (schema, table); `free` the numeric columns without precision,
    (scalars, arrays); `run` runs a query on the server and gives its one row. Under --where
    (the engine's own reading stays) an array keeps the engine's type."""
    scalars, arrays = free[0], ([] if where else free[1])
    if not scalars and not arrays:
        return columns, []
    query, names = measure_query(place[0], place[1], scalars, arrays)
    found = dict(zip(scalars + arrays, measured(run(query, names), len(scalars) + len(arrays)), strict=True))
    notes: list[str] = []
    out = []
    for c in columns:
        m = found.get(c.name)
        if m is None:
            out.append(c)
            continue
        ident = quote_ident(c.name)
        digits = f"{m.whole} digits before the point and {m.scale} after"
        if c.name in arrays:
            if engine_reads_exactly(m):
                out.append(c)
                continue
            # NULL stays NULL (the engine's reading made it an empty array).
            out.append(replace(c, type="Nullable(String)", expr=ident, exact=ident))
            notes.append(
                f"column {c.name}: numeric[] without precision holds elements of up to {digits}: "
                "String holding each array's text as the server writes it"
            )
            continue
        chosen = scalar_type(m)
        nullable = split_nullable(c.raw)[0]
        if chosen is None:
            out.append(replace(c, type="Nullable(String)" if nullable else "String", exact=ident))
            notes.append(
                f"column {c.name}: numeric without precision holds values of up to {digits}, more than "
                "a Decimal's 76: String holding each number's text"
            )
            continue
        typed = f"Nullable({chosen})" if nullable else chosen
        out.append(replace(c, type=typed, exact=decimal(ident, chosen, True)))
        if m.values and chosen != "Decimal({}, {})".format(*ENGINE_DECIMAL):
            notes.append(f"column {c.name}: numeric without precision holds values of up to {digits}: {chosen}")
    return out, notes
