"""Values checked against their column's type, in SQL: what fits, the converted value, and why not.

The engine's text parsers wrap integers that do not fit, clamp dates and roll
clock times over; these expressions turn each of those into a NULL (does not
fit) that the careful pass reports, instead of a changed value.
"""

from __future__ import annotations

import re

from chute.schema import Column
from chute.sql import quote_ident, quote_str

INT_RE = re.compile(r"^U?Int(8|16|32|64|128|256)$")


def strip_wrappers(type_sql: str) -> tuple[str, bool]:
    """(inner type, nullable) without LowCardinality(...) and Nullable(...)."""
    t = type_sql.strip()
    nullable = False
    for wrapper in ("LowCardinality(", "Nullable(", "LowCardinality("):
        if t.startswith(wrapper) and t.endswith(")"):
            nullable = nullable or wrapper == "Nullable("
            t = t[len(wrapper) : -1].strip()
    return t, nullable


def widened(type_sql: str) -> str | None:
    """A wider integer type to read text into, so out-of-range values are caught.

    The engine's text parsers wrap an integer that does not fit (300 into
    UInt8 becomes 44); reading into Int64 and `accurateCast` to the real type
    turns that into an error, which sends the file to the careful pass. 64-bit
    columns are read as they are: a wider read costs time on every row, and
    only values beyond 64 bits (which the engine cannot check) would differ.
    """
    inner, nullable = strip_wrappers(type_sql)
    match = INT_RE.match(inner)
    if type_sql.startswith("LowCardinality(") or not match or int(match.group(1)) >= 64:
        return None
    return "Nullable(Int64)" if nullable else "Int64"


def is_temporal(type_sql: str) -> bool:
    """Date, Date32, DateTime, DateTime64 (Nullable or not): types whose text the engine's
    parsers clamp or roll over rather than refuse."""
    inner, _ = strip_wrappers(type_sql)
    return inner in ("Date", "Date32") or inner.startswith("DateTime")


def read_type(type_sql: str) -> str:
    """The type a careful JSON read parses a column as: integers wide (range checked after),
    dates and times as text (checked and converted after), the rest as they are."""
    if is_temporal(type_sql):
        return "Nullable(String)"
    return widened(type_sql) or type_sql


def conversion(text: str, type_sql: str) -> str | None:
    """SQL turning the String `text` into the inner type, NULL when it does not fit.

    None when the type has no exact check (arrays, maps, tuples): those are
    converted without a per-value check.
    """
    inner, _ = strip_wrappers(type_sql)
    tz = re.search(r"'([^']*)'", inner)
    tz_arg = f", {quote_str(tz.group(1))}" if tz else ""
    if inner in ("String",):
        return text
    if inner.startswith("FixedString("):
        n = int(inner[len("FixedString(") : -1])
        return f"if(length({text}) <= {n}, {text}, NULL)"
    if inner.startswith("Enum"):
        # accurateCastOrNull throws on an unknown name: compare with the type's names and numbers first.
        names = re.findall(r"'((?:[^'\\]|\\.)*)'\s*=\s*(-?\d+)", inner)
        known = ", ".join(quote_str(n.replace("\\'", "'")) for n, _ in names)
        numbers = ", ".join(v for _, v in names)
        fits = f"({text} IN ({known}) OR toInt64OrNull({text}) IN ({numbers}))"
        # (the cast never sees an unknown name, even where both branches are computed)
        safe = f"if({fits}, {text}, {quote_str(names[0][0].replace(chr(92) + chr(39), chr(39)))})"
        return f"if({fits}, accurateCastOrNull({safe}, {quote_str(inner)}), NULL)"
    if INT_RE.match(inner) or inner.startswith(("Float", "Decimal", "Bool", "BFloat16")):
        return f"accurateCastOrNull({text}, {quote_str(inner)})"
    if inner in ("Date", "Date32"):
        # Parsed wide (1900-2299), then checked against the type's range: never clamped.
        fn, (lo, hi) = ("toDate", DATE_RANGE) if inner == "Date" else ("toDate32", DATE32_RANGE)
        wide = f"parseDateTime64BestEffortOrNull({text}, 0, 'UTC')"
        day = f"toDate32({wide})"
        return f"if({clock_ok(text)} AND {day} BETWEEN toDate32('{lo}') AND toDate32('{hi}'), {fn}({wide}), NULL)"
    if inner.startswith("DateTime64"):
        precision = re.search(r"DateTime64\(\s*(\d+)", inner)
        p = precision.group(1) if precision else "3"
        return f"if({clock_ok(text)}, parseDateTime64BestEffortOrNull({text}, {p}{tz_arg}), NULL)"
    if inner.startswith("DateTime"):
        wide = f"parseDateTime64BestEffortOrNull({text}, 0{tz_arg})"
        seconds = f"toUnixTimestamp64Second({wide})"
        return f"if({clock_ok(text)} AND {seconds} BETWEEN 0 AND 4294967295, toDateTime({wide}{tz_arg}), NULL)"
    if inner == "UUID":
        return f"toUUIDOrNull({text})"
    if inner in ("IPv4", "IPv6"):
        return f"to{inner}OrNull({text})"
    return None


DATE_RANGE = ("1970-01-01", "2149-06-06")
DATE32_RANGE = ("1900-01-01", "2299-12-31")


def clock_ok(text: str) -> str:
    """No hour past 23 nor minute or second past 59 in the text: the engine's parsers roll
    `25:61:61` over into the next day instead of refusing it."""
    return f"NOT match({text}, '(?:^|[ T])(?:2[4-9]|[3-9][0-9]):[0-9]|:[6-9][0-9](?:[^0-9]|$)')"


def default_of(type_sql: str) -> str:
    return f"defaultValueOfTypeName({quote_str(type_sql)})"


def multi_if(parts: list[str]) -> str:
    return f"multiIf({', '.join(parts)}, '')" if parts else "''"


def finals(columns: list[Column], texts: list[str], present: list[str], extract: list[str]) -> list[str]:
    """Converted value of each column, and the condition that it is bad."""
    finals = []
    for i, col in enumerate(columns):
        conv = conversion(texts[i], col.type)
        _, nullable = strip_wrappers(col.type)
        if conv is None:
            value = extract[i]
        elif nullable:
            value = f"if({present[i]}, {conv}, NULL)"
        else:
            value = f"if({present[i]}, assumeNotNull({conv}), {default_of(strip_wrappers(col.type)[0])})"
        finals.append(f"CAST({value}, {quote_str(col.type)}) AS v{i}")
    return finals


def bad_conditions(columns: list[Column], texts: list[str], present: list[str]) -> list[str]:
    parts = []
    for i, col in enumerate(columns):
        conv = conversion(texts[i], col.type)
        if conv is None or conv == texts[i]:
            continue
        inner = strip_wrappers(col.type)[0]
        message = f"concat('column {col.name}: ', substring({texts[i]}, 1, 200), {quote_str(' does not fit ' + inner)})"
        parts.append(f"{present[i]} AND ({conv}) IS NULL, {message}")
    return parts


def range_reasons(columns: list[Column]) -> str:
    """SQL over a row the engine parsed with wide integers and dates as text: why its values do
    not fit their columns ('' when they do)."""
    reasons = [
        f"if(isNotNull({quote_ident(c.name)}) AND isNull(accurateCastOrNull({quote_ident(c.name)}, "
        f"{quote_str(strip_wrappers(c.type)[0])})), "
        f"concat('column {c.name}: ', toString({quote_ident(c.name)}), "
        f"{quote_str(' is out of range for ' + strip_wrappers(c.type)[0])}), '')"
        for c in columns
        if widened(c.type)
    ] + [
        f"if(isNotNull({quote_ident(c.name)}) AND ({conversion(quote_ident(c.name), c.type)}) IS NULL, "
        f"concat('column {c.name}: ', {quote_ident(c.name)}, "
        f"{quote_str(' does not fit ' + strip_wrappers(c.type)[0])}), '')"
        for c in columns
        if is_temporal(c.type)
    ]
    return f"arrayStringConcat(arrayFilter(x -> x != '', [{', '.join(reasons)}]), '; ')" if reasons else "''"
