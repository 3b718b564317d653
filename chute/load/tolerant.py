"""Dirty JSON-lines batches in one pass: the engine skips bad records and says where.

A batch of JSON-lines files that fails on a bad record is read again with
per-record error skipping (`input_format_allow_errors_*`), each file through
its own subquery whose SETTINGS give it its own errors file
(`input_format_record_errors_file_path`), so the 1-based positions of the
skipped records are known per file. The engine's `_row_number` then counts
only the records it kept, so the stage table's `_source_row` is mended with
one mutation from those positions; the bad records' text is read back by line
number, and their reasons come from the careful pass's checks run on just
those lines. Anything that does not reconcile (blank lines, counts that
disagree) sends the files to the careful pass instead.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from chute.engine import Engine, Settings, render_settings
from chute.scratch import scratch_file
from chute.sql import quote_str

ERRORS_STRUCTURE = (
    "time String, database Nullable(String), table Nullable(String), offset UInt64, reason String, raw_data String"
)
"""The columns of the engine's errors file (`errors_output_format = 'CSV'`)."""

SKIP_ERRORS: dict[str, str | int | float] = {
    "input_format_allow_errors_num": 1_000_000_000_000,
    "input_format_allow_errors_ratio": 1,
    "errors_output_format": "CSV",
    # One reader per file, in order: `_row_number` and the errors file count the same records.
    "input_format_parallel_parsing": 0,
}


@dataclass
class ErrorFiles:
    """One errors file per unit key, in a directory of their own."""

    directory: str
    paths: dict[str, str]

    @classmethod
    def for_keys(cls, keys: list[str]) -> ErrorFiles:
        directory = tempfile.mkdtemp(prefix="chute-errors-")
        return cls(directory, {key: os.path.join(directory, f"{i}.csv") for i, key in enumerate(keys)})

    def wrap(self, key: str, select: str, settings: Settings) -> str:
        """`select` with its own errors file. A subquery's SETTINGS apply to its reading,
        and replace the statement's there: all of them are repeated."""
        own = {**settings, "input_format_record_errors_file_path": self.paths[key]}
        return f"SELECT * FROM ({select}{render_settings(own)})"

    def positions(self, engine: Engine) -> dict[str, list[int]]:
        """Key -> sorted 1-based positions of the records the engine skipped."""
        found: dict[str, list[int]] = {}
        for key, path in self.paths.items():
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                found[key] = []
                continue
            rows = engine.rows(
                f"SELECT arraySort(groupArray(offset)) AS p FROM file({quote_str(path)}, 'CSV', "
                f"{quote_str(ERRORS_STRUCTURE)})"
            )
            found[key] = [int(p) for p in rows[0]["p"]]
        return found

    def remove(self) -> None:
        for path in self.paths.values():
            if os.path.exists(path):
                os.remove(path)
        os.rmdir(self.directory)


def kept_row_to_position(bad_by_source: dict[str, list[int]]) -> str:
    """SQL turning `_source_row` (the 1-based count of kept records) into the record's position.

    With bad positions b_1 < b_2 < ..., the g-th kept record sits at g plus the
    number of i with b_i - i < g (the bad records before it).
    """
    arms = []
    for source, bad in bad_by_source.items():
        if bad:
            shifted = ", ".join(str(b - i) for i, b in enumerate(bad, start=1))
            arms += [f"_source = {quote_str(source)}", f"[{shifted}]"]
    if not arms:
        return "_source_row"
    table = f"multiIf({', '.join(arms)}, [])" if len(arms) > 2 else arms[1]
    return f"_source_row + arrayCount(x -> x < _source_row, {table})"


def scratch_path() -> str:
    return scratch_file("bad-lines", ".txt")
