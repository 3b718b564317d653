"""What every source shares: the `Source` protocol, its options, and helpers for
the SQL that reads units.

A source never reads rows itself; it names units (with an identity the ledger
can compare between runs) and gives the engine SQL to read each one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from chute.capabilities import Capabilities
from chute.formats import COMPRESSION_BY_EXTENSION, FORMAT_BY_EXTENSION
from chute.schema import Column
from chute.sql import quote_str
from chute.units import Unit

# Formats whose reader fills the `_row_number` virtual column; for the others
# (Native, ORC, Arrow) rows are numbered by a single-threaded read.
ROW_NUMBER_FORMATS = frozenset({"JSONEachRow", "CSV", "TSV", "Parquet", "Avro"})


def table_function(
    name: str,
    location: list[str],
    fmt_name: str,
    structure: str | None,
    compression: str,
    extra: list[str] | None = None,
) -> str:
    """`name(location..., format[, structure][, compression][, extra...])`: the argument order
    file(), url(), s3() and hdfs() share (a compression needs a structure before it: 'auto')."""
    args = [*location, quote_str(fmt_name)]
    if structure is not None or compression != "none":
        args.append(quote_str(structure) if structure is not None else "'auto'")
    if compression != "none":
        args.append(quote_str(compression))
    return f"{name}({', '.join([*args, *(extra or [])])})"


def common_directory(paths: list[str]) -> str:
    """The paths' common prefix, cut back to a '/' (character-wise on purpose: object keys
    are not file paths, and '//' in one is kept)."""
    common = os.path.commonprefix(paths)  # noqa: RUF071
    return common[: common.rfind("/") + 1]


def provenance_by_path(source_sql: str, paths: list[str], units: list[Unit]) -> dict[str, str]:
    """`_source` and `_source_mtime` of rows read by one call over several units, from the
    engine's `_path` (which names each unit as `paths` does)."""
    listed = "[" + ", ".join(quote_str(p) for p in paths) + "]"
    mtimes = "[" + ", ".join(str(u.mtime_ns) for u in units) + "]"
    return {
        "_source": source_sql,
        "_source_mtime": f"fromUnixTimestamp64Nano(transform(_path, {listed}, {mtimes}, 0), 'UTC')",
    }


class Source(Protocol):
    """A set of units plus the SQL that reads them."""

    batch_bytes: int | None
    """Input bytes per batch at most (None: --batch-mb alone decides)."""

    def units(self) -> list[Unit]:
        """List the units, cheaply (no row is read)."""
        ...

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        """A table function call that reads `unit` with the given structure
        (and, for the careful pass, another format such as LineAsString)."""
        ...

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """One table function call reading all `units`, with SQL for the per-unit
        provenance values (`_source`, `_source_mtime`); None when not possible."""
        ...

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        """Exact column types the source states for `unit` (a `chute export`
        manifest), so nothing needs inferring; None when it states none."""
        ...

    def unchanged(self, unit: Unit) -> bool:
        """Whether the unit still has the identity it was planned with."""
        ...

    def row_number_expression(self, unit: Unit) -> str:
        """SQL giving the 1-based number of the row within its unit."""
        ...

    def needs_serial_read(self, unit: Unit) -> bool:
        """True when row numbers are only right if the unit is read by one thread."""
        ...

    # -- optional hooks: `SourceBase` gives each a default that changes nothing --

    @property
    def notes(self) -> Sequence[str]:
        """What a person should hear about this run (skipped files, gaps in a topic)."""
        ...

    def scrub(self, text: str) -> str:
        """`text` without any secret of this source (messages may carry engine or server text)."""
        ...

    def close(self) -> None:
        """Release connections and clients once the load is over."""
        ...

    def unit_done(self, units: list[Unit]) -> None:
        """Told after `units` committed (Kafka commits its group's offsets for information)."""
        ...

    def verify(self, unit: Unit) -> None:
        """Raise SourceError where `unit`'s bytes are known not to be whole before a row is read
        (a local zstd or LZ4 file cut short, which the engine's readers would load in part)."""
        ...

    def unreadable(self, unit: Unit) -> str | None:
        """Why `unit` cannot be read at all, as listing found (permission denied, not a regular
        file, gone): it fails alone, and nothing opens it (a FIFO would block a reader)."""
        ...

    def extra_provenance_columns(self) -> list[tuple[str, str]]:
        """Provenance columns this source adds to the four (a Kafka message's key): (name, type)."""
        ...

    def provenance_expressions(self, unit: Unit, row_expression: str) -> dict[str, str]:
        """SQL for provenance values of `unit`'s rows that differ from the defaults, by column."""
        ...


class SourceBase:
    """Defaults for the optional hooks of `Source`; every source inherits it.

    Hooks whose mere presence changes what the loader does (`ServerReadable`,
    `RowPositions`) are not here: a source has them or not."""

    notes: Sequence[str] = ()
    batch_bytes: int | None = None
    """Input bytes per batch at most, below --batch-mb, for a source that holds its units'
    bytes itself (Kafka): bounded batches keep its memory bounded and let it fetch the next
    batch while the engine loads this one."""

    def scrub(self, text: str) -> str:
        return text

    def close(self) -> None:
        return None

    def unit_done(self, units: list[Unit]) -> None:
        return None

    def verify(self, unit: Unit) -> None:
        return None

    def unreadable(self, unit: Unit) -> str | None:
        return None

    def extra_provenance_columns(self) -> list[tuple[str, str]]:
        return []

    def provenance_expressions(self, unit: Unit, row_expression: str) -> dict[str, str]:
        return {}


@runtime_checkable
class ServerReadable(Protocol):
    """A source a ClickHouse server can read itself (url(), s3(), s3Cluster())."""

    def server_blocker(self, unit: Unit, capabilities: Capabilities, cluster: str | None = None) -> str | None:
        """Why a server cannot be handed `unit` to read itself; None when it can."""
        ...

    def server_expression(
        self, unit: Unit, structure: str, fmt_name: str, capabilities: Capabilities, cluster: str | None = None
    ) -> str | None:
        """The table function call a server runs to read `unit`; None when `server_blocker` names a reason."""
        ...


@runtime_checkable
class RowPositions(Protocol):
    """A source whose rows are not numbered from 1 within a unit (Kafka: by offset)."""

    def row_at_position(self, unit: Unit, position: str) -> str:
        """`_source_row` (SQL) of the record at 1-based `position` in `unit`, as the careful pass counts."""
        ...


@dataclass(frozen=True)
class CheckedRead:
    """How the loader reads a column whose source text it converts and checks itself (see `CheckedValues`):
    SQL over the column as `read_as`, as chute.load.checks.types.FastRead has it."""

    read_as: str
    """The type the source gives the column as (its text)."""
    value: str
    """The converted value; fails the SELECT (`column NAME: a value does not fit TYPE`) where it does not fit."""
    fits: str
    """The value fits (or is NULL)."""
    lenient: str
    """The converted value that never fails: the column's NULL or default where it does not fit."""


@runtime_checkable
class CheckedValues(Protocol):
    """A source of typed rows (not text files) with values a column may not hold exactly (a database's
    zero dates, NaN numerics): the loader reads them as text, converts exactly, and a value that does
    not fit makes its row a reject (the careful pass of typed units), not a changed value."""

    def checked_read(self, unit: Unit, name: str, type_sql: str) -> CheckedRead | None:
        """How to read column `name` of `unit` into `type_sql`; None: as the source reads it."""
        ...


@dataclass(frozen=True)
class SourceOptions:
    """How to reach and read sources; credentials never appear in messages."""

    format: str | None = None
    compression: str | None = None
    exclude: tuple[str, ...] = ()
    s3_endpoint: str | None = None
    """An S3-compatible endpoint (http(s)://host:port); default: AWS (`AWS_ENDPOINT_URL` if set)."""
    split_bytes: int | None = None
    """Cut uncompressed CSV/TSV/JSON-lines files bigger than twice this into byte ranges of about this size."""
    split_by: str | None = None
    """Database sources: the column whose ranges make the units (default: the primary key)."""
    where: str | None = None
    """Database sources: a filter (SQL) every unit applies."""
    cursor: str | None = None
    """Database sources: a column that only grows (updated_at); a run loads rows past the last one loaded."""
    password_file: str | None = None
    """Database sources: a file holding the password (else the URL or the usual environment variable)."""
    loaded: tuple[tuple[str, str], ...] = ()
    """(unit key, state) of every unit the ledger knows for this table: where an incremental source goes on."""
    loaded_rows: tuple[tuple[str, int], ...] = ()
    """(unit key, rows loaded + rejected) of the units the ledger has done: what a recount compares with."""
    loaded_identities: tuple[tuple[str, str], ...] = ()
    """(unit key, identity) of the units the ledger has done (local files): a file whose size, mtime,
    change time and inode are the recorded ones keeps its recorded fingerprint, unread."""


def expand_braces(pattern: str) -> list[str]:
    """Expand `{a,b}` alternatives (nested allowed); Python's glob lacks them."""
    depth = 0
    start = -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                options, level, current = [], 0, ""
                for c in pattern[start + 1 : i]:
                    if c == "," and level == 0:
                        options.append(current)
                        current = ""
                        continue
                    level += c == "{"
                    level -= c == "}"
                    current += c
                options.append(current)
                head, tail = pattern[:start], pattern[i + 1 :]
                return [x for opt in options for x in expand_braces(head + opt + tail)]
    return [pattern]


def known_extension(name: str) -> bool:
    """Whether the name ends in a format chute knows (with or without a compression suffix)."""
    parts = name.lower().split(".")[1:]
    if parts and parts[-1] in COMPRESSION_BY_EXTENSION:
        parts = parts[:-1]
    return bool(parts) and parts[-1] in FORMAT_BY_EXTENSION


class EngineRowNumbers:
    """Row numbers of units the engine reads as files: its `_row_number` where the format
    fills it, else a count over the blocks, right only when one thread reads the unit."""

    def row_number_expression(self, unit: Unit) -> str:
        if unit.fmt.format in ROW_NUMBER_FORMATS:
            return "_row_number + 1"
        return "rowNumberInAllBlocks() + 1"

    def needs_serial_read(self, unit: Unit) -> bool:
        return unit.fmt.format not in ROW_NUMBER_FORMATS
