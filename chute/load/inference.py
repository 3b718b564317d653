"""Schema inference of a file, for a table chute makes: the engine's, with a CSV/TSV file's NULL
markers and numbers as text on top, and past bad records, so the bad ones become the load's
rejected rows, as they do for a table that exists. The engine's inference stops at the first
record it cannot read (settings that allow errors do not reach it)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable, Mapping

from chute.engine import Engine, Settings
from chute.errors import ChuteError, SourceError, TargetError
from chute.formats import refuse_unreadable
from chute.load.context import LoadContext
from chute.load.headers import Headers
from chute.schema import Column, describe, with_faithful_numbers, with_null_markers
from chute.scratch import scratch_file
from chute.sniff import HEAD_LINES, PROBE_SETTINGS
from chute.sql import quote_str
from chute.units import Unit

TOLERANT_TEXT: dict[str, str | int | float] = {
    "input_format_csv_allow_variable_number_of_columns": 1,
    "input_format_tsv_allow_variable_number_of_columns": 1,
    "input_format_csv_skip_trailing_empty_lines": 1,
    "input_format_tsv_skip_trailing_empty_lines": 1,
}
"""CSV/TSV inference past rows of another number of fields (a trailing blank line, a ragged
row): the header, or the other rows, name the columns. Inference only: the load reads those
rows strictly, as rejected rows."""

CANNOT_EXTRACT_TABLE_STRUCTURE = 636
_REASON_RE = re.compile(r"DB::Exception: ([^.(]+)")
"""The engine's own reason inside its inference error ("Expected end of line")."""

JSON_SAMPLE_LINES = 25_000
"""Lines of JSON objects copied for inference from a file whose inference failed."""
MIXED_TYPES = re.compile(r"for column '[^']*' in row (\d+) differs from type defined by previous rows")
"""The engine's inference meeting a record whose value is of another kind (an object, a number)."""
MIXED_RETRIES = 20
"""Records of another kind left out of the sample, one at a time, before inference gives up."""


def repeated_names(fields: list[str]) -> list[str]:
    """Names a header line gives to more than one field, in order."""
    return sorted({f for f in fields if f and fields.count(f) > 1}, key=fields.index)


ORDINARY_OBJECT = (
    "isValidJSON(line) AND JSONType(line) = 'Object' AND position(line, '\\0') = 0 "
    "AND length(JSONExtractKeys(line)) = length(arrayDistinct(JSONExtractKeys(line)))"
)
"""A line inference may read: a JSON object (valid, so nested less than the parser's depth limit)
without a NUL byte or a key given twice. Any other line is odd: one such made the engine's
inference fail ("Duplicate column name"), or type a column 1,100 arrays deep; the load rejects it."""

NO_OBJECT_LINE = "no line is a JSON object"

EMPTY_KEY = "position(line, '\"\"') > 0 AND isValidJSON(line) AND has(JSONExtractKeys(line), '')"
"""A line holding a JSON object with a field named "" (the empty key)."""


def screen_lines(engine: Engine, lines: str, key: str, sample_rows: int | None) -> int:
    """How many of the lines inference reads are odd (see ORDINARY_OBJECT; blank lines are not),
    read in the same pass that refuses a field named "" (SourceError): no column can be named so
    (the engine's inference drops the field, then its read refuses it). One read of the sample,
    not one per question: each costs as much as decompressing and splitting it."""
    limit = int(sample_rows or JSON_SAMPLE_LINES)
    found = engine.rows(
        f"SELECT minIf(n, {EMPTY_KEY}) AS first, countIf({EMPTY_KEY}) AS empty, "
        f"countIf(NOT ({ORDINARY_OBJECT}) AND NOT match(line, '^\\s*$')) AS odd "
        f"FROM (SELECT line, rowNumberInAllBlocks() + 1 AS n FROM (SELECT line FROM {lines} LIMIT {limit}))",
        PROBE_SETTINGS,
        context=f"{key}: looking for odd lines",
    )
    if not found:
        return 0
    if int(found[0]["empty"]):
        raise SourceError(
            f'{key}: line {found[0]["first"]} has a field named "" (the empty key), which no column can '
            "be named; rename or drop that field, then load"
        )
    return int(found[0]["odd"])


def from_json_objects(
    engine: Engine, lines: str, key: str, format_settings: Mapping[str, str | int | float]
) -> list[Column]:
    """The columns of a JSON lines file whose inference failed, from its lines that are JSON
    objects (not broken lines, arrays or scalars)."""
    context = f"{key}: cannot infer the schema"
    sample = scratch_file("sample", ".jsonl")
    try:
        engine.execute(
            f"INSERT INTO FUNCTION file({quote_str(sample)}, 'LineAsString', 'line String') "
            f"SELECT line FROM {lines} WHERE {ORDINARY_OBJECT} LIMIT {JSON_SAMPLE_LINES}",
            context=context,
        )
        if not os.path.getsize(sample):
            raise SourceError(f"{context}: {NO_OBJECT_LINE}")
        for _ in range(MIXED_RETRIES):
            try:
                return describe(engine, f"file({quote_str(sample)}, 'JSONEachRow')", context, None, format_settings)
            except ChuteError as exc:
                mixed = MIXED_TYPES.search(str(exc))
                if mixed is None:
                    raise
                # That record left out of the sample: the load rejects it (its value does not fit).
                rest = scratch_file("sample", ".jsonl")
                engine.execute(
                    f"INSERT INTO FUNCTION file({quote_str(rest)}, 'LineAsString', 'line String') SELECT line "
                    f"FROM file({quote_str(sample)}, 'LineAsString', 'line String') WHERE _row_number != {mixed[1]}",
                    {"max_threads": 1},
                    context=context,
                )
                os.replace(rest, sample)
        return describe(engine, f"file({quote_str(sample)}, 'JSONEachRow')", context, None, format_settings)
    except ChuteError as exc:  # the sample is chute's copy: name the user's file
        exc.args = (str(exc).replace(sample, key),)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.remove(sample)


class Inferrer:
    """A file's columns as the engine infers them, for a table chute makes."""

    def __init__(self, ctx: LoadContext, headers: Headers) -> None:
        self.ctx = ctx
        self.headers = headers

    def infer(self, unit: Unit, sample_rows: int | None = None) -> list[Column]:
        """The unit's columns; SourceError when the engine cannot read it in its format at all
        (the file, or the format asked for, is what is wrong: not the target)."""
        try:
            return self._infer(unit, sample_rows)
        except TargetError as exc:
            if exc.code != CANNOT_EXTRACT_TABLE_STRUCTURE:
                raise
            raise SourceError(self._unreadable(unit, str(exc))) from None

    def _unreadable(self, unit: Unit, message: str) -> str:
        """One short line: the file, its format, the engine's first reason, a way out."""
        fmt = unit.fmt.format
        reason = next(iter(_REASON_RE.findall(message)), "")
        reason = f" ({reason[:60]})" if reason else ""
        hint = "a wrong --format or --delimiter?"
        if fmt in ("CSV", "TSV"):
            with contextlib.suppress(ChuteError):
                first = b"".join(self.headers.head(unit).lines[:1]).lstrip()
                if first.startswith((b"{", b"[")):
                    hint = "it looks like JSON lines: --format json"
        return f"{unit.key}: cannot be read as {fmt}{reason}; {hint}"

    def _infer(self, unit: Unit, sample_rows: int | None = None) -> list[Column]:
        """The unit's columns. Bad records do not stop it (load.inference): a CSV/TSV file's are
        read past, a JSON lines file's left out; the load then rejects them. A text column of a
        CSV/TSV file whose only other values are one NULL marker (`NA`) is typed Nullable
        (schema.with_null_markers)."""
        refuse_unreadable(unit.key, unit.fmt)
        declared = self.ctx.source.declared_columns(unit)
        if declared is not None:
            return declared
        text = unit.fmt.format in ("CSV", "TSV")
        if text:
            head = self.headers.head(unit)
            if len(head.lines) < HEAD_LINES and not any(line.strip() for line in head.lines):
                # (the whole file read: the engine would infer one text column, c1, from its empty lines)
                raise SourceError(f"{unit.key}: no header and no rows: empty, or only blank lines")
            names = self.headers.header_only(unit, head)
            if names is not None:
                return [Column(n, "String") for n in names]
        read: Callable[[str], str] = lambda f: self.ctx.source.table_expression(unit, None, f)  # noqa: E731
        lines = self.ctx.source.table_expression(unit, "line String", "LineAsString")
        odd = 0
        if unit.fmt.format == "JSONEachRow":
            odd = screen_lines(self.ctx.target.engine, lines, unit.key, sample_rows)
        try:
            if not odd:
                return self._described(unit, read, sample_rows)
        except ChuteError as exc:
            if text:
                return self._described_tolerantly(unit, read, sample_rows, exc)
            if unit.fmt.format != "JSONEachRow":
                raise
        try:
            columns = from_json_objects(self.ctx.target.engine, lines, unit.key, self.ctx.format_settings())
        except SourceError as exc:
            if not str(exc).endswith(NO_OBJECT_LINE):
                raise
            return self._documents(unit, read, sample_rows, exc)
        self.ctx.note(
            f"{unit.key}: some lines are not plain JSON objects (invalid, nested too deep, a NUL byte, a key "
            "given twice, a value of another kind); the columns are inferred from the others, and the load "
            "rejects those it cannot read"
        )
        return columns

    def _documents(
        self, unit: Unit, read: Callable[[str], str], sample_rows: int | None, failed: SourceError
    ) -> list[Column]:
        """A JSON file with no line that is an object of its own: one JSON array of objects, or
        objects over several lines (pretty-printed). The engine reads such a file as rows (as it
        did into a table that exists): the columns are its reading of the whole file."""
        try:
            columns = self._described(unit, read, sample_rows)
        except ChuteError:
            raise failed from None
        self.ctx.note(
            f"{unit.key}: not one JSON object a line (a JSON array, or objects over several lines): the "
            "columns are the engine's reading of the whole file, its rows numbered by record; a record "
            "it cannot take fails the file (bad rows are told apart by line)"
        )
        return columns

    def _described_tolerantly(
        self, unit: Unit, read: Callable[[str], str], sample_rows: int | None, failed: ChuteError
    ) -> list[Column]:
        """A CSV/TSV file whose inference failed, inferred past blank lines and rows of another
        number of fields; a header naming a field twice is refused in one line (the engine reads
        no such file)."""
        sample = scratch_file("sample", ".txt")
        lines = self.ctx.source.table_expression(unit, "line String", "LineAsString")
        try:
            # The lines that are not blank (the engine's inference takes one for a row of one
            # field, which the load skips), read past rows of another number of fields.
            self.ctx.target.engine.execute(
                f"INSERT INTO FUNCTION file({quote_str(sample)}, 'LineAsString', 'line String') "
                f"SELECT line FROM {lines} WHERE NOT match(line, '^\\s*$') LIMIT {sample_rows or 25000}",
                context=f"{unit.key}: cannot infer the schema",
            )
            columns = self._described(unit, lambda f: f"file({quote_str(sample)}, {quote_str(f)})", None, TOLERANT_TEXT)
        except ChuteError:
            delimiter = self.ctx.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
            twice = repeated_names(self.headers.head(unit).fields(delimiter))
            if twice:
                raise SourceError(
                    f"{unit.key}: the header line names {', '.join(twice)} more than once; the engine reads no "
                    "file whose columns share a name: rename the repeated fields in the header, then load"
                ) from None
            raise failed from None
        finally:
            with contextlib.suppress(OSError):
                os.remove(sample)
        self.ctx.note(
            f"{unit.key}: some rows are blank or have another number of fields than the others; the columns "
            "are inferred from the rest"
        )
        return columns

    def _described(
        self, unit: Unit, read: Callable[[str], str], sample_rows: int | None, extra: Settings | None = None
    ) -> list[Column]:
        """The columns the engine infers for the unit as `read` (a format name: its table
        expression) reads it, with `extra` settings; CSV/TSV: see infer."""
        context = f"{unit.key}: cannot infer the schema"
        engine, settings = self.ctx.target.engine, {**self.ctx.format_settings(), **(extra or {})}
        expression = read(unit.fmt.format)
        columns = describe(engine, expression, context, sample_rows, settings)
        if unit.fmt.format not in ("CSV", "TSV"):
            return columns
        self.headers.refuse_unnamed(unit, columns)
        names = self.headers.names_before_end(unit, columns)
        if names is not None:
            # A header ending in a delimiter (`id,s,`), taken for a row: the rows alone say the
            # types (its names would load as a row, and make every column text). All text, it
            # is still a row unless --header says so, as for any header (named_if_all_text).
            skip = f"input_format_{unit.fmt.format.lower()}_skip_first_lines"
            past = {**settings, skip: 1, "input_format_csv_detect_header": 0, "input_format_tsv_detect_header": 0}
            rows = describe(engine, expression, context, sample_rows, past)
            text = ("String", "Nullable(String)")
            if self.ctx.opts.header or any(c.type not in text for c in rows[: len(names)]):
                columns, settings = rows, past
            else:
                names = None
        if columns and columns[0].name.startswith("\ufeff"):
            # A UTF-8 BOM (Excel's "CSV UTF-8"): the engine's inference keeps it in the first
            # name, its header detection then fails on the line: the header is read as one.
            name = columns[0].name.removeprefix("\ufeff")
            if unit.fmt.format == "CSV" and len(name) > 1 and name[0] == name[-1] == '"':
                name = name[1:-1].replace('""', '"')  # (quoted: `\ufeff"id"`, as PowerShell writes)
            columns[0] = dataclasses.replace(columns[0], name=name)
            expression = read(f"{unit.fmt.format}WithNames")
        columns = with_null_markers(engine, expression, columns, context, settings, sample_rows)
        columns = with_faithful_numbers(engine, expression, columns, context, settings, sample_rows)
        if names is None:
            return columns
        # (the unnamed last fields get no column: the load refuses a file whose rows fill them)
        return [dataclasses.replace(c, name=n) for c, n in zip(columns[: len(names)], names, strict=True)]
