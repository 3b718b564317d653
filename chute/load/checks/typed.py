"""Typed files (Parquet, ORC, Arrow, Native): their checked columns read wide and cast exactly."""

from __future__ import annotations

from chute.load.checks import composite, decimals, floats, integers, temporal
from chute.load.checks.types import FastRead, array_element, checked, default_of, plus_check, strip_wrappers
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
