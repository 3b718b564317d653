"""Column types as the checks see them: which are checked, their defaults, and a checked read's shape.

The engine's text parsers change some values instead of refusing them (chute.load.checks): these
predicates say which types that concerns, for every family module and every pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chute.sql import quote_str

INT_RE = re.compile(r"^U?Int(8|16|32|64|128|256)$")
FAIL_MESSAGE = "'a value does not fit its column'"
"""SQL: the message of a read that met a value its column does not hold (the careful pass then tells which)."""


def strip_wrappers(type_sql: str) -> tuple[str, bool]:
    """(inner type, nullable) without LowCardinality(...) and Nullable(...)."""
    t = type_sql.strip()
    nullable = False
    for wrapper in ("LowCardinality(", "Nullable(", "LowCardinality("):
        if t.startswith(wrapper) and t.endswith(")"):
            nullable = nullable or wrapper == "Nullable("
            t = t[len(wrapper) : -1].strip()
    return t, nullable


def is_temporal(type_sql: str) -> bool:
    """Date, Date32, DateTime, DateTime64 (Nullable or not): types whose text the engine's
    parsers clamp or roll over rather than refuse."""
    inner, _ = strip_wrappers(type_sql)
    return inner in ("Date", "Date32") or inner.startswith("DateTime")


def checked(type_sql: str) -> bool:
    """Types whose text the engine's parsers change instead of refusing: integers wrap
    (`18446744073709551617` into UInt32 is 1), Float32 and Float64 overflow to inf
    (`1e39`, `1e400`), Decimal drops
    digits past its scale, dates and times clamp or roll over (`2024-02-30`, `25:61:61`),
    and a JSON `""` is 0. Their text is read as it is and converted by `column.conversion`."""
    inner, _ = strip_wrappers(type_sql)
    return (
        bool(INT_RE.match(inner))
        or inner in ("Float32", "Float64")
        or inner.startswith("Decimal")
        or is_temporal(type_sql)
        or array_element(inner) is not None
    )


def array_element(inner: str) -> str | None:
    """The element type of an Array whose elements are `checked` (at any depth), else None:
    the engine's readers wrap `[300]` into Array(UInt8) as they do a plain 300."""
    if inner.startswith("Array(") and inner.endswith(")"):
        element = inner[len("Array(") : -1].strip()
        if checked(element):
            return element
    return None


def read_as_text(type_sql: str) -> bool:
    """Whether a careful JSON read takes the column as text: the checked types, and UUID,
    whose reader, skipping a bad row, runs past a value shorter than a UUID into the next
    record (`"not-a-uuid"` loses the line after it)."""
    return checked(type_sql) or strip_wrappers(type_sql)[0] == "UUID"


def read_type(type_sql: str) -> str:
    """The type a careful JSON read parses a column as: `read_as_text` ones as text
    (converted and checked after), the rest as they are."""
    return "Nullable(String)" if read_as_text(type_sql) else type_sql


def default_of(type_sql: str) -> str:
    """SQL of the value a missing value takes: the type's default, except Date32's, whose
    defaultValueOfTypeName is 1900-01-01 where the engine's own reading (and a NULL's
    assumeNotNull) gives 1970-01-01, the zero the docs name."""
    if strip_wrappers(type_sql)[0] == "Date32":
        return "toDate32(0)"
    return f"defaultValueOfTypeName({quote_str(type_sql)})"


@dataclass(frozen=True)
class FastRead:
    """How the fast path reads a checked column (see `column.checked_read`)."""

    read_as: str
    """The type the parser reads the column as."""
    value: str
    """SQL of the column's value; fails the SELECT where the text does not fit."""
    fits: str
    """SQL: the text fits (or is missing)."""
    lenient: str
    """SQL of the value that never fails: the column's NULL or default where the text does not fit."""


def plus_check(value: str, fails: str, inner: str, message: str = FAIL_MESSAGE) -> str:
    """SQL: `value`, failing the SELECT where `fails`. A float is multiplied by 1, not added 0:
    -0 + 0 is +0, the sign lost."""
    if inner.startswith(("Float", "BFloat")):
        return f"{value} * (1 - throwIf({fails}, {message}))"
    return f"{value} + throwIf({fails}, {message})"
