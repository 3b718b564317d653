"""HDFS: `hdfs://namenode:port/path/**/*.parquet`, read by the engine's hdfs() function.

The engine lists the files too: `SELECT _path, _size, _time FROM hdfs(pattern, 'One')`
names every matching file with its size and modification time and reads no
byte of any of them (the One format yields one row per file without opening
it). That keeps to the one address the user gives, the NameNode's RPC port,
and to the engine's own HDFS client (the one that reads the units), rather than
WebHDFS, which needs the NameNode's HTTP port and may be switched off.

Each file is a unit keyed by its full hdfs:// URL; its identity is its size
and modification time. The engine states that time to the second (`_time` is a
DateTime), so a rewrite that keeps the size within the same second is not seen.

A plain path names a file, or a directory: then everything under it, as a
directory walk finds it (hidden `.x` and `_x` names skipped, and without
--format only known extensions). `*`, `?` and `**` go to the engine's globbing;
`{a,b}` alternatives are listed one by one. No credentials: the engine connects
as the user running chute (simple authentication, no Kerberos here).
"""

from __future__ import annotations

import socket
import urllib.parse
from typing import TYPE_CHECKING

from chute.errors import ChuteError, SourceError, UsageError
from chute.formats import detect
from chute.schema import Column
from chute.sources.base import (
    EngineRowNumbers,
    SourceBase,
    common_directory,
    expand_braces,
    known_extension,
    provenance_by_path,
    table_function,
)
from chute.sql import quote_str
from chute.units import Unit

if TYPE_CHECKING:
    from chute.engine import Engine

GLOB_CHARS = frozenset("*?")
ENGINE_GLOB_CHARS = frozenset("*?{}")
"""Characters the engine's hdfs() reads as a pattern in a path."""
COMBINE_UNSAFE = ENGINE_GLOB_CHARS | {",", "\\", "'"}
CONNECT_TIMEOUT = 5.0
"""Seconds to wait for the NameNode's port before saying it cannot be reached (the
engine's own client retries for about 20 s before it gives up)."""


def split_url(url: str) -> tuple[str, str]:
    """('host:port', '/path or pattern') from hdfs://host:port/path."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "hdfs":
        raise UsageError(f"{url}: not an hdfs:// URL")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None or parts.username or parts.query or parts.fragment:
        raise UsageError(f"{url}: give hdfs://namenode:port/path (the NameNode's RPC address)")
    return parts.netloc, parts.path or "/"


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text[:limit] + "..." if len(text) > limit else text


class HdfsSource(SourceBase, EngineRowNumbers):
    """Files on HDFS, one unit per file, listed and read by the engine's hdfs() function."""

    def __init__(
        self,
        patterns: list[str],
        format_override: str | None = None,
        compression_override: str | None = None,
    ) -> None:
        if not patterns:
            raise UsageError("no source given")
        for pattern in patterns:
            split_url(pattern)
        self.patterns = patterns
        self.format_override = format_override
        self.compression_override = compression_override
        self._reached: set[str] = set()

    @property
    def engine(self) -> Engine:
        from chute.engine import shared_engine

        # The target's engine (chDB holds one per process), else one in memory.
        return shared_engine()

    # -- listing ------------------------------------------------------------

    def _reach(self, address: str, pattern: str) -> None:
        """A quick TCP connect to the NameNode, so a wrong address is one line at once."""
        if address in self._reached:
            return
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT):
                pass
        except socket.gaierror as exc:
            raise SourceError(f"{pattern}: cannot resolve the NameNode host {host}: {exc.strerror}") from None
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise SourceError(f"{pattern}: cannot reach the NameNode at {address}: {reason}") from None
        self._reached.add(address)

    def _list(self, url: str, pattern: str) -> list[tuple[str, int, int]]:
        """(path, size, mtime in seconds) of what hdfs(url, 'One') names; [] for a missing path
        under a glob. Raises SourceError for a missing plain path."""
        sql = (
            "SELECT _path AS path, _size AS size, toUnixTimestamp(_time) AS t "
            f"FROM hdfs({quote_str(url)}, 'One') ORDER BY path"
        )
        try:
            rows = self.engine.rows(sql)
        except ChuteError as exc:
            text = str(exc)
            if "does not exist" in text or "FileNotFoundException" in text:
                raise SourceError(f"{pattern}: no such file or directory") from None
            raise SourceError(f"{pattern}: cannot list: {_one_line(text)}") from None
        return [(str(r["path"]), int(r["size"] or 0), int(r["t"] or 0)) for r in rows]

    def _walk(self, address: str, directory: str, pattern: str) -> tuple[list[tuple[str, int, int]], bool]:
        """(every file under `directory` as a directory walk finds it, whether `directory`
        is in fact a file: the engine names a file given as `file/**` as `file/`)."""
        base = directory.rstrip("/") + "/"
        found = []
        is_file = False
        for path, size, mtime in self._list(f"hdfs://{address}{base}**", pattern):
            rest = path[len(base) :] if path.startswith(base) else ""
            if not rest:
                is_file = path == base
                continue
            *dirs, name = rest.split("/")
            if any(d.startswith(".") for d in dirs) or name.startswith((".", "_")):
                continue
            if self.format_override or known_extension(name):
                found.append((path, size, mtime))
        return found, is_file and not found

    def _resolve(self, pattern: str) -> list[tuple[str, int, int]]:
        address, path_pattern = split_url(pattern)
        self._reach(address, pattern)
        known = "" if self.format_override else " with a known extension (or pass --format)"
        found: list[tuple[str, int, int]] = []
        for alternative in expand_braces(path_pattern):
            if set(alternative) & GLOB_CHARS:
                found += self._list(f"hdfs://{address}{alternative}", pattern)
                continue
            under, is_file = self._walk(address, alternative, pattern)
            if under or alternative.endswith("/"):
                found += under
                continue
            exact = self._list(f"hdfs://{address}{alternative}", pattern)  # raises when missing
            if not exact:
                raise SourceError(f"{pattern}: no such file or directory")
            if not is_file and exact[0][1] == 0:
                raise SourceError(f"{pattern}: no file under this directory{known}")
            found.append(exact[0])
        if not found:
            if path_pattern.endswith("/"):
                raise SourceError(f"{pattern}: no file under this directory{known}")
            raise SourceError(f"{pattern}: no file matches")
        return [(f"hdfs://{address}{path}", size, mtime) for path, size, mtime in found]

    def units(self) -> list[Unit]:
        files: dict[str, tuple[int, int]] = {}
        for pattern in self.patterns:
            for url, size, mtime in self._resolve(pattern):
                files.setdefault(url, (size, mtime))
        units = []
        for url, (size, mtime) in files.items():
            path = split_url(url)[1]
            if any(c in path for c in ENGINE_GLOB_CHARS):
                raise SourceError(f"{url}: paths with * ? {{ }} cannot be read by the engine; rename the file")
            fmt = detect(path, self.format_override, self.compression_override)
            units.append(Unit(key=url, size=size, mtime_ns=mtime * 10**9, fmt=fmt))
        return units

    # -- reading ------------------------------------------------------------

    @staticmethod
    def _call(url: str, fmt_name: str, structure: str | None, compression: str) -> str:
        return table_function("hdfs", [quote_str(url)], fmt_name, structure, compression)

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        return self._call(unit.key, fmt_name or unit.fmt.format, structure, unit.fmt.compression)

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """One hdfs() call over `dir/{a,b,c}` for files of one NameNode and format."""
        parsed = [split_url(u.key) for u in units]
        address = parsed[0][0]
        paths = [path for _, path in parsed]
        if any(a != address for a, _ in parsed) or any(u.fmt != units[0].fmt for u in units):
            return None
        if any(c in COMBINE_UNSAFE for path in paths for c in path) or len(set(paths)) != len(paths):
            return None
        common = common_directory(paths)
        names = ",".join(path[len(common) :] for path in paths)
        fmt = units[0].fmt
        call = self._call(f"hdfs://{address}{common}{{{names}}}", fmt_name or fmt.format, structure, fmt.compression)
        # The engine's _path is the path alone, without hdfs://host:port.
        return call, provenance_by_path(f"concat({quote_str('hdfs://' + address)}, _path)", paths, units)

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        return None

    def unchanged(self, unit: Unit) -> bool:
        """List the file again: the same size and modification time (to the second)."""
        try:
            rows = self.engine.rows(
                f"SELECT _size AS size, toUnixTimestamp(_time) AS t FROM hdfs({quote_str(unit.key)}, 'One')"
            )
        except ChuteError:
            return False
        if len(rows) != 1:
            return False
        return int(rows[0]["size"] or 0) == unit.size and int(rows[0]["t"] or 0) * 10**9 == unit.mtime_ns
