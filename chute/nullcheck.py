"""CSV and TSV read with the engine's NULL check off, where the bytes prove it changes nothing.

For every field of a non-Nullable column, the engine's CSV/TSV parser first
tries the NULL representation, `\\N`, so that a NULL can become the column's
default (`input_format_null_as_default`, on by default). That try is a quarter
of the parse: 27% of the CPU for the P4 CSV, 25% for TSV (13% for JSON lines,
whose `null` is a word that string values hold too: left as it is).

A file without the two bytes `\\N` reads the same either way, into columns
of scalar types (`scalar_type`; in nested ones `NULL` is a NULL too). So a batch's
first MiB is searched before its INSERT (a file with NULLs mostly shows one
there, and then never reads with the check off), and the rest while the
engine reads it: the search runs ahead of the engine at memory or disk speed,
and on a cold file its reads are the engine's reads. Before the stage commits,
the search must have found nothing; if it found a `\\N` (or the INSERT failed
and it did), the rows read with the check off are dropped with the stage and
the load reads the file again with it on (`NullsInFile`).
"""

from __future__ import annotations

import re
import threading

from chute.errors import TargetError

NULL_MARKER = b"\\N"
"""The engine's NULL in CSV and TSV (`format_csv_null_representation`, `format_tsv_null_representation`)."""
SEARCH_BUFFER = 2**20
HEAD_BYTES = 2**20
"""Searched before the INSERT starts: the first bytes of a batch (its first file's, or the first files')."""
CHECKED_FORMATS = frozenset({"CSV", "TSV"})

SCALAR_TYPE = re.compile(
    r"(U?Int\d+|Float\d+|BFloat16|Decimal\d*|String|FixedString|Date|Date32|DateTime|DateTime64|UUID|IPv4|IPv6"
    r"|Enum8|Enum16|Bool)(\(.*\))?",
    re.S,
)
"""Types whose text has no NULL but `\\N`. Inside an Array, Tuple or Map, `NULL` is a NULL as
well (`[1,NULL]`): with the check off such a row fails instead of getting a default."""

Place = tuple[str, int, int, str]
"""A file's bytes [start, end) and its identity (size and mtime): a file or a range of one."""


class NullsInFile(TargetError):
    """Rows read with the engine's NULL check off, from a file that holds `\\N`: read it again with the check on."""


def scalar_type(type_name: str) -> bool:
    """Whether a column of this type reads a NULL only from `\\N` (see SCALAR_TYPE)."""
    name = type_name.strip()
    for wrapper in ("LowCardinality(", "Nullable("):
        if name.startswith(wrapper) and name.endswith(")"):
            name = name[len(wrapper) : -1].strip()
    return SCALAR_TYPE.fullmatch(name) is not None


def free_of_null_marker(path: str, start: int, end: int) -> bool:
    """Whether bytes [start, end) of a file hold no `\\N`.

    memchr finds backslashes (rare in most files) at memory speed; numpy checks
    the byte after each one, so a file full of escapes costs a pass, not a
    Python loop: 0.15 s for the 1.35 GB P4 file in memory, one thread.
    """
    import numpy as np

    # Byte 0 holds the previous block's last byte: a marker across two blocks is seen.
    buffer = bytearray(SEARCH_BUFFER + 1)
    array = np.frombuffer(buffer, dtype=np.uint8)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        pos = start
        while pos < end:
            got = fh.readinto(view[1 : 1 + min(SEARCH_BUFFER, end - pos)])
            if not got:
                break  # the file got shorter: the loader's unchanged-file check tells
            if buffer.find(b"\\", 0, got + 1) >= 0:
                slashes = np.flatnonzero(array[:got] == NULL_MARKER[0])
                if slashes.size and bool(np.any(array[slashes + 1] == NULL_MARKER[1])):
                    return False
            buffer[0] = buffer[got]
            pos += got
    return True


class _Search:
    """The rest of some places, searched in a thread of its own, one place after another."""

    def __init__(self, places: list[tuple[Place, int]]) -> None:
        self.found: dict[Place, bool] = {}
        """Place -> free of the marker; a place not in it after the thread ends was not searched."""
        self._thread = threading.Thread(target=self._run, args=(places,), name="chute-nulls", daemon=True)
        self._thread.start()

    def _run(self, places: list[tuple[Place, int]]) -> None:
        for place, begin in places:
            path, _, end, _ = place
            try:
                self.found[place] = free_of_null_marker(path, begin, end)
            except OSError:
                self.found[place] = False
            if not self.found[place]:
                return  # the batch reads again with the check on: the others need not be known

    def free(self, place: Place) -> bool:
        self._thread.join()
        return self.found.get(place, False)


class NullSearches:
    """What a load knows of its CSV/TSV places: free of `\\N`, holding one, or being searched."""

    def __init__(self) -> None:
        self._state: dict[Place, bool | _Search] = {}

    def check_off(self, places: list[Place] | None) -> bool:
        """Whether an INSERT of `places` may read with the NULL check off; starts their search.

        True when each is free of `\\N` or still being searched; the INSERT must then
        ask `holds_nulls` before it commits, and when it fails.
        """
        if not places:
            return False
        rest: list[tuple[Place, int]] = []
        budget = HEAD_BYTES  # for the whole batch: many small files on disk are not read here first
        for place in [p for p in places if p not in self._state]:
            path, start, end, _ = place
            head_end = min(end, start + budget)
            if head_end > start:
                try:
                    clean = free_of_null_marker(path, start, head_end)
                except OSError:
                    clean = False  # the INSERT says why, with the usual settings
                budget -= head_end - start
                if not clean:
                    self._state[place] = False
                    return False  # the others are searched when they are loaded again
                if head_end == end:
                    self._state[place] = True
                    continue
            # From the head's last byte: a marker across the head's end is seen.
            rest.append((place, max(start, head_end - 1)))
        if rest:
            search = _Search(rest)
            for place, _ in rest:
                self._state[place] = search
        return all(self._state[p] is not False for p in places)

    def known_to_hold(self, places: list[Place] | None) -> bool:
        """Whether some of `places` is known (without waiting) to hold `\\N`."""
        return any(self._state.get(p) is False for p in places or [])

    def holds_nulls(self, places: list[Place]) -> bool:
        """Whether any of `places` holds `\\N` (or could not be searched); waits for their search."""
        held = False
        for place in places:
            state = self._state.get(place, False)
            if isinstance(state, _Search):
                state = self._state[place] = state.free(place)
            held = held or not state
        return held


BLANK_LINE = re.compile(rb"\n[ \t\r]*\n")
SMALL_READ = 64 * 2**10
"""Reads up to this size are searched by the expression alone (numpy's arrays cost more on a
few hundred bytes than the search: 20,000 files of 400 bytes took 1.3 s, now 0.3 s)."""
LINE_CARRY = 4096
"""Bytes of a read's last line carried into the next read, so a blank line across two reads is seen."""


def blank_line_in(path: str, start: int, end: int) -> bool:
    """Whether bytes [start, end) of a file hold a blank (or whitespace-only) line.

    The engine's JSON-lines reader skips such lines without counting them, so the
    rows after one would be numbered by record, not by line. numpy finds the line
    starts whose first byte is a line break, space, tab or CR (rare in JSON lines:
    0.3 ms per MB); only a read with such a line start is searched with the
    regular expression.
    """
    import numpy as np

    carry = b"\n"  # the start of the range starts a line
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        pos = start
        while pos < end:
            got = fh.read(min(SEARCH_BUFFER, end - pos))
            if not got:
                break
            buffer = carry + got
            if len(buffer) <= SMALL_READ:
                # A small file (many of them: one each): the expression alone, no arrays.
                if BLANK_LINE.search(buffer):
                    return True
                tail = buffer.rfind(b"\n")
                carry = buffer[tail:] if tail >= 0 and len(buffer) - tail <= LINE_CARRY else b"x"
                pos += len(got)
                continue
            array = np.frombuffer(buffer, dtype=np.uint8)
            breaks = np.flatnonzero(array == 10)
            if breaks.size:
                after = breaks[breaks + 1 < len(buffer)] + 1
                first = array[after]
                starts_blank = bool(np.any((first == 10) | (first == 13) | (first == 32) | (first == 9)))
                if starts_blank and BLANK_LINE.search(buffer):
                    return True
                tail = int(breaks[-1])
                carry = buffer[tail:] if len(buffer) - tail <= LINE_CARRY else b"x"
            else:
                carry = b"x"
            pos += len(got)
    return False


class BlankLineSearch:
    """`blank_line_in` over some places, in a thread of its own while the engine reads them."""

    def __init__(self, places: list[tuple[str, int, int]]) -> None:
        self.found = False
        self._thread = threading.Thread(target=self._run, args=(places,), name="chute-blank-lines", daemon=True)
        self._thread.start()

    def _run(self, places: list[tuple[str, int, int]]) -> None:
        for path, start, end in places:
            try:
                if blank_line_in(path, start, end):
                    self.found = True
                    return
            except OSError:
                continue  # (the unchanged check says what happened to the file)

    def blank(self) -> bool:
        self._thread.join()
        return self.found
