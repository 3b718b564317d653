"""Typed files (Parquet, ORC, Arrow, Native): their checked columns read wide and cast exactly."""

from __future__ import annotations

from chute.load.checks import composite, decimals, enums, floats, integers, strings, temporal
from chute.load.checks.types import (
    INT_RE,
    FastRead,
    array_element,
    checked,
    default_of,
    is_temporal,
    plus_check,
    strip_wrappers,
)
from chute.sql import quote_ident, quote_str

WIDE_READ_FORMATS = frozenset({"Parquet", "ORC", "Arrow", "ArrowStream", "Native"})
"""Typed formats whose reader takes a column as a wider type faithfully. Not Avro: its reader
refuses Int128, gives a decimal's bytes as text and misreads timestamps as DateTime64(0)."""


def binary_read(name: str, type_sql: str, fmt: str) -> FastRead | None:
    """How the fast path reads a checked column of a typed file (Parquet, ORC, Arrow, Avro,
    Native), or None to read it as its own type.

    Read straight into a narrower column, the engine wraps integers (an Int64
    5000000000 into UInt32 is 705032704), drops decimal digits and overflows the
    precision, makes 1e39 a Float32 inf, and clamps dates and times to the type's
    range. So the column is read wide (integers as Int128, Float32 as Float64,
    Decimal as its exact text, Date as Date32, DateTime as DateTime64 in the column's
    time zone: what the file holds is read the way it was, text or not) and cast
    exactly; a value that does not fit fails the file, naming the column (a typed
    file has no careful pass). Date32 and DateTime64 are as wide as a read gets:
    read as they are; so are the columns of formats not in WIDE_READ_FORMATS."""
    if fmt not in WIDE_READ_FORMATS or not checked(type_sql) or type_sql.startswith("LowCardinality("):
        return None
    inner, nullable = strip_wrappers(type_sql)
    ident = quote_ident(name)
    message = quote_str(f"column {name}: a value does not fit {inner}")
    if array_element(inner) is not None:
        # Integer elements (at any depth) read as Int128 and cast exactly, as in text files;
        # other elements are read as they are (docs/loading.md).
        return composite.int_array_read(ident, type_sql, inner, message)
    wide = (
        integers.typed_read(ident, inner)
        or floats.typed_read(ident, inner)
        or decimals.typed_read(ident, inner)
        or temporal.typed_read(ident, inner)
    )
    if wide is None:
        return None
    read_as, exact = wide
    missing = "NULL" if nullable else default_of(inner)
    fits = f"(isNull({ident}) OR isNotNull({exact}))"
    value = f"if(isNull({ident}), {missing}, {exact})" if nullable else f"ifNull({exact}, {missing})"
    strict = f"CAST({plus_check(value, f'NOT {fits}', inner, message)}, {quote_str(type_sql)})"
    lenient = f"CAST(if({fits}, {value}, {missing}), {quote_str(type_sql)})"
    return FastRead(f"Nullable({read_as})", strict, fits, lenient)


def _kind(type_sql: str) -> str:
    """A scalar type's family as the readers' conversions go: int, float, decimal, bool, date,
    time, text, enum; "" for the rest (arrays, maps, tuples, UUID, IP addresses)."""
    inner, _ = strip_wrappers(type_sql)
    if INT_RE.match(inner):
        return "int"
    if inner in ("Float32", "Float64", "BFloat16"):
        return "float"
    if decimals.holds(inner):
        return "decimal"
    if enums.holds(inner):
        return "enum"
    if inner == "Bool":
        return "bool"
    if is_temporal(inner):
        return "date" if inner in ("Date", "Date32") else "time"
    return "text" if inner == "String" or inner.startswith("FixedString(") else ""


LOSSY = frozenset(
    {(k, "int") for k in ("float", "decimal")}
    | {(k, "bool") for k in ("int", "float", "decimal")}
    | {(k, "enum") for k in ("int", "float", "decimal")}
    | {("text", k) for k in ("int", "float", "decimal", "bool", "enum", "date", "time")}
    | {(k, "text") for k in ("int", "float", "decimal", "bool", "date", "time")}
)
"""(file's family, table's family) pairs the engine's typed readers convert with a change and no
error, measured on chDB 26.9 with Parquet: text that does not parse is NULL (so 0 or the default,
counted as a missing value), a float loses its fraction (1.5 -> 1, -0.7 -> 0), an integer wraps into
an Enum (20000 -> 32, a value the Enum does not list: the table then fails every read of it), a
NULL into a String column is the zero of the file's type as text (`false`, `0`, `1970-01-01
00:00:00.000000`), not the column's default ''.
Such a column is read as text (`text_read`). (A timestamp into a Date is its day, as the text
of one is.)"""


def lossy(file_type: str, table_type: str) -> bool:
    """The file's column of `file_type` would change on the way into a `table_type` column (LOSSY)."""
    return (_kind(file_type), _kind(table_type)) in LOSSY


def text_read(name: str, type_sql: str) -> FastRead:
    """A typed file's column read as its text (the readers give every scalar so) and converted
    exactly by the text checks: `1.5` into an integer, `x` into a number, 20000 into an Enum8
    do not fit, and the file fails naming the column, its rows then told apart as
    binary_read's are. A NULL keeps the column's NULL or default."""
    inner, nullable = strip_wrappers(type_sql)
    ident = quote_ident(name)
    if integers.holds(inner):
        exact = integers.conversion(ident, inner)
    elif floats.holds(inner):
        exact = floats.conversion(ident, inner)
    elif decimals.holds(inner):
        exact = decimals.conversion(ident, inner)
    elif enums.holds(inner):
        exact = enums.conversion(ident, inner)
    elif strings.holds(inner):
        exact = strings.conversion(ident, inner)
    else:
        exact = temporal.conversion(ident, inner) or "NULL"  # (every table family of LOSSY has one)
    message = quote_str(f"column {name}: a value does not fit {inner}")
    missing = "NULL" if nullable else default_of(inner)
    fits = f"(isNull({ident}) OR isNotNull({exact}))"
    value = f"if(isNull({ident}), {missing}, {exact})"
    strict = f"CAST({plus_check(value, f'NOT {fits}', inner, message)}, {quote_str(type_sql)})"
    lenient = f"CAST(if({fits}, {value}, {missing}), {quote_str(type_sql)})"
    return FastRead("Nullable(String)", strict, fits, lenient)
