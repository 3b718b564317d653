"""Exact conversions of a database column's text: the value its column holds, or NULL where it would change.

The engine's PostgreSQL and MySQL readers change some values without a word
(measured on chDB 26.9): MySQL's zero dates ('0000-00-00 00:00:00') become
1970-01-01 and an invalid date ('2024-02-30', allowed by ALLOW_INVALID_DATES)
rolls over into March; PostgreSQL's NaN numeric is NULL, a numeric without
precision loses digits past 19 decimals (or is NULL past 19 whole digits),
dates BC lose their era, and 'infinity' fails the whole read. So these columns
are read as the text the server writes and converted here, in SQL the engine
runs over the whole column: a value whose conversion does not give back its
text is NULL, and its row a reject with a reason (chute.load.careful_pass).

Each function takes `t`, SQL of the text (a String column), and gives SQL of
the value in the column's type, NULL where it does not fit exactly.
"""

from __future__ import annotations

import re
from dataclasses import replace

from chute.sources.base import CheckedRead
from chute.sources.database.columns import SourceColumn, split_nullable
from chute.sql import quote_ident, quote_str


def temporal(t: str, inner: str, zone: str, pg: bool, offset: bool = False) -> str | None:
    """Date, Date32, DateTime or DateTime64 `inner` (of zone 'UTC') from text written in `zone`:
    'YYYY-MM-DD' or 'YYYY-MM-DD hh:mm:ss[.fraction]' (`pg`: PostgreSQL's, which may end in ' BC' or
    be 'infinity'), and with `offset` (timestamptz) a UTC offset after the clock.

    The parsers roll an invalid day over ('2024-02-30' is March 1st, '0000-00-00' 1970-01-01), so
    the parsed date must print back as the text's date (a roundtrip of the whole text costs three
    times the parse; the clock and fraction the servers write are always valid). PostgreSQL's
    dates are valid: there the checks are a four-digit year, no era and the parse itself.
    """
    z = quote_str(zone)
    era = f" AND NOT endsWith({t}, 'BC')" if pg else ""
    if inner in ("Date", "Date32"):
        value = f"to{inner}OrNull({t})"
        return f"if(toString({value}) = {t}{era}, {value}, NULL)"
    stamp = re.fullmatch(r"DateTime(?:64\((\d+)(?:,.*)?\))?(?:\(.*\))?", inner)
    if stamp is None:
        return None
    precision = int(stamp.group(1)) if stamp.group(1) else 0
    target = f"DateTime64({precision}, 'UTC')" if inner.startswith("DateTime64") else "DateTime('UTC')"
    if offset and zone == "UTC":
        # Written in UTC: every value ends in '+00' (a BC one in ' BC'); the clock before it is parsed.
        parsed = f"toDateTime64OrNull(substring({t}, 1, length({t}) - 3), {precision}, 'UTC')"
        same = f"endsWith({t}, '+00') AND substring({t}, 5, 1) = '-'"  # a year of four digits
    elif offset:
        # The offset decides the instant (the same wall clock comes twice when clocks go back).
        parsed = f"parseDateTime64BestEffortOrNull({t}, {precision}, {z})"
        same = f"substring({t}, 5, 1) = '-'{era}"  # a year of four digits
    else:
        parsed = f"toDateTime64OrNull({t}, {precision}, {z})"
        same = f"toString(toDate32({parsed})) = substring({t}, 1, 10){era}"
    value = f"CAST({parsed}, {quote_str('Nullable(' + target + ')')})"
    if target.startswith("DateTime("):
        # DateTime holds 1970 to 2106: past that the cast would wrap.
        same += f" AND toUnixTimestamp64Second({parsed}) BETWEEN 0 AND 4294967295"
    return f"if({same}, {value}, NULL)"


def decimal(t: str, inner: str, free: bool) -> str:
    """Decimal(P, S) from a number's text: NULL for NaN and infinities, more than P - S whole digits,
    and (`free`: a PostgreSQL numeric without precision, read as Decimal(38, 19)) digits past the
    scale that are not zeros. A column declared with its scale is written with exactly that many
    digits after the point: no pattern runs on its values."""
    value = f"accurateCastOrNull({t}, {quote_str(inner)})"
    if not free:
        return value
    numbers = re.findall(r"\d+", inner)
    scale = int(numbers[1]) if len(numbers) >= 2 else 0
    point = f"position({t}, '.')"
    pattern = quote_str("\\.[0-9]{" + str(scale) + "}[0-9]*[1-9]")
    # AND is lazy: the pattern runs only on text with more digits after the point than the scale.
    extra = f"{point} > 0 AND length({t}) - {point} > {scale} AND match({t}, {pattern})"
    return f"if({extra}, NULL, {value})"


def strict(column: SourceColumn) -> str:
    """The value of a column read as text; the read fails naming the column where one does not fit."""
    ident = quote_ident(column.name)
    message = quote_str(f"column {column.name}: a value does not fit {split_nullable(column.type)[1]}")
    if split_nullable(column.type)[1] == "String":  # the text itself (chute.sources.database.numerics)
        return f"CAST({column.exact}, {quote_str(column.type)})"
    fits = f"isNull({ident}) OR isNotNull({column.exact})"
    return f"CAST({column.exact} + throwIf(NOT ({fits}), {message}), {quote_str(column.type)})"


def checked_read(column: SourceColumn, type_sql: str) -> CheckedRead | None:
    """How the loader reads a column read as text (`column.text`) into `type_sql`, its own type or
    the table's (see `CheckedValues`); None where the conversion is not one of these."""
    ident = quote_ident(column.name)
    nullable, inner = split_nullable(type_sql)
    if column.type != type_sql and column.numeric and inner.startswith("Decimal"):
        # A table made by an earlier run (or by hand): the text converts exactly into its type.
        column = replace(column, type=type_sql, exact=decimal(ident, inner, True))
    elif column.type != type_sql:
        if (split_nullable(column.type)[1], inner) != ("Date32", "Date"):
            return None
        # A server without Date32 (before 21.9): Date, which holds 1970-01-01 to 2149-06-06;
        # a cast past them fails the whole read, so such a date is a rejected row.
        in_range = f"{column.exact} BETWEEN toDate32('1970-01-01') AND toDate32('2149-06-06')"
        column = replace(column, type=type_sql, exact=f"if({in_range}, toDate({column.exact}), NULL)")
    missing = "NULL" if nullable else f"defaultValueOfTypeName({quote_str(inner)})"
    fits = f"(isNull({ident}) OR isNotNull({column.exact}))"
    lenient = f"CAST(if({fits}, {column.exact}, {missing}), {quote_str(type_sql)})"
    return CheckedRead(column.raw, strict(column), fits, lenient)
