"""Column types chosen from SQL aggregates over the sample: a type is proposed only if
every sampled value survives it exactly."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chute.engine import Engine
from chute.schema import NULL_MARKERS
from chute.sql import quote_ident, quote_str

HEADROOM = 4
"""A partial sample cannot show the largest value: integer types must hold 4x its range,
because the engine wraps out-of-range integers silently when it loads them."""
LC_MAX_DISTINCT = 10_000
LC_MAX_RATIO = 0.2
ENUM_MAX_VALUES = 255

INT_RANGES: tuple[tuple[str, int, int], ...] = (
    ("UInt8", 0, 2**8 - 1),
    ("Int8", -(2**7), 2**7 - 1),
    ("UInt16", 0, 2**16 - 1),
    ("Int16", -(2**15), 2**15 - 1),
    ("UInt32", 0, 2**32 - 1),
    ("Int32", -(2**31), 2**31 - 1),
    ("UInt64", 0, 2**64 - 1),
    ("Int64", -(2**63), 2**63 - 1),
)

SCALAR_INPUT = re.compile(r"^(String|U?Int(8|16|32|64)|Float(32|64)|Bool)$")

_DATE_RE = r"^\d{4}-\d{2}-\d{2}$"
_DATETIME_RE = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})?$"
_OFFSET_RE = r"([+-]\d{2}:?\d{2})$"
_FRACTION_RE = r"\.(\d+)"
_DATETIME_MIN, _DATETIME_MAX = "1970-01-01 00:00:00", "2106-02-07 06:28:15"
_DATETIME64_MIN, _DATETIME64_MAX = "1900-01-01 00:00:00", "2262-04-11 23:47:16"


@dataclass(frozen=True)
class Typed:
    """A chosen column type (Nullable included) and the SQL that turns a sampled value into it."""

    type: str
    convert: Callable[[str], str]
    reason: str
    distinct: int = 0
    nulls: int = 0
    null_marker: str = ""
    """The text that stands for NULL in this column of the files (`NA`; see schema.NULL_MARKERS)."""


@dataclass(frozen=True)
class _Base:
    """A type before nulls are considered; `parse` turns text into it where CAST cannot."""

    type: str
    reason: str
    parse: Callable[[str], str] | None = None


def unwrap(type_: str, wrapper: str) -> tuple[str, bool]:
    prefix = wrapper + "("
    if type_.startswith(prefix) and type_.endswith(")"):
        return type_[len(prefix) : -1], True
    return type_, False


def _nullable(type_: str, nulls: int) -> str:
    """Wrap in Nullable only where nulls occur; LowCardinality stays outermost."""
    if not nulls:
        return type_
    inner, low = unwrap(type_, "LowCardinality")
    return f"LowCardinality(Nullable({inner}))" if low else f"Nullable({type_})"


def cast(type_: str) -> Callable[[str], str]:
    return lambda v: f"CAST({v} AS {type_})"


def narrowest_int(lo: int, hi: int, headroom: bool) -> str | None:
    """The smallest integer type holding [lo, hi], with HEADROOM when the sample is partial."""
    want_lo = lo * HEADROOM if headroom and lo < 0 else lo
    want_hi = hi * HEADROOM if headroom and hi > 0 else hi
    for name, low, high in INT_RANGES:
        if low <= want_lo and want_hi <= high:
            return name
    return narrowest_int(lo, hi, False) if headroom else None


def _int_reason(lo: int, hi: int, chosen: str, headroom: bool, what: str) -> str:
    room = f" with {HEADROOM}x headroom (the sample is part of the data)" if headroom else ""
    return f"{what}, range {lo:,}..{hi:,}: {chosen} is the narrowest exact type{room}"


def first_row(engine: Engine, sql: str, context: str) -> dict[str, Any]:
    rows = engine.rows(sql, context=context)
    return rows[0] if rows else {}


def as_int(value: Any) -> int:
    return int(value) if value not in (None, "") else 0


class TypeChooser:
    """Chooses the type of one sampled column (or array element) from SQL aggregates."""

    def __init__(self, engine: Engine, complete: bool, enums: bool) -> None:
        self.engine = engine
        self.headroom = not complete
        self.enums = enums

    def choose(self, name: str, inferred: str, sample: str) -> Typed:
        context = f"design: measuring column {name}"
        col = quote_ident(name)
        base, _ = unwrap(inferred, "Nullable")
        element, is_array = unwrap(base, "Array")
        element_base, _ = unwrap(element, "Nullable")
        if is_array and SCALAR_INPUT.match(element_base):
            src = f"(SELECT arrayJoin({col}) AS x FROM {sample})"
            chosen = self._scalar("x", element_base, src, context, allow_enum=False)
            return Typed(
                f"Array({chosen.type})",
                lambda v: f"CAST(arrayMap(x -> {chosen.convert('x')}, {v}) AS Array({chosen.type}))",
                f"elements: {chosen.reason}",
            )
        # The column under a neutral name: the stats' aliases (n, d, lo, ...) must not shadow it.
        only = f"(SELECT {col} AS __chute_v FROM {sample})"
        if not SCALAR_INPUT.match(base):
            row = self._counts("__chute_v", only, context)
            nulls = as_int(row.get("nulls"))
            type_ = inferred if nulls else base
            why = "nulls occur" if nulls else "no nulls in the sample"
            return Typed(type_, cast(type_), f"kept as inferred ({why})", as_int(row.get("d")), nulls)
        return self._scalar("__chute_v", base, only, context, allow_enum=self.enums)

    def _counts(self, v: str, src: str, context: str) -> dict[str, Any]:
        return first_row(
            self.engine, f"SELECT count() AS n, countIf({v} IS NULL) AS nulls, uniq({v}) AS d FROM {src}", context
        )

    def _scalar(self, v: str, inferred: str, src: str, context: str, allow_enum: bool) -> Typed:
        if inferred == "String":
            row = first_row(self.engine, _string_stats_sql(v, src), context)
            marked = self._with_marker(v, src, context, row)
            if marked is not None:
                return marked
        else:
            row = self._counts(v, src, context)
        n, nulls, distinct = as_int(row["n"]), as_int(row["nulls"]), as_int(row["d"])
        if n == nulls:
            base = _Base(inferred, "only nulls in the sample: kept as inferred")
            nulls = max(nulls, 1)  # nothing says the column is never null
        elif inferred == "String":
            base = self._string(v, src, context, row, n - nulls, distinct, allow_enum)
        elif inferred.startswith(("Int", "UInt")):
            base = self._integer(v, src, context)
        elif inferred.startswith("Float"):
            base = self._float(v, src, context, n - nulls)
        else:
            base = _Base(inferred, "kept as inferred")
        full = _nullable(base.type, nulls)
        reason = base.reason + (f"; Nullable: {nulls:,} nulls in the sample" if nulls and n != nulls else "")
        parse = base.parse
        convert = (lambda v: f"CAST({parse(v)} AS {full})") if parse else cast(full)
        return Typed(full, convert, reason, distinct, nulls)

    def _with_marker(self, v: str, src: str, context: str, row: dict[str, Any]) -> Typed | None:
        """A text column whose values are of one type but for one NULL marker (`NA`): that type,
        Nullable, the marker NULL (None when the column is text, or holds no marker or several)."""
        values = as_int(row["n"]) - as_int(row["nulls"])
        if not values or any(parsed(row, values) for parsed in self._parsers()):
            return None
        markers = ", ".join(quote_str(m) for m in NULL_MARKERS)
        found = first_row(self.engine, f"SELECT groupUniqArrayIf({v}, {v} IN ({markers})) AS m FROM {src}", context)
        if len(found.get("m") or []) != 1:
            return None
        marker = str(found["m"][0])
        text = f"nullIf({v}, {quote_str(marker)})"
        again = first_row(self.engine, _string_stats_sql(text, src), context)
        n, nulls = as_int(again["n"]), as_int(again["nulls"])
        base = next((b for b in (p(again, n - nulls) for p in self._parsers()) if b is not None), None)
        if base is None or n == nulls:
            return None
        full = _nullable(base.type, nulls)
        parse = base.parse or cast(full)
        reason = f"{base.reason}; Nullable: {nulls:,} nulls in the sample, written {marker}"
        return Typed(
            full,
            lambda x: f"CAST({parse(f'nullIf({x}, {quote_str(marker)})')} AS {full})",
            reason,
            as_int(again["d"]),
            nulls,
            marker,
        )

    def _parsers(self) -> tuple[Callable[[dict[str, Any], int], _Base | None], ...]:
        return (self._as_date, self._as_datetime, self._as_integer, self._as_float)

    def _integer(self, v: str, src: str, context: str) -> _Base:
        row = first_row(self.engine, f"SELECT toString(min({v})) AS lo, toString(max({v})) AS hi FROM {src}", context)
        lo, hi = as_int(row["lo"]), as_int(row["hi"])
        chosen = narrowest_int(lo, hi, self.headroom) or "Int64"
        return _Base(chosen, _int_reason(lo, hi, chosen, self.headroom, "integers"))

    def _float(self, v: str, src: str, context: str, values: int) -> _Base:
        row = first_row(
            self.engine, f"SELECT countIf(isNaN({v}) OR toFloat64(toFloat32({v})) = {v}) AS f32 FROM {src}", context
        )
        lossy = values - as_int(row["f32"])
        if not lossy:
            return _Base("Float32", "every value is exact in Float32")
        return _Base("Float64", f"{lossy:,} values would change in Float32: Float64")

    def _string(
        self, v: str, src: str, context: str, row: dict[str, Any], values: int, distinct: int, allow_enum: bool
    ) -> _Base:
        for parsed in self._parsers():
            base = parsed(row, values)
            if base is not None:
                return base
        if allow_enum and distinct <= ENUM_MAX_VALUES:
            enum = self._enum(v, src, context)
            if enum is not None:
                return enum
        if distinct <= LC_MAX_DISTINCT and distinct <= values * LC_MAX_RATIO:
            return _Base("LowCardinality(String)", f"{distinct:,} distinct values in {values:,}: LowCardinality")
        return _Base("String", f"{distinct:,} distinct values in {values:,}: too many for LowCardinality")

    def _as_date(self, row: dict[str, Any], values: int) -> _Base | None:
        if as_int(row["dates"]) != values:
            return None
        if as_int(row["dates_outside_date"]) == 0:
            return _Base("Date", "every value is a valid YYYY-MM-DD date within 1970..2149")
        return _Base("Date32", "every value is a valid YYYY-MM-DD date, some outside Date's 1970..2149")

    def _as_datetime(self, row: dict[str, Any], values: int) -> _Base | None:
        if as_int(row["dts_exact"]) != values or as_int(row["outside_datetime64"]):
            return None
        digits = as_int(row["frac"])
        precision = 0 if digits == 0 else 3 if digits <= 3 else 6 if digits <= 6 else 9
        tz, tz_reason = _timezone(row, values)
        reason = f"every value is an ISO 8601 / RFC 3339 time that round-trips; {tz_reason}"
        if precision == 0 and not as_int(row["outside_datetime"]):
            type_ = f"DateTime({quote_str(tz)})"
        else:
            type_ = f"DateTime64({precision}, {quote_str(tz)})"
            reason += f"; {digits} fraction digits" if digits else "; outside DateTime's 1970..2106"

        def parse(v: str) -> str:
            return f"parseDateTime64BestEffortOrNull({v}, {precision}, {quote_str(tz)})"

        return _Base(type_, reason, parse)

    def _as_integer(self, row: dict[str, Any], values: int) -> _Base | None:
        if as_int(row["ints"]) != values:
            return None
        lo, hi = as_int(row["int_lo"]), as_int(row["int_hi"])
        chosen = narrowest_int(lo, hi, self.headroom)
        if chosen is None:
            return None
        what = "integers written as text that round-trip exactly (no leading zeros, signs or spaces)"
        return _Base(chosen, _int_reason(lo, hi, chosen, self.headroom, what))

    def _as_float(self, row: dict[str, Any], values: int) -> _Base | None:
        if as_int(row["floats"]) != values:
            return None
        if as_int(row["floats32"]) == values:
            return _Base("Float32", "numbers written as text, every one exact in Float32")
        return _Base("Float64", "numbers written as text that round-trip exactly in Float64")

    def _enum(self, v: str, src: str, context: str) -> _Base | None:
        row = first_row(self.engine, f"SELECT groupUniqArray({ENUM_MAX_VALUES + 1})({v}) AS vals FROM {src}", context)
        names = sorted(str(x) for x in row.get("vals", []))
        if not names or len(names) > ENUM_MAX_VALUES:
            return None
        body = ", ".join(f"{quote_str(name)} = {i}" for i, name in enumerate(names, start=1))
        reason = f"{len(names)} distinct values, Enum asked for (a value not in the list fails the load)"
        return _Base(f"Enum8({body})", reason)


def _offset_seconds(v: str) -> str:
    off = f"extract({v}, {quote_str(_OFFSET_RE)})"
    return (
        f"if({off} = '', 0, if(substring({off}, 1, 1) = '-', -1, 1) * "
        f"(toInt32(substring({off}, 2, 2)) * 3600 + toInt32(substring({off}, -2, 2)) * 60))"
    )


def _string_stats_sql(v: str, src: str) -> str:
    """One pass over a text column: every test a type must pass, counted."""
    is_dt = f"match({v}, {quote_str(_DATETIME_RE)})"
    parsed = f"parseDateTime64BestEffortOrNull({v}, 9, 'UTC')"
    local = f"formatDateTime(addSeconds({parsed}, {_offset_seconds(v)}), '%Y-%m-%d %H:%i:%S', 'UTC')"
    as_int = f"toInt128OrNull({v})"
    as_float = f"toFloat64OrNull({v})"
    date32 = f"toDate32OrNull({v})"
    return (
        f"SELECT count() AS n, countIf({v} IS NULL) AS nulls, uniq({v}) AS d, "
        f"countIf(match({v}, {quote_str(_DATE_RE)}) AND toString({date32}) = {v}) AS dates, "
        f"countIf({date32} < toDate32('1970-01-01') OR {date32} > toDate32('2149-06-06')) AS dates_outside_date, "
        f"countIf({is_dt} AND {parsed} IS NOT NULL "
        f"AND {local} = replaceOne(substring({v}, 1, 19), 'T', ' ')) AS dts_exact, "
        f"countIf({is_dt} AND ({parsed} < toDateTime64({quote_str(_DATETIME_MIN)}, 0, 'UTC') "
        f"OR {parsed} > toDateTime64({quote_str(_DATETIME_MAX)}, 0, 'UTC'))) AS outside_datetime, "
        f"countIf({is_dt} AND ({parsed} < toDateTime64({quote_str(_DATETIME64_MIN)}, 0, 'UTC') "
        f"OR {parsed} > toDateTime64({quote_str(_DATETIME64_MAX)}, 0, 'UTC'))) AS outside_datetime64, "
        f"max(if({is_dt}, length(extract({v}, {quote_str(_FRACTION_RE)})), 0)) AS frac, "
        f"countIf(endsWith({v}, 'Z')) AS zulu, "
        f"uniqExact(extract({v}, {quote_str(_OFFSET_RE)})) AS offsets, "
        f"any(extract({v}, {quote_str(_OFFSET_RE)})) AS offset, "
        f"countIf(toString({as_int}) = {v}) AS ints, "
        f"toString(min({as_int})) AS int_lo, toString(max({as_int})) AS int_hi, "
        f"countIf(toString({as_float}) = {v}) AS floats, "
        f"countIf(toString({as_float}) = {v} AND (isNaN({as_float}) OR toFloat64(toFloat32({as_float})) = {as_float})) "
        f"AS floats32 FROM {src}"
    )


def _timezone(row: dict[str, Any], values: int) -> tuple[str, str]:
    """The zone to keep: UTC for Z, a fixed Etc/GMT zone for one whole-hour offset."""
    zulu, offsets, offset = as_int(row["zulu"]), as_int(row["offsets"]), str(row.get("offset") or "")
    if zulu == values:
        return "UTC", "the strings end with Z: DateTime('UTC')"
    if offsets == 1 and offset:
        hours, minutes = int(offset[1:3]), int(offset[-2:])
        if minutes == 0 and hours == 0:
            return "UTC", f"every string has offset {offset}: UTC"
        if minutes == 0 and hours <= 12:
            zone = f"Etc/GMT{'-' if offset[0] == '+' else '+'}{hours}"
            return zone, f"every string has offset {offset}: zone {zone}"
        return "UTC", f"every string has offset {offset}; instants are exact, shown in UTC"
    if zulu == 0 and offsets == 1:
        return "UTC", "no zone in the strings: read and shown as UTC, so every value round-trips"
    return "UTC", "offsets differ between values; instants are exact, shown in UTC"
