"""One database table as the engine and its server see it: catalog, key bounds, the SELECT that reads it."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from chute.engine import Engine
from chute.errors import ChuteError, SchemaError, SourceError, UsageError
from chute.sources.base import CheckedRead, SourceOptions
from chute.sources.database.columns import SourceColumn, one_reason, parse_structure, scrub_secret, split_nullable
from chute.sources.database.exact import checked_read, decimal, strict, temporal
from chute.sources.database.numerics import with_measured_types
from chute.sources.database.pgcatalog import catalog_query, parse_bounds, unreadable_numerics
from chute.sources.database.url import (
    CONNECTION_ERRORS,
    CURSOR_TYPE,
    FORMATS,
    INTEGER_TYPE,
    PROBE_DATABASE,
    READ_DATABASE,
    UTC_NAMES,
    DatabaseUrl,
)
from chute.sources.dbplan import (
    Streams,
    mysql_ident,
    mysql_str,
    pg_ident,
    pg_str,
    scaled_rows,
)
from chute.sql import quote_ident, quote_str


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
        message = " ".join(scrub_secret(str(exc), self.url.password).split())
        if exc.name in CONNECTION_ERRORS:
            message = f"cannot connect: {one_reason(message)}"
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
        read, fetched = self._catalog_bounds()
        if not read:
            fetched = self._read_bounds()
        if fetched is None or (start is not None and fetched[1] < start):
            return None
        lo, hi, rows = fetched
        if rows <= 0:
            # Never analyzed (or an empty-looking estimate for a table with rows): the server counts.
            table = f"{pg_ident(u.schema)}.{pg_ident(u.table)}"
            if not pg:
                table = f"{mysql_ident(u.database)}.{mysql_ident(u.table)}"
            counted = self.server_rows(
                f"SELECT CAST(count(*) AS {'text' if pg else 'CHAR'}) AS n FROM {table}", ["n"], "counting rows"
            )
            rows = int(counted[0]["n"])
        return lo, hi, scaled_rows(rows, lo, hi, start)

    def _catalog_bounds(self) -> tuple[bool, tuple[int, int, int] | None]:
        """The key's (min, max) and the row estimate as the catalog query read them (PostgreSQL): (False,
        None) if it did not (see `catalog_query`), (True, None) if the table has no row."""
        assert self.key is not None
        rows = self._catalog()
        bounds = next((r for r in rows if r["k"] == "bounds" and r["c"] == self.key.name), None)
        estimate = next((r for r in rows if r["k"] == "estimate"), None)
        if bounds is None or estimate is None:
            return False, None
        got = parse_bounds(bounds["v"])
        return True, None if got is None else (got[0], got[1], int(estimate["v"]))

    def _read_bounds(self) -> tuple[int, int, int] | None:
        """(min, max) of the key through its index and the catalog's row estimate, in a query of their own."""
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
        if not got["lo"] or not got["hi"]:
            return None
        return int(got["lo"]), int(got["hi"]), int(got["n"])

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

    def _refuse_awkward_names(self, columns: list[str]) -> None:
        """PostgreSQL names with `"` or `\\`: the engine's reader writes `"` as `\\"` inside a quoted
        name (the server reads `\\` as itself), so every read of the table would fail."""
        awkward = next((n for n in [self.url.schema, self.url.table, *columns] if '"' in n or "\\" in n), None)
        if awkward is not None:
            raise UsageError(
                f"{self.url.display}: the name {awkward!r} holds a double quote or a backslash, which the "
                "engine's PostgreSQL reader cannot quote; load from a view that renames it"
            )

    def _columns(self) -> list[SourceColumn]:
        if self.url.dialect == "postgresql":
            self._refuse_awkward_names([])
        # The catalog (through a dictionary's connection) while the engine describes the table
        # (through its own): two connections to the server in the time of one.
        with ThreadPoolExecutor(1) as pool:
            catalog = pool.submit(self._catalog)
            try:
                described = self.rows(f"DESCRIBE TABLE {self.url.function()}", "reading the columns")
            except SourceError:
                self._refuse_unreadable_numerics(catalog.result())
                raise
            catalog.result()
        kinds = self._catalog_types()
        if self.url.dialect == "postgresql":
            self._refuse_awkward_names([r["name"] for r in described])
        if self.url.dialect == "mysql" and "timestamp" in kinds.values():
            self.server_zone = self._mysql_zone()
        return [self._column(r["name"], r["type"], kinds.get(r["name"], "")) for r in described]

    def _refuse_unreadable_numerics(self, catalog: list[dict[str, str]]) -> None:
        """A numeric the engine cannot type fails its DESCRIBE with an internal message: name the
        column and the way around it instead."""
        declared = {r["c"]: r["v"] for r in catalog if r["k"] == "declared"}
        unreadable = unreadable_numerics(declared)
        if unreadable:
            raise UsageError(
                f"{self.url.display}: column {', '.join(unreadable)}: the engine's PostgreSQL reader takes "
                "numerics of at most 76 digits and no negative scale; load from a view that casts the "
                "column to text (or to a numeric it takes)"
            )

    def _catalog(self) -> list[dict[str, str]]:
        """What the server's catalog says of the table, in one query it runs itself: ("type", column,
        the server's type name), ("key", column, position in the primary key) and, MySQL, ("zone",
        TIME_ZONE or SYSTEM_TIME_ZONE, value)."""
        if self._catalog_rows is not None:
            return self._catalog_rows
        u = self.url
        if u.dialect == "postgresql":
            # With --cursor the key's bounds come with the cursor's window (see Planner._window).
            query = catalog_query(u.schema, u.table, self.options.split_by, bounds=self.options.cursor is None)
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
        nullable, inner = split_nullable(raw)

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
            # writes timestamptz in that zone (see postgres_session): the instant is right.
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
            offset = pg and kind == "timestamp with time zone"
            exact = temporal(ident, split_nullable(utc_type)[1], wall_zone, pg, offset)
            if wall_zone == self.zone:
                return SourceColumn(name, raw, utc_type, f"CAST({ident}, {quote_str(utc_type)})", zone, exact or "")
            text = f"toString({ident})"
            parse = (
                f"toDateTime64({text}, {precision}, {quote_str(wall_zone)})"
                if precision
                else f"toDateTime({text}, {quote_str(wall_zone)})"
            )
            return SourceColumn(name, raw, utc_type, f"CAST({parse}, {quote_str(utc_type)})", zone, exact or "")
        if inner in ("Date", "Date32"):
            return SourceColumn(name, raw, raw, ident, exact=temporal(ident, inner, "UTC", pg) or "")
        if inner.startswith("Decimal"):
            exact = decimal(ident, inner, kind == "numeric free")
            return SourceColumn(name, raw, raw, ident, exact=exact, numeric=True)
        if inner in ("Float32", "Float64"):
            # The engine's MySQL reader rounds the shortest text the server writes for a DOUBLE
            # (0.30000000000000004 comes out 0.3000000000000001, 4.9e-324 is 0, the largest is
            # NULL); its PostgreSQL reader fails the whole read on a subnormal ('5e-324'). Read
            # as text, parsed exactly (NaN and the infinities too).
            return SourceColumn(name, raw, raw, ident, exact=f"to{inner}OrNull({ident})")
        return SourceColumn(name, raw, raw, ident)

    def measure_numerics(self) -> list[str]:
        """PostgreSQL numerics without precision get the type their values need, measured by the
        server now (chute.sources.database.numerics); the report's notes."""
        if self.url.dialect != "postgresql":
            return []
        kinds = self._catalog_types()
        scalars = [c.name for c in self.columns if kinds.get(c.name) == "numeric free"]
        arrays = [r["c"] for r in self._catalog() if r["k"] == "freearray" and r["c"] in self.by_name]
        self.columns, notes = with_measured_types(
            self.columns,
            (self.url.schema, self.url.table),
            (scalars, arrays),
            lambda query, names: self.server_rows(query, names, "measuring numerics")[0],
            bool(self.options.where),
        )
        self.by_name = {c.name: c for c in self.columns}
        return notes

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
        if not CURSOR_TYPE.match(split_nullable(column.raw)[1]):
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

    def read_as_text(self, name: str) -> None:
        """Read the columns the engine's reader could change (timestamps, dates, numerics: see
        chute.sources.database.exact) as the server's text, converted exactly by the engine.

        Faster too: the engine's readers parse each numeric and MySQL timestamp on its own
        (measured on 3 M rows of numeric(12, 2): 0.9 s of CPU for PostgreSQL, 1.1 s for
        MariaDB, as much as all other columns together); a conversion of the text column is
        vectorized. A table function takes no column types, so the rows come through a
        table of the engine's PostgreSQL or MySQL engine, `name`, in a Memory database
        (the password in its definition never reaches the disk). --where keeps the table
        function and the engine's reading (its SQL compares the columns as their types);
        so does the --cursor column (its values are compared on the server).
        """
        cursor = self.cursor.name if self.cursor is not None else None
        texts = {c.name for c in self.columns if c.exact and c.name != cursor}
        if self.options.where or not texts:
            return
        u = self.url
        nullable = {c.name for c in self.columns if split_nullable(c.raw)[0] or split_nullable(c.type)[0]}
        text = {c.name: "Nullable(String)" if c.name in nullable else "String" for c in self.columns}
        structure = ", ".join(
            f"{quote_ident(c.name)} {text[c.name] if c.name in texts else c.raw}" for c in self.columns
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
            replace(c, raw=text[c.name], expr=strict(c), text=True) if c.name in texts else c for c in self.columns
        ]
        self.by_name = {c.name: c for c in self.columns}

    def checked_read(self, name: str, type_sql: str) -> CheckedRead | None:
        """How the loader reads a column this table reads as text into its own type (see `CheckedValues`)."""
        column = self.by_name.get(name)
        return None if column is None or not column.text else checked_read(column, type_sql)

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
            elif column.text and type_name == column.raw:
                # The text as the server wrote it: what checked_read asks for (and a String column gets).
                value = quote_ident(name)
            else:
                value = column.expr
                source_nullable, source_inner = split_nullable(column.type)
                if source_nullable and not type_name.startswith(("Nullable(", "LowCardinality(Nullable(")):
                    # As files do: a NULL into a column that cannot hold one is the column's default.
                    value = f"ifNull({value}, defaultValueOfTypeName({quote_str(source_inner)}))"
            exprs.append(f"CAST({value}, {quote_str(type_name)}) AS {quote_ident(name)}")
        return exprs

    def literal(self, column: SourceColumn, value: str) -> str:
        """SQL for a value of `column` as a unit key holds it (the value chute stores, timestamps
        in UTC), to compare with the raw column: the text the server compares it as."""
        if INTEGER_TYPE.match(split_nullable(column.raw)[1]):
            return str(int(value))
        if not column.zone:
            return quote_str(value)  # a date, or a wall clock without zone: the same text
        if value not in self._zoned:
            inner = split_nullable(column.type)[1]
            self._zoned[value] = str(
                self.rows(
                    f"SELECT toString(toTimeZone(CAST({quote_str(value)}, {quote_str(inner)}), "
                    f"{quote_str(column.zone)})) AS t",
                    f"reading {column.name} value {value!r}",
                )[0]["t"]
            )
        return quote_str(self._zoned[value])
