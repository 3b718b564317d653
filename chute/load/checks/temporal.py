"""Dates and times checked in SQL: the text parsed wide, then its clock, day and range checked,
where the engine's parsers would roll over or clamp (`2024-02-30` is March 1st to them, and
`2024-01-01 25:61:61` the next day at 02:02:01)."""

from __future__ import annotations

import re
from collections.abc import Callable

from chute.load.checks.types import FAIL_MESSAGE, FastRead, is_temporal
from chute.sql import quote_str


def holds(inner: str) -> bool:
    """Date, Date32, DateTime, DateTime64."""
    return is_temporal(inner)


def conversion(text: str, inner: str) -> str | None:
    """SQL turning the String `text` into the date or time type `inner`, NULL when it does not fit."""
    temporal = temporal_parts(text, inner)
    if temporal is None:
        return None
    wide, fits, convert, _ = temporal
    return f"if({fits}, {convert(wide)}, NULL)"


def text_read(ident: str, type_sql: str, inner: str, nullable: bool, json: bool, absent: str) -> FastRead | None:
    """A date or time of a text file, read as text and parsed once, converted without if() (whose
    branches the engine would compute apart). `absent`: SQL that the text is missing."""
    temporal = temporal_parts(ident, inner)
    if temporal is None:
        return None
    wide, wide_fits, convert, zero = temporal
    fits = f"bitOr({absent}, ifNull({wide_fits}, 0))"  # (NULL text: NULL checks; bitOr keeps a NULL)
    strict = convert(wide if nullable else f"ifNull({wide}, {zero})")
    lenient = convert(f"if({fits}, {wide}, NULL)" if nullable else f"if({fits}, ifNull({wide}, {zero}), {zero})")
    return FastRead(
        "Nullable(String)" if json or nullable else "String",
        f"CAST({strict} + throwIf({fits} = 0, {FAIL_MESSAGE}), {quote_str(type_sql)})",
        f"({fits} != 0)",
        f"CAST({lenient}, {quote_str(type_sql)})",
    )


def typed_read(ident: str, inner: str) -> tuple[str, str] | None:
    """A typed file's Date or DateTime column: (the wider type it is read as, SQL of its exact
    value or NULL). Date32 and DateTime64 are as wide as a read gets: None (read as they are)."""
    tz = re.search(r"'([^']*)'", inner)
    tz_arg = f", {quote_str(tz.group(1))}" if tz else ""
    if inner == "Date":
        lo, hi = DATE_RANGE
        in_range = f"{ident} BETWEEN toDate32('{lo}') AND toDate32('{hi}')"
        return "Date32", f"if({in_range}, toDate({ident}), NULL)"
    if inner.startswith("DateTime") and not inner.startswith("DateTime64"):
        # Read to the nanosecond: a timestamp with a fraction of a second does not fit (a read as
        # DateTime64(0) would have cut the fraction off before any check).
        in_range = f"toUnixTimestamp64Second({ident}) BETWEEN 0 AND 4294967295"
        whole = f"toUnixTimestamp64Nano({ident}) % 1000000000 = 0"
        return f"DateTime64(9{tz_arg})", f"if({in_range} AND {whole}, toDateTime({ident}{tz_arg}), NULL)"
    return None


def temporal_parts(text: str, inner: str) -> tuple[str, str, Callable[[str], str], str] | None:
    """A date or time type's text, in parts: (the text parsed wide or NULL, SQL that
    the parsed value fits the type (its clock unrolled, its day in range), SQL converting a
    parsed value into the type, the type's zero as a wide value). None for other types."""
    tz = re.search(r"'([^']*)'", inner)
    tz_arg = f", {quote_str(tz.group(1))}" if tz else ""
    if inner in ("Date", "Date32"):
        fn, (lo, hi) = ("toDate", DATE_RANGE) if inner == "Date" else ("toDate32", DATE32_RANGE)
        wide, zero = f"parseDateTime64BestEffortOrNull({text}, 0, 'UTC')", "toDateTime64(0, 0, 'UTC')"
        in_range = f"toDate32(ifNull({wide}, {zero})) BETWEEN toDate32('{lo}') AND toDate32('{hi}')"
        checks = [clock_ok(text), date_ok(text), f"isNotNull({wide})", in_range]
        return wide, _all_of(*checks), lambda w: f"{fn}({w})", zero
    if inner.startswith("DateTime64"):
        precision = re.search(r"DateTime64\(\s*(\d+)", inner)
        p = precision.group(1) if precision else "3"
        wide, zero = f"parseDateTime64BestEffortOrNull({text}, {p}{tz_arg})", f"toDateTime64(0, {p}{tz_arg})"
        checks = [clock_ok(text), date_ok(text), fraction_ok(text, int(p)), f"isNotNull({wide})"]
        checks += _wall_clock_ok(text, wide, zero, tz.group(1) if tz else "")
        return wide, _all_of(*checks), lambda w: w, zero
    if inner.startswith("DateTime"):
        wide, zero = f"parseDateTime64BestEffortOrNull({text}, 0{tz_arg})", f"toDateTime64(0, 0{tz_arg})"
        in_range = f"toUnixTimestamp64Second(ifNull({wide}, {zero})) BETWEEN 0 AND 4294967295"
        checks = [clock_ok(text), date_ok(text), fraction_ok(text, 0), f"isNotNull({wide})", in_range]
        checks += _wall_clock_ok(text, wide, zero, tz.group(1) if tz else "")
        return wide, _all_of(*checks), lambda w: f"toDateTime({w}{tz_arg})", zero
    return None


UTC_NAMES = frozenset({"", "UTC", "Etc/UTC", "GMT", "Etc/GMT", "Zulu", "Universal", "Etc/Universal"})


def _wall_clock_ok(text: str, wide: str, zero: str, tz: str) -> list[str]:
    """In a column's time zone with daylight saving, a local time in the hour the clocks skip
    (`2024-03-10 02:30` in America/New_York) does not exist: the parser moves it an hour. The
    parsed value's hh:mm must be the text's, for `YYYY-MM-DD hh:mm` texts without an offset.
    (Columns in UTC, or in the session's zone, are not checked.)"""
    if tz in UTC_NAMES:
        return []
    layout = f"(substring({text}, 11, 1) IN (' ', 'T') AND substring({text}, 14, 1) = ':')"
    offset = f"match({text}, '(?:Z|[+-][0-9]{{2}}:?[0-9]{{2}})\\s*$')"
    same = f"substring({text}, 12, 5) = formatDateTime(ifNull({wide}, {zero}), '%H:%i', {quote_str(tz)})"
    return [f"(NOT {layout} OR {offset} OR isNull({wide}) OR {same})"]


def _all_of(*conditions: str) -> str:
    """Conditions that are never NULL, all true: bitAnd (the engine's AND is lazy, and costs twice)."""
    result = conditions[0]
    for condition in conditions[1:]:
        result = f"bitAnd({result}, {condition})"
    return result


DATE_RANGE = ("1970-01-01", "2149-06-06")
DATE32_RANGE = ("0001-01-01", "9999-12-31")
"""What the engine's Date32 holds and gives back (its documented range is 1900-2299), as a
database source's dates are kept: a table's export in text loads back the same."""


def clock_ok(text: str) -> str:
    """No hour past 23 nor minute or second past 59 in the text: the engine's parsers roll
    `25:61:61` over into the next day instead of refusing it. `...hh:mm:ss` at the 12th
    character (`YYYY-MM-DD hh:mm:ss`, ISO 8601 with `T`) is checked on its bytes: every row
    of a clean file pays this, and a regular expression costs four times as much. Any other
    layout takes the regular expression."""
    clock = f"reinterpretAsUInt64(substring({text}, 12, 8))"  # h h : m m : s s, first byte lowest

    def byte(i: int) -> str:
        return f"bitAnd(bitShiftRight({clock}, {8 * i}), 255)" if i else f"bitAnd({clock}, 255)"

    layout = f"bitAnd({clock}, 0x0000FF0000FF0000) = 0x00003A00003A0000"  # ':' at bytes 2 and 5
    # bitAnd, not AND: the engine's AND evaluates lazily, copying the columns, at twice the cost.
    in_range = f"bitAnd(bitAnd(({byte(0)} - 48) * 10 + {byte(1)} - 48 < 24, {byte(3)} < 54), {byte(6)} < 54)"  # '6'
    regex = f"NOT match({text}, '(?:^|[ T])(?:2[4-9]|[3-9][0-9]):[0-9]|:[6-9][0-9](?:[^0-9]|$)')"
    return f"if({layout}, {in_range}, {regex})"


def date_ok(text: str) -> str:
    """No month or day 00 in the text: the engine's parsers take `2024-00-10` for January 10th
    and `2024-01-00` for January 1st. `YYYY-MM-DD...` is checked on its bytes (what every row of
    a clean file pays); any other layout takes a regular expression over the part before the
    clock: a number of the date that is all zeros (`00.01.2024`, `2024/00/10`), or `YYYYMMDD`
    with month or day 00."""
    part = f"reinterpretAsUInt64(substring({text}, 5, 8))"  # - M M - D D, first byte lowest
    layout = f"bitAnd({part}, 0xFF0000FF) = 0x2D00002D"  # '-' at bytes 0 and 3
    month, day = f"bitAnd(bitShiftRight({part}, 8), 0xFFFF)", f"bitAnd(bitShiftRight({part}, 32), 0xFFFF)"
    fine = f"bitAnd({month} != 0x3030, {day} != 0x3030)"  # '00' is 0x3030
    date = f"extract({text}, '^[^ T]*')"
    regex = f"NOT match({date}, '^[0-9]{{4}}(?:00[0-9]{{2}}|[0-9]{{2}}00)$|(?:^|[-/.])0+[-/.]|[-/.]0+$')"
    return f"if({layout}, {fine}, {regex})"


def fraction_ok(text: str, precision: int) -> str:
    """No digit past the type's `precision` that is not 0, in the fraction of a second after the
    clock (`10:20:30.1239`) or of a number of seconds (`1705314030.5`): the parsers drop those
    digits (`.1239` into DateTime64(3) is .123, `.5` into DateTime is gone). Text without a `.`
    (most) pays only the search for it, text with a short tail after it its length."""
    digits = f"[0-9]{{{precision}}}" if precision else ""
    regex = f"':[0-9]{{2}}\\\\.{digits}[0-9]*[1-9]|^[0-9]+\\\\.{digits}[0-9]*[1-9][0-9]*$'"
    # Text with no more characters after its `.` than the precision holds no digit past it: no
    # regex (`.123Z`, `.123456+05:30` into DateTime64(9): most fractions of API dumps).
    dot = f"position({text}, '.')"
    return f"if({dot} = 0 OR length({text}) - {dot} <= {precision}, 1, NOT match({text}, {regex}))"
