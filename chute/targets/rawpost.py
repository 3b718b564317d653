"""Files sent as they are, for the server to parse (the server-parse and pass-through methods).

The body is the file's bytes; gzip travels as the body's encoding, which every
server version decodes itself. Nothing is read or converted on the client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from chute.engine import Settings
from chute.formats import FileFormat
from chute.sql import TableName, quote_ident
from chute.transport import HttpClient
from chute.units import Unit

# Formats a server of any version parses from a raw HTTP body (the pass-through method).
PASS_THROUGH_FORMATS = frozenset({"JSONEachRow", "CSV", "TSV", "Native"})
# Reading settings that mean the same on the server (18.16 knows these).
SERVER_FORMAT_SETTINGS = frozenset({"date_time_input_format", "format_csv_delimiter"})
CHUNK_BYTES = 1 << 20


def passes_through(fmt: FileFormat) -> bool:
    """Whether every server version parses files of this format from an HTTP body, as they are."""
    return fmt.format in PASS_THROUGH_FORMATS and fmt.compression in ("gzip", "none")


def server_settings(settings: Settings) -> dict[str, str | int | float]:
    """The load's reading settings that the server understands, and unknown fields refused."""
    kept = {k: v for k, v in settings.items() if k in SERVER_FORMAT_SETTINGS}
    kept["input_format_skip_unknown_fields"] = 0
    return kept


def post_file(
    client: HttpClient,
    into: TableName,
    columns: Sequence[str],
    unit: Unit,
    format_name: str,
    settings: Settings,
    context: str,
    sent: Callable[[int], None],
    length: int | None = None,
) -> None:
    """POST `unit`'s bytes into `into` (its `columns`), with exactly `settings`; `sent` counts the bytes."""
    client.insert(
        f"INSERT INTO {into.sql} ({', '.join(quote_ident(c) for c in columns)}) FORMAT {format_name}",
        file_body(unit.key, sent),
        settings=settings,
        context=context,
        content_encoding="gzip" if unit.fmt.compression == "gzip" else None,
        length=length,
    )


def file_body(path: str, sent: Callable[[int], None]) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            sent(len(chunk))
            yield chunk
