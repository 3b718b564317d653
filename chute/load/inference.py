"""Schema inference of a file with bad records, for a new table: from its good records, so the
bad ones become the load's rejected rows, as they do for a table that exists. The engine's
inference stops at the first record it cannot read (settings that allow errors do not reach it)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from chute.engine import Engine
from chute.errors import ChuteError, SourceError
from chute.schema import Column, describe
from chute.scratch import scratch_file
from chute.sql import quote_str

TOLERANT_TEXT: dict[str, str | int | float] = {
    "input_format_csv_allow_variable_number_of_columns": 1,
    "input_format_tsv_allow_variable_number_of_columns": 1,
    "input_format_csv_skip_trailing_empty_lines": 1,
    "input_format_tsv_skip_trailing_empty_lines": 1,
}
"""CSV/TSV inference past rows of another number of fields (a trailing blank line, a ragged
row): the header, or the other rows, name the columns. Inference only: the load reads those
rows strictly, as rejected rows."""

JSON_SAMPLE_LINES = 25_000
"""Lines of JSON objects copied for inference from a file whose inference failed."""


def repeated_names(fields: list[str]) -> list[str]:
    """Names a header line gives to more than one field, in order."""
    return sorted({f for f in fields if f and fields.count(f) > 1}, key=fields.index)


def refuse_empty_key(engine: Engine, lines: str, key: str, sample_rows: int | None) -> None:
    """SourceError for a JSON object with a field named "" among the lines inference reads: no
    column can be named so (the engine's inference drops the field, then its read refuses it)."""
    limit = int(sample_rows or JSON_SAMPLE_LINES)
    found = engine.rows(
        "SELECT min(n) AS first, count() AS lines FROM (SELECT line, rowNumberInAllBlocks() + 1 AS n "
        f"FROM (SELECT line FROM {lines} LIMIT {limit})) "
        "WHERE position(line, '\"\"') > 0 AND isValidJSON(line) AND has(JSONExtractKeys(line), '')",
        context=f"{key}: looking for empty field names",
    )
    if found and int(found[0]["lines"]):
        raise SourceError(
            f'{key}: line {found[0]["first"]} has a field named "" (the empty key), which no column can '
            "be named; rename or drop that field, then load"
        )


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
            f"SELECT line FROM {lines} WHERE isValidJSON(line) AND JSONType(line) = 'Object' "
            f"LIMIT {JSON_SAMPLE_LINES}",
            context=context,
        )
        if not os.path.getsize(sample):
            raise SourceError(f"{context}: no line is a JSON object")
        return describe(engine, f"file({quote_str(sample)}, 'JSONEachRow')", context, None, format_settings)
    except ChuteError as exc:  # the sample is chute's copy: name the user's file
        exc.args = (str(exc).replace(sample, key),)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.remove(sample)
