"""A wide table's INSERT into a server: what its part writer reserves against `max_memory_usage`.

A server writes a part through two buffers of about 1 MiB for each column file (a write
buffer and a compression buffer), allocated when the part starts, whatever its rows:
measured on 18.16, the query's memory tracker counts 2,110,000 bytes a file, two files for a
Nullable or Array column. Their size comes from the server's profile
(`max_compress_block_size`), not the query, so a 2,000-column Nullable table needs about
8 GiB of tracked memory for a 30-row INSERT (its resident memory was 240 MiB) and fails
`[241] Memory limit exceeded` under the default 10 GB limit from about 2,400 columns. chute
raises the limit of its INSERTs into such a table by that reservation, and says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from chute.report import human_bytes

PART_FILE_BYTES = 2_200_000
"""Tracked bytes a column file of a part being written (2,110,000 measured on 18.16), rounded up."""
FILES_PER_COLUMN = 2
"""A Nullable column writes its values and its null map: chute's own tables are Nullable."""
WIDE_COLUMNS = 200
"""Below this many columns the reservation (under 1 GiB) is left to the server's limit."""


def part_writer_bytes(columns: int) -> int:
    """What a part of `columns` columns reserves while it is written."""
    return columns * FILES_PER_COLUMN * PART_FILE_BYTES


class PartMemory:
    """The `max_memory_usage` for chute's INSERTs into a table of a given width on one server.

    The server's own limit (the user's profile) is read once, when the first wide INSERT comes."""

    def __init__(self, rows: Callable[[str], list[dict[str, Any]]], notes: list[str]) -> None:
        self._rows = rows
        self._limit: int | None = None
        self._lock = threading.Lock()
        self._notes = notes
        """The target's notes for the load's report: one line per width raised."""

    def over(self, settings: Mapping[str, str | int | float] | None, columns: int) -> dict[str, str | int | float]:
        """`settings` for an INSERT of `columns` columns, with the raised limit where it needs one."""
        return {**(settings or {}), **self.settings(columns)}

    def settings(self, columns: int) -> dict[str, str | int | float]:
        """The INSERT's own setting for a table of `columns` columns: none for a narrow table
        or where the server's limit already holds the reservation twice over."""
        if columns < WIDE_COLUMNS:
            return {}
        need = part_writer_bytes(columns)
        with self._lock:
            if self._limit is None:
                found = self._rows("SELECT value FROM system.settings WHERE name = 'max_memory_usage'")
                self._limit = int(found[0]["value"]) if found else 0
            limit = self._limit
            if limit == 0 or need * 2 <= limit:
                return {}
            raised = limit + need
            note = (
                f"{columns} columns: the server's part writer reserves about {human_bytes(need)} "
                f"(2 MiB a column file) whatever the rows, so chute's INSERTs run with max_memory_usage "
                f"{human_bytes(raised)} (the server's is {human_bytes(limit)})"
            )
            if note not in self._notes:
                self._notes.append(note)
        return {"max_memory_usage": raised}
