"""How a unit's rows go from the source into a stage table of the destination.

- pull: the destination reads the source itself, `INSERT ... SELECT FROM
  url(<the source's HTTP interface>, Native)`: no row crosses chute. A server
  destination runs it when it can reach the source (probed once) and the source
  has no password (the url() call carries it, and the destination's query_log
  keeps the calls it runs): `--method pull` pulls anyway; the embedded
  destination is this process's engine, so it always pulls from a server.
- stream: chute sends the source's `SELECT ... FORMAT Native` (compressed
  blocks, as the server sends them with `compress=1`) into the destination's
  `INSERT ... FORMAT Native` (`decompress=1`) as it comes, never decoding a
  row. An embedded source's blocks come from the engine and are compressed
  here (zstd), as are an 18.16 source's: its compressed answers under 1 MiB
  come out empty (see Capabilities.compressed_output). Works between two
  servers, and from the embedded database to a server; into the embedded
  database, streaming is what its pull does.
- files (asked only): the stream method's blocks written to a file in a
  directory or an S3 prefix, then sent from the file (chute.copy.files).
- local: both ends are the same embedded database: one INSERT ... SELECT.

The source's columns are cast to the destination's types in the source's own
SELECT where they differ (a newer source into an 18.16 destination).
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence

from chute.copy.files import Files
from chute.errors import ChuteError, UsageError
from chute.nativecompress import NativeCompressor, pipelined
from chute.schema import Column
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.base import Target
from chute.targets.server import ServerTarget, conversion_settings

METHODS = ("auto", "pull", "stream", "files")


class Mover:
    """Writes units into stages with the chosen method; counts the bytes chute moved."""

    def __init__(
        self,
        source: Target,
        dest: Target,
        table: TableName,
        columns: Sequence[Column],
        source_types: Sequence[str],
        method: str,
        files: Files | None = None,
    ) -> None:
        self.source = source
        self.dest = dest
        self.table = table
        self.columns = list(columns)
        self.source_types = list(source_types)
        self.method = method
        self.files = files
        """Where the files method puts each unit's file (`--via`)."""
        self.wire_bytes = 0
        self._lock = threading.Lock()

    def select(self, where: str) -> str:
        """The source's SELECT of a unit, each column as the destination's type."""
        items = []
        for column, source_type in zip(self.columns, self.source_types, strict=True):
            name = quote_ident(column.name)
            items.append(name if source_type == column.type else f"CAST({name}, {quote_str(column.type)}) AS {name}")
        return f"SELECT {', '.join(items)} FROM {self.table.sql} WHERE {where}"

    def write(self, where: str, stage: TableName, context: str, dest: Target | None = None, parts: str = "") -> None:
        """The unit's rows into `stage` of the destination (or of `dest`: a shard's node);
        `parts`: the digest of the source's parts the rows are in (names the files method's file)."""
        dest = dest or self.dest
        column_list = ", ".join(quote_ident(c.name) for c in self.columns)
        if self.method == "local":
            dest.execute(f"INSERT INTO {stage.sql} ({column_list}) {self.select(where)}", context=context)
        elif self.method == "pull":
            url = source_url(self.source, self.select(where))
            # (18.16 reads a backquote in a structure as part of the name: plain names go bare)
            structure = ", ".join(f"{_structure_name(c.name)} {c.type}" for c in self.columns)
            reading = f"url({quote_str(url)}, 'Native', {quote_str(structure)})"
            sql = f"INSERT INTO {stage.sql} ({column_list}) SELECT * FROM {reading}"
            try:
                dest.execute(sql, context=context)
            except ChuteError as exc:
                raise scrubbed(exc, self.source) from None
        elif self.method == "files":
            assert isinstance(dest, ServerTarget) and self.files is not None
            name = self.files.name(self.source.display_name, str(self.table), self.select(where), parts)
            if parts and self.files.has(name):
                self.files.reuse()  # (a killed run's file of the same parts: the source is not read again)
            else:
                self.files.write(name, self._counted(self._source_blocks(where, context)))
            statement = f"INSERT INTO {stage.sql} ({column_list}) FORMAT Native"
            dest.client.insert(statement, self.files.read(name), context=context, native_compressed=True)
            self.files.remove(name)  # (in the stage now; a try again writes it anew)
        else:
            assert isinstance(dest, ServerTarget)
            body = self._counted(self._source_blocks(where, context))
            statement = f"INSERT INTO {stage.sql} ({column_list}) FORMAT Native"
            dest.client.insert(statement, body, context=context, native_compressed=True)

    def _source_blocks(self, where: str, context: str) -> Iterator[bytes]:
        """The source's compressed Native blocks of a unit, as they come."""
        select = self.select(where)
        if isinstance(self.source, ServerTarget):
            query = f"{select} FORMAT Native"
            if self.source.capabilities.compressed_output:
                yield from self.source.client.stream(query, {"compress": 1}, context)
                return
            plain = ((memoryview(chunk), None) for chunk in self.source.client.stream(query, None, context))
            yield from pipelined(plain, NativeCompressor())
            return
        settings = conversion_settings({}, 1, self.dest.capabilities.low_cardinality)
        views = self.source.engine.stream_views(select, "Native", settings, context)
        yield from pipelined(views, NativeCompressor())

    def _counted(self, blocks: Iterable[bytes]) -> Iterator[bytes]:
        for block in blocks:
            with self._lock:
                self.wire_bytes += len(block)
            yield block


def _structure_name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else quote_ident(name)


def source_url(source: Target, select: str) -> str:
    """The source's HTTP interface answering `select` as Native (credentials in the URL)."""
    if not isinstance(source, ServerTarget):
        raise UsageError("the pull method needs a server source")
    address = source.address
    params = {"database": address.database, "user": address.user, "password": address.password}
    params["query"] = f"{select} FORMAT Native"
    return address.base_url + "?" + urllib.parse.urlencode(params)


def scrubbed(exc: ChuteError, source: Target) -> ChuteError:
    """The same error without the source's password (it travels in the url() call)."""
    password = source.address.password if isinstance(source, ServerTarget) else ""
    if not password:
        return exc
    text = str(exc)
    for secret in {password, urllib.parse.quote_plus(password), urllib.parse.quote(password)}:
        text = text.replace(secret, "***")
    return type(exc)(text, code=exc.code, name=exc.name)


STRUCTURE_PARSER = (20, 1, 0)
"""From here on, url()'s structure is taken as SQL types. 18.16 splits it at every comma and
blank (measured: `Decimal(18, 4)`, `Enum8('a' = 1, 'b' = 2)`, `Tuple(UInt8, String)` fail even
written without blanks); versions in between are not verified, so they stream too."""


def _unreadable_structure(dest: Target, columns: Sequence[Column]) -> str | None:
    """Why a server destination's url() cannot take these columns' structure (None: it can)."""
    if dest.capabilities.version >= STRUCTURE_PARSER:
        return None
    odd = [c for c in columns if re.search(r"[\s,]", c.type) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", c.name)]
    if not odd:
        return None
    return (
        f"server {dest.capabilities.version_text}'s url() cannot read a column like "
        f"{odd[0].name} {odd[0].type} (it splits types at commas and blanks)"
    )


def choose(asked: str, source: Target, dest: Target, same: bool, columns: Sequence[Column] = ()) -> tuple[str, str]:
    """(method, why) for the ends: what was asked where it can run, else the fastest that can."""
    if asked not in METHODS:
        raise UsageError(f"unknown --method {asked!r}: use one of {', '.join(METHODS)}")
    if same:
        if asked == "files":
            raise UsageError("--method files: both ends are the same embedded database; copy with auto")
        return "local", "both ends are the same embedded database: one INSERT ... SELECT in the engine"
    if asked == "files":
        if not dest.is_server:
            raise UsageError(
                "--method files needs a server destination; the embedded one reads the source itself (auto)"
            )
        return "files", "asked (--method files): each partition through a file in --via, then into the destination"
    if not dest.is_server:
        if asked == "stream":
            return "pull", "into the embedded database, streaming is its engine reading the source's Native output"
        return "pull", "the embedded destination (this process's engine) reads the source's Native output"
    if not source.is_server:
        if asked == "pull":
            raise UsageError("--method pull: a server cannot read the embedded source; use stream (or auto)")
        return "stream", "the source is embedded: chute streams its Native blocks to the destination"
    if asked == "stream":
        return "stream", "asked (--method stream)"
    if asked == "auto" and _password(source):
        # (not even probed: the probe is a url() call with the password too)
        return "stream", (
            "the source has a password, and pulling would put it in the url() call the destination runs "
            "(its query_log keeps it): chute streams the rows (--method pull to pull anyway)"
        )
    reach = _unreadable_structure(dest, columns) or _reaches(source, dest)
    if reach is None:
        return "pull", ("asked (--method pull)" if asked == "pull" else "the destination reaches the source") + (
            ": it reads the source itself, no row crosses chute"
        )
    if asked == "pull":
        raise UsageError(f"--method pull: the destination cannot read the source: {reach}")
    return "stream", f"the destination cannot pull: {reach}; chute streams the rows"


def _password(source: Target) -> bool:
    return isinstance(source, ServerTarget) and bool(source.address.password)


def _reaches(source: Target, dest: Target) -> str | None:
    """None when the destination server can read the source's HTTP interface, else why not."""
    url = source_url(source, "SELECT toUInt8(1) AS x")
    try:
        found = dest.rows(f"SELECT count() AS n FROM url({quote_str(url)}, 'Native', 'x UInt8')")
    except ChuteError as exc:
        return str(scrubbed(exc, source)).splitlines()[0][:200]
    return None if found and int(str(found[0]["n"])) == 1 else "no answer"
