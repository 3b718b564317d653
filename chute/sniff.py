"""A look at the first lines of a text file: binary or not, its delimiter, its header.

The engine reads the first `HEAD_LINES` lines (each cut at `HEAD_LINE_BYTES`)
as raw bytes; Python looks only at that sample, never at the rest of the file.
Delimiters are found the way Python's csv.Sniffer and DuckDB find them: the
candidate that splits every record of the sample (outside quotes) into the same
number of fields, more than one.
"""

from __future__ import annotations

import base64
import csv
import re
from dataclasses import dataclass

from chute.engine import Engine
from chute.errors import NotText

HEAD_LINES = 32
HEAD_LINE_BYTES = 256 * 1024
"""A line of the sample is cut here: a wide file's header (10,000 columns of 20-byte names) whole.
(At 4 KiB a header of 500 columns was cut, and its last name taken for a column.)"""
DELIMITERS = (",", "\t", ";", "|")
"""Candidates, in order of preference when several split the sample alike."""

# First bytes of files that are not text (what a misnamed file usually is).
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"PAR1", "a Parquet file"),
    (b"ORC", "an ORC file"),
    (b"Obj\x01", "an Avro file"),
    (b"ARROW1", "an Arrow file"),
    (b"\x1f\x8b", "gzip-compressed"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed"),
    (b"BZh", "bzip2-compressed"),
    (b"\xfd7zXZ\x00", "xz-compressed"),
    (b"\x04\x22\x4d\x18", "lz4-compressed"),
    (b"PK\x03\x04", "a zip archive"),
)

_QUOTES = re.compile(r'^\s*"|"\s*$')
NUMBER_OR_DATE = re.compile(r"^[-+]?(\d[\d_]*)?(\.\d+)?([eE][-+]?\d+)?$|^\d{4}-\d\d-\d\d")


@dataclass(frozen=True)
class Head:
    """The first lines of a file (a UTF-8 BOM and line ends removed), as bytes."""

    lines: list[bytes]

    def not_text(self, nul_ok: bool = False) -> str | None:
        """What the file is when it is not text ("a Parquet file"), else None."""
        first = self.lines[0] if self.lines else b""
        for magic, kind in _MAGIC:
            if first.startswith(magic):
                return kind
        # (UTF-16 text has NULs in every line; one odd line with a NUL byte is a bad record)
        if not nul_ok and 2 * sum(b"\x00" in line for line in self.lines) > len(self.lines):
            return "binary (it holds NUL bytes; UTF-16 text has them too)"
        return None

    @property
    def text(self) -> list[str]:
        return [line.decode("utf-8", errors="replace") for line in self.lines]

    def delimiter(self) -> str | None:
        """The delimiter that splits every whole record of the sample alike, or None."""
        records = _records(self.text, [len(line) >= HEAD_LINE_BYTES for line in self.lines])
        best: tuple[int, str] | None = None
        for candidate in DELIMITERS:
            counts = {_count_outside_quotes(r, candidate) for r in records}
            if len(counts) != 1 or 0 in counts:
                continue
            fields = counts.pop() + 1
            if best is None or fields > best[0]:
                best = (fields, candidate)
        return best[1] if best else None

    def fields(self, delimiter: str) -> list[str]:
        """The first line's fields, quotes and spaces around them removed."""
        return [_QUOTES.sub("", f).strip(" \t") for f in self.raw_fields(delimiter)]

    def raw_fields(self, delimiter: str) -> list[str]:
        """The first line's fields, split where the delimiter stands outside quotes (`a,"x,y"`
        is two fields) as the engine's CSV reader splits them, quotes removed; TSV has no quoting."""
        if not self.lines:
            return []
        first = self.text[0]
        if delimiter == "\t":
            return first.split(delimiter)
        try:
            return next(csv.reader([first], delimiter=delimiter, skipinitialspace=True), None) or [""]
        except csv.Error:  # (a NUL byte, say: split as it stands)
            return first.split(delimiter)

    def padded_names(self, delimiter: str) -> bool:
        """The first line's unquoted fields have spaces or tabs around them (`id, name`)."""
        if not self.lines or delimiter == "\t":
            return False
        return any(f != f.strip(" \t") for f in self.text[0].split(delimiter) if '"' not in f)

    def unnamed_at(self, delimiter: str) -> list[int]:
        """Positions (1-based) of the empty fields of a first line that otherwise looks like a
        header (`a,,b`: distinct fields, none a number or a date); [] for any other line, and
        for empty fields only at its end (`id,s,`, see chute.load.headers.Headers.named_fields)."""
        fields = self.fields(delimiter)
        names = [f for f in fields if f]
        gaps = [i + 1 for i, f in enumerate(fields) if not f]
        if not gaps or not names or all(fields[: len(fields) - len(gaps)]):
            return []
        if len(set(names)) != len(names) or any(NUMBER_OR_DATE.match(f) for f in names):
            return []
        return gaps

    def bare_cr(self) -> bool:
        """Its lines end in a bare CR (classic Mac OS, Excel's "CSV (Macintosh)"): read by lines
        (LF), the file is one line with a CR outside quotes. The engine would take it for a
        header of names running into the rows (`b\\r1`) and no row; a CR inside a line of a file
        of many lines (`1,x\\ry`) is a value's."""
        lines = [line for line in self.lines if line.strip()]
        return len(lines) == 1 and any(b"\r" in piece for piece in lines[0].split(b'"')[::2])

    def names_before_end(self, delimiter: str) -> list[str] | None:
        """A first line's names where it ends in empty fields (`id,s,`: a delimiter after every
        field, as many exporters write): its fields before them, when they are distinct and none
        is empty, a number or a date; else None."""
        fields = self.fields(delimiter)
        named = len(fields)
        while named and not fields[named - 1]:
            named -= 1
        names = fields[:named]
        if named == len(fields) or not all(names) or len(set(names)) != named:
            return None
        return None if not names or any(NUMBER_OR_DATE.match(f) for f in names) else names

    def blank_lines(self) -> bool:
        """The sample holds a blank (or whitespace-only) line."""
        return any(not line.strip() for line in self.lines)

    def names_only(self, delimiter: str) -> list[str] | None:
        """The column names, when the whole file is one line that looks like a header:
        distinct, non-empty fields, none a number or a date."""
        lines = [line for line in self.lines if line.strip()]
        if len(lines) != 1 or len(self.lines[0]) >= HEAD_LINE_BYTES:
            return None
        fields = self.fields(delimiter)
        if len(set(fields)) != len(fields) or any(not f or NUMBER_OR_DATE.match(f) for f in fields):
            return None
        return fields


def _records(lines: list[str], cut: list[bool]) -> list[str]:
    """Whole records of the sample: lines joined where a quoted field spans them;
    a record that is cut (a long line, or the sample's end inside quotes) is left out."""
    records: list[str] = []
    current: list[str] = []
    quoted = False
    for line, was_cut in zip(lines, cut, strict=True):
        if was_cut:
            current, quoted = [], False
            continue
        current.append(line)
        quoted ^= line.count('"') % 2 == 1
        if not quoted:
            record = "\n".join(current)
            if record.strip():
                records.append(record)
            current = []
    return records


def _count_outside_quotes(record: str, delimiter: str) -> int:
    # Between quotes sit the odd-numbered pieces of a split on '"' ("" inside a field splits evenly).
    return sum(piece.count(delimiter) for piece in record.split('"')[::2])


PROBE_SETTINGS: dict[str, str | int | float] = {"input_format_parallel_parsing": 0, "max_threads": 1}
"""A read of a file's first lines: parsed in parallel, the engine splits off and decompresses a
10 MiB segment first, whatever the LIMIT (twice the CPU of 2,000 lines read in one thread)."""


def read_head(engine: Engine, lines_expression: str, context: str = "") -> Head:
    """The first lines of the file that `lines_expression` (LineAsString, `line String`) reads."""
    rows = engine.rows(
        f"SELECT base64Encode(substring(line, 1, {HEAD_LINE_BYTES})) AS b FROM {lines_expression} LIMIT {HEAD_LINES}",
        PROBE_SETTINGS,
        context=context,
    )
    lines = [base64.b64decode(r["b"]) for r in rows]
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    return Head([line[:-1] if line.endswith(b"\r") else line for line in lines])


def refuse_binary(engine: Engine, lines_expression: str, what: str, nul_ok: bool = False) -> Head:
    """The head of a file read as text; NotText when its first bytes say it is not text.
    `nul_ok`: its format was given (--format, an export's manifest), so NUL bytes are text (a
    CSV field may hold one); only a typed file's magic refuses it."""
    head = read_head(engine, lines_expression, context=f"{what}: reading its first lines")
    kind = head.not_text(nul_ok)
    if kind:
        raise NotText(f"{what}: not text but {kind}; give its format with --format, or rename it")
    if head.bare_cr():
        raise NotText(
            f"{what}: its lines end in a bare CR (\\r, as classic Mac OS writes them), which the engine "
            "does not take for line ends: convert them first (tr '\\r' '\\n' < FILE > NEW)"
        )
    return head
