"""The figures that prove a copy equal to its source: row count and an order-independent checksum.

`sum(cityHash64(...))` over every row, each row hashed over all its columns,
gives the same number on 18.16 and on current engines for the same values,
whatever the order of the rows or of the parts. Not every type hashes alike on
every version, so each column goes into the hash in a form measured equal on
18.16 and the embedded 26.9 engine:

- integers, floats, String, FixedString, Date, DateTime, Enum, and Arrays and
  Tuples of those: as they are;
- Nullable(T): `isNull` gives a fixed number, else T's form of the value (a
  NULL argument would make the row's whole hash NULL, and `sum` skip it);
- Decimal: its text without trailing zeros (18.16 prints `1.5000`, 26.9 `1.5`;
  18.16's cityHash64 takes no Decimal);
- UUID, and anything else (an Array of Nullable, a Map, ...): its text.
- LowCardinality(T): as T.

Both sides hash the destination's types: the source's columns are cast to
them first where they differ (a DateTime64 copied to 18.16 as String).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from chute.schema import Column
from chute.sql import quote_ident, quote_str

_PLAIN = re.compile(
    r"^(?:U?Int(?:8|16|32|64)|Float(?:32|64)|String|FixedString\(\d+\)|Date|DateTime(?:\('[^']*'\))?"
    r"|Enum(?:8|16)\(.*\))$"
)
ROWS = "_chute_rows"
CHECKSUM = "_chute_checksum"
NULL_HASH = 0x5EED_0000_0000_0001
"""What a NULL counts as in a row's hash (any fixed number: both sides use the same)."""


@dataclass(frozen=True)
class Figures:
    rows: int
    checksum: int

    def __str__(self) -> str:
        return f"{self.rows:,} rows, checksum {self.checksum}"


def _args(type_sql: str) -> list[str]:
    """The arguments of `Name(a, b(c), d)`: top-level commas only."""
    inner = type_sql[type_sql.index("(") + 1 : -1]
    out, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(inner):
        if ch == "'" and (i == 0 or inner[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and ch == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    out.append(inner[start:].strip())
    return out


def hashes_as_is(type_sql: str) -> bool:
    """Whether a value of this type goes into cityHash64 as it is, equal on every version."""
    if _PLAIN.match(type_sql):
        return True
    if type_sql.startswith("Array(") and type_sql.endswith(")"):
        return hashes_as_is(type_sql[len("Array(") : -1])
    if type_sql.startswith("Tuple(") and type_sql.endswith(")"):
        # (named elements, `a UInt8`, are hashed by their types alike)
        return all(hashes_as_is(re.sub(r"^[A-Za-z_][A-Za-z0-9_]* (?=\S)", "", a)) for a in _args(type_sql))
    return False


def hash_arg(expr: str, type_sql: str) -> str:
    """`expr` (of type `type_sql`) as an argument of the row's cityHash64."""
    if hashes_as_is(type_sql):
        return expr
    if type_sql.startswith("LowCardinality(") and type_sql.endswith(")"):
        inner = type_sql[len("LowCardinality(") : -1]
        return hash_arg(f"CAST({expr}, {quote_str(inner)})", inner)
    if type_sql.startswith("Nullable(") and type_sql.endswith(")"):
        inner = type_sql[len("Nullable(") : -1]
        value = hash_arg(f"assumeNotNull({expr})", inner)
        return f"if(isNull({expr}), {NULL_HASH}, cityHash64({value}))"
    if type_sql.startswith("Decimal"):
        # Trailing zeros of the fraction (and a bare point) go: `1.5000` and `1.5` are one text.
        return f"replaceRegexpOne(toString({expr}), '\\\\.0*$|(\\\\.[0-9]*[1-9])0+$', '\\\\1')"
    return f"toString({expr})"


def checksum_sql(columns: Sequence[Column], source_types: Sequence[str] | None = None) -> str:
    """`sum(cityHash64(...))` over the columns, hashed as the destination types (`columns`); where
    `source_types` differ (the source's side), each value is cast to the destination's type first."""
    args = []
    for i, column in enumerate(columns):
        expr = quote_ident(column.name)
        if source_types is not None and source_types[i] != column.type:
            expr = f"CAST({expr}, {quote_str(column.type)})"
        args.append(hash_arg(expr, column.type))
    return f"sum(cityHash64({', '.join(args)}))"


def figures_sql(
    table_sql: str, where: str, columns: Sequence[Column], source_types: Sequence[str] | None = None
) -> str:
    """The SELECT that gives `n` (rows) and `h` (checksum) of the rows of `table_sql` matching `where`."""
    checksum = checksum_sql(columns, source_types)
    return f"SELECT count() AS {ROWS}, toString({checksum}) AS {CHECKSUM} FROM {table_sql} WHERE {where}"


def read_figures(row: dict[str, object]) -> Figures:
    return Figures(int(str(row[ROWS])), int(str(row[CHECKSUM] or 0)))
