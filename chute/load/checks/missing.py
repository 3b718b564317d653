"""Missing values that take their column's default: which columns are watched, and how counted.

A JSON `null` or absent key, or a NULL in a typed file (Parquet, ORC, Arrow, Avro, Native),
into a column that is not Nullable loads as the column's default. The load reads such columns
Nullable, takes the NULL's default itself (`assumeNotNull`: the value under a NULL is the
type's default, as the engine's own NULL-as-default gives), and writes a bit mask of the
row's missing columns into an extra column of the stage table (MASK_COLUMN), which the stage
counts and drops before its rows move in (chute.targets.staging). A row counts once however
many of its values are missing; the mask says which columns had some.
"""

from __future__ import annotations

from chute.load.checks.types import default_of, strip_wrappers
from chute.schema import Column
from chute.sql import internal, quote_ident, quote_str
from chute.targets.staging import MASK_COLUMN

SENTINEL_TEXT = "chute: a value is missing"
"""The message of a read that met a missing value while reading without the count (`sentinel`)."""

INPUT_ALIAS = internal("in")
"""The input's name in a SELECT that counts missing values: its columns as read, by `<INPUT_ALIAS>.name`
(the name alone is the SELECT's value of that name, not NULL)."""

COUNTED_FORMATS = frozenset({"JSONEachRow", "CSV", "TSV", "Parquet", "ORC", "Arrow", "ArrowStream", "Avro", "Native"})
"""Formats whose missing values are counted on the way in. CSV/TSV: an empty field or `\\N`
(CSV), `\\N` (TSV); reading their columns Nullable costs a quarter more CPU, so they are read
first without the count (PROBED_FORMATS)."""
_TEXT = ("String", "FixedString(")
_COMPOUND = ("Array(", "Map(", "Tuple(", "Nested(", "Object(", "JSON", "Variant(", "Dynamic", "AggregateFunction(")
MASK_BITS = 64
"""Columns past the 63rd share the mask's last bit."""


def watched(col: Column, fmt: str = "") -> bool:
    """A column whose missing values are counted: not Nullable, no DEFAULT expression of its
    own (the table then says what a missing value is), and a scalar (an absent array is an
    empty one: not counted). In CSV (format `fmt`), not a String: an empty field there is the
    empty string, and the engine's CSV parser reads `\\N` the same way as an empty field."""
    inner, nullable = strip_wrappers(col.type)
    if fmt == "CSV" and inner.startswith(_TEXT):
        return False
    return not nullable and not col.default_kind and not inner.startswith(_COMPOUND)


def computed(col: Column) -> bool:
    """A column whose missing value is its DEFAULT expression (over the row's other values),
    which a careful read computes itself: not Nullable (a JSON null is then a NULL, not a
    missing value) and a scalar."""
    inner, nullable = strip_wrappers(col.type)
    return (
        col.default_kind == "DEFAULT"
        and bool(col.default_expression)
        and not nullable
        and not (inner.startswith(_COMPOUND))
    )


def nullable_read(type_sql: str) -> str:
    """The type a watched column is read as: Nullable (inside LowCardinality)."""
    if type_sql.startswith("LowCardinality(") and type_sql.endswith(")"):
        return f"LowCardinality(Nullable({type_sql[len('LowCardinality(') : -1]}))"
    return f"Nullable({type_sql})"


def not_null(ident: str, type_sql: str) -> str:
    """SQL of a watched column read Nullable as its value: the NULL's default. The value under a
    NULL is the type's zero, taken as it is (no copy); an Enum's default is its first name instead."""
    inner = strip_wrappers(type_sql)[0]
    return f"ifNull({ident}, {default_of(inner)})" if inner.startswith("Enum") else f"assumeNotNull({ident})"


def mask_sql(flags: list[tuple[int, str]], kept: str | None = None) -> str:
    """SQL of the row's mask: bit i (at most the last) set where the i-th input column's value is
    missing; `flags` are (column index, SQL that is 1 where it is missing). With `kept`, 0 where
    that SQL is false (a row whose values do not fit: a rejected row, not a loaded one).

    Eight flags at a time are packed in UInt8 (bitShiftLeft, bitOr), then the bytes into UInt64:
    a sum of flags times powers of two costs twice as much (wider integers at every step)."""
    by_byte: dict[int, list[str]] = {}
    # The columns that share the last bit, in one flat `or` (a chain of bitOr nested one level per
    # column: 2,000 columns overflowed the engine's stack).
    shared = [flag for i, flag in flags if i >= MASK_BITS - 1]
    if len(shared) > 1:
        flags = [*((i, flag) for i, flag in flags if i < MASK_BITS - 1), (MASK_BITS - 1, f"or({', '.join(shared)})")]
    for i, flag in flags:
        bit = min(i, MASK_BITS - 1)
        shifted = flag if bit % 8 == 0 else f"bitShiftLeft({flag}, {bit % 8})"
        by_byte.setdefault(bit // 8, []).append(shifted)
    parts = []
    for byte, in_byte in sorted(by_byte.items()):
        packed = in_byte[0]
        for more in in_byte[1:]:
            packed = f"bitOr({packed}, {more})"
        parts.append(f"toUInt64({packed})" if byte == 0 else f"bitShiftLeft(toUInt64({packed}), {8 * byte})")
    sql = parts[0] if parts else "toUInt64(0)"
    for more in parts[1:]:
        sql = f"bitOr({sql}, {more})"
    if kept is not None:
        sql = f"{sql} * ({kept})"
    return f"{sql} AS {quote_ident(MASK_COLUMN)}"


def column_names(mask: int, columns: list[Column]) -> list[str]:
    """The input columns a mask names (the last bit: every column from the 64th on)."""
    names = [c.name for i, c in enumerate(columns[: MASK_BITS - 1]) if mask >> i & 1]
    if mask >> (MASK_BITS - 1) & 1:
        names += [c.name for c in columns[MASK_BITS - 1 :]]
    return names


PROBED_FORMATS = frozenset({"JSONEachRow", "CSV", "TSV"})
"""Formats read first without the count (`sentinel`): a clean file costs nothing more. A
JSON null or absent key, or a CSV/TSV `\\N` or empty CSV field, takes the read column's
DEFAULT expression, which fails the read (a column read as text checks its emptiness
instead: `text_missing`); the batch is then read again with the count (its units are in
`LoadContext.with_missing`)."""


def sentinel(type_sql: str) -> str:
    """A DEFAULT expression of type `type_sql` that fails the read where it is used (a missing
    value). Evaluated only for rows that miss a value: a clean file never runs it."""
    typed = f"defaultValueOfTypeName({quote_str(type_sql)})"
    return f"if(throwIf(1, {quote_str(SENTINEL_TEXT)}) = 0, {typed}, {typed})"


def without_nullable(type_sql: str) -> str:
    """`Nullable(T)` as T (a missing value then takes the column's DEFAULT expression)."""
    if type_sql.startswith("Nullable(") and type_sql.endswith(")"):
        return type_sql[len("Nullable(") : -1]
    return type_sql


def text_missing(ref: str, json: bool, nullable: bool) -> str:
    """SQL: the text of a column read as text by the fast path (`ref`: how the query names it) is
    missing, so the column takes its NULL or default: no key or null in JSON, an empty field
    (or `\\N`, which the parser reads as one) in CSV/TSV."""
    if json:
        return f"isNull({ref})"
    return f"empty(ifNull({ref}, ''))" if nullable else f"empty({ref})"
