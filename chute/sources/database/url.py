"""Database source URLs: parsing, the password, and how the engine's table function names a table."""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass

from chute.errors import UsageError
from chute.formats import FileFormat
from chute.sql import quote_str

ROWS_PER_RANGE = 250_000
"""Rows per key range (a ledger unit: what a failure redoes). The loader writes up to 64 units in one
INSERT (fewer when they sum past --batch-mb x 2^20 rows), read by `streams` connections."""
PROBE_DATABASE = "_chute_probe"
"""A Memory database of the engine holding, for a moment, the dictionary that runs a catalog query on the server."""
READ_DATABASE = "_chute_read"
"""A Memory database of the engine holding, for one load, tables that read a source table with other column types."""

DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}
SCHEMES = {"postgresql": "postgresql", "postgres": "postgresql", "mysql": "mysql"}
FORMATS = {"postgresql": FileFormat("PostgreSQL", "none"), "mysql": FileFormat("MySQL", "none")}
PASSWORD_ENV = {"postgresql": "PGPASSWORD", "mysql": "MYSQL_PWD"}

CONNECTION_ERRORS = frozenset(
    {
        "POSTGRESQL_CONNECTION_FAILURE",
        "ALL_CONNECTION_TRIES_FAILED",
        "MYSQL_CLIENT_INSUFFICIENT_CAPABILITIES",
        "NETWORK_ERROR",
        "SOCKET_TIMEOUT",
    }
)
UTC_NAMES = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu"})
INTEGER_TYPE = re.compile(r"^U?Int(8|16|32|64|128|256)$")
CURSOR_TYPE = re.compile(r"^(U?Int(8|16|32|64)|Date|Date32|DateTime(64)?(\(.*\))?)$")
RANGE_PART = re.compile(r"^(?P<col>.+)=\[(?P<a>-?\d+),(?P<b>-?\d+)\)$")
WINDOW_PART = re.compile(r"^(?P<col>.+)=\((?P<v0>[^,]*),(?P<v1>[^\]]*)\]$")


@dataclass(frozen=True)
class DatabaseUrl:
    """A table in a PostgreSQL or MySQL database; `display` is the URL without the password."""

    dialect: str  # "postgresql" or "mysql"
    user: str
    password: str
    host: str
    port: int
    database: str
    schema: str  # PostgreSQL only ("" for MySQL)
    table: str
    rows_per_range: int = ROWS_PER_RANGE
    streams: int | None = None  # ?streams=N: connections reading at once (None: chosen from the cores)

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def display(self) -> str:
        user = urllib.parse.quote(self.user, safe="")
        name = f"{self.schema}.{self.table}" if self.schema else self.table
        return f"{self.dialect}://{user}@{self.address}/{self.database}/{name}"

    def function(self, table: str | None = None, schema: str | None = None, database: str | None = None) -> str:
        """The engine's table function for this table (or a catalog table on the same server)."""
        args = [self.address, database or self.database, table or self.table, self.user, self.password]
        if self.dialect == "postgresql":
            args.append(schema or self.schema)
        return f"{self.dialect}({', '.join(quote_str(a) for a in args)})"


def parse_url(text: str, password_file: str | None = None) -> DatabaseUrl:
    """Split a source URL; errors never echo `text`, which may hold a password."""
    parts = urllib.parse.urlsplit(text)
    dialect = SCHEMES.get(parts.scheme.lower())
    if dialect is None:
        raise UsageError(f"unknown database scheme {parts.scheme!r}")
    shown = f"{parts.scheme}://{parts.hostname or ''}{parts.path}"
    form = (
        "postgresql://user[:password]@host[:port]/dbname/[schema.]table"
        if dialect == "postgresql"
        else "mysql://user[:password]@host[:port]/dbname/table"
    )
    path = [urllib.parse.unquote(p) for p in parts.path.strip("/").split("/")]
    if not parts.hostname or len(path) != 2 or not all(path) or not parts.username:
        raise UsageError(f"{shown}: expected {form}")
    try:
        port = parts.port or DEFAULT_PORTS[dialect]
    except ValueError:
        raise UsageError(f"{shown}: invalid port") from None
    database, name = path
    schema = ""
    if dialect == "postgresql":
        schema, _, table = name.partition(".") if "." in name else ("public", "", name)
    else:
        table = name
    params = {"rows_per_range": ROWS_PER_RANGE}
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if key not in ("rows_per_range", "streams") or not value.isdigit() or int(value) < 1:
            raise UsageError(f"{shown}: unknown or invalid parameter {key!r} (known: rows_per_range=N, streams=N)")
        params[key] = int(value)
    if parts.fragment:
        raise UsageError(f"{shown}: a source URL has no #fragment")
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    if password is None and password_file:
        try:
            with open(password_file, encoding="utf-8") as f:
                password = f.readline().rstrip("\r\n")
        except OSError as exc:
            raise UsageError(f"--password-file {password_file}: {exc.strerror}") from None
    if password is None:
        password = os.environ.get(PASSWORD_ENV[dialect], "")
    return DatabaseUrl(
        dialect,
        urllib.parse.unquote(parts.username),
        password,
        parts.hostname,
        port,
        database,
        schema,
        table,
        params["rows_per_range"],
        params.get("streams"),
    )
