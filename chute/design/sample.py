"""The sample: the first rows of files spread over the list, in one scratch table."""

from __future__ import annotations

import math
import re
import time
import uuid
from dataclasses import dataclass, field

from chute.design.model import Request
from chute.design.types import SCALAR_INPUT, unwrap
from chute.engine import Engine
from chute.errors import ChuteError, SourceError
from chute.parquetmeta import null_free
from chute.schema import (
    INFER_FILES,
    INFER_MORE_ROWS,
    PROVENANCE_COLUMNS,
    PROVENANCE_NAMES,
    Column,
    describe,
    spread,
    union_columns,
)
from chute.sql import quote_ident, quote_str

SCRATCH_PREFIX = "_chute_design_"
MAX_SAMPLE_FILES = 32
"""Files read for the sample at first; more only when these hold too few rows."""
MAX_READ_FILES = 256
SAMPLE_CELLS = 6_000_000
"""Rows x columns of the sample: wide inputs get fewer rows, so every step stays bounded."""
MIN_SAMPLE_ROWS = 20_000
_TEXT_FORMAT = re.compile(r"^\s*\w+\(\s*'(?:[^'\\]|\\.)*'\s*,\s*'(CSV|TSV|TabSeparated|CSVWithNames|TSVWithNames)'")


@dataclass
class Sample:
    table: str
    columns: list[tuple[str, str]]
    """Input columns as read: (name, type in the sample table)."""
    provenance: bool
    rows: int = 0
    files_read: int = 0
    complete: bool = False
    notes: list[str] = field(default_factory=list)
    stats_nulls: set[str] = field(default_factory=set)
    """Columns whose Parquet statistics count NULLs in a sampled file (the sample may hold none)."""


class Scratch:
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


def _is_text(expression: str) -> bool:
    return _TEXT_FORMAT.match(expression) is not None


_RAW_TEXT: dict[str, str | int | float] = {"input_format_try_infer_dates": 0, "input_format_try_infer_datetimes": 0}
"""Times stay text in the sample, so their zones and digits can be tested."""


def _sample_structure(
    engine: Engine, expressions: list[str], order: list[int], settings: dict[str, str | int | float]
) -> list[tuple[str, str]]:
    """Columns of the first readable file and of up to INFER_FILES - 1 more spread over the list
    (INFER_MORE_ROWS rows of each; a field that appears only in later files is a column too);
    numbers in CSV/TSV are read as text to test them."""
    infer = {**settings, **_RAW_TEXT, "schema_inference_make_columns_nullable": 1}
    last: ChuteError | None = None
    per_file: list[list[Column]] = []
    for index in order[:MAX_SAMPLE_FILES]:
        if len(per_file) == INFER_FILES:
            break
        expression = expressions[index]
        try:
            rows = INFER_MORE_ROWS if per_file else None
            columns = describe(engine, expression, "design: cannot infer the schema", rows, infer)
        except ChuteError as exc:  # a broken file: try the next one
            last = exc
            continue
        text = _is_text(expression)
        as_read = []
        for c in columns:
            base, _ = unwrap(c.type, "Nullable")
            as_read.append(Column(c.name, "Nullable(String)" if text and SCALAR_INPUT.match(base) else c.type))
        per_file.append(as_read)
    if not per_file:
        raise SourceError(f"design: no file could be read: {last}")
    return [(c.name, c.type) for c in union_columns(engine, per_file)]


def load_sample(engine: Engine, scratch: Scratch, request: Request) -> Sample:
    """Read the first rows of files spread over the list into one scratch table."""
    expressions = request.expressions
    order = spread(len(expressions), MAX_SAMPLE_FILES)
    columns = _sample_structure(engine, expressions, order, request.settings)
    names = {name for name, _ in columns}
    sample = Sample(scratch.name("sample"), columns, provenance=not names & PROVENANCE_NAMES)
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
        sample.stats_nulls |= _parquet_nulls(engine, expressions[index], sample.columns)
    if failed:
        sample.notes.append(f"{failed} file(s) could not be read for the sample, e.g. {first_error}")
    sample.complete = exhausted == len(expressions)
    return sample


def _parquet_nulls(engine: Engine, expression: str, columns: list[tuple[str, str]]) -> set[str]:
    """Columns a Parquet file's statistics say hold NULLs (or cannot say); none for other formats."""
    if expression.count(", 'Parquet'") != 1:
        return set()
    metadata = expression.replace(", 'Parquet'", ", 'ParquetMetadata'")
    described = [Column(n, t) for n, t in columns]
    try:
        return {n for n, _ in columns} - null_free(engine, metadata, described)
    except ChuteError:
        return set()


def _insert_sample(
    engine: Engine, sample: Sample, expression: str, limit: int, settings: dict[str, str | int | float]
) -> int:
    try:
        return _insert_sample_columns(engine, sample, expression, limit, settings, None)
    except ChuteError as exc:
        if exc.code != UNKNOWN_IDENTIFIER:
            raise
    # A file that lacks some of the columns (fields of other files): those are NULL in its rows.
    hints = {k: v for k, v in settings.items() if k != "schema_inference_hints"}
    found = describe(engine, expression, "design: reading the sample", INFER_MORE_ROWS, hints)
    return _insert_sample_columns(engine, sample, expression, limit, settings, {c.name for c in found})


UNKNOWN_IDENTIFIER = 47


def _absent(type_: str) -> str:
    """The value of a column a file lacks: NULL, or the type's default where it holds no NULL."""
    return (
        f"CAST(NULL, {quote_str(type_)})"
        if type_.startswith("Nullable(")
        else f"defaultValueOfTypeName({quote_str(type_)})"
    )


def _insert_sample_columns(
    engine: Engine,
    sample: Sample,
    expression: str,
    limit: int,
    settings: dict[str, str | int | float],
    present: set[str] | None,
) -> int:
    names = [quote_ident(n) for n, _ in sample.columns]
    select = [quote_ident(n) if present is None or n in present else _absent(t) for n, t in sample.columns]
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
