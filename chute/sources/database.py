"""PostgreSQL and MySQL tables, read by the engine's postgresql() and mysql() table functions.

    postgresql://user[:password]@host[:port]/dbname/[schema.]table[?rows_per_range=N&streams=N]
    mysql://user[:password]@host[:port]/dbname/table[?rows_per_range=N&streams=N]

The engine does every row (no Python per row): it streams the table (COPY for
PostgreSQL, a SELECT for MySQL) with each unit's filter pushed down to the
server. Python only plans, and planning reads no row: the server answers two
small queries of its own (run through an engine dictionary, `server_rows`):
its catalog (column types, primary key) and the key's min and max (through the
key's index) with the catalog's row estimate (PostgreSQL reltuples scaled to
the table's current pages; MySQL TABLE_ROWS; counted by the server when the
table was never analyzed). See chute.sources.dbplan.

- A table with a one-column integer primary key (or `--split-by COL`) is cut
  into key ranges of equal width, about `rows_per_range` rows each by the
  estimate (a skewed key gives uneven ranges; each range's exact count is known
  once it loads). Each range is a ledger unit; its key, also its rows'
  `_source`, names it: `postgresql://user@host:5432/db/public.t#id=[1,250001)`.
  Ranges end at the largest key seen at planning (+1), so the next run plans
  only rows past the largest range end the ledger knows: new rows load as a
  delta, a re-run with nothing new plans nothing. Ranges that were started or
  failed are planned again under the same key: the loader deletes what an
  interrupted attempt left (by `_source`) and loads them again.
- The ranges of one batch are read by `streams` connections at once (adjacent
  ranges of a connection read as one range): the client's cores (CPU affinity
  and cgroup quota), half of them when the server is on this machine
  (loopback), else no more than the server's parallel workers; `?streams=N`
  sets it. The report's notes say how many and why.
- `--cursor COL` (a column that only grows, such as updated_at): each run loads
  the rows with COL in (largest COL loaded before, largest COL now], as one unit
  `#updated_at=(v0,v1]`, cut into key ranges when the table has a key. Rows whose
  COL is NULL are never loaded; updated rows load again (a new version each).
- Without a usable key, the table is one unit, counted on every run: a changed
  row count is a changed unit (`--on-change`).
- `--where SQL` (ClickHouse SQL over the source's columns) filters every unit;
  simple comparisons reach the server. Ranges are planned over the whole key
  (the filter is the engine's SQL, not the server's).

Ranges loaded before are not checked again (a recount would scan the table):
rows updated or deleted in them are not seen; that is what `--cursor` is for.
Keys must appear in increasing order: a row committed after a run with a key
below the ranges that run planned (a long transaction) is not loaded.

`_source_row` is the row's key minus its range's start, plus one, so
`_source` and `_source_row` find the row at the source (without a key: the
row's number in the order the server sent it). Ranges of one batch are read
together by a few connections and numbered alike, whatever the order.

Types are the engine's, mended where it reads something less useful or wrong
(measured on chDB 26.9): PostgreSQL boolean (UInt8) -> Bool; bytea (the text
'\\x...') -> its bytes; MySQL YEAR (String) -> UInt16; MariaDB UUID (String) ->
UUID; timestamps -> DateTime(64)(p, 'UTC'): an instant for timestamptz and
MySQL TIMESTAMP, the wall clock for timestamp and DATETIME. The engine parses
timestamp text in its own zone and ignores offsets, so PostgreSQL sessions are
told to write in that zone (PGOPTIONS, with ISO dates, hex bytea and exact
floats); MySQL writes TIMESTAMP in the server's time_zone, read from its global
variables (exact for UTC and named zones; a SYSTEM zone known only by an
abbreviation such as EST is taken as that fixed offset). The rest is the
engine's: numeric(p, s) -> Decimal(p, s), numeric without precision ->
Decimal(38, 19) (a larger value fails the unit with the engine's message),
json/jsonb, enums, time, interval, inet, money -> String, arrays -> Array (a
NULL array is []), NOT NULL -> not Nullable.

The password comes from the URL, else `--password-file`, else PGPASSWORD or
MYSQL_PWD. It appears only inside the table function calls given to the engine
(which masks it as [HIDDEN] in its own messages) and in the definitions of the
planning dictionary and of the table that reads numeric columns as text (both
in Memory databases: never on disk, dropped after use); unit keys, `_source`,
reports and messages use the URL without it, and engine text is scrubbed of it
as well.
"""

from __future__ import annotations

import itertools
import os
import re
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from chute.engine import Engine, shared_engine
from chute.errors import ChuteError, SchemaError, SourceError, UsageError
from chute.formats import FileFormat
from chute.schema import Column
from chute.sources.base import SourceBase, SourceOptions
from chute.sources.dbplan import (
    Streams,
    choose_streams,
    client_cores,
    estimate_cuts,
    is_local,
    mysql_ident,
    mysql_str,
    pg_ident,
    pg_str,
    scaled_rows,
)
from chute.sql import quote_ident, quote_str
from chute.units import Unit

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


@dataclass(frozen=True)
class SourceColumn:
    """A column as chute reads it: `expr` (over the engine's raw column) gives `type`."""

    name: str
    raw: str  # the engine's type for the column, as its table function reads it
    type: str
    expr: str
    zone: str = ""  # a timestamp with zone: the zone of the text the server writes and compares it in


@dataclass(frozen=True)
class _Part:
    """What one unit reads of its table: a filter over the raw columns (`window`: a --cursor's) and,
    for a key range, the key column and [start, end)."""

    table: DatabaseTable
    window: str = ""
    key: str = ""  # the key column of a key range ("": the unit is no key range)
    start: int = 0
    end: int = 0

    @property
    def where(self) -> str:
        return " AND ".join(t for t in (self.window, self.key_filter(self.start, self.end)) if t)

    def key_filter(self, start: int, end: int) -> str:
        if not self.key:
            return ""
        k = quote_ident(self.key)
        return f"{k} >= {start} AND {k} < {end}"

    @property
    def condition(self) -> str:
        return self.where or "1"

    @property
    def row_number(self) -> str:
        """`_source_row`: the key's offset in its range (+1), so the row is found again from
        `_source` and `_source_row` alone and ranges read together number alike; without a
        key, the row's number in the one stream the server sends."""
        if self.key:
            return f"toUInt64(toInt128({quote_ident(self.key)}) - {self.start} + 1)"
        return "rowNumberInAllBlocks() + 1"


def _merged_filter(parts: list[_Part]) -> str:
    """The filter that reads key ranges together: adjacent ranges (same window) as one, so the
    server tests each row against one range, not one per unit."""
    spans: list[tuple[str, int, int]] = []
    for p in sorted(parts, key=lambda p: (p.window, p.start)):
        if spans and spans[-1][0] == p.window and spans[-1][2] == p.start:
            spans[-1] = (p.window, spans[-1][1], p.end)
        else:
            spans.append((p.window, p.start, p.end))
    first = parts[0]
    span = first.table.key_span
    if len(spans) == 1 and not spans[0][0] and span is not None and spans[0][1] <= span[0] and spans[0][2] >= span[1]:
        # The whole table as planned: the server sends it all (it spends ~7 % of a COPY's time on
        # a range filter), the engine drops rows added past the ranges since (identity() is not
        # pushed down to the server).
        k = f"identity({quote_ident(first.key)})"
        return f"{k} >= {spans[0][1]} AND {k} < {spans[0][2]}"
    terms = [" AND ".join(t for t in (w, first.key_filter(a, b)) if t) for w, a, b in spans]
    return terms[0] if len(terms) == 1 else " OR ".join(f"({t})" for t in terms)


def _nullable(type_name: str) -> tuple[bool, str]:
    if type_name.startswith("Nullable(") and type_name.endswith(")"):
        return True, type_name[9:-1]
    return False, type_name


def _split_top(text: str, sep: str) -> Iterator[str]:
    """Split at `sep` outside parentheses and quotes (structures and types)."""
    depth, quote, start, i = 0, "", 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'`\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            yield text[start:i]
            start = i + len(sep)
            i = start
            continue
        i += 1
    yield text[start:]


def parse_structure(structure: str) -> list[tuple[str, str, str]]:
    """(name, type, default SQL) of each column of a structure chute wrote (`Column.structure_sql`)."""
    found = []
    for item in _split_top(structure, ","):
        item = item.strip()
        if not item:
            continue
        match = re.match(r"`((?:[^`\\]|\\.)*)`\s+", item)
        if not match:
            raise SchemaError(f"cannot read the column list {structure[:200]!r}")
        name = re.sub(r"\\(.)", r"\1", match.group(1))
        rest = list(_split_top(item[match.end() :], " DEFAULT "))
        found.append((name, rest[0].strip(), rest[1].strip() if len(rest) > 1 else ""))
    return found


def _scrub(text: str, secret: str) -> str:
    if not secret:
        return text
    for form in {secret, quote_str(secret)[1:-1], urllib.parse.quote(secret, safe="")}:
        text = text.replace(form, "***")
    return text


def _reason(message: str) -> str:
    """The server's own words from an engine error about a connection or table."""
    for pattern in (
        r"port \d+ failed: (?:FATAL:\s*)?(.+?)[\s.]*$",
        r"mysqlxx::\w+: (.+?)(?: \(\(nullptr\):\d+\))?[\s.]*$",
    ):
        match = re.search(pattern, message)
        if match:
            return match.group(1).strip().rstrip(".")
    return message


class DatabaseTable:
    """One source table: its columns, how it is split, and the SQL that reads a part of it."""

    def __init__(self, url: DatabaseUrl, options: SourceOptions, engine: Engine, zone: str) -> None:
        self.url = url
        self.options = options
        self.engine = engine
        self.zone = "UTC" if zone in UTC_NAMES else zone
        """The engine's time zone: timestamp text is read in it."""
        self.server_zone: str | None = None
        """MySQL: the zone the server writes TIMESTAMP values in, when the engine knows its name."""
        self.fmt = FORMATS[url.dialect]
        self._zoned: dict[str, str] = {}
        """Cursor values (UTC) as the text the server compares them as."""
        self._catalog_rows: list[dict[str, str]] | None = None
        self.columns = self._columns()
        self.by_name = {c.name: c for c in self.columns}
        self.key, self.unique_key = self._split_column()
        self.cursor = self._cursor_column()
        self.streams = Streams(1, "not planned yet")
        """Connections reading this table's ranges at once (set when it is planned)."""
        self.source = url.function()
        """What the rows are read from: the table function, or a table with other column types."""
        self.key_span: tuple[int, int] | None = None
        """[min, max + 1) of the key at planning, when this run's ranges cover all of it (a first load)."""

    # -- talking to the server through the engine ------------------------------------

    def rows(self, sql: str, what: str) -> list[dict[str, Any]]:
        """Run a planning query; any failure is one line naming the table, without the password."""
        try:
            return self.engine.rows(sql)
        except ChuteError as exc:
            raise self.error(exc, what) from None

    def error(self, exc: ChuteError, what: str) -> SourceError:
        message = " ".join(_scrub(str(exc), self.url.password).split())
        if exc.name in CONNECTION_ERRORS:
            message = f"cannot connect: {_reason(message)}"
        elif exc.name == "UNKNOWN_TABLE":
            message = "no such table (or no permission to read it)"
        else:
            message = f"{what}: {message}"
        return SourceError(f"{self.url.display}: {message}")

    def server_rows(self, query: str, names: list[str], what: str) -> list[dict[str, str]]:
        """Rows of a query the server itself runs (an aggregate over an index, a catalog read), each
        column cast to text by the query. The table functions only read rows (a WHERE reaches the
        server, an aggregate does not): a dictionary source takes any query, so the engine runs it
        through a dictionary of a Memory database that lives for this call only."""
        u = self.url
        dictionary = f"{quote_ident(PROBE_DATABASE)}.`q`"
        source = "POSTGRESQL" if u.dialect == "postgresql" else "MYSQL"
        params = " ".join(
            f"{k} {quote_str(v)}" for k, v in (("host", u.host), ("user", u.user), ("password", u.password))
        )
        attributes = ", ".join(f"{quote_ident(n)} String" for n in names)
        try:
            self.engine.execute(f"CREATE DATABASE IF NOT EXISTS {quote_ident(PROBE_DATABASE)} ENGINE = Memory")
            self.engine.execute(
                f"CREATE DICTIONARY {dictionary} ({attributes}) PRIMARY KEY {quote_ident(names[0])} "
                f"SOURCE({source}({params} port {u.port} db {quote_str(u.database)} query {quote_str(query)})) "
                "LAYOUT(COMPLEX_KEY_DIRECT())"
            )
            return [{n: str(r[n]) for n in names} for r in self.engine.rows(f"SELECT * FROM dictionary({dictionary})")]
        except ChuteError as exc:
            raise self.error(exc, what) from None
        finally:
            self.engine.execute(f"DROP DATABASE IF EXISTS {quote_ident(PROBE_DATABASE)}")

    def key_bounds(self, start: int | None) -> tuple[int, int, int | None] | None:
        """(min, max) of the key, read through its index, and the catalog's estimate of the table's rows
        (None: the catalog has none, counted then) with keys from `start` on; None: no such row."""
        assert self.key is not None
        u, pg = self.url, self.url.dialect == "postgresql"
        if pg:
            k = pg_ident(self.key.name)
            table = f"{pg_ident(u.schema)}.{pg_ident(u.table)}"
            # reltuples scaled to the table's pages now, as PostgreSQL's own planner does (-1: never analyzed).
            estimate = (
                "SELECT CASE WHEN c.reltuples < 0 THEN -1 WHEN c.relpages > 0 THEN c.reltuples / c.relpages * "
                "(pg_relation_size(c.oid) / current_setting('block_size')::float8) ELSE c.reltuples END "
                "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                f"WHERE n.nspname = {pg_str(u.schema)} AND c.relname = {pg_str(u.table)}"
            )
            query = (
                f"SELECT coalesce(min({k})::text, '') AS lo, coalesce(max({k})::text, '') AS hi, "
                f"coalesce(round(({estimate}))::bigint::text, '-1') AS n FROM {table}"
            )
        else:
            k = mysql_ident(self.key.name)
            table = f"{mysql_ident(u.database)}.{mysql_ident(u.table)}"
            estimate = (
                "SELECT TABLE_ROWS FROM information_schema.TABLES "
                f"WHERE TABLE_SCHEMA = {mysql_str(u.database)} AND TABLE_NAME = {mysql_str(u.table)}"
            )
            query = (
                f"SELECT COALESCE(CAST(MIN({k}) AS CHAR), '') AS lo, COALESCE(CAST(MAX({k}) AS CHAR), '') AS hi, "
                f"CAST(COALESCE(({estimate}), -1) AS CHAR) AS n FROM {table}"
            )
        got = self.server_rows(query, ["lo", "hi", "n"], "reading the key's bounds")[0]
        if not got["lo"] or not got["hi"] or (start is not None and int(got["hi"]) < start):
            return None
        lo, hi, rows = int(got["lo"]), int(got["hi"]), int(got["n"])
        if rows <= 0:
            # Never analyzed (or an empty-looking estimate for a table with rows): the server counts.
            counted = self.server_rows(
                f"SELECT CAST(count(*) AS {'text' if pg else 'CHAR'}) AS n FROM {table}", ["n"], "counting rows"
            )
            rows = int(counted[0]["n"])
        return lo, hi, scaled_rows(rows, lo, hi, start)

    def server_workers(self) -> int | None:
        """The server's parallel workers (PostgreSQL max_parallel_workers; MariaDB thread_pool_size, its
        cores by default; MySQL innodb_parallel_read_threads), None if it does not say."""
        if self.url.dialect == "postgresql":
            queries = ["SELECT current_setting('max_parallel_workers') AS n"]
        else:
            queries = [
                "SELECT CAST(@@thread_pool_size AS CHAR) AS n",
                "SELECT CAST(@@innodb_parallel_read_threads AS CHAR) AS n",
            ]
        for query in queries:
            try:
                value = self.server_rows(query, ["n"], "reading the server's workers")[0]["n"]
            except SourceError:
                continue
            if value.isdigit() and int(value) > 0:
                return int(value)
        return None

    def _columns(self) -> list[SourceColumn]:
        described = self.rows(f"DESCRIBE TABLE {self.url.function()}", "reading the columns")
        kinds = self._catalog_types()
        if self.url.dialect == "mysql" and "timestamp" in kinds.values():
            self.server_zone = self._mysql_zone()
        return [self._column(r["name"], r["type"], kinds.get(r["name"], "")) for r in described]

    def _catalog(self) -> list[dict[str, str]]:
        """What the server's catalog says of the table, in one query it runs itself: ("type", column,
        the server's type name), ("key", column, position in the primary key) and, MySQL, ("zone",
        TIME_ZONE or SYSTEM_TIME_ZONE, value)."""
        if self._catalog_rows is not None:
            return self._catalog_rows
        u = self.url
        if u.dialect == "postgresql":
            same = f"table_schema = {pg_str(u.schema)} AND table_name = {pg_str(u.table)}"
            query = (
                f"SELECT 'type:' || column_name AS id, 'type' AS k, column_name::text AS c, data_type::text AS v "
                f"FROM information_schema.columns WHERE {same} "
                "UNION ALL SELECT 'key:' || column_name, 'key', column_name::text, ordinal_position::text "
                f"FROM information_schema.key_column_usage WHERE {same} AND constraint_name IN ("
                f"SELECT constraint_name FROM information_schema.table_constraints WHERE {same} "
                "AND constraint_type = 'PRIMARY KEY')"
            )
        else:
            same = f"TABLE_SCHEMA = {mysql_str(u.database)} AND TABLE_NAME = {mysql_str(u.table)}"
            query = (
                "SELECT CONCAT('type:', COLUMN_NAME) AS id, 'type' AS k, COLUMN_NAME AS c, DATA_TYPE AS v "
                f"FROM information_schema.COLUMNS WHERE {same} "
                "UNION ALL SELECT CONCAT('key:', COLUMN_NAME), 'key', COLUMN_NAME, CAST(ORDINAL_POSITION AS CHAR) "
                f"FROM information_schema.COLUMNS WHERE {same} AND COLUMN_KEY = 'PRI' "
                "UNION ALL SELECT 'zone:1', 'zone', 'TIME_ZONE', @@global.time_zone "
                "UNION ALL SELECT 'zone:2', 'zone', 'SYSTEM_TIME_ZONE', @@global.system_time_zone"
            )
        self._catalog_rows = self.server_rows(query, ["id", "k", "c", "v"], "reading the catalog")
        return self._catalog_rows

    def _catalog_types(self) -> dict[str, str]:
        """The server's own type name of each column (what the engine's mapping loses)."""
        return {r["c"]: r["v"].lower() for r in self._catalog() if r["k"] == "type"}

    def _column(self, name: str, raw: str, kind: str) -> SourceColumn:
        """The engine's type, mended where it reads the value into something less useful or wrong."""
        ident = quote_ident(name)
        nullable, inner = _nullable(raw)

        def typed(t: str) -> str:
            return f"Nullable({t})" if nullable else t

        pg = self.url.dialect == "postgresql"
        if pg and kind == "boolean" and inner == "UInt8":
            return SourceColumn(name, raw, typed("Bool"), f"CAST({ident}, {quote_str(typed('Bool'))})")
        if pg and kind == "bytea" and inner == "String":
            # The engine keeps bytea's text form '\x0a1b...' (hex output is set for its connections).
            return SourceColumn(name, raw, raw, f"unhex(substring({ident}, 3))")
        if not pg and kind == "year" and inner == "String":
            return SourceColumn(name, raw, typed("UInt16"), f"CAST({ident}, {quote_str(typed('UInt16'))})")
        if not pg and kind == "uuid" and inner == "String":
            return SourceColumn(name, raw, typed("UUID"), f"CAST({ident}, {quote_str(typed('UUID'))})")
        stamp = re.fullmatch(r"DateTime(?:64\((\d+)\))?", inner)
        if stamp:
            # The engine reads timestamp text in its own zone, ignoring any offset. PostgreSQL
            # writes timestamptz in that zone (see _postgres_session): the instant is right.
            # MySQL writes TIMESTAMP in the server's zone: read again as a wall clock there.
            # Without zone (timestamp, DATETIME) the wall clock is kept, labelled UTC.
            precision = stamp.group(1)
            utc_type = typed(f"DateTime64({precision}, 'UTC')" if precision else "DateTime('UTC')")
            wall_zone = "UTC"
            if kind == "timestamp with time zone" or (kind == "timestamp" and not self.server_zone):
                wall_zone = self.zone
            elif kind == "timestamp" and self.server_zone:
                wall_zone = self.server_zone
            zone = wall_zone if kind in ("timestamp with time zone", "timestamp") else ""
            if wall_zone == self.zone:
                return SourceColumn(name, raw, utc_type, f"CAST({ident}, {quote_str(utc_type)})", zone)
            text = f"toString({ident})"
            parse = (
                f"toDateTime64({text}, {precision}, {quote_str(wall_zone)})"
                if precision
                else f"toDateTime({text}, {quote_str(wall_zone)})"
            )
            return SourceColumn(name, raw, utc_type, f"CAST({parse}, {quote_str(utc_type)})", zone)
        return SourceColumn(name, raw, raw, ident)

    def _mysql_zone(self) -> str | None:
        """The zone MySQL writes TIMESTAMP values in (its time_zone), if the engine knows the name."""
        values = {r["c"]: r["v"] for r in self._catalog() if r["k"] == "zone"}
        zone = values.get("TIME_ZONE", "")
        if zone.upper() == "SYSTEM":
            zone = values.get("SYSTEM_TIME_ZONE", "")
        if re.fullmatch(r"[+-]0?0:00", zone) or zone in UTC_NAMES:
            return "UTC"
        try:
            self.engine.rows(f"SELECT toTimeZone(now(), {quote_str(zone)}) AS t")
        except ChuteError:
            return None
        return zone or None

    def _primary_key(self) -> list[str]:
        keys = [r for r in self._catalog() if r["k"] == "key"]
        return [r["c"] for r in sorted(keys, key=lambda r: int(r["v"]) if r["v"].isdigit() else 0)]

    def _split_column(self) -> tuple[SourceColumn | None, bool]:
        """--split-by, else a one-column integer primary key; None: the table is one unit.
        The flag says the column is the primary key (each value once)."""
        key = self._primary_key()
        name = self.options.split_by
        if name is None:
            if len(key) != 1 or key[0] not in self.by_name:
                return None, False
            primary = self.by_name[key[0]]
            return (primary, True) if INTEGER_TYPE.match(primary.raw) else (None, False)
        column = self.by_name.get(name)
        if column is None:
            raise UsageError(f"{self.url.display}: --split-by {name}: no such column")
        if not INTEGER_TYPE.match(column.raw):
            raise UsageError(
                f"{self.url.display}: --split-by {name}: needs an integer column that is NOT NULL, "
                f"the engine reads it as {column.raw}"
            )
        return column, key == [name]

    def _cursor_column(self) -> SourceColumn | None:
        name = self.options.cursor
        if name is None:
            return None
        column = self.by_name.get(name)
        if column is None:
            raise UsageError(f"{self.url.display}: --cursor {name}: no such column")
        if not CURSOR_TYPE.match(_nullable(column.raw)[1]):
            raise UsageError(
                f"{self.url.display}: --cursor {name}: needs an integer, date or timestamp column, "
                f"the engine reads it as {column.raw}"
            )
        return column

    # -- SQL --------------------------------------------------------------------------

    def raw_filter(self, extra: str = "") -> str:
        """WHERE over the raw columns: the unit's own filter and --where (simple ones reach the server)."""
        terms = [t for t in (extra, self.options.where) if t]
        return " WHERE " + " AND ".join(f"({t})" for t in terms) if terms else ""

    def read(self, where: str, extras: tuple[str, ...] = ()) -> str:
        """The raw rows of a part: filtered on the raw columns, so the filter reaches the server;
        `extras` (`expression AS name`) are computed on the raw columns too."""
        return f"(SELECT {', '.join(['*', *extras])} FROM {self.source}{self.raw_filter(where)})"

    def read_decimals_as_text(self, name: str) -> None:
        """Read numeric (DECIMAL) columns as their text, cast to Decimal by the engine.

        The engine's PostgreSQL and MySQL readers parse each numeric value on its own
        (measured on 3 M rows of numeric(12, 2): 0.9 s of CPU for PostgreSQL, 1.1 s for
        MariaDB, as much as all other columns together); a cast of the text column is
        vectorized. A table function takes no column types, so the rows come through a
        table of the engine's PostgreSQL or MySQL engine, `name`, in a Memory database
        (the password in its definition never reaches the disk); --where keeps the table
        function (its SQL compares the columns as Decimal). Timestamps stay the engine's:
        its text cast reads MySQL's zero dates as garbage where its reader gives 1970.
        """
        decimal = {c.name for c in self.columns if _nullable(c.raw)[1].startswith("Decimal(")}
        if self.options.where or not decimal:
            return
        u = self.url
        text = {c.name: "Nullable(String)" if _nullable(c.raw)[0] else "String" for c in self.columns}
        structure = ", ".join(
            f"{quote_ident(c.name)} {text[c.name] if c.name in decimal else c.raw}" for c in self.columns
        )
        args = [u.address, u.database, u.table, u.user, u.password] + ([u.schema] if u.dialect == "postgresql" else [])
        try:
            self.engine.execute(f"CREATE DATABASE IF NOT EXISTS {quote_ident(READ_DATABASE)} ENGINE = Memory")
            self.engine.execute(f"DROP TABLE IF EXISTS {name}")
            engine = "PostgreSQL" if u.dialect == "postgresql" else "MySQL"
            self.engine.execute(
                f"CREATE TABLE {name} ({structure}) ENGINE = {engine}({', '.join(map(quote_str, args))})"
            )
        except ChuteError as exc:
            raise self.error(exc, "preparing the read") from None
        self.source = name
        self.columns = [
            replace(c, raw=text[c.name], expr=f"CAST({quote_ident(c.name)}, {quote_str(c.type)})")
            if c.name in decimal
            else c
            for c in self.columns
        ]
        self.by_name = {c.name: c for c in self.columns}

    def select(self, where: str, structure: str | None, extras: tuple[str, ...] = ()) -> str:
        """SELECT a part of the table: chute's types, or `structure`'s names and types (plus `extras`)."""
        if structure is None:
            exprs = [f"{c.expr} AS {quote_ident(c.name)}" for c in self.columns]
        else:
            exprs = self._cast_to(parse_structure(structure))
        names = [extra.rsplit(" AS ", 1)[1] for extra in extras]
        return f"SELECT {', '.join([*exprs, *names])} FROM {self.read(where, extras)}"

    def _cast_to(self, wanted: list[tuple[str, str, str]]) -> list[str]:
        names = {name for name, _, _ in wanted}
        extra = [c.name for c in self.columns if c.name not in names]
        if extra:
            raise SchemaError(
                f"{self.url.display}: columns not in the table: {', '.join(extra)} (use --add-columns to add them)"
            )
        exprs = []
        for name, type_name, default in wanted:
            column = self.by_name.get(name)
            if column is None:
                value = f"({default})" if default else f"defaultValueOfTypeName({quote_str(type_name)})"
            else:
                value = column.expr
                source_nullable, source_inner = _nullable(column.type)
                if source_nullable and not type_name.startswith(("Nullable(", "LowCardinality(Nullable(")):
                    # As files do: a NULL into a column that cannot hold one is the column's default.
                    value = f"ifNull({value}, defaultValueOfTypeName({quote_str(source_inner)}))"
            exprs.append(f"CAST({value}, {quote_str(type_name)}) AS {quote_ident(name)}")
        return exprs

    def literal(self, column: SourceColumn, value: str) -> str:
        """SQL for a value of `column` as a unit key holds it (the value chute stores, timestamps
        in UTC), to compare with the raw column: the text the server compares it as."""
        if INTEGER_TYPE.match(_nullable(column.raw)[1]):
            return str(int(value))
        if not column.zone:
            return quote_str(value)  # a date, or a wall clock without zone: the same text
        if value not in self._zoned:
            inner = _nullable(column.type)[1]
            self._zoned[value] = str(
                self.rows(
                    f"SELECT toString(toTimeZone(CAST({quote_str(value)}, {quote_str(inner)}), "
                    f"{quote_str(column.zone)})) AS t",
                    f"reading {column.name} value {value!r}",
                )[0]["t"]
            )
        return quote_str(self._zoned[value])


class DatabaseSource(SourceBase):
    """Tables of PostgreSQL or MySQL servers, read in key ranges by the engine."""

    def __init__(self, patterns: list[str], options: SourceOptions) -> None:
        if not patterns:
            raise UsageError("no source given")
        self.options = options
        self.urls = [parse_url(p, options.password_file) for p in patterns]
        self.parts: dict[str, _Part] = {}
        self.notes: list[str] = []
        """For the report: how many streams read each table, and why."""
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            # The target's engine (chDB holds one per process), else one in memory.
            self._engine = shared_engine()
        return self._engine

    def units(self) -> list[Unit]:
        zone = str(self.engine.rows("SELECT timezone() AS tz")[0]["tz"])
        if any(u.dialect == "postgresql" for u in self.urls):
            _postgres_session(zone)
        now = time.time_ns()
        units: list[Unit] = []
        for i, url in enumerate(self.urls):
            table = DatabaseTable(url, self.options, self.engine, zone)
            planned = Planner(table, self.options.loaded, now, self.parts).plan()
            if planned:
                table.read_decimals_as_text(f"{quote_ident(READ_DATABASE)}.{quote_ident(f't{i}')}")
            table.streams = self._streams(table)
            ranges = sum(1 for u in planned if self.parts[u.key].key)
            if planned:
                self.notes.append(table.streams.note(url.display, ranges))
            units.extend(planned)
        return units

    @staticmethod
    def _streams(table: DatabaseTable) -> Streams:
        """Connections that read the table's ranges at once (see `choose_streams`)."""
        url, cores = table.url, client_cores()
        local = is_local(url.host)
        # The server's workers matter only when it has cores of its own and this side has more than one.
        server = None if url.streams is not None or local or cores == 1 else table.server_workers()
        return choose_streams(cores, local, server, url.streams)

    def close(self) -> None:
        """Drop the tables the load read through (see `read_decimals_as_text`)."""
        if self._engine is not None and any(p.table.source != p.table.url.function() for p in self.parts.values()):
            self._engine.execute(f"DROP DATABASE IF EXISTS {quote_ident(READ_DATABASE)}")

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        part = self.parts[unit.key]
        extras = () if structure is None else (f"{part.row_number} AS `_chute_row`",)
        return f"({part.table.select(part.where, structure, extras)})"

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """A batch of units read by a few connections, not one each.

        The engine opens every branch of a UNION ALL at once, so key ranges of a
        table share its `streams` branches: each reads its ranges' filters (adjacent
        ones merged, pushed down to the server as one scan) and names each row's range.
        """
        groups: dict[tuple[int, str], list[tuple[Unit, _Part]]] = {}
        branches: list[list[tuple[Unit, _Part]]] = []
        for unit in units:
            part = self.parts[unit.key]
            if part.key:
                groups.setdefault((id(part.table), part.key), []).append((unit, part))
            else:
                branches.append([(unit, part)])  # numbered by the order rows arrive: read alone
        for members in groups.values():
            streams = members[0][1].table.streams.count
            # Neighbouring ranges in one branch: their filters merge into one range.
            members.sort(key=lambda m: (m[1].window, m[1].start))
            step = -(-len(members) // min(len(members), streams))
            branches.extend(members[i : i + step] for i in range(0, len(members), step))
        selects = [self._branch(members, structure or None) for members in branches]
        # Every unit of a run has the planning time as its mtime.
        mtime = f"fromUnixTimestamp64Nano({units[0].mtime_ns}, 'UTC')"
        return "(" + " UNION ALL ".join(selects) + ")", {"_source": "`_chute_unit`", "_source_mtime": mtime}

    @staticmethod
    def _branch(members: list[tuple[Unit, _Part]], structure: str | None) -> str:
        first = members[0][1]
        if len(members) == 1:
            extras = (f"{quote_str(members[0][0].key)} AS `_chute_unit`", f"{first.row_number} AS `_chute_row`")
            return first.table.select(_merged_filter([first]) if first.key else first.where, structure, extras)
        parts = [p for _, p in members]
        k = quote_ident(first.key)
        if all(a.window == b.window and a.end == b.start for a, b in itertools.pairwise(parts)):
            # Adjacent ranges (the usual batch): the first range whose end is past the key, one
            # comparison each (the filter has already dropped keys outside them all).
            which = "".join(f"{k} < {p.end}, {quote_str(u.key)}, " for u, p in members[:-1])
            starts = "".join(f"{k} < {p.end}, {p.start}, " for p in parts[:-1])
            unit, start = f"multiIf({which}{quote_str(members[-1][0].key)})", f"multiIf({starts}{parts[-1].start})"
        else:
            which = ", ".join(f"{p.condition}, {quote_str(u.key)}" for u, p in members)
            starts = ", ".join(f"{p.condition}, {p.start}" for p in parts)
            unit, start = f"multiIf({which}, '')", f"multiIf({starts}, 0)"
        extras = (f"{unit} AS `_chute_unit`", f"toUInt64(toInt128({k}) - {start} + 1) AS `_chute_row`")
        return first.table.select(_merged_filter(parts), structure, extras)

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        return [Column(c.name, c.type) for c in self.parts[unit.key].table.columns]

    def unchanged(self, unit: Unit) -> bool:
        """True: a range is read once, as it is then; recounting it before the commit would read it twice."""
        return True

    def row_number_expression(self, unit: Unit) -> str:
        return "`_chute_row`"

    def needs_serial_read(self, unit: Unit) -> bool:
        """False: each range's rows are numbered by their key (or, alone, in the one stream the server sends)."""
        return False


def _postgres_session(zone: str) -> None:
    """Settings for the engine's PostgreSQL connections (libpq reads PGOPTIONS at connect).

    The engine parses timestamp text in its own time zone and ignores the offset,
    so the server must write timestamptz in that zone; ISO dates, hex bytea and
    exact floats (servers before 12) are what its parser expects.
    """
    wanted = f"-c TimeZone={zone} -c DateStyle=ISO -c bytea_output=hex -c extra_float_digits=3"
    current = os.environ.get("PGOPTIONS", "")
    if wanted not in current:
        os.environ["PGOPTIONS"] = f"{current} {wanted}".strip()


def _fragment_parts(fragment: str) -> dict[str, re.Match[str]]:
    """{"range": ..., "window": ...} of a unit key's fragment (`c=(v0,v1]&k=[a,b)`)."""
    found: dict[str, re.Match[str]] = {}
    for piece in fragment.split("&") if fragment else []:
        key_range, window = RANGE_PART.match(piece), WINDOW_PART.match(piece)
        if key_range:
            found["range"] = key_range
        elif window:
            found["window"] = window
    return found


class Planner:
    """The units of one table for this run: repairs of unfinished ones, then what is new."""

    def __init__(self, table: DatabaseTable, loaded: tuple[tuple[str, str], ...], now: int, parts: dict[str, _Part]):
        self.table = table
        self.now = now
        self.parts = parts
        self.base = table.url.display
        self.known = [
            (key, state, _fragment_parts(key[len(self.base) + 1 :]))
            for key, state in loaded
            if key == self.base or key.startswith(self.base + "#")
        ]
        self.rows_per_range = table.url.rows_per_range

    def plan(self) -> list[Unit]:
        self._check_mode()
        units = self._repairs()
        repaired = {u.key for u in units}
        if self.table.cursor is not None:
            new = self._window()
        elif self.table.key is not None:
            new = self._ranges()
        else:
            new = self._whole()
        return units + [u for u in new if u.key not in repaired]

    def _mode(self) -> str:
        if self.table.cursor is not None:
            return f"--cursor {self.table.cursor.name}"
        if self.table.key is not None:
            return f"ranges of {self.table.key.name}"
        return "the whole table"

    def _check_mode(self) -> None:
        """Units of another kind (another key, a cursor, the whole table) would load rows twice."""
        t = self.table
        for key, _state, parts in self.known:
            window, key_range = parts.get("window"), parts.get("range")
            if t.cursor is not None:
                ok = window is not None and window.group("col") == t.cursor.name
            elif t.key is not None:
                ok = window is None and key_range is not None and key_range.group("col") == t.key.name
            else:
                ok = not parts
            if not ok:
                earlier = key.split("#", 1)[1] if "#" in key else "the whole table"
                raise UsageError(
                    f"{self.base}: loaded into this table before as {earlier!r}, now as {self._mode()}: "
                    "rows would load twice; keep the earlier --split-by/--cursor or load into a new table"
                )

    def _part(self, parts: dict[str, re.Match[str]]) -> _Part:
        """The filter (over raw columns) a unit key stands for."""
        t = self.table
        terms = []
        window = parts.get("window")
        if window is not None and t.cursor is not None:
            c = quote_ident(t.cursor.name)
            if window.group("v0"):
                terms.append(f"{c} > {t.literal(t.cursor, window.group('v0'))}")
            terms.append(f"{c} <= {t.literal(t.cursor, window.group('v1'))}")
        key_range = parts.get("range")
        if key_range is None:
            return _Part(t, " AND ".join(terms))
        start, end = int(key_range.group("a")), int(key_range.group("b"))
        return _Part(t, " AND ".join(terms), key_range.group("col"), start, end)

    def _unit(self, fragment: str, rows: int) -> Unit:
        # size > 0: the loader takes a 0-size unit for an empty file; an interrupted range
        # that is empty now must still run, so that what it left is deleted.
        key = f"{self.base}#{fragment}" if fragment else self.base
        self.parts[key] = self._part(_fragment_parts(fragment))
        return Unit(key=key, size=max(rows, 1), mtime_ns=self.now, fmt=self.table.fmt, etag=fragment or "table")

    def _repairs(self) -> list[Unit]:
        """Units the ledger has as started or failed: planned again under the same key."""
        unfinished = [key for key, state, _ in self.known if state != "done"]
        if not unfinished:
            return []
        t = self.table
        fragments = [key[len(self.base) + 1 :] for key in unfinished]
        conditions = [self._part(_fragment_parts(f)).condition for f in fragments]
        counts = ", ".join(f"countIf({c}) AS c{i}" for i, c in enumerate(conditions))
        scope = " OR ".join(f"({c})" for c in conditions)
        row = t.rows(f"SELECT {counts} FROM {t.url.function()}{t.raw_filter(scope)}", "counting unfinished rows")[0]
        return [self._unit(f, int(row[f"c{i}"])) for i, f in enumerate(fragments)]

    def _whole(self) -> list[Unit]:
        """No key: one unit, recounted each run (its identity is the row count)."""
        t = self.table
        rows = int(t.rows(f"SELECT count() AS n FROM {t.url.function()}{t.raw_filter()}", "counting rows")[0]["n"])
        return [self._unit("", rows)] if rows or self.known else []

    def _ranges(self, window: str = "", stats: tuple[int, int, int | None] | None = None) -> list[Unit]:
        """New key ranges: past the largest range end known, up to the largest key now (+1).

        Without a cursor the bounds come from the server (min and max through the key's index,
        the row estimate from its catalog): no row is read to plan.
        """
        t = self.table
        assert t.key is not None
        start = None
        if not window:
            ends = [int(p["range"].group("b")) for _, _, p in self.known if "range" in p]
            start = max(ends) if ends else None
        if stats is None:
            stats = t.key_bounds(start)
            if stats is None:
                return []
        lo, hi, rows = stats
        if start is None and not window:
            t.key_span = (lo, hi + 1)
        cuts = estimate_cuts(lo if start is None else max(lo, start), hi, rows, self.rows_per_range, t.unique_key)
        if start is not None:
            # The first new range starts where the last one known ended (keys in between are gone or never were).
            cuts[0] = (start, cuts[0][1], cuts[0][2])
        prefix = f"{window}&" if window else ""
        return [self._unit(f"{prefix}{t.key.name}=[{a},{b})", n) for a, b, n in cuts]

    def _window(self) -> list[Unit]:
        """--cursor: rows past the largest cursor value loaded before, up to the largest now."""
        t = self.table
        assert t.cursor is not None
        c = quote_ident(t.cursor.name)
        numeric = INTEGER_TYPE.match(_nullable(t.cursor.raw)[1]) is not None
        ends = [p["window"].group("v1") for _, _, p in self.known if "window" in p]
        v0 = (max(ends, key=int) if numeric else max(ends)) if ends else ""
        after = f"{c} > {t.literal(t.cursor, v0)}" if v0 else f"{c} IS NOT NULL"
        key_stats = ""
        if t.key is not None:
            k = quote_ident(t.key.name)
            key_stats = f", toString(min({k})) AS lo, toString(max({k})) AS hi"
        got = t.rows(
            f"SELECT toString(max({t.cursor.expr})) AS v1, count() AS n{key_stats} "
            f"FROM {t.url.function()}{t.raw_filter(after)}",
            "reading the cursor",
        )[0]
        total = int(got["n"])
        if total == 0:
            return []
        v1 = str(got["v1"])
        window = f"{t.cursor.name}=({v0},{v1}]"
        if t.key is not None:
            return self._ranges(window, (int(got["lo"]), int(got["hi"]), total))
        return [self._unit(window, total)]
