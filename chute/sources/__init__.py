"""Sources: what units of work exist, and the table expression that reads one.

A source never reads rows itself; it names units (with an identity the ledger
can compare between runs) and gives the engine SQL to read each one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from chute.formats import FileFormat
from chute.schema import Column
from chute.sql import quote_str


@dataclass(frozen=True)
class Unit:
    """One unit of work: a file today; a byte range, key range or offsets later."""

    key: str  # stable name of the unit (the absolute path for files, the URL of an object)
    size: int
    mtime_ns: int
    fmt: FileFormat
    etag: str = ""  # an object store's version of the object, where it has one
    origin: str = ""  # for a byte range of a big file: the file (what `_source` names)
    start: int = 0  # the byte range [start, end) of `origin`
    end: int = 0

    @property
    def source_name(self) -> str:
        """What `_source` holds for this unit's rows: the file, also for its ranges."""
        return self.origin or self.key

    @property
    def is_range(self) -> bool:
        return bool(self.origin)

    @property
    def identity(self) -> str:
        """What must stay equal for the unit to count as unchanged."""
        return f"{self.size}:{self.etag}" if self.etag else f"{self.size}:{self.mtime_ns}"


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


def open_source(patterns: list[str], options: SourceOptions) -> Source:
    """The source for `patterns`, chosen by their scheme; one scheme per load (http and https are one)."""
    from chute.errors import UsageError

    def kind(pattern: str) -> str:
        scheme = pattern.split("://", 1)[0].lower() if "://" in pattern else "file"
        return "http" if scheme == "https" else scheme

    schemes = {kind(p) for p in patterns}
    if len(schemes) > 1:
        raise UsageError(f"one kind of source per load, got {', '.join(sorted(schemes))}")
    scheme = schemes.pop() if schemes else "file"
    if scheme == "file":
        from chute.sources.files import FileSource

        return FileSource(
            patterns,
            options.format,
            options.compression,
            exclude=list(options.exclude),
            split_bytes=options.split_bytes,
            known=frozenset(key for key, _ in options.loaded),
        )
    if scheme == "s3":
        from chute.sources.s3 import S3Source

        return S3Source(patterns, options.format, options.compression, endpoint=options.s3_endpoint)
    if scheme == "hdfs":
        from chute.sources.hdfs import HdfsSource

        return HdfsSource(patterns, options.format, options.compression)
    if scheme == "http":
        from chute.sources.url import UrlSource

        return UrlSource(patterns, options.format, options.compression)
    if scheme in ("postgresql", "postgres", "mysql"):
        from chute.sources.database import DatabaseSource

        return DatabaseSource(patterns, options)
    if scheme == "kafka":
        from chute.sources.kafka import KafkaSource

        return KafkaSource(patterns, options)
    raise UsageError(
        f"unknown source scheme {scheme!r}: give files, directories, globs, s3://, hdfs:// or http(s):// URLs"
    )
