"""The checks' one entry: given a column's type (and how it is read), the SQL that reads and converts it.

The engine's text parsers wrap integers that do not fit, clamp dates and roll clock times over;
the expressions here turn each of those into a NULL (does not fit) that the careful pass reports,
or a failed read on the fast path, instead of a changed value. Each type family has its module
(integers, floats, decimals, temporal, enums, strings, composite; missing values in `missing`);
this one picks it. Every pass asks here: `checked_read` (the fast path, the tolerant pass,
server-parse verification, typed files) and `conversion` (the careful passes, `reasons`).
"""

from __future__ import annotations

from chute.load.checks import composite, decimals, enums, floats, integers, strings, temporal
from chute.load.checks.missing import text_missing
from chute.load.checks.typed import binary_read
from chute.load.checks.types import (
    FAIL_MESSAGE,
    FastRead,
    array_element,
    checked,
    default_of,
    plus_check,
    strip_wrappers,
)
from chute.sources.base import CheckedRead
from chute.sql import quote_ident, quote_str


def conversion(text: str, type_sql: str) -> str | None:
    """SQL turning the String `text` into the inner type, NULL when it does not fit: the full
    check of one value, by its type's family.

    None when the type has no exact check (maps, tuples, arrays of unchecked elements):
    those are converted without a per-value check.
    """
    inner, _ = strip_wrappers(type_sql)
    element = array_element(inner)
    if element is not None:
        return composite.array_conversion(text, element, conversion)
    refused = composite.refused_element(inner)
    if refused is not None:
        return composite.refused_conversion(text, refused, conversion)
    if strings.holds(inner):
        return strings.conversion(text, inner)
    if enums.holds(inner):
        return enums.conversion(text, inner)
    if integers.holds(inner):
        return integers.conversion(text, inner)
    if floats.holds(inner):
        return floats.conversion(text, inner)
    if decimals.holds(inner):
        return decimals.conversion(text, inner)
    return temporal.conversion(text, inner)


def checked_read(
    name: str,
    type_sql: str,
    fmt: str,
    text: bool,
    null_marker: str = "",
    counted: bool = False,
    whole_numbers: bool = False,
) -> FastRead | None:
    """How a column of format `fmt` (`text`: a text format) is read so that a value that does
    not fit is refused, never changed; None to read it as its own type. Text files: `fast_read`;
    typed files: typed.binary_read. `null_marker` counts for CSV and TSV only."""
    if text:
        marker = null_marker if fmt in ("CSV", "TSV") else ""
        return fast_read(name, type_sql, fmt == "JSONEachRow", marker, counted, fmt == "TSV", whole_numbers)
    return binary_read(name, type_sql, fmt)


def fast_read(
    name: str,
    type_sql: str,
    json: bool,
    null_marker: str = "",
    counted: bool = False,
    tsv: bool = False,
    whole_numbers: bool = False,
) -> FastRead | None:
    """How the fast path reads a checked column of a text file, or None to read it as its own type.

    A value that does not fit makes the SELECT fail, which sends the file to the careful
    pass (the same checks, row by row, with reasons). Integers of a CSV/TSV file are read
    as Int128 and cast exactly (as cheap as their own type; a CSV field is never the JSON
    `""`); the rest are read as text. Text that is missing (JSON: no key or null;
    CSV/TSV: an empty field) keeps the column's NULL or default, as the engine's own
    parser would give it.

    A `null_marker` (a Nullable column of a CSV/TSV file, see schema.NULL_MARKERS) is read as
    text whatever the type: the marker is NULL, every other value is converted and checked.

    `counted`: a missing value must show as NULL in the read column (chute.load.checks.missing
    counts it): integers are read Nullable too, and taken with assumeNotNull (the NULL's default).

    `whole_numbers`: JSON integers past 32 bits are read as text too, so that `1e2` and `1.0`
    are the whole numbers they are (the Int128 read refuses them; the Float64 read of narrower
    ones takes them): the pass that keeps bad rows, where a refused record is a rejected row.

    `tsv`: integers are read as text as well. The engine's TSV reader takes an empty field for
    0 (a CSV one takes the column's DEFAULT, which the missing-value probe sees): read as text,
    an empty field is a missing value, counted, like a date's.
    """
    if null_marker and not json:
        return _marker_read(name, type_sql, null_marker)
    if not checked(type_sql) or type_sql.startswith("LowCardinality("):
        return None
    inner, nullable = strip_wrappers(type_sql)
    ident = quote_ident(name)
    if array_element(inner) is not None:
        return composite.int_array_read(ident, type_sql, inner) or composite.text_array_read(
            type_sql, json, _conversion(ident, type_sql), text_missing(ident, json, False)
        )
    missing = "NULL" if nullable else default_of(inner)
    if inner == "Float64" and not whole_numbers:
        return floats.float64_read(ident, type_sql, nullable, counted, missing)
    bits = 0 if tsv else integers.bits(inner)
    if bits > 64:
        return None  # (read as it is: a wider read costs every row; see docs/loading.md)
    if bits and not (whole_numbers and json and bits > 32):
        return integers.wide_read(ident, type_sql, inner, nullable, counted, missing)
    absent = text_missing(ident, json, nullable)
    temporal_read = temporal.text_read(ident, type_sql, inner, nullable, json, absent)
    if temporal_read is not None:
        return temporal_read
    conv = _conversion(ident, type_sql)
    fits = f"bitOr({absent}, isNotNull({conv}))"
    value = conv if nullable else f"ifNull({conv}, {missing})"
    # No if(): the conversion runs once per row, and throwIf (0 when the value fits) fails the SELECT.
    return FastRead(
        "Nullable(String)" if json or nullable else "String",
        f"CAST({plus_check(value, f'{fits} = 0', inner)}, {quote_str(type_sql)})",
        f"({fits} != 0)",
        f"CAST({value}, {quote_str(type_sql)})",
    )


def _conversion(text: str, type_sql: str) -> str:
    """`conversion` of a type that has one (every `checked` type)."""
    conv = conversion(text, type_sql)
    assert conv is not None
    return conv


def read_as_text_by(fast: FastRead | CheckedRead) -> bool:
    """Whether `fast_read` reads the column as text (else wide: an integer as Int128 or Float64)."""
    return fast.read_as in ("String", "Nullable(String)")


def _marker_read(name: str, type_sql: str, marker: str) -> FastRead | None:
    """A Nullable column whose NULL is written `marker`: read as text, the marker NULL, the rest
    converted exactly (None for types without a check: read as they are, the marker then fails)."""
    text = f"nullIf({quote_ident(name)}, {quote_str(marker)})"
    inner, _ = strip_wrappers(type_sql)
    conv = conversion(text, type_sql)
    if conv is None or inner == "String":
        return None
    fits = f"bitOr(empty(ifNull({text}, '')), isNotNull({conv}))"
    checked_value = f"if(throwIf({fits} = 0, {FAIL_MESSAGE}) = 0, {conv}, NULL)"
    return FastRead(
        "Nullable(String)",
        f"CAST({checked_value}, {quote_str(type_sql)})",
        f"({fits} != 0)",
        f"CAST(if({fits}, {conv}, NULL), {quote_str(type_sql)})",
    )
