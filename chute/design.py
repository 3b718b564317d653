"""Measured table layouts: types, codecs and ORDER BY chosen by trying them.

The engine loads a sample of the files once into a scratch table; everything
after that is SQL on the sample. Value ranges and round trips choose the types
(a type is proposed only if every sampled value survives it exactly), candidate
tables holding every codec variant of every column choose the codecs, and the
sample written into each candidate ORDER BY chooses the layout by bytes on
disk. Python loops over columns and candidates, never over rows. Scratch tables
are named `_chute_design_*` and are dropped whatever happens.
"""

from __future__ import annotations

import math
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from chute.engine import Engine, open_engine
from chute.errors import SchemaError, SourceError, UsageError
from chute.schema import PROVENANCE_COLUMNS, PROVENANCE_NAMES, describe
from chute.sources.files import FileSource
from chute.sql import TableName, quote_ident, quote_str

__all__ = [
    "ColumnChoice",
    "LayoutTrial",
    "Proposal",
    "design_sources",
    "load_ddl_file",
    "propose",
    "render_text",
]

SCRATCH_PREFIX = "_chute_design_"
DEFAULT_SAMPLE_ROWS = 300_000
MAX_SAMPLE_FILES = 32
"""Files read for the sample at first; more only when these hold too few rows."""
MAX_READ_FILES = 256
HEADROOM = 4
"""A partial sample cannot show the largest value: integer types must hold 4x its range,
because the engine wraps out-of-range integers silently when it loads them."""
LC_MAX_DISTINCT = 10_000
LC_MAX_RATIO = 0.2
ENUM_MAX_VALUES = 255
MAX_KEY_DIMENSIONS = 4
MAX_TIME_COLUMNS = 2
MAX_LAYOUTS = 7
COSTLIER_MUST_WIN_BY = 0.02
"""A costlier codec (or a longer key) is chosen only if it is at least 2% smaller."""
PARTITION_MIN_DAYS = 92

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

# Codec candidates per kind of data, cheapest first ("" is the default, LZ4).
INT_CODECS = (
    "",
    "T64, LZ4",
    "Delta, LZ4",
    "DoubleDelta",
    "ZSTD(1)",
    "T64, ZSTD(1)",
    "Delta, ZSTD(1)",
    "DoubleDelta, ZSTD(1)",
    "ZSTD(3)",
    "T64, ZSTD(3)",
    "Delta, ZSTD(3)",
)
FLOAT_CODECS = ("", "Gorilla", "ZSTD(1)", "Gorilla, ZSTD(1)", "ZSTD(3)")
GENERIC_CODECS = ("", "ZSTD(1)", "ZSTD(3)")

_INT_LIKE = re.compile(r"^(U?Int(8|16|32|64)|Bool|Date|Date32|DateTime(64)?(\(.*\))?|Enum(8|16)\(.*\))$")
_TIME = re.compile(r"^(Date|Date32|DateTime(64)?(\(.*\))?)$")
_SCALAR_INPUT = re.compile(r"^(String|U?Int(8|16|32|64)|Float(32|64)|Bool)$")
_TEXT_FORMAT = re.compile(r"^\s*\w+\(\s*'(?:[^'\\]|\\.)*'\s*,\s*'(CSV|TSV|TabSeparated|CSVWithNames|TSVWithNames)'")

_DATE_RE = r"^\d{4}-\d{2}-\d{2}$"
_DATETIME_RE = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})?$"
_OFFSET_RE = r"([+-]\d{2}:?\d{2})$"
_DATETIME_MIN, _DATETIME_MAX = "1970-01-01 00:00:00", "2106-02-07 06:28:15"
_DATETIME64_MIN, _DATETIME64_MAX = "1900-01-01 00:00:00", "2262-04-11 23:47:16"


# -- what a proposal holds ------------------------------------------------------


@dataclass(frozen=True)
class ColumnChoice:
    """One column of the proposal: its type and codec, and why."""

    name: str
    inferred: str
    """The type the engine inferred from the input (before any choice)."""
    type: str
    codec: str
    """The CODEC(...) arguments; "" is the server default (LZ4)."""
    reason: str
    codec_reason: str


@dataclass(frozen=True)
class LayoutTrial:
    """One ORDER BY tried: the sample written into it and measured."""

    name: str
    order_by: str
    bytes_on_disk: int
    rows: int
    column_bytes: Mapping[str, int]
    """Compressed bytes per column, with the codecs chosen for this layout."""
    codecs: Mapping[str, str] = field(default_factory=dict)

    @property
    def bytes_per_row(self) -> float:
        return self.bytes_on_disk / self.rows if self.rows else 0.0


@dataclass(frozen=True)
class Proposal:
    """A measured CREATE TABLE and the evidence for it."""

    table: str
    ddl: str
    columns: tuple[ColumnChoice, ...]
    layouts: tuple[LayoutTrial, ...]
    winner: str
    why: str
    order_by: str
    partition_by: str | None
    partition_reason: str
    sample_rows: int
    sample_complete: bool
    """True when the sample is every row of every file (types are then exact, no headroom)."""
    files_sampled: int
    files_total: int
    final_bytes_on_disk: int
    """The sample written into the proposed DDL itself (which also proves the DDL valid)."""
    seconds: float
    notes: tuple[str, ...] = ()


# -- types ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Typed:
    """A chosen type and the SQL that turns a sampled value into it."""

    type: str
    convert: Callable[[str], str]
    reason: str
    distinct: int = 0
    nulls: int = 0


def _unwrap(type_: str, wrapper: str) -> tuple[str, bool]:
    prefix = wrapper + "("
    if type_.startswith(prefix) and type_.endswith(")"):
        return type_[len(prefix) : -1], True
    return type_, False


def _nullable(type_: str, nulls: int) -> str:
    """Wrap in Nullable only where nulls occur; LowCardinality stays outermost."""
    if not nulls:
        return type_
    inner, low = _unwrap(type_, "LowCardinality")
    return f"LowCardinality(Nullable({inner}))" if low else f"Nullable({type_})"


def _cast(type_: str) -> Callable[[str], str]:
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
    room = f" ({HEADROOM}x headroom: the sample is part of the data)" if headroom else ""
    return f"{what}, range {lo:,}..{hi:,}: {chosen} is the narrowest exact type{room}"


def _one(engine: Engine, sql: str, context: str) -> dict[str, Any]:
    rows = engine.rows(sql, context=context)
    return rows[0] if rows else {}


def _int(value: Any) -> int:
    return int(value) if value not in (None, "") else 0


class _TypeChooser:
    """Chooses the type of one sampled column (or array element) from SQL aggregates."""

    def __init__(self, engine: Engine, complete: bool, enums: bool) -> None:
        self.engine = engine
        self.headroom = not complete
        self.enums = enums

    def choose(self, name: str, inferred: str, sample: str) -> _Typed:
        context = f"measuring column {name}"
        col = quote_ident(name)
        base, _ = _unwrap(inferred, "Nullable")
        element, is_array = _unwrap(base, "Array")
        element_base, _ = _unwrap(element, "Nullable")
        if is_array and _SCALAR_INPUT.match(element_base):
            src = f"(SELECT arrayJoin({col}) AS x FROM {sample})"
            chosen = self._scalar("x", element_base, src, context, allow_enum=False)
            return self._array(chosen, element_base)
        if not _SCALAR_INPUT.match(base):
            return self._kept(col, inferred, base, sample, context)
        return self._scalar(col, base, sample, context, allow_enum=self.enums)

    def _array(self, element: _Typed, inferred: str) -> _Typed:
        elem_type = _nullable(element.type, element.nulls)
        convert = element.convert
        if element.type.startswith(("DateTime", "Date")):
            return _Typed(
                f"Array({elem_type})",
                lambda v: f"CAST(arrayMap(x -> {convert('x')}, {v}) AS Array({elem_type}))",
                f"elements: {element.reason}",
                element.distinct,
            )
        return _Typed(f"Array({elem_type})", _cast(f"Array({elem_type})"), f"elements: {element.reason}")

    def _kept(self, col: str, inferred: str, base: str, sample: str, context: str) -> _Typed:
        row = _one(self.engine, f"SELECT countIf({col} IS NULL) AS nulls, uniq({col}) AS d FROM {sample}", context)
        nulls = _int(row.get("nulls"))
        type_ = inferred if nulls or inferred == base else base
        why = "nulls occur" if nulls else "no nulls in the sample"
        return _Typed(type_, _cast(type_), f"kept as inferred ({why})", _int(row.get("d")), nulls)

    def _scalar(self, v: str, base: str, src: str, context: str, allow_enum: bool) -> _Typed:
        if base == "String":
            chosen = self._string(v, src, context, allow_enum)
        elif base.startswith(("Int", "UInt")):
            chosen = self._integer(v, src, context)
        elif base.startswith("Float"):
            chosen = self._float(v, src, context)
        else:
            row = _one(self.engine, f"SELECT countIf({v} IS NULL) AS nulls, uniq({v}) AS d FROM {src}", context)
            chosen = _Typed(base, _cast(base), "kept as inferred", _int(row.get("d")), _int(row.get("nulls")))
        if chosen.nulls and chosen.reason:
            chosen = replace(chosen, reason=f"{chosen.reason}; Nullable: {chosen.nulls:,} nulls in the sample")
        return chosen

    def _integer(self, v: str, src: str, context: str) -> _Typed:
        row = _one(
            self.engine,
            f"SELECT count() AS n, countIf({v} IS NULL) AS nulls, uniq({v}) AS d, "
            f"toString(min({v})) AS lo, toString(max({v})) AS hi FROM {src}",
            context,
        )
        nulls, distinct = _int(row["nulls"]), _int(row["d"])
        if _int(row["n"]) == nulls:
            return _Typed("String", _cast("Nullable(String)"), "only nulls in the sample", distinct, nulls)
        lo, hi = _int(row["lo"]), _int(row["hi"])
        chosen = narrowest_int(lo, hi, self.headroom) or "Int64"
        reason = _int_reason(lo, hi, chosen, self.headroom, "integers")
        return _Typed(chosen, _cast(_nullable(chosen, nulls)), reason, distinct, nulls)

    def _float(self, v: str, src: str, context: str) -> _Typed:
        row = _one(
            self.engine,
            f"SELECT count() AS n, countIf({v} IS NULL) AS nulls, uniq({v}) AS d, "
            f"countIf(isNaN({v}) OR toFloat64(toFloat32({v})) = {v}) AS f32 FROM {src}",
            context,
        )
        n, nulls, distinct = _int(row["n"]), _int(row["nulls"]), _int(row["d"])
        if n - nulls and _int(row["f32"]) == n - nulls:
            reason = "every value is exact in Float32"
            return _Typed("Float32", _cast(_nullable("Float32", nulls)), reason, distinct, nulls)
        lossy = n - nulls - _int(row["f32"])
        reason = f"Float64: {lossy:,} values would change in Float32"
        return _Typed("Float64", _cast(_nullable("Float64", nulls)), reason, distinct, nulls)

    def _string(self, v: str, src: str, context: str, allow_enum: bool) -> _Typed:
        row = _one(self.engine, _string_stats_sql(v, src), context)
        n, nulls, distinct = _int(row["n"]), _int(row["nulls"]), _int(row["d"])
        values = n - nulls
        if not values:
            return _Typed("String", _cast(_nullable("String", nulls)), "only nulls in the sample", distinct, nulls)
        for parsed in (self._as_date, self._as_datetime, self._as_integer, self._as_float):
            typed = parsed(row, values)
            if typed is not None:
                return replace(typed, distinct=distinct, nulls=nulls, convert=typed.convert)
        return self._text(v, src, context, values, distinct, nulls, allow_enum)

    def _as_date(self, row: dict[str, Any], values: int) -> _Typed | None:
        if _int(row["dates"]) != values:
            return None
        type_ = "Date" if _int(row["dates_outside_date"]) == 0 else "Date32"
        why = "within 1970..2149" if type_ == "Date" else "some before 1970 or after 2149"
        return _Typed(type_, _cast(type_), f"every value is a valid YYYY-MM-DD date, {why}")

    def _as_datetime(self, row: dict[str, Any], values: int) -> _Typed | None:
        if _int(row["dts_exact"]) != values or _int(row["outside_datetime64"]):
            return None
        digits = _int(row["frac"])
        precision = 0 if digits == 0 else 3 if digits <= 3 else 6 if digits <= 6 else 9
        tz, tz_reason = _timezone(row, values)
        fits_datetime = precision == 0 and not _int(row["outside_datetime"])
        type_ = f"DateTime({quote_str(tz)})" if fits_datetime else f"DateTime64({precision}, {quote_str(tz)})"
        parse_precision = max(precision, 0)
        reason = f"every value is an ISO 8601 / RFC 3339 time that round-trips; {tz_reason}"
        if not fits_datetime:
            reason += f"; {digits} fraction digits" if digits else "; outside DateTime's 1970..2106"

        def convert(v: str) -> str:
            return f"CAST(parseDateTime64BestEffortOrNull({v}, {parse_precision}, {quote_str(tz)}) AS {type_})"

        return _Typed(type_, convert, reason)

    def _as_integer(self, row: dict[str, Any], values: int) -> _Typed | None:
        if _int(row["ints"]) != values:
            return None
        lo, hi = _int(row["int_lo"]), _int(row["int_hi"])
        chosen = narrowest_int(lo, hi, self.headroom)
        if chosen is None:
            return None
        what = "integers written as text that round-trip exactly (no leading zeros, signs or spaces)"
        return _Typed(chosen, _cast(chosen), _int_reason(lo, hi, chosen, self.headroom, what))

    def _as_float(self, row: dict[str, Any], values: int) -> _Typed | None:
        if _int(row["floats"]) != values:
            return None
        if _int(row["floats32"]) == values:
            return _Typed("Float32", _cast("Float32"), "numbers written as text, every one exact in Float32")
        return _Typed("Float64", _cast("Float64"), "numbers written as text that round-trip exactly in Float64")

    def _text(self, v: str, src: str, context: str, values: int, distinct: int, nulls: int, allow_enum: bool) -> _Typed:
        if allow_enum and distinct <= ENUM_MAX_VALUES:
            enum = self._enum(v, src, context)
            if enum is not None:
                return replace(enum, distinct=distinct, nulls=nulls, convert=_cast(_nullable(enum.type, nulls)))
        if distinct <= LC_MAX_DISTINCT and distinct <= values * LC_MAX_RATIO:
            type_ = "LowCardinality(String)"
            reason = f"{distinct:,} distinct values in {values:,}: LowCardinality"
            return _Typed(type_, _cast(_nullable(type_, nulls)), reason, distinct, nulls)
        reason = f"{distinct:,} distinct values in {values:,}: too many for LowCardinality"
        return _Typed("String", _cast(_nullable("String", nulls)), reason, distinct, nulls)

    def _enum(self, v: str, src: str, context: str) -> _Typed | None:
        row = _one(self.engine, f"SELECT groupUniqArray({ENUM_MAX_VALUES + 1})({v}) AS vals FROM {src}", context)
        names = sorted(str(x) for x in row.get("vals", []))
        if not names or len(names) > ENUM_MAX_VALUES:
            return None
        body = ", ".join(f"{quote_str(name)} = {i}" for i, name in enumerate(names, start=1))
        reason = f"{len(names)} distinct values, Enum asked for (a value not in the list fails the load)"
        return _Typed(f"Enum8({body})", _cast(f"Enum8({body})"), reason)


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
        f"max(if({is_dt}, length(extract({v}, {quote_str(r'\.(\d+)')})), 0)) AS frac, "
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
    zulu, offsets, offset = _int(row["zulu"]), _int(row["offsets"]), str(row.get("offset") or "")
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


# -- the sample -------------------------------------------------------------------


@dataclass
class _Sample:
    table: str
    columns: list[tuple[str, str]]
    """Input columns as read: (name, type in the sample table)."""
    provenance: bool
    rows: int = 0
    files_read: int = 0
    complete: bool = False
    notes: list[str] = field(default_factory=list)


class _Scratch:
    """Names scratch tables of one run and drops them all at the end."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.prefix = f"{SCRATCH_PREFIX}{uuid.uuid4().hex[:10]}_"
        self.count = 0

    def name(self, label: str) -> str:
        self.count += 1
        return f"{self.prefix}{self.count}_{label}"

    def drop(self, name: str) -> None:
        self.engine.execute(f"DROP TABLE IF EXISTS {quote_ident(name)} SYNC", context="dropping a design table")

    def drop_all(self, prefix: str | None = None) -> None:
        """Drop this run's tables (or every table with `prefix`, left by a killed run)."""
        rows = self.engine.rows(
            "SELECT name FROM system.tables WHERE database = currentDatabase() "
            f"AND startsWith(name, {quote_str(prefix or self.prefix)})"
        )
        for row in rows:
            self.drop(str(row["name"]))


def _spread(count: int, take: int) -> list[int]:
    """`take` indices spread evenly over range(count), then the rest in order."""
    if count <= take:
        return list(range(count))
    first = sorted({round(i * (count - 1) / (take - 1)) for i in range(take)}) if take > 1 else [0]
    chosen = set(first)
    return first + [i for i in range(count) if i not in chosen]


def _is_text(expression: str) -> bool:
    return _TEXT_FORMAT.match(expression) is not None


def _sample_structure(
    engine: Engine, expressions: list[str], order: list[int], settings: dict[str, str | int | float]
) -> list[tuple[str, str]]:
    """Columns of the first readable file; numbers in CSV/TSV are read as text to test them."""
    infer = {
        **settings,
        "schema_inference_make_columns_nullable": 1,
        "input_format_try_infer_dates": 0,
        "input_format_try_infer_datetimes": 0,
    }
    last: Exception | None = None
    for index in order[:MAX_SAMPLE_FILES]:
        expression = expressions[index]
        try:
            columns = describe(engine, expression, "design: cannot infer the schema", format_settings=infer)
        except Exception as exc:  # a broken file: try the next one
            last = exc
            continue
        text = _is_text(expression)
        result = []
        for c in columns:
            base, _ = _unwrap(c.type, "Nullable")
            result.append((c.name, "Nullable(String)" if text and _SCALAR_INPUT.match(base) else c.type))
        return result
    raise SourceError(f"design: no file could be read: {last}")


def _load_sample(
    engine: Engine,
    scratch: _Scratch,
    expressions: list[str],
    sample_rows: int,
    settings: dict[str, str | int | float],
    deadline: float,
) -> _Sample:
    """Read the first rows of files spread over the list into one scratch table."""
    order = _spread(len(expressions), MAX_SAMPLE_FILES)
    columns = _sample_structure(engine, expressions, order, settings)
    names = {name for name, _ in columns}
    sample = _Sample(scratch.name("sample"), columns, provenance=not names & PROVENANCE_NAMES)
    body = [f"{quote_ident(n)} {t}" for n, t in columns]
    if sample.provenance:
        body += [f"{quote_ident(n)} {t}" for n, t in PROVENANCE_COLUMNS]
    engine.execute(
        f"CREATE TABLE {quote_ident(sample.table)} ({', '.join(body)}) ENGINE = MergeTree ORDER BY tuple()",
        context="design: creating the sample table",
    )
    hints = ", ".join(f"{quote_ident(n)} {t}" for n, t in columns)
    read = {**settings, "schema_inference_hints": hints, "input_format_try_infer_dates": 0}
    read["input_format_try_infer_datetimes"] = 0
    per_file = max(1, math.ceil(sample_rows / min(len(expressions), MAX_SAMPLE_FILES)))
    exhausted = 0
    for index in order[:MAX_READ_FILES]:
        if sample.rows >= sample_rows or (sample.files_read and time.monotonic() > deadline):
            break
        limit = min(per_file, sample_rows - sample.rows)
        try:
            got = _insert_sample(engine, sample, expressions[index], limit, read)
        except Exception as exc:
            sample.notes.append(f"a file was left out of the sample: {exc}")
            continue
        sample.rows += got
        sample.files_read += 1
        exhausted += got < limit
    sample.complete = exhausted == len(expressions)
    return sample


def _insert_sample(
    engine: Engine, sample: _Sample, expression: str, limit: int, settings: dict[str, str | int | float]
) -> int:
    names = [quote_ident(n) for n, _ in sample.columns]
    select = list(names)
    if sample.provenance:
        names += [quote_ident(n) for n, _ in PROVENANCE_COLUMNS]
        select += [
            "_path",
            "toDateTime64(ifNull(_time, toDateTime(0)), 3, 'UTC')",
            "_row_number + 1",
            quote_str("0" * 32),
        ]
    result = engine.execute(
        f"INSERT INTO {quote_ident(sample.table)} ({', '.join(names)}) "
        f"SELECT {', '.join(select)} FROM {expression} LIMIT {int(limit)}",
        settings=settings,
        context="design: reading the sample",
    )
    return result.rows_written


# -- layouts and codecs -------------------------------------------------------------


@dataclass(frozen=True)
class _Column:
    name: str
    inferred: str
    typed: _Typed

    @property
    def key_eligible(self) -> bool:
        """Plain, non-Nullable scalars with some repetition can sort the table."""
        base, low = _unwrap(self.typed.type, "LowCardinality")
        if self.typed.nulls or base.startswith(("Array", "Map", "Tuple", "Float", "Nullable", "JSON", "Object")):
            return False
        return self.typed.distinct >= 2

    @property
    def is_time(self) -> bool:
        return _TIME.match(self.typed.type) is not None

    @property
    def cost(self) -> int:
        """How cheap a key column is: integers before LowCardinality before text."""
        if _INT_LIKE.match(self.typed.type):
            return 0
        return 1 if self.typed.type.startswith("LowCardinality") else 2


def _codec_candidates(type_: str) -> tuple[str, ...]:
    base = type_
    for wrapper in ("Array", "Nullable"):
        base, _ = _unwrap(base, wrapper)
    if base.startswith("LowCardinality"):
        return GENERIC_CODECS
    if _INT_LIKE.match(base):
        return INT_CODECS
    if base.startswith("Float"):
        return FLOAT_CODECS
    return GENERIC_CODECS


def _order_by_sql(key: Sequence[str]) -> str:
    if not key:
        return "tuple()"
    if len(key) == 1:
        return quote_ident(key[0])
    return "(" + ", ".join(quote_ident(k) for k in key) + ")"


def _column_sql(name: str, type_: str, codec: str) -> str:
    return f"{quote_ident(name)} {type_}" + (f" CODEC({codec})" if codec else "")


def _pick_codec(sizes: Mapping[str, int], candidates: Sequence[str]) -> str:
    """The smallest; a costlier codec must beat the cheaper ones by COSTLIER_MUST_WIN_BY."""
    best = candidates[0]
    for codec in candidates[1:]:
        if codec in sizes and sizes[codec] < sizes[best] * (1 - COSTLIER_MUST_WIN_BY):
            best = codec
    return best


class _Measurer:
    """Writes the sample into scratch tables and reads their sizes from system tables."""

    def __init__(self, engine: Engine, scratch: _Scratch, sample: _Sample, columns: list[_Column]) -> None:
        self.engine = engine
        self.scratch = scratch
        self.sample = sample
        self.columns = columns
        self.codec_sizes: dict[str, dict[str, dict[str, int]]] = {}
        """Per layout name: per column: bytes per codec."""

    def _select(self, names: Sequence[str]) -> str:
        exprs = ", ".join(
            f"{c.typed.convert(quote_ident(c.name))} AS {quote_ident(n)}"
            for c, n in zip(self.columns, names, strict=True)
        )
        return f"SELECT {exprs} FROM {quote_ident(self.sample.table)}"

    def _write(self, table: str, body: list[str], tail: str, select: str) -> None:
        self.engine.execute(
            f"CREATE TABLE {quote_ident(table)} ({', '.join(body)}) ENGINE = MergeTree {tail}",
            context="design: creating a measuring table",
        )
        self.engine.execute(
            f"INSERT INTO {quote_ident(table)} {select}",
            settings={"max_insert_threads": 1},
            context="design: writing the sample",
        )
        parts = _one(
            self.engine,
            f"SELECT count() AS n FROM system.parts WHERE active AND database = currentDatabase() AND table = {quote_str(table)}",
            "design",
        )
        if _int(parts.get("n")) > 1:
            self.engine.execute(f"OPTIMIZE TABLE {quote_ident(table)} FINAL", context="design: merging")

    def _column_bytes(self, table: str) -> dict[str, int]:
        rows = self.engine.rows(
            "SELECT name, data_compressed_bytes AS b FROM system.columns "
            f"WHERE database = currentDatabase() AND table = {quote_str(table)}"
        )
        return {str(r["name"]): _int(r["b"]) for r in rows}

    def codecs(self, key: Sequence[str]) -> dict[str, dict[str, int]]:
        """Bytes of every codec of every column when the sample is sorted by `key`."""
        table = self.scratch.name("codecs")
        body, select, names = [], [], {}
        for i, c in enumerate(self.columns):
            for j, codec in enumerate(_codec_candidates(c.typed.type)):
                name = f"c{i}_{j}"
                names[name] = (c.name, codec)
                body.append(_column_sql(name, c.typed.type, codec))
                select.append(quote_ident(f"c{i}"))
        index = {c.name: i for i, c in enumerate(self.columns)}
        order = _order_by_sql([f"c{index[k]}_0" for k in key])
        inner = self._select([f"c{i}" for i in range(len(self.columns))])
        try:
            self._write(table, body, f"ORDER BY {order}", f"SELECT {', '.join(select)} FROM ({inner})")
            sizes: dict[str, dict[str, int]] = {c.name: {} for c in self.columns}
            for name, size in self._column_bytes(table).items():
                column, codec = names[name]
                sizes[column][codec] = size
        finally:
            self.scratch.drop(table)
        return sizes

    def layout(self, label: str, key: Sequence[str]) -> LayoutTrial:
        """The sample written into `key` with the best codec per column, measured on disk."""
        sizes = self.codecs(key)
        chosen = {c.name: _pick_codec(sizes[c.name], _codec_candidates(c.typed.type)) for c in self.columns}
        order = _order_by_sql(key)
        self.codec_sizes[label] = sizes
        table = self.scratch.name("layout")
        body = [_column_sql(c.name, c.typed.type, chosen[c.name]) for c in self.columns]
        try:
            self._write(table, body, f"ORDER BY {order}", self._select([c.name for c in self.columns]))
            on_disk = self.bytes_on_disk(table)
            column_bytes = self._column_bytes(table)
        finally:
            self.scratch.drop(table)
        return LayoutTrial(label, order, on_disk, self.sample.rows, column_bytes, chosen)

    def bytes_on_disk(self, table: str) -> int:
        row = _one(
            self.engine,
            "SELECT sum(bytes_on_disk) AS b FROM system.parts WHERE active "
            f"AND database = currentDatabase() AND table = {quote_str(table)}",
            "design: reading sizes",
        )
        return _int(row.get("b"))
