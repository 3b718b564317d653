"""PostgreSQL and MySQL tables, read by the engine's postgresql() and mysql() table functions.

    postgresql://user[:password]@host[:port]/dbname/[schema.]table[?rows_per_range=N&streams=N]
    mysql://user[:password]@host[:port]/dbname/table[?rows_per_range=N&streams=N]

The engine does every row (no Python per row): it streams the table (COPY for
PostgreSQL, a SELECT for MySQL) with each unit's filter pushed down to the
server. Python only plans, and planning reads no row: the server answers
small queries of its own (run through an engine dictionary, `server_rows`):
its catalog (column types, primary key) and the key's min and max (through the
key's index) with the catalog's row estimate (PostgreSQL reltuples scaled to
the table's current pages; MySQL TABLE_ROWS; counted by the server when the
table was never analyzed). See chute.sources.dbplan. PostgreSQL answers all of
it in one query (chute.sources.database.pgcatalog), run while the engine
describes the table: two connections at once, ~0.06-0.1 s on a busy 2-core box.

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
engine's: numeric(p, s) -> Decimal(p, s), numeric without precision -> the
Decimal its values need, measured by the server when a run plans
(chute.sources.database.numerics), json/jsonb, enums, time, interval, inet, money -> String,
arrays -> Array (a NULL array is []), NOT NULL -> not Nullable.

Timestamps, dates and numerics are read as the server's text (a table of the
engine's PostgreSQL/MySQL engine with those columns as String) and converted
exactly (chute.sources.database.exact): a value its column cannot hold (MySQL
zero and invalid dates, NaN, numerics past the column's Decimal, BC, infinity) fails
the batch with `column C: a value does not fit T`, and the range's careful pass
(`CheckedValues`) loads the rows that fit and keeps the others as rejects.
`--where` and the --cursor column keep the engine's own reading.

The password comes from the URL, else `--password-file`, else PGPASSWORD or
MYSQL_PWD. It appears only inside the table function calls given to the engine
(which masks it as [HIDDEN] in its own messages) and in the definitions of the
planning dictionary and of the table that reads columns as text (both
in Memory databases: never on disk, dropped after use); unit keys, `_source`,
reports and messages use the URL without it, and engine text is scrubbed of it
as well.
"""

from __future__ import annotations

from chute.sources.database.source import DatabaseSource
from chute.sources.database.url import DatabaseUrl, parse_url

__all__ = ["DatabaseSource", "DatabaseUrl", "parse_url"]
