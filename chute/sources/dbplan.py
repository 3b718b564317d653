"""Planning a database table's read from catalog numbers: key ranges and the number of streams.

Pure functions (no server, no engine), so the choices can be tested alone:

- `estimate_cuts`: key ranges of about N rows from the key's min and max (read
  through its index) and the catalog's row estimate (PostgreSQL
  `pg_class.reltuples` scaled to the table's current size, MySQL
  `information_schema.TABLES.TABLE_ROWS`). No row is counted: a range's exact
  row count is known once it has loaded.
- `choose_streams`: how many connections read at once. Each stream costs about
  one core on each side (the server writing rows, the engine parsing them), so
  never more than the client's cores, half of them when the server runs on the
  same machine, and no more than the server's parallel workers otherwise.
- `pg_ident`, `pg_str`, `mysql_ident`, `mysql_str`: quoting for SQL run on the
  server itself (names come from users).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

UNKNOWN_SERVER = 4
"""Streams at most to a server on another machine that does not say how many workers it runs."""


def pg_ident(name: str) -> str:
    """A PostgreSQL identifier: double quotes, doubled inside."""
    _no_nul(name)
    return '"' + name.replace('"', '""') + '"'


def pg_str(value: str) -> str:
    """A PostgreSQL string literal, whatever standard_conforming_strings says (an E'' string)."""
    _no_nul(value)
    return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def mysql_ident(name: str) -> str:
    """A MySQL identifier: backticks, doubled inside."""
    _no_nul(name)
    return "`" + name.replace("`", "``") + "`"


def mysql_str(value: str) -> str:
    """A MySQL string as hex bytes: the same text whatever the SQL mode (NO_BACKSLASH_ESCAPES, ANSI_QUOTES)."""
    return f"CONVERT(X'{value.encode().hex()}' USING utf8mb4)"


def _no_nul(text: str) -> None:
    if "\0" in text:
        raise ValueError("a name with a NUL character")


def estimate_cuts(lo: int, hi: int, rows: int | None, rows_per_range: int, unique: bool) -> list[tuple[int, int, int]]:
    """Ranges [a, b) of equal key width covering [lo, hi], about `rows_per_range` rows each, with their estimated
    rows (at least 1); `rows` is the estimate for [lo, hi] (None: unknown, taken as one row per key).

    A unique key holds at most one row per value, so the estimate is capped at the span; keys
    are taken as evenly spread (a skewed key gives uneven ranges, each still a unit of its own).
    """
    if hi < lo:
        return []
    span = hi - lo + 1
    total = span if rows is None or rows < 0 else rows
    if unique:
        total = min(total, span)
    pieces = max(1, min(span, -(-total // rows_per_range)))
    width = -(-span // pieces)
    cuts = []
    for a in range(lo, hi + 1, width):
        b = min(a + width, hi + 1)
        cuts.append((a, b, max(1, -(-total * (b - a) // span))))
    return cuts


def scaled_rows(rows: int | None, lo: int, hi: int, start: int | None) -> int | None:
    """The share of a table's estimated `rows` (keys lo..hi) with keys from `start` on (keys evenly spread)."""
    if rows is None or start is None or start <= lo:
        return rows
    if start > hi:
        return 0
    return -(-rows * (hi - start + 1) // (hi - lo + 1))


def is_local(host: str) -> bool:
    """The server runs on this machine: a loopback address, `localhost`, or this machine's name."""
    name = host.strip("[]").lower()
    if name in ("localhost", "localhost.localdomain") or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    return name in {socket.gethostname().lower(), socket.getfqdn().lower()}


@dataclass(frozen=True)
class Streams:
    """How many connections read a table at once, and why (for the report)."""

    count: int
    why: str

    def note(self, table: str, ranges: int) -> str:
        ran = max(1, min(self.count, ranges))
        plural = "s" if ran > 1 else ""
        capped = f" (of {self.count}: {ranges} range{'s' if ranges != 1 else ''} to read)" if ran < self.count else ""
        return f"{table}: read by {ran} stream{plural}{capped}: {self.why}"


def choose_streams(client: int, local: bool, server: int | None, override: int | None) -> Streams:
    """Streams for one table: `client` cores here, the server on this machine or not, its parallel workers
    (None: unknown), `?streams=N` (None: not given)."""
    if override is not None:
        return Streams(override, "streams=N in the source URL")
    if local:
        if client == 1:
            return Streams(1, "the server is on this machine; this process may use 1 core")
        return Streams(
            max(1, client // 2), f"the server is on this machine: half the {client} cores this process may use"
        )
    if server is None:
        count = max(1, min(client, UNKNOWN_SERVER))
        return Streams(count, f"{client} cores here, the server's workers unknown (at most {UNKNOWN_SERVER})")
    count = max(1, min(client, server))
    return Streams(count, f"{client} core{'s' if client > 1 else ''} here, {server} parallel workers on the server")
