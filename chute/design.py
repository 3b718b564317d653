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

import contextlib
import dataclasses
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chute.engine import Engine, open_engine
from chute.errors import ChuteError, SchemaError, SourceError, UsageError
from chute.schema import PROVENANCE_COLUMNS, PROVENANCE_NAMES, describe
from chute.sniff import read_head
from chute.sources import Unit
from chute.sources.files import FileSource
from chute.sql import TableName, quote_ident, quote_str

__all__ = [
    "ColumnChoice",
    "LayoutTrial",
    "Proposal",
    "create_table_ddl",
    "design_sources",
    "load_ddl_file",
    "narrowest_int",
    "propose",
    "render_text",
]

SCRATCH_PREFIX = "_chute_design_"
DEFAULT_SAMPLE_ROWS = 300_000
MAX_SAMPLE_FILES = 32
"""Files read for the sample at first; more only when these hold too few rows."""
MAX_READ_FILES = 256
SAMPLE_CELLS = 6_000_000
"""Rows x columns of the sample: wide inputs get fewer rows, so every step stays bounded."""
MIN_SAMPLE_ROWS = 20_000
DEPENDENCY_DIMS = 12
"""Dependencies are looked for among the highest-cardinality dimensions only."""
CODEC_TABLE_COLUMNS = 200
"""Codec variants written per scratch table, to bound the memory of one insert."""
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
_WIDE = "SETTINGS min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0"
"""Scratch tables keep a file per column, as big tables do, so sizes per column can be read."""

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
_FRACTION_RE = r"\.(\d+)"
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
    """A chosen column type (Nullable included) and the SQL that turns a sampled value into it."""

    type: str
    convert: Callable[[str], str]
    reason: str
    distinct: int = 0
    nulls: int = 0


@dataclass(frozen=True)
class _Base:
    """A type before nulls are considered; `parse` turns text into it where CAST cannot."""

    type: str
    reason: str
    parse: Callable[[str], str] | None = None


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
    room = f" with {HEADROOM}x headroom (the sample is part of the data)" if headroom else ""
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
        context = f"design: measuring column {name}"
        col = quote_ident(name)
        base, _ = _unwrap(inferred, "Nullable")
        element, is_array = _unwrap(base, "Array")
        element_base, _ = _unwrap(element, "Nullable")
        if is_array and _SCALAR_INPUT.match(element_base):
            src = f"(SELECT arrayJoin({col}) AS x FROM {sample})"
            chosen = self._scalar("x", element_base, src, context, allow_enum=False)
            return _Typed(
                f"Array({chosen.type})",
                lambda v: f"CAST(arrayMap(x -> {chosen.convert('x')}, {v}) AS Array({chosen.type}))",
                f"elements: {chosen.reason}",
            )
        # The column under a neutral name: the stats' aliases (n, d, lo, ...) must not shadow it.
        only = f"(SELECT {col} AS __chute_v FROM {sample})"
        if not _SCALAR_INPUT.match(base):
            row = self._counts("__chute_v", only, context)
            nulls = _int(row.get("nulls"))
            type_ = inferred if nulls else base
            why = "nulls occur" if nulls else "no nulls in the sample"
            return _Typed(type_, _cast(type_), f"kept as inferred ({why})", _int(row.get("d")), nulls)
        return self._scalar("__chute_v", base, only, context, allow_enum=self.enums)

    def _counts(self, v: str, src: str, context: str) -> dict[str, Any]:
        return _one(
            self.engine, f"SELECT count() AS n, countIf({v} IS NULL) AS nulls, uniq({v}) AS d FROM {src}", context
        )

    def _scalar(self, v: str, inferred: str, src: str, context: str, allow_enum: bool) -> _Typed:
        if inferred == "String":
            row = _one(self.engine, _string_stats_sql(v, src), context)
        else:
            row = self._counts(v, src, context)
        n, nulls, distinct = _int(row["n"]), _int(row["nulls"]), _int(row["d"])
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
        convert = (lambda v: f"CAST({parse(v)} AS {full})") if parse else _cast(full)
        return _Typed(full, convert, reason, distinct, nulls)

    def _integer(self, v: str, src: str, context: str) -> _Base:
        row = _one(self.engine, f"SELECT toString(min({v})) AS lo, toString(max({v})) AS hi FROM {src}", context)
        lo, hi = _int(row["lo"]), _int(row["hi"])
        chosen = narrowest_int(lo, hi, self.headroom) or "Int64"
        return _Base(chosen, _int_reason(lo, hi, chosen, self.headroom, "integers"))

    def _float(self, v: str, src: str, context: str, values: int) -> _Base:
        row = _one(
            self.engine, f"SELECT countIf(isNaN({v}) OR toFloat64(toFloat32({v})) = {v}) AS f32 FROM {src}", context
        )
        lossy = values - _int(row["f32"])
        if not lossy:
            return _Base("Float32", "every value is exact in Float32")
        return _Base("Float64", f"{lossy:,} values would change in Float32: Float64")

    def _string(
        self, v: str, src: str, context: str, row: dict[str, Any], values: int, distinct: int, allow_enum: bool
    ) -> _Base:
        for parsed in (self._as_date, self._as_datetime, self._as_integer, self._as_float):
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
        if _int(row["dates"]) != values:
            return None
        if _int(row["dates_outside_date"]) == 0:
            return _Base("Date", "every value is a valid YYYY-MM-DD date within 1970..2149")
        return _Base("Date32", "every value is a valid YYYY-MM-DD date, some outside Date's 1970..2149")

    def _as_datetime(self, row: dict[str, Any], values: int) -> _Base | None:
        if _int(row["dts_exact"]) != values or _int(row["outside_datetime64"]):
            return None
        digits = _int(row["frac"])
        precision = 0 if digits == 0 else 3 if digits <= 3 else 6 if digits <= 6 else 9
        tz, tz_reason = _timezone(row, values)
        reason = f"every value is an ISO 8601 / RFC 3339 time that round-trips; {tz_reason}"
        if precision == 0 and not _int(row["outside_datetime"]):
            type_ = f"DateTime({quote_str(tz)})"
        else:
            type_ = f"DateTime64({precision}, {quote_str(tz)})"
            reason += f"; {digits} fraction digits" if digits else "; outside DateTime's 1970..2106"

        def parse(v: str) -> str:
            return f"parseDateTime64BestEffortOrNull({v}, {precision}, {quote_str(tz)})"

        return _Base(type_, reason, parse)

    def _as_integer(self, row: dict[str, Any], values: int) -> _Base | None:
        if _int(row["ints"]) != values:
            return None
        lo, hi = _int(row["int_lo"]), _int(row["int_hi"])
        chosen = narrowest_int(lo, hi, self.headroom)
        if chosen is None:
            return None
        what = "integers written as text that round-trip exactly (no leading zeros, signs or spaces)"
        return _Base(chosen, _int_reason(lo, hi, chosen, self.headroom, what))

    def _as_float(self, row: dict[str, Any], values: int) -> _Base | None:
        if _int(row["floats"]) != values:
            return None
        if _int(row["floats32"]) == values:
            return _Base("Float32", "numbers written as text, every one exact in Float32")
        return _Base("Float64", "numbers written as text that round-trip exactly in Float64")

    def _enum(self, v: str, src: str, context: str) -> _Base | None:
        row = _one(self.engine, f"SELECT groupUniqArray({ENUM_MAX_VALUES + 1})({v}) AS vals FROM {src}", context)
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


_RAW_TEXT: dict[str, str | int | float] = {"input_format_try_infer_dates": 0, "input_format_try_infer_datetimes": 0}
"""Times stay text in the sample, so their zones and digits can be tested."""


def _sample_structure(
    engine: Engine, expressions: list[str], order: list[int], settings: dict[str, str | int | float]
) -> list[tuple[str, str]]:
    """Columns of the first readable file; numbers in CSV/TSV are read as text to test them."""
    infer = {**settings, **_RAW_TEXT, "schema_inference_make_columns_nullable": 1}
    last: ChuteError | None = None
    for index in order[:MAX_SAMPLE_FILES]:
        expression = expressions[index]
        try:
            columns = describe(engine, expression, "design: cannot infer the schema", format_settings=infer)
        except ChuteError as exc:  # a broken file: try the next one
            last = exc
            continue
        text = _is_text(expression)
        result = []
        for c in columns:
            base, _ = _unwrap(c.type, "Nullable")
            result.append((c.name, "Nullable(String)" if text and _SCALAR_INPUT.match(base) else c.type))
        return result
    raise SourceError(f"design: no file could be read: {last}")


def _load_sample(engine: Engine, scratch: _Scratch, request: _Request) -> _Sample:
    """Read the first rows of files spread over the list into one scratch table."""
    expressions = request.expressions
    order = _spread(len(expressions), MAX_SAMPLE_FILES)
    columns = _sample_structure(engine, expressions, order, request.settings)
    names = {name for name, _ in columns}
    sample = _Sample(scratch.name("sample"), columns, provenance=not names & PROVENANCE_NAMES)
    wanted = min(request.sample_rows, max(MIN_SAMPLE_ROWS, SAMPLE_CELLS // max(len(columns), 1)))
    if wanted < request.sample_rows:
        sample.notes.append(f"{len(columns)} columns: the sample is capped at {wanted:,} rows to bound the run")
    body = [f"{quote_ident(n)} {t}" for n, t in columns]
    if sample.provenance:
        body += [f"{quote_ident(n)} {t}" for n, t in PROVENANCE_COLUMNS]
    engine.execute(
        f"CREATE TABLE {quote_ident(sample.table)} ({', '.join(body)}) ENGINE = MergeTree ORDER BY tuple()",
        context="design: creating the sample table",
    )
    read: dict[str, str | int | float] = {
        **request.settings,
        **_RAW_TEXT,
        "schema_inference_hints": ", ".join(f"{quote_ident(n)} {t}" for n, t in columns),
    }
    per_file = max(1, math.ceil(wanted / min(len(expressions), MAX_SAMPLE_FILES)))
    exhausted, failed, first_error = 0, 0, ""
    for index in order[:MAX_READ_FILES]:
        if sample.rows >= wanted or (sample.files_read and time.monotonic() > request.sample_deadline):
            break
        limit = min(per_file, wanted - sample.rows)
        try:
            got = _insert_sample(engine, sample, expressions[index], limit, read)
        except ChuteError as exc:  # the load will report this file; the sample goes on without it
            failed += 1
            first_error = first_error or str(exc)
            continue
        sample.rows += got
        sample.files_read += 1
        exhausted += got < limit
    if failed:
        sample.notes.append(f"{failed} file(s) could not be read for the sample, e.g. {first_error}")
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
        base, _ = _unwrap(self.typed.type, "LowCardinality")
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

    def select_sql(self, names: Sequence[str]) -> str:
        exprs = ", ".join(
            f"{c.typed.convert(quote_ident(c.name))} AS {quote_ident(n)}"
            for c, n in zip(self.columns, names, strict=True)
        )
        return f"SELECT {exprs} FROM {quote_ident(self.sample.table)}"

    def _write(self, table: str, body: list[str], tail: str, select: str) -> None:
        self.engine.execute(
            f"CREATE TABLE {quote_ident(table)} ({', '.join(body)}) ENGINE = MergeTree {tail} {_WIDE}",
            context="design: creating a measuring table",
        )
        self.engine.execute(
            f"INSERT INTO {quote_ident(table)} {select}",
            settings={"max_insert_threads": 1},
            context="design: writing the sample",
        )
        parts = _one(
            self.engine,
            "SELECT count() AS n FROM system.parts WHERE active "
            f"AND database = currentDatabase() AND table = {quote_str(table)}",
            "design: counting parts",
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
        variants = [(i, codec) for i, c in enumerate(self.columns) for codec in _codec_candidates(c.typed.type)]
        sizes: dict[str, dict[str, int]] = {c.name: {} for c in self.columns}
        for start in range(0, len(variants), CODEC_TABLE_COLUMNS):
            for (i, codec), size in self._codec_table(key, variants[start : start + CODEC_TABLE_COLUMNS]):
                sizes[self.columns[i].name][codec] = size
        return sizes

    def _codec_table(self, key: Sequence[str], variants: list[tuple[int, str]]) -> list[tuple[tuple[int, str], int]]:
        """One scratch table holding `variants` (column index, codec), sorted by `key` (all columns)."""
        table = self.scratch.name("codecs")
        names = {f"v{j}": variant for j, variant in enumerate(variants)}
        body = [_column_sql(n, self.columns[i].typed.type, codec) for n, (i, codec) in names.items()]
        select = [quote_ident(f"c{i}") for i, _ in variants]
        index = {c.name: i for i, c in enumerate(self.columns)}
        keys = [f"c{index[k]}" for k in key]
        body += [f"{quote_ident(k)} {self.columns[index[n]].typed.type}" for k, n in zip(keys, key, strict=True)]
        select += [quote_ident(k) for k in keys]
        inner = self.select_sql([f"c{i}" for i in range(len(self.columns))])
        try:
            self._write(table, body, f"ORDER BY {_order_by_sql(keys)}", f"SELECT {', '.join(select)} FROM ({inner})")
            return [(names[n], size) for n, size in self._column_bytes(table).items() if n in names]
        finally:
            self.scratch.drop(table)

    def layout(self, label: str, key: Sequence[str]) -> LayoutTrial:
        """The sample written into `key` with the best codec per column, measured on disk."""
        sizes = self.codecs(key)
        chosen = {c.name: _pick_codec(sizes[c.name], _codec_candidates(c.typed.type)) for c in self.columns}
        order = _order_by_sql(key)
        self.codec_sizes[label] = sizes
        table = self.scratch.name("layout")
        body = [_column_sql(c.name, c.typed.type, chosen[c.name]) for c in self.columns]
        try:
            self._write(table, body, f"ORDER BY {order}", self.select_sql([c.name for c in self.columns]))
            on_disk = self.bytes_on_disk(table)
            column_bytes = self._column_bytes(table)
        finally:
            self.scratch.drop(table)
        return LayoutTrial(label, order, on_disk, self.sample.rows, column_bytes, chosen)

    def final(self, columns: Sequence[tuple[str, str, str]], order_by: str, partition_by: str | None) -> int:
        """The sample written into the proposed DDL itself: proves it valid and measures it."""
        table = TableName(None, self.scratch.name("final"))
        ddl = create_table_ddl(table, columns, order_by, partition_by)
        self.engine.execute(f"{ddl}\n{_WIDE}", context="design: the proposed DDL does not create")
        self.engine.execute(
            f"INSERT INTO {table.sql} {self.select_sql([c.name for c in self.columns])}",
            context="design: the sample does not fit the proposed table",
        )
        return self.bytes_on_disk(table.table)

    def bytes_on_disk(self, table: str) -> int:
        row = _one(
            self.engine,
            "SELECT sum(bytes_on_disk) AS b FROM system.parts WHERE active "
            f"AND database = currentDatabase() AND table = {quote_str(table)}",
            "design: reading sizes",
        )
        return _int(row.get("b"))


# -- ORDER BY candidates ------------------------------------------------------------


def _dependents(engine: Engine, sample: _Sample, dims: list[_Column], columns: list[_Column]) -> dict[str, set[str]]:
    """For the highest-cardinality dimensions, the other columns each determines."""
    others = [c for c in columns if c.name not in PROVENANCE_NAMES and c.typed.distinct != 1]
    rows = quote_ident(sample.table)
    found: dict[str, set[str]] = {d.name: set() for d in dims}
    for dim in sorted(dims, key=lambda c: -c.typed.distinct)[:DEPENDENCY_DIMS]:
        d = quote_ident(dim.name)
        pairs = ", ".join(f"uniq({d}, {quote_ident(c.name)}) AS p{i}" for i, c in enumerate(others))
        row = _one(engine, f"SELECT uniq({d}) AS d, {pairs} FROM {rows}", "design: dependencies")
        limit = _int(row["d"]) * 1.01
        found[dim.name] = {c.name for i, c in enumerate(others) if c is not dim and _int(row[f"p{i}"]) <= limit}
    return found


def _chain(engine: Engine, sample: _Sample, dims: list[_Column]) -> list[_Column]:
    """Dimensions low to high cardinality, skipping those the earlier ones determine."""
    chain: list[_Column] = []
    groups = 1
    for column in dims:
        if len(chain) == MAX_KEY_DIMENSIONS or groups > sample.rows / 2:
            break
        args = ", ".join(quote_ident(c.name) for c in [*chain, column])
        row = _one(engine, f"SELECT uniq({args}) AS d FROM {quote_ident(sample.table)}", "design: cardinality")
        combined = _int(row.get("d"))
        if combined <= groups * 1.01:
            continue
        chain.append(column)
        groups = combined
    return chain


def _key_candidates(engine: Engine, sample: _Sample, columns: list[_Column]) -> list[tuple[str, list[str]]]:
    """ORDER BY candidates from cardinalities and dependencies, time last; unsorted as the baseline.

    A column that determines others (a user id fixing name, country, ...) is
    worth sorting by: those others become runs of one value. Columns that
    determine nothing (a random measure) only break runs up.
    """
    eligible = [c for c in columns if c.key_eligible and c.name not in PROVENANCE_NAMES]
    position = {c.name: i for i, c in enumerate(columns)}
    times = sorted((c for c in eligible if c.is_time), key=lambda c: -c.typed.distinct)[:MAX_TIME_COLUMNS]
    dims = sorted(
        (c for c in eligible if not c.is_time and c.typed.distinct <= sample.rows / 2),
        key=lambda c: (c.typed.distinct, c.cost, position[c.name]),
    )
    dependents = _dependents(engine, sample, dims, columns)
    carriers = [c for c in dims if dependents[c.name]]
    by_reach = sorted(carriers, key=lambda c: (-len(dependents[c.name]), c.cost, -c.typed.distinct))
    prefixes = [(f"{c.name} (determines {len(dependents[c.name])} columns)", [c.name]) for c in by_reach[:2]]
    if not prefixes and dims:
        prefixes = [("highest-cardinality column", [max(dims, key=lambda c: c.typed.distinct).name])]
    prefixes.append(("columns that determine others, low to high", [c.name for c in _chain(engine, sample, carriers)]))
    prefixes.append(("low to high cardinality", [c.name for c in _chain(engine, sample, dims)]))
    found: list[tuple[str, list[str]]] = []
    for tail in [[t.name] for t in times] or [[]]:
        then = f", then {tail[0]}" if tail else ""
        found += [(f"{label}{then}", [*prefix, *tail]) for label, prefix in prefixes if prefix]
    if times:
        found.append((f"{times[0].name} only", [times[0].name]))
    unique: dict[tuple[str, ...], str] = {}
    for label, key in found:
        if key:
            unique.setdefault(tuple(key), label)
    ordered = [(label, list(key)) for key, label in unique.items()][: MAX_LAYOUTS - 1]
    return [*ordered, ("unsorted", [])]


def _pick_winner(trials: list[LayoutTrial], times: set[str]) -> tuple[LayoutTrial, str]:
    """Smallest on disk; within COSTLIER_MUST_WIN_BY, a key ending in time, then the shorter key."""
    smallest = min(trials, key=lambda t: t.bytes_on_disk)

    def preference(t: LayoutTrial) -> tuple[int, int, int]:
        key = [] if t.order_by == "tuple()" else t.order_by.strip("()").split(", ")
        ends_in_time = bool(key) and key[-1] in times
        return (0 if ends_in_time else 1, len(key), t.bytes_on_disk)

    close = [t for t in trials if t.bytes_on_disk <= smallest.bytes_on_disk / (1 - COSTLIER_MUST_WIN_BY)]
    winner = min(close, key=preference)
    why = f"{winner.name}, ORDER BY {winner.order_by}: {winner.bytes_per_row:.2f} bytes/row on the sample"
    unsorted = next((t for t in trials if t.order_by == "tuple()"), None)
    if unsorted is not None and unsorted is not winner:
        why += f"; unsorted takes {unsorted.bytes_on_disk / max(winner.bytes_on_disk, 1):.2f}x its size"
    others = sorted((t for t in trials if t is not winner), key=lambda t: t.bytes_on_disk)
    if others:
        nxt = others[0]
        ratio = nxt.bytes_on_disk / max(winner.bytes_on_disk, 1)
        why += f"; next: {nxt.name} (ORDER BY {nxt.order_by}) at {ratio:.3f}x the size"
    if winner is not smallest:
        gain = 1 - smallest.bytes_on_disk / winner.bytes_on_disk
        why += f"; preferred to {smallest.name}, only {gain:.1%} smaller, for a key that ends in time or is shorter"
    return winner, why


def _partition(engine: Engine, sample: _Sample, columns: list[_Column], key: str) -> tuple[str | None, str]:
    """PARTITION BY month (or year) of the time column when the sample spans months."""
    times = [c for c in columns if c.is_time and not c.typed.nulls and c.name not in PROVENANCE_NAMES]
    if not times:
        return None, "no non-Nullable time column: no PARTITION BY"
    column = next((c for c in times if quote_ident(c.name) in key), times[0])
    value = column.typed.convert(quote_ident(column.name))
    row = _one(
        engine,
        f"SELECT dateDiff('day', min({value}), max({value})) AS days, toString(min({value})) AS lo, "
        f"toString(max({value})) AS hi FROM {quote_ident(sample.table)}",
        "design: time span",
    )
    days = _int(row.get("days"))
    span = f"{column.name} spans {days} days ({row.get('lo')} .. {row.get('hi')})"
    if days <= PARTITION_MIN_DAYS:
        return None, f"{span}: no PARTITION BY (under {PARTITION_MIN_DAYS} days)"
    if days > 20 * 366:
        return f"toYear({quote_ident(column.name)})", f"{span}: one partition per year"
    return f"toYYYYMM({quote_ident(column.name)})", f"{span}: one partition per month"


# -- the proposal -----------------------------------------------------------------


def create_table_ddl(
    table: TableName, columns: Sequence[tuple[str, str, str]], order_by: str, partition_by: str | None
) -> str:
    """CREATE TABLE from (name, type, codec) triples; ORDER BY/PARTITION BY are SQL."""
    body = ",\n    ".join(_column_sql(n, t, c) for n, t, c in columns)
    sql = f"CREATE TABLE IF NOT EXISTS {table.sql}\n(\n    {body}\n)\nENGINE = MergeTree"
    if partition_by:
        sql += f"\nPARTITION BY {partition_by}"
    return sql + f"\nORDER BY {order_by}"


def _codec_reason(sizes: Mapping[str, int], chosen: str, layout: str) -> str:
    default = sizes.get("", 0)
    best = sizes.get(chosen, default)
    label = chosen or "LZ4 (default)"
    ranked = sorted(sizes.items(), key=lambda kv: kv[1])[:3]
    tried = ", ".join(f"{c or 'LZ4'} {b:,}" for c, b in ranked)
    ratio = default / best if best else 1.0
    return f"{label}: {best:,} bytes vs LZ4 {default:,} ({ratio:.1f}x) under {layout}; best tried: {tried}"


def _choose_columns(engine: Engine, sample: _Sample, enums: bool, provenance: bool) -> list[_Column]:
    chooser = _TypeChooser(engine, sample.complete, enums)
    table = quote_ident(sample.table)
    columns = [_Column(n, t, chooser.choose(n, t, table)) for n, t in sample.columns]
    if provenance:
        columns += [
            _Column(n, t, _Typed(t, _cast(t), "provenance column, filled by chute.load")) for n, t in PROVENANCE_COLUMNS
        ]
    return columns


@dataclass(frozen=True)
class _Request:
    """What one design run was asked, with its deadlines (monotonic seconds)."""

    expressions: list[str]
    table: TableName
    sample_rows: int
    settings: dict[str, str | int | float]
    started: float
    budget: float
    enums: bool
    provenance: bool

    @property
    def sample_deadline(self) -> float:
        return self.started + self.budget * 0.4

    @property
    def layout_deadline(self) -> float:
        return self.started + self.budget * 0.85


def propose(
    engine: Engine,
    table_expressions: list[str],
    table: str,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    format_settings: Mapping[str, str | int | float] | None = None,
    time_budget_s: float = 60,
    *,
    enums: bool = False,
    provenance: bool = False,
) -> Proposal:
    """Measure a layout for `table` on a sample of the files in `table_expressions`.

    Each expression is an engine table function call such as
    ``FileSource(...).table_expression(unit, None)``; `format_settings` are the
    settings the load will read them with. `enums` allows Enum8 for strings
    with few values (a new value then fails the load); `provenance` adds the
    columns chute.load fills. At least one layout is measured however small
    `time_budget_s` is. Scratch tables are dropped before returning.
    """
    if not table_expressions:
        raise UsageError("design: no source given")
    if sample_rows < 1:
        raise UsageError("design: --sample-rows must be at least 1")
    request = _Request(
        list(table_expressions),
        TableName.parse(table),
        sample_rows,
        dict(format_settings or {}),
        time.monotonic(),
        time_budget_s,
        enums,
        provenance,
    )
    scratch = _Scratch(engine)
    scratch.drop_all(SCRATCH_PREFIX)  # left by a killed run: chDB gives this process the directory alone
    try:
        proposal = _propose(engine, scratch, request)
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to report
            scratch.drop_all()
        raise
    scratch.drop_all()
    return proposal


def _propose(engine: Engine, scratch: _Scratch, request: _Request) -> Proposal:
    sample = _load_sample(engine, scratch, request)
    if not sample.rows:
        raise SourceError("design: the files hold no rows to sample")
    if request.provenance and not sample.provenance:
        raise SchemaError("design: input fields clash with provenance columns; design without provenance")
    notes = list(sample.notes)
    columns = _choose_columns(engine, sample, request.enums, request.provenance)
    measurer = _Measurer(engine, scratch, sample, columns)
    trials: list[LayoutTrial] = []
    for label, key in _key_candidates(engine, sample, columns):
        if trials and time.monotonic() > request.layout_deadline:
            notes.append(f"time budget of {request.budget:g} s reached: layout {label!r} was not measured")
            continue
        trials.append(measurer.layout(label, key))
    winner, why = _pick_winner(trials, {quote_ident(c.name) for c in columns if c.is_time})
    partition_by, partition_reason = _partition(engine, sample, columns, winner.order_by)
    choices = tuple(
        ColumnChoice(
            c.name,
            c.inferred,
            c.typed.type,
            winner.codecs[c.name],
            c.typed.reason,
            _codec_reason(measurer.codec_sizes[winner.name][c.name], winner.codecs[c.name], winner.name),
        )
        for c in columns
    )
    triples = [(c.name, c.type, c.codec) for c in choices]
    final_bytes = measurer.final(triples, winner.order_by, partition_by)
    if not sample.complete:
        notes.append(
            f"the sample is the first rows of {sample.files_read} of {len(request.expressions)} files: integer "
            f"types keep {HEADROOM}x headroom; a null outside it loads as the type's default"
        )
    return Proposal(
        table=str(request.table),
        ddl=create_table_ddl(request.table, triples, winner.order_by, partition_by),
        columns=choices,
        layouts=tuple(trials),
        winner=winner.name,
        why=why,
        order_by=winner.order_by,
        partition_by=partition_by,
        partition_reason=partition_reason,
        sample_rows=sample.rows,
        sample_complete=sample.complete,
        files_sampled=sample.files_read,
        files_total=len(request.expressions),
        final_bytes_on_disk=final_bytes,
        seconds=time.monotonic() - request.started,
        notes=tuple(notes),
    )


def design_sources(
    sources: Sequence[str],
    table: str,
    target: str | None = None,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    format: str | None = None,
    compression: str | None = None,
    *,
    delimiter: str | None = None,
    enums: bool = False,
    provenance: bool = False,
    time_budget_s: float = 60,
) -> Proposal:
    """Propose a layout for loading `sources` into `table`, measured in the target's engine.

    Files are found as `chute.load` finds them; the target is `target`,
    ``$CHUTE_TARGET`` or ``./chute.db``. Nothing is created but scratch tables,
    which are dropped again. Raises UsageError/SourceError for bad requests.
    """
    from chute.targets import DEFAULT_TARGET

    if delimiter is not None and len(delimiter) != 1:
        raise UsageError("--delimiter must be a single character")
    name = TableName.parse(table)
    if name.table.startswith("_chute_"):
        raise UsageError(f"table names starting with _chute_ are reserved: {table}")
    source = FileSource([sources] if isinstance(sources, str) else list(sources), format, compression)
    units = [u for u in source.units() if u.size > 0]
    if not units:
        raise SourceError("design: every file is empty; nothing to measure")
    spec = target or os.environ.get("CHUTE_TARGET") or DEFAULT_TARGET
    if "://" in spec:
        raise UsageError("design measures in the embedded engine: give a directory as the target")
    settings: dict[str, str | int | float] = {
        "date_time_input_format": "best_effort",
        "input_format_csv_detect_header": 1,
    }
    engine = open_engine(spec)
    try:
        found = delimiter or _sniffed_delimiter(engine, source, units)
        if found:
            settings["format_csv_delimiter"] = found
        expressions = [source.table_expression(u, None) for u in units]
        proposal = propose(
            engine,
            expressions,
            str(name),
            sample_rows,
            settings,
            time_budget_s,
            enums=enums,
            provenance=provenance,
        )
    finally:
        source.close()
    if found and not delimiter:
        note = f"CSV fields separated by {found!r}, as the first lines show (--delimiter overrides)"
        proposal = dataclasses.replace(proposal, notes=(*proposal.notes, note))
    return proposal


def _sniffed_delimiter(engine: Engine, source: FileSource, units: list[Unit]) -> str | None:
    """The delimiter of the first CSV file, found as `chute load` finds it (None: a comma)."""
    first = next((u for u in units if u.fmt.format == "CSV"), None)
    if first is None:
        return None
    lines = source.table_expression(first, "line String", "LineAsString")
    found = read_head(engine, lines, f"design: {first.key}").delimiter()
    if found == "\t":  # the engine reads no CSV with tabs
        raise SourceError(f"{first.key}: fields separated by tabs: give --format tsv")
    return found if found != "," else None


# -- showing and saving -------------------------------------------------------------


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return lines


def render_text(proposal: Proposal) -> str:
    """The evidence as SQL comments, then the DDL: the output is itself a valid --design FILE.sql."""
    p = proposal
    sample = "every row" if p.sample_complete else f"first rows of {p.files_sampled} of {p.files_total} files"
    lines = [
        f"chute design for {p.table}: {p.sample_rows:,} sampled rows ({sample}), measured in {p.seconds:.1f} s",
        "",
        "Columns",
    ]
    lines += _table(
        ["column", "inferred", "chosen", "codec", "why"],
        [[c.name, c.inferred, c.type, c.codec or "LZ4", c.reason] for c in p.columns],
    )
    lines += ["", "Codecs (compressed bytes of the sample under the winning layout)"]
    lines += _table(["column", "codec", "why"], [[c.name, c.codec or "LZ4", c.codec_reason] for c in p.columns])
    lines += ["", "Layouts tried (the sample written into each, codecs chosen per layout)"]
    labels = [f"L{i}" for i in range(1, len(p.layouts) + 1)]
    lines += [f"  {label}: {t.name}: ORDER BY {t.order_by}" for label, t in zip(labels, p.layouts, strict=True)]
    rows = [[c.name, *(f"{t.column_bytes.get(c.name, 0):,}" for t in p.layouts)] for c in p.columns]
    rows.append(["bytes on disk", *(f"{t.bytes_on_disk:,}" for t in p.layouts)])
    rows.append(["bytes per row", *(f"{t.bytes_per_row:.2f}" for t in p.layouts)])
    lines += _table(["column", *labels], rows)
    lines += ["", f"Winner: {p.why}", f"Partition: {p.partition_reason}"]
    lines.append(f"Proposed table with the sample: {p.final_bytes_on_disk:,} bytes on disk")
    lines += [f"Note: {note}" for note in p.notes]
    comments = "\n".join(f"-- {line}".rstrip() for line in lines)
    return f"{comments}\n\n{p.ddl};\n"


_DDL_HEAD = re.compile(
    r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?((?:`(?:[^`\\]|\\.)*`|\w+)(?:\.(?:`(?:[^`\\]|\\.)*`|\w+))?)",
    re.IGNORECASE,
)


def _strip_sql_comments(text: str) -> str:
    """Drop `--` comment lines and the final semicolon; refuse a second statement."""
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()
    body = body.removesuffix(";").rstrip()
    quote = ""
    escaped = False
    for ch in body:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "'`\"":
            quote = ch
        elif ch == ";":
            raise UsageError("the design file must hold one CREATE TABLE statement, not several")
    return body


def load_ddl_file(path: str, table: str | None = None) -> str:
    """The CREATE TABLE of a saved proposal (`chute design ... > FILE.sql`), ready to run.

    Comment lines are dropped; the statement becomes CREATE TABLE IF NOT EXISTS,
    and with `table` it is renamed to that table, so one saved design serves
    any table name. Raises UsageError when the file is not one CREATE TABLE.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    body = _strip_sql_comments(text)
    match = _DDL_HEAD.match(body)
    if match is None:
        raise UsageError(f"{path}: not a CREATE TABLE statement")
    name = TableName.parse(table).sql if table else match.group(1)
    return f"CREATE TABLE IF NOT EXISTS {name}{body[match.end() :]}"
