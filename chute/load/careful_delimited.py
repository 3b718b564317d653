"""The careful pass for CSV and TSV: records split by the engine's parser, values checked in SQL.

All fields are read as text, the records the parser cannot split are written by the
engine to an errors file with their numbers, and a quote that is never closed is
found by counting lines (it would swallow the rest of the file).
"""

from __future__ import annotations

import os
import re
import uuid

from chute.engine import Engine
from chute.load.careful import RAW, RAW_LIMIT, REASON, ROW, CheckedRows, materialize
from chute.load.checks import wide
from chute.load.checks.missing import computed, mask_sql
from chute.load.checks.reasons import bad_conditions, finals, multi_if, nested_reasons, present_at, value_at
from chute.load.checks.types import default_of, strip_wrappers
from chute.schema import Column
from chute.scratch import scratch_file
from chute.sniff import read_head, refuse_binary
from chute.sql import TableName, internal, quote_ident, quote_str
from chute.targets.staging import MASK_COLUMN

BLANK = f"match({RAW}, '^\\\\s*$')"
"""A record the parser could not split is a blank (or whitespace-only) line."""

K = internal("k")
"""The scratch table's record number among the records the parser split."""


def field_at(i: int) -> str:
    """The scratch table's column of the i-th input column's field, as text."""
    return internal(f"f{i}")


# The line of the engine's diagnostic that says what is wrong (and its hint).
ENGINE_REASON = "trimBoth(replaceAll(extract(reason, 'ERROR: ([^\\n]*\\n?[^\\n]*)'), '\\n', ' '))"


def check_delimited(
    engine: Engine,
    file_expression: str,
    lines_expression: str,
    columns: list[Column],
    delimiter: str,
    settings: dict[str, str | int | float],
    header_lines: int | None = None,
    watched_at: tuple[int, ...] = (),
    nul_ok: bool = False,
) -> CheckedRows:
    """Check CSV/TSV: records split by the engine's parser (all fields as text),
    bad records (wrong field count, broken quoting) recorded by the engine with
    their row numbers, values checked in SQL. A quote that is never closed would
    swallow the rest of the file: that record is its first line alone, and the
    lines after it are read again as records (`header_lines`: 0 or 1, None to look).
    The columns `watched_at` (chute.load.checks.missing) set bits of each record's MASK_COLUMN
    where their value is missing (the good records' count of defaults)."""
    refuse_binary(engine, lines_expression, "read as CSV/TSV", nul_ok)
    errors_path = scratch_file("errors", ".csv", create=False)  # the engine writes it only if it is new
    scratch = TableName(None, f"_chute_fields_{uuid.uuid4().hex[:12]}")
    header = header_lines if header_lines is not None else int(has_header(engine, lines_expression, columns, delimiter))
    if header:
        # All-text columns defeat the engine's header detection: say it outright.
        file_expression = re.sub(r"'(CSV|TSV)'", r"'\1WithNames'", file_expression, count=1)
    rest: list[CheckedRows] = []
    try:
        _read_records(engine, file_expression, scratch, columns, settings, errors_path)
        bad_structure = (
            f"SELECT offset AS {ROW}, raw_data AS {RAW}, "
            f"concat('malformed record: ', coalesce(nullIf({ENGINE_REASON}, ''), reason)) AS {REASON} "
            f"FROM file({quote_str(errors_path)}, 'CSV', 'time String, database Nullable(String), "
            "table Nullable(String), offset UInt64, reason String, raw_data String')"
        )
        fields = [field_at(i) for i in range(len(columns))]
        if not (os.path.exists(errors_path) and os.path.getsize(errors_path) > 0):
            select = _good_records(scratch, columns, delimiter, "[]::Array(UInt64)", watched_at)
            lines = int(engine.rows(f"SELECT count() AS n FROM {lines_expression}")[0]["n"])
            at_end = None if delimiter == "\t" else _open_at_end(engine, scratch, fields, lines_expression, lines, 0)
            if at_end is not None:
                select = _split_at(
                    engine, select, at_end, lines_expression, columns, delimiter, settings, rest, watched_at
                )
            return materialize(engine, select, settings)
        bad_rows = f"(SELECT arraySort(groupArray({ROW})) FROM ({bad_structure}))"
        good = _good_records(scratch, columns, delimiter, bad_rows, watched_at)
        # A blank line is no record, yet keeps its number: the rows after it are numbered by line.
        select = (
            f"{good} UNION ALL SELECT {ROW}, {RAW}, {REASON}, {_no_values(columns)} FROM ({bad_structure}) "
            f"WHERE NOT {BLANK}"
        )
        unclosed = _unclosed_quote(engine, scratch, fields, bad_structure, lines_expression, header, delimiter)
        if unclosed is not None:
            select = _split_at(
                engine, select, unclosed, lines_expression, columns, delimiter, settings, rest, watched_at
            )
        return materialize(engine, select, settings)
    finally:
        engine.execute(f"DROP TABLE IF EXISTS {scratch.sql}")
        for checked in rest:
            checked.drop(engine)
        if os.path.exists(errors_path):
            os.remove(errors_path)


def _read_records(
    engine: Engine,
    file_expression: str,
    scratch: TableName,
    columns: list[Column],
    settings: dict[str, str | int | float],
    errors_path: str,
) -> None:
    """Every record's fields as text into `scratch` (K: its number among the good ones); the
    engine writes the records it could not split into `errors_path`."""
    read_settings = {
        **settings,
        "input_format_allow_errors_num": 1_000_000_000_000,
        "input_format_allow_errors_ratio": 1,
        "input_format_record_errors_file_path": errors_path,
        "errors_output_format": "CSV",
        "input_format_parallel_parsing": 0,
        "max_threads": 1,
    }
    # (a field the file expression reads Nullable, as TSV's are: its NULL is the text `\N`)
    names = ", ".join(f"ifNull({quote_ident(c.name)}, '\\\\N') AS {field_at(i)}" for i, c in enumerate(columns))
    engine.execute(
        f"CREATE TABLE {scratch.sql} ENGINE = Memory AS SELECT _row_number AS {K}, {names} FROM {file_expression}",
        settings=read_settings,
        context="reading records as text",
    )


def _no_values(columns: list[Column]) -> str:
    """The value columns of a bad record: defaults, and no missing value."""
    nulls = ", ".join(f"{default_of(c.type)} AS {value_at(i)}" for i, c in enumerate(columns))
    return f"{nulls}, toUInt64(0) AS {quote_ident(MASK_COLUMN)}{_presence(columns, ['1'] * len(columns))}"


def _presence(columns: list[Column], present: list[str]) -> str:
    """`, <present> AS <present_at(i)>` for each DEFAULT expression's column: where its field is missing, the
    careful select computes the expression (chute.load.careful)."""
    return "".join(f", toUInt8({present[i]}) AS {present_at(i)}" for i, c in enumerate(columns) if computed(c))


def _good_records(
    scratch: TableName, columns: list[Column], delimiter: str, bad_rows: str, watched_at: tuple[int, ...]
) -> str:
    """The records the parser split, numbered among all records (bad ones counted), with
    each value checked and converted, and the mask of the `watched_at` columns' missing values."""
    fields = [field_at(i) for i in range(len(columns))]
    nested = nested_reasons(columns, [f"length({value_at(i)})" for i in range(len(columns))])
    source = scratch.sql
    if wide.is_wide(columns):
        # (a type at a time, over arrays: chute.load.checks.wide)
        checks = wide.delimited(columns, fields, _text, _present, _extract)
        present = checks.present
        reasons = checks.reasons + nested
        values = [f"{v} AS {value_at(i)}" for i, v in enumerate(checks.values)]
        source = checks.source(source)
        flags = checks.missing(watched_at)
    else:
        texts = [_text(f) for f in fields]
        present = [_present(c, fields[i]) for i, c in enumerate(columns)]
        extract = [_extract(c, fields[i]) for i, c in enumerate(columns)]
        reasons = bad_conditions(columns, texts, present) + nested
        values = finals(columns, texts, present, extract)
        flags = [(i, f"NOT {present[i]}") for i in watched_at]
    return (
        f"SELECT arrayFold((acc, b) -> if(b <= acc, acc + 1, acc), {bad_rows}, toUInt64({K} + 1)) AS {ROW}, "
        f"{_record(fields, delimiter)} AS {RAW}, "
        f"{multi_if(reasons)} AS {REASON}, {', '.join(values)}, "
        f"{mask_sql(flags)}{_presence(columns, present)} FROM {source}"
    )


def _record(fields: list[str], delimiter: str) -> str:
    """A record rebuilt from its fields, for its reject's `raw`: a CSV field holding the
    delimiter, a quote or a line end quoted again (its quotes doubled), so that the record reads
    back as the same fields; TSV fields as they were read."""
    if delimiter == "\t":
        return f"arrayStringConcat([{', '.join(fields)}], {quote_str(delimiter)})"
    specials = ", ".join(quote_str(c) for c in (delimiter, '"', "\r", "\n"))
    quoted = f"if(multiSearchAny(x, [{specials}]), concat('\"', replaceAll(x, '\"', '\"\"'), '\"'), x)"
    return f"arrayStringConcat(arrayMap(x -> {quoted}, [{', '.join(fields)}]), {quote_str(delimiter)})"


def _text(field: str) -> str:
    """A field's text (TSV's `\\N` and a Nullable column's NULL read as `\\N`: empty)."""
    return f"if({field} = '\\\\N', '', {field})"


def _present(column: Column, field: str) -> str:
    """A field holds a value. An empty field of a text column is the empty string: a Nullable one's
    NULL (TSV's `\\N`, CSV's unquoted empty field) was read as NULL, here `\\N` (chute.load.careful_pass)."""
    empty_is_text = int(strip_wrappers(column.type)[0] == "String")
    marker = f" AND {field} != {quote_str(column.null_marker)}" if column.null_marker else ""
    return f"({field} != '\\\\N' AND (notEmpty({field}) OR {empty_is_text}){marker})"


def _extract(column: Column, field: str) -> str:
    """A field of a type without a check, cast as it is."""
    return f"CAST({field}, {quote_str(strip_wrappers(column.type)[0])})"


def _split_at(
    engine: Engine,
    select: str,
    unclosed: tuple[int, int],
    lines_expression: str,
    columns: list[Column],
    delimiter: str,
    settings: dict[str, str | int | float],
    rest: list[CheckedRows],
    watched_at: tuple[int, ...],
) -> str:
    """The record that swallowed the rest of the file is its first line alone; the lines after
    it are records of their own, checked the same way (appended to `rest`, to be dropped)."""
    row, line = unclosed
    nulls = _no_values(columns)
    select = (
        f"SELECT * FROM ({select}) WHERE {ROW} < {row} "
        f"UNION ALL SELECT toUInt64({row}) AS {ROW}, substring(line, 1, {RAW_LIMIT}) AS {RAW}, "
        f"{quote_str(UNCLOSED_QUOTE)} AS {REASON}, {nulls} FROM "
        f"(SELECT line FROM {lines_expression} WHERE _row_number = {line - 1})"
    )
    if _has_lines_after(engine, lines_expression, line):
        rest.append(_check_rest(engine, lines_expression, line, columns, delimiter, settings, watched_at))
        flags = [present_at(i) for i, c in enumerate(columns) if computed(c)]
        values = ", ".join([*(value_at(i) for i in range(len(columns))), quote_ident(MASK_COLUMN), *flags])
        select += f" UNION ALL SELECT {ROW} + {row} AS {ROW}, {RAW}, {REASON}, {values} FROM {rest[-1].table.sql}"
    return select


UNCLOSED_QUOTE = "malformed record: a quote opened in this record is never closed (it would run to the end of the file)"


def _unclosed_quote(
    engine: Engine,
    scratch: TableName,
    fields: list[str],
    bad_structure: str,
    lines_expression: str,
    header: int,
    delimiter: str,
) -> tuple[int, int] | None:
    """(record number, line number) of a record whose open quote swallowed the lines after
    it; None when every line of the file is in some record, or no such record is found.

    An opening quote that is never closed makes the parser read on, past line ends, to
    the next quote (the opening quote of a later field) or to the end of the file, and
    drop all of it as one bad record: the records it read then cover fewer lines than
    the file has. Good records cover one line each plus the line breaks in their
    fields, a bad record at least one. The first bad record starts right after the good
    records before it; if the parser said it ran into a quote or the end, it is that
    record: its first line alone is bad, and the lines after it are read again."""
    if delimiter == "\t":
        return None  # TSV has no quoting
    counts = engine.rows(
        f"SELECT (SELECT count() FROM {lines_expression}) AS lines, "
        f"(SELECT sum(1 + countSubstrings(arrayStringConcat([{', '.join(fields)}]), '\n')) FROM {scratch.sql}) "
        f"AS good_lines, (SELECT count() FROM ({bad_structure})) AS bad"
    )[0]
    lines, good_lines, bad = int(counts["lines"]), int(counts["good_lines"] or 0), int(counts["bad"])
    if header + good_lines + bad >= lines:
        # Every line is in a record; but a quote opened on the last line leaves no raw text.
        last = engine.rows(f"SELECT {ROW} AS row, {RAW} AS raw FROM ({bad_structure}) ORDER BY row DESC LIMIT 1")
        if last and str(last[0]["raw"]).startswith("Buffer has gone") and header + good_lines + bad == lines:
            return int(last[0]["row"]), lines
        return _open_at_end(engine, scratch, fields, lines_expression, lines, bad)
    # The first bad record that ran on: bad records before it (a field too few, say) are one
    # line each, as the parser stopped at their line end.
    found = engine.rows(f"SELECT {ROW} AS row, {REASON} AS reason, {RAW} AS raw FROM ({bad_structure}) ORDER BY row")
    ran_on = [i for i, b in enumerate(found) if _ran_on(str(b["reason"]), str(b["raw"]))]
    if not ran_on:
        return None
    bad_before = ran_on[0]
    row = int(found[bad_before]["row"])
    before = engine.rows(
        f"SELECT sum(1 + countSubstrings(arrayStringConcat([{', '.join(fields)}]), '\n')) AS n "
        f"FROM {scratch.sql} WHERE {K} < {row - 1 - bad_before}"
    )[0]
    return row, header + int(before["n"] or 0) + bad_before + 1


def _open_at_end(
    engine: Engine, scratch: TableName, fields: list[str], lines_expression: str, lines: int, bad: int
) -> tuple[int, int] | None:
    """(record number, line number) of the last record when a quote in its last field is
    never closed: the parser then ends the field with the file, without an error.

    The file's quotes are odd in number, and the last line where the quotes before it
    are even (where a record can start) begins a record that runs to the end; the
    last record's fields hold the line breaks of all the lines after it. A quote
    inside an unquoted field (`5"`) makes the count odd too, but its record is one
    line: it is left as it is."""
    parity = engine.rows(
        "SELECT sum(q) % 2 AS odd, argMaxIf(n, n, before % 2 = 0) AS start FROM ("
        "SELECT _row_number + 1 AS n, countSubstrings(line, '\"') AS q, "
        "sum(q) OVER (ORDER BY _row_number ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before "
        f"FROM {lines_expression})",
        {"input_format_parallel_parsing": 0, "max_threads": 1},
    )[0]
    if not int(parity["odd"] or 0):
        return None
    start = int(parity["start"])
    last = engine.rows(
        f"SELECT countSubstrings(arrayStringConcat([{', '.join(fields)}]), '\n') AS breaks, "
        f"(SELECT count() FROM {scratch.sql}) AS records FROM {scratch.sql} ORDER BY {K} DESC LIMIT 1"
    )
    if not last or int(last[0]["breaks"]) < max(1, lines - start):
        return None
    return int(last[0]["records"]) + bad, start


def _has_lines_after(engine: Engine, lines_expression: str, line: int) -> bool:
    found = engine.rows(
        f"SELECT count() AS n FROM (SELECT 1 FROM {lines_expression} WHERE _row_number >= {line} LIMIT 1)"
    )
    return bool(int(found[0]["n"]))


QUOTE_RAN_ON = ("There is no delimiter", "Buffer has gone", "Unexpected end of stream")
"""What the engine says of a record whose quoted field ran on into a later quote or the end."""

LAST_FIELD_RAN_ON = "There is no line feed"
"""What it says when the field that ran on was the last: the later quote ended it, and text
followed it where the line feed should be. So it says of a record with a field too many, too:
only one whose first line (`raw_data`) leaves a quote open ran on."""


def _ran_on(reason: str, raw: str) -> bool:
    """Whether a bad record's quoted field ran on past its first line."""
    if any(sign in reason for sign in QUOTE_RAN_ON):
        return True
    return LAST_FIELD_RAN_ON in reason and raw.count('"') % 2 == 1


def _check_rest(
    engine: Engine,
    lines_expression: str,
    line: int,
    columns: list[Column],
    delimiter: str,
    settings: dict[str, str | int | float],
    watched_at: tuple[int, ...],
) -> CheckedRows:
    """The records of the lines after `line` (1-based), checked as a file of their own."""
    path = scratch_file("rest", ".csv")
    try:
        engine.execute(
            f"INSERT INTO FUNCTION file({quote_str(path)}, 'LineAsString', 'line String') "
            f"SELECT line FROM {lines_expression} WHERE _row_number >= {line} SETTINGS max_threads = 1, "
            "engine_file_truncate_on_insert = 1",
            context="reading the rest of the file",
        )
        text_columns = ", ".join(f"{quote_ident(c.name)} String" for c in columns)
        expression = f"file({quote_str(path)}, 'CSV', {quote_str(text_columns)})"
        rest_lines = f"file({quote_str(path)}, 'LineAsString', 'line String')"
        return check_delimited(
            engine,
            expression,
            rest_lines,
            columns,
            delimiter,
            settings,
            header_lines=0,
            watched_at=watched_at,
            nul_ok=True,  # (lines of a file already read as text)
        )
    finally:
        os.remove(path)


def has_header(engine: Engine, lines_expression: str, columns: list[Column], delimiter: str) -> bool:
    """Whether the first line holds the column names (quote-aware: `"x,y"` is one name)."""
    fields = read_head(engine, lines_expression).fields(delimiter)
    names = {c.name for c in columns}
    return bool(fields) and all(f in names for f in fields)
