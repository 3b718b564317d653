"""The careful pass: only for a text file the fast path could not load.

The engine reads the file again, one record at a time as text, checks every
value against the table's type in SQL, and keeps two sets in a scratch table:
good rows (converted) and bad rows with a reason a person understands. No
row passes through Python. The engine's own `input_format_allow_errors_*`
is not used for JSON (an unterminated object swallows the next line), and for
CSV/TSV it only separates records (all fields read as text), never converts
(chute.load.careful_delimited).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from chute.engine import Engine
from chute.load.checks import wide
from chute.load.checks.column import conversion
from chute.load.checks.missing import INPUT_ALIAS, computed, mask_sql, not_null, nullable_read, watched
from chute.load.checks.reasons import (
    bad_conditions,
    nested_reasons,
    present_at,
    range_reasons,
    refused_conditions,
    value_at,
)
from chute.load.checks.types import array_element, default_of, read_as_text, read_type, strip_wrappers
from chute.schema import Column
from chute.scratch import scratch_file
from chute.sniff import refuse_binary
from chute.sql import TableName, internal, quote_ident, quote_str
from chute.targets.staging import MASK_COLUMN

RAW_LIMIT = 4096
"""Bytes of a bad record kept in the rejects table."""
ROW, RAW, REASON, OVERFLOW = internal("row"), internal("raw"), internal("reason"), internal("overflow")
"""The checked records' own columns beside the user's (chute.sql.internal): the record's number,
its text, why it is bad; a parsed JSON record's reason its values do not fit."""
OK, BLANK = internal("ok"), internal("blank")


@dataclass(frozen=True)
class CheckedRows:
    """Every record of one file in a scratch table `table` (ROW, RAW, REASON);
    good records have an empty reason."""

    table: TableName
    total: int
    rejected: int
    parsed: TableName | None = None
    """JSON: the good records as the engine's own parser read them (integers wide),
    with the record number in ROW and OVERFLOW for values out of range."""

    def good_select(
        self,
        columns: list[Column],
        provenance: Callable[[str], dict[str, tuple[str, str]]],
        row_of: Callable[[str], str] = str,
        count_missing: bool = False,
    ) -> str:
        """The good rows; `provenance(row)` maps a column to (SQL, type) given SQL for the
        row's `_source_row`, which `row_of` makes of the record's 1-based position (for a
        byte range of a bigger file: plus the rows before it; for Kafka: the offset).
        `count_missing` (JSON parsed so, see check_json_lines): the last column is the mask
        of the row's missing values (chute.load.checks.missing)."""
        flags: list[tuple[int, str]] = []
        mask = None
        if self.parsed is None:
            # (a DEFAULT expression's column: where its field was missing (p{i} = 0), the expression)
            exprs = [
                f"if({present_at(i)}, {value_at(i)}, CAST({c.default_expression}, {quote_str(c.type)})) "
                f"AS {quote_ident(c.name)}"
                if computed(c)
                else f"{value_at(i)} AS {quote_ident(c.name)}"
                for i, c in enumerate(columns)
            ]
            row, source = ROW, f"{self.table.sql} WHERE {REASON} = ''"
            mask = quote_ident(MASK_COLUMN)  # (made by `_good_records`)
        else:
            exprs = []
            source = self.parsed.sql
            converted: dict[int, str] = {}
            if wide.is_wide(columns):
                # (the text-read columns converted a type at a time: chute.load.checks.wide)
                source, converted = wide.json_conversions(columns, source)
            for i, c in enumerate(columns):
                name = quote_ident(c.name)
                if count_missing and watched(c):
                    flags.append((i, f"isNull({INPUT_ALIAS}.{name})"))
                default = f"CAST({c.default_expression}, {quote_str(c.type)})"  # (over the others' aliases)
                if computed(c) and not read_as_text(c.type):
                    exprs.append(
                        f"if(isNull({INPUT_ALIAS}.{name}), {default}, assumeNotNull({INPUT_ALIAS}.{name})) AS {name}"
                    )
                elif count_missing and watched(c) and not read_as_text(c.type):
                    exprs.append(f"{not_null(name, c.type)} AS {name}")
                elif i in converted:
                    exprs.append(f"{INPUT_ALIAS}.{converted[i]} AS {name}")  # (as below, a type at a time)
                elif read_as_text(c.type):
                    # Read as text, checked above (OVERFLOW): converted here, never wrapped or clamped.
                    inner, nullable = strip_wrappers(c.type)
                    missing = "NULL" if nullable else "'[]'" if array_element(inner) else default_of(inner)
                    missing = default if computed(c) else missing
                    value = f"if(isNull({name}), {missing}, {conversion(name, c.type)})"
                    exprs.append(f"CAST({value}, {quote_str(c.type)}) AS {name}")
                else:
                    exprs.append(name)
            row, source = ROW, f"{source} AS {INPUT_ALIAS} WHERE {OVERFLOW} = ''"
        row = row_of(row)
        values = provenance(row)
        exprs += [
            f"CAST({row if name == '_source_row' else expr}, {quote_str(t)}) AS {name}"
            for name, (expr, t) in values.items()
        ]
        if count_missing:
            exprs.append(mask_sql(flags) if mask is None else mask)
        return f"SELECT {', '.join(exprs)} FROM {source}"

    def rejects_select(
        self, source: str, load_id: str, types: dict[str, str], row_of: Callable[[str], str] = str
    ) -> str:
        return (
            f"SELECT CAST({quote_str(source)}, {quote_str(types['_source'])}) AS _source, "
            f"CAST({row_of(ROW)}, {quote_str(types['_source_row'])}) AS _source_row, "
            f"substring({RAW}, 1, {RAW_LIMIT}) AS raw, {REASON} AS error, "
            f"CAST({quote_str(load_id)}, {quote_str(types['_load_id'])}) AS _load_id, "
            f"CAST(now64(3), {quote_str(types['at'])}) AS at "
            f"FROM {self.table.sql} WHERE {REASON} != ''"
        )

    def drop(self, engine: Engine) -> None:
        engine.execute(f"DROP TABLE IF EXISTS {self.table.sql}")
        if self.parsed is not None:
            engine.execute(f"DROP TABLE IF EXISTS {self.parsed.sql}")


def check_json_lines(
    engine: Engine,
    file_expression_lines: str,
    columns: list[Column],
    settings: dict[str, str | int | float],
    format_settings: dict[str, str | int | float],
    count_missing: bool = False,
    nul_ok: bool = False,
) -> CheckedRows:
    """Check a JSON-lines file; a line is the unit of recovery. `count_missing`: watched columns
    (chute.load.checks.missing) are parsed Nullable, for `CheckedRows.good_select` to count. `nul_ok`:
    see sniff.refuse_binary.

    1. Lines that are not JSON objects are bad (cheap: one validity check).
    2. The others go, tagged with their record number, through the engine's own
       JSON parser with per-row error skipping: every line is a whole object, so
       a bad row cannot swallow its neighbour. Rows the parser skipped are the
       ones with values that do not fit; only those few get a reason in SQL.
    """
    refuse_binary(engine, file_expression_lines, "read as JSON lines", nul_ok)
    scratch = uuid.uuid4().hex[:12]
    parsed = TableName(None, f"_chute_parsed_{scratch}")
    lines = _read_lines(engine, file_expression_lines, scratch, settings)
    try:
        _parse_readable(engine, lines, parsed, columns, format_settings, count_missing)
        checked = materialize(
            engine,
            f"SELECT l.{ROW} AS {ROW}, l.{RAW} AS {RAW}, multiIf(NOT l.{OK}, {_NOT_READ}, p.{ROW} = 0, "
            f"{_json_reasons(columns)}, p.{OVERFLOW}) AS {REASON} "
            f"FROM {lines.sql} AS l LEFT JOIN (SELECT {ROW}, {OVERFLOW} FROM {parsed.sql}) AS p "
            f"ON l.{ROW} = p.{ROW}",
            {**settings, "join_use_nulls": 0},
        )
        return CheckedRows(checked.table, checked.total, checked.rejected, parsed)
    except BaseException:
        engine.execute(f"DROP TABLE IF EXISTS {parsed.sql}")
        raise
    finally:
        engine.execute(f"DROP TABLE IF EXISTS {lines.sql}")


_VALID = (
    f"(isValidJSON({RAW}) OR (match({RAW}, '[0-9][eE][+]?[0-9]{{3}}') "
    f"AND isValidJSON(replaceRegexpAll({RAW}, '([0-9])[eE][+]?[0-9]{{3,}}', '\\\\1'))))"
)
"""A line is JSON. The validity check takes a number past Float64's range (`1e400`) for invalid
JSON: without its exponent such a line is checked again, and then read (its column's check
rejects the number, or a String column keeps its text, as the fast path does)."""
_NOT_READ = f"if(isValidJSON(l.{RAW}), 'not a JSON object', 'invalid JSON (or invalid UTF-8)')"
"""Why a line is not read: it is no JSON object."""


def _read_lines(
    engine: Engine, file_expression_lines: str, scratch: str, settings: dict[str, str | int | float]
) -> TableName:
    """A scratch table of the file's records: (ROW: its line number, RAW, OK: a JSON object).

    A record is numbered by its line in the file (what a person looks up); blank
    lines are no records but count as lines."""
    lines = TableName(None, f"_chute_lines_{scratch}")
    engine.execute(
        f"CREATE TABLE {lines.sql} ENGINE = Memory AS "
        f"SELECT _row_number + 1 AS {ROW}, {RAW}, {_VALID} AND startsWith(trimLeft({RAW}), '{{') AS {OK}, "
        f"empty(trimBoth({RAW})) AS {BLANK} FROM ("
        "SELECT _row_number, replaceRegexpOne(replaceRegexpOne(line, '^\\xEF\\xBB\\xBF', ''), "
        f"'\\r$', '') AS {RAW} FROM {file_expression_lines})",
        settings=settings,
        context="reading lines",
    )
    if not int(engine.rows(f"SELECT countIf({BLANK}) AS n FROM {lines.sql}")[0]["n"]):
        return lines
    records = TableName(None, f"_chute_records_{scratch}")
    try:
        engine.execute(
            f"CREATE TABLE {records.sql} ENGINE = Memory AS SELECT * FROM {lines.sql} WHERE NOT {BLANK}",
            context="leaving out blank lines",
        )
    finally:
        engine.execute(f"DROP TABLE {lines.sql}")
    return records


def _parse_readable(
    engine: Engine,
    lines: TableName,
    parsed: TableName,
    columns: list[Column],
    format_settings: dict[str, str | int | float],
    count_missing: bool = False,
) -> None:
    """The JSON objects parsed by the engine into `parsed`, each with its line number
    (ROW) and why a value does not fit its column (OVERFLOW); with `count_missing`,
    watched columns Nullable."""
    tagged_file = scratch_file("lines", ".jsonl")
    # {"a":1} -> {"<ROW>":7,"a":1}: the line number travels with the row.
    tagged = (
        f"concat('{{\"{ROW}\":', toString({ROW}), "
        f"if(match({RAW}, '^\\s*\\{{\\s*\\}}\\s*$'), '}}', concat(',', substring({RAW}, position({RAW}, '{{') + 1))))"
    )
    try:
        engine.execute(
            f"INSERT INTO FUNCTION file({quote_str(tagged_file)}, 'LineAsString', 'line String') "
            f"SELECT {tagged} FROM {lines.sql} WHERE {OK}",
            context="writing the readable lines",
        )
        nullable = {
            c.name for c in columns if ((count_missing and watched(c)) or computed(c)) and not read_as_text(c.type)
        }
        read_as = [
            f"{quote_ident(c.name)} {nullable_read(c.type) if c.name in nullable else read_type(c.type)}"
            for c in columns
        ]
        structure = ", ".join([*read_as, f"{ROW} UInt64"])
        # A Nested structure's arrays of different lengths: left out (the engine refuses them, and
        # the whole table with them), their reason given with the other refused records.
        lengths = [
            f"length(JSONExtractArrayRaw(ifNull({quote_ident(c.name)}, '')))"
            if read_as_text(c.type)
            else f"length({quote_ident(c.name)})"
            for c in columns
        ]
        nested = nested_reasons(columns, lengths)
        matching = f" WHERE NOT ({' OR '.join(nested[0::2])})" if nested else ""
        reasons = wide.range_reasons(columns) if wide.is_wide(columns) else range_reasons(columns)
        engine.execute(
            f"CREATE TABLE {parsed.sql} ENGINE = Memory AS SELECT *, {reasons} AS {OVERFLOW} "
            f"FROM file({quote_str(tagged_file)}, 'JSONEachRow', {quote_str(structure)}){matching}",
            settings={
                **format_settings,
                "input_format_skip_unknown_fields": 0,
                "input_format_allow_errors_num": 1_000_000_000_000,
                "input_format_allow_errors_ratio": 1,
                "input_format_parallel_parsing": 0,
                "max_threads": 1,
            },
            context="parsing the readable lines",
        )
    finally:
        if os.path.exists(tagged_file):
            os.remove(tagged_file)


EMPTY_KEY = 'a field named "" (the empty key), which no column can be named'
"""Why a JSON object with that field is refused: the engine's words name no field."""


def _json_reasons(columns: list[Column]) -> str:
    """Why the parser refused a valid JSON object: evaluated only for those rows."""
    names = "[" + ", ".join(quote_str(c.name) for c in columns) + "]"
    keys = f"JSONExtractKeys(l.{RAW})"
    parts = [
        f"has({keys}, ''), {quote_str(EMPTY_KEY)}",
        f"notEmpty(arrayFilter(k -> NOT has({names}, k), {keys})), "
        f"concat('fields not in the table: ', arrayStringConcat(arrayFilter(k -> NOT has({names}, k), {keys}), ', '))",
    ]
    twice = f"arrayDistinct(arrayFilter((k, i) -> indexOf({keys}, k) != i, {keys}, arrayEnumerate({keys})))"
    parts.append(f"notEmpty({twice}), concat('a field appears twice: ', arrayStringConcat({twice}, ', '))")
    lengths = [f"length(JSONExtractArrayRaw(l.{RAW}, {quote_str(c.name)}))" for c in columns]
    parts += [", ".join(arm) for arm in zip(*[iter(nested_reasons(columns, lengths))] * 2, strict=True)]
    if wide.is_wide(columns):
        # (a type at a time, over the record's keys and values: chute.load.checks.wide)
        arm = wide.json_reason(columns, f"l.{RAW}")
        parts += [arm] if arm else []
    for c in [] if wide.is_wide(columns) else columns:
        key = quote_str(c.name)
        raw = f"l.{RAW}"
        text = f"if(JSONType({raw}, {key}) = 'String', JSONExtractString({raw}, {key}), JSONExtractRaw({raw}, {key}))"
        present = f"(JSONHas({raw}, {key}) AND JSONType({raw}, {key}) != 'Null')"
        parts += bad_conditions([c], [text], [present])
        parts += refused_conditions(c, text, present)  # (read as they are: the parser's refusal, named)
    parts.append("true, 'a value does not fit the table'")
    return f"multiIf({', '.join(parts)}, '')"


def materialize(engine: Engine, select: str, settings: dict[str, str | int | float]) -> CheckedRows:
    table = TableName(None, f"_chute_check_{uuid.uuid4().hex[:12]}")
    engine.execute(f"CREATE TABLE {table.sql} ENGINE = Memory AS {select}", settings=settings, context="checking rows")
    counts = engine.rows(f"SELECT count() AS n, countIf({REASON} != '') AS bad FROM {table.sql}")[0]
    return CheckedRows(table, int(counts["n"]), int(counts["bad"]))
