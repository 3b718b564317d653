"""postgresql:// and mysql:// sources against real servers (tests/harness/extservers.py).

Each engine: a full load equals the source (count and a checksum computed by the
server itself), a re-run loads nothing, new rows load as a delta, kill -9 at a
random moment and a re-run give the same table as a clean load, a bad password
is one line without the password; and the types the created table gets.
Skipped, with what to install, where scripts/install-source-servers has not run.
"""

from __future__ import annotations

import decimal
import json
import random
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chute.cli import main
from chute.engine import Engine, open_engine
from chute.errors import UsageError
from chute.load import LoadOptions, load
from chute.sources.database import DatabaseSource
from chute.sql import quote_str
from chute.units import Unit

from ..harness.extservers import TEST_DATABASE, TEST_PASSWORD, TEST_USER, MariaDBServer, PostgresServer, running
from ..harness.servers import server_query

pytestmark = pytest.mark.slow

ROWS = 30_000
CRASH_ROWS = 120_000


@dataclass
class Db:
    """One server and how to speak to it: its client for statements, a URL for chute."""

    dialect: str
    server: PostgresServer | MariaDBServer

    def sql(self, statements: str) -> str:
        return self.server.sql(statements)

    def url(self, table: str, password: str | None = TEST_PASSWORD, query: str = "") -> str:
        secret = f":{password}" if password is not None else ""
        return f"{self.dialect}://{TEST_USER}{secret}@{self.server.address}/{TEST_DATABASE}/{table}{query}"

    @property
    def shown(self) -> str:
        """The URL prefix chute names units with (no password)."""
        return f"{self.dialect}://{TEST_USER}@{self.server.address}/{TEST_DATABASE}/"

    def make_items(self, table: str, first: int, last: int, create: bool = True) -> None:
        """Rows first..last of a table with text, numeric, timestamp and NULLs."""
        if self.dialect == "postgresql":
            ddl = (
                f"CREATE TABLE {table} (id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12, 2), "
                "at timestamptz, qty integer);"
            )
            rows = (
                f"INSERT INTO {table} SELECT g, 'name ' || g || repeat('x', g % 7), (g % 100000) / 100.0, "
                "timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second 1 microsecond', "
                f"CASE WHEN g % 10 = 0 THEN NULL ELSE g % 1000 END FROM generate_series({first}, {last}) g;"
            )
        else:
            ddl = (
                f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(40) NOT NULL, amount DECIMAL(12, 2), "
                "at DATETIME(6), qty INT);"
            )
            rows = (
                f"INSERT INTO {table} SELECT seq, CONCAT('name ', seq, REPEAT('x', seq % 7)), (seq % 100000) / 100, "
                "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL seq MICROSECOND, "
                f"IF(seq % 10 = 0, NULL, seq % 1000) FROM seq_{first}_to_{last};"
            )
        self.sql((ddl if create else "") + rows)

    def checksum(self, table: str) -> tuple[int, str]:
        """(rows, md5 of every row's canonical text in key order), computed by the server."""
        if self.dialect == "postgresql":
            line = (
                "concat_ws('|', id, name, (amount * 100)::bigint, to_char(at, 'YYYY-MM-DD HH24:MI:SS.US'), "
                "coalesce(qty::text, 'N'))"
            )
            out = self.sql(
                f"SET TIME ZONE 'UTC'; SELECT count(*), md5(string_agg({line}, ',' ORDER BY id)) FROM {table}"
            )
        else:
            line = (
                "CONCAT_WS('|', id, name, CAST(amount * 100 AS SIGNED), DATE_FORMAT(at, '%Y-%m-%d %H:%i:%s.%f'), "
                "COALESCE(qty, 'N'))"
            )
            out = self.sql(
                "SET SESSION group_concat_max_len = 1000000000; "
                f"SELECT COUNT(*), MD5(GROUP_CONCAT({line} ORDER BY id SEPARATOR ',')) FROM {table}"
            )
        count, digest = out.split()
        return int(count), digest


ENGINE_CHECKSUM = (
    "SELECT count() AS n, lower(hex(MD5(arrayStringConcat(arrayMap(x -> x.2, arraySort(x -> x.1, groupArray(("
    "id, concatWithSeparator('|', toString(id), name, toString(toInt64(amount * 100)), "
    "formatDateTime(at, '%Y-%m-%d %H:%i:%S.%f'), ifNull(toString(qty), 'N')))))), ',')))) AS h FROM {table}"
)


def _engine_checksum(target: str, table: str) -> tuple[int, str]:
    row = open_engine(target).rows(ENGINE_CHECKSUM.format(table=table))[0]
    return int(row["n"]), str(row["h"])


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running(PostgresServer) as server:
        # Not UTC on purpose: timestamptz must still arrive as the right instant.
        server.sql(f"ALTER ROLE {TEST_USER} SET timezone = 'Asia/Kolkata'")
        yield server


@pytest.fixture(scope="module")
def mariadb() -> Iterator[MariaDBServer]:
    with running(MariaDBServer) as server:
        yield server


@pytest.fixture(params=["postgresql", "mysql"])
def db(request: pytest.FixtureRequest) -> Db:
    server = request.getfixturevalue("postgres" if request.param == "postgresql" else "mariadb")
    return Db(request.param, server)


def test_full_load_rerun_and_delta(db: Db, target: str) -> None:
    db.make_items("items", 1, ROWS)
    url = db.url("items", query="?rows_per_range=4000")
    report = load(url, "items", target)
    assert report.ok and report.rows_loaded == ROWS
    # Dense keys: equal ranges from one pass over the key; the last one ends past the largest key.
    assert [f.source.rsplit("#", 1)[1] for f in report.files][-1] == "id=[26251,30001)"
    assert len(report.files) == 8
    assert _engine_checksum(target, "items") == db.checksum("items")

    again = load(url, "items", target)
    assert again.ok and again.files == [] and again.table_rows == ROWS

    db.make_items("items", ROWS + 1, ROWS + 500, create=False)
    delta = load(url, "items", target)
    assert [(f.source, f.rows_loaded) for f in delta.files] == [
        (f"{db.shown}{_table(db, 'items')}#id=[30001,30501)", 500)
    ]
    assert _engine_checksum(target, "items") == db.checksum("items")

    engine = open_engine(target)
    sources = [r["s"] for r in engine.rows("SELECT DISTINCT _source AS s FROM items")]
    units = [r["u"] for r in engine.rows("SELECT DISTINCT unit AS u FROM _chute_ledger")]
    assert len(sources) == 9 and sorted(sources) == sorted(units)
    # Planning's dictionary and the table that read numeric as text are gone with the load.
    assert engine.rows("SELECT name FROM system.databases WHERE startsWith(name, '_chute')") == []
    assert not [s for s in sources + units if TEST_PASSWORD in s]
    # _source_row: the key's place in its range, so (_source, _source_row) finds the row.
    assert engine.rows("SELECT countIf(id != 30001 + _source_row - 1) AS bad FROM items WHERE id > 30000") == [
        {"bad": 0}
    ]


def test_key_ranges_without_provenance_are_counted_each(db: Db, target: str) -> None:
    """Without provenance columns, a batch of key ranges is still counted range by range (the
    stage's own column names each row's range), and a re-run loads nothing."""
    db.make_items("bare", 1, ROWS)
    url = db.url("bare", query="?rows_per_range=4000")
    options = LoadOptions(provenance=False)
    report = load(url, "bare", target, options)
    assert report.ok and report.rows_loaded == ROWS and len(report.files) == 8
    for f in report.files:  # each range's own rows: keys 1..ROWS in [start, end)
        start, end = (int(x) for x in f.source.rsplit("=[", 1)[1].rstrip(")").split(","))
        assert f.rows_loaded == min(end, ROWS + 1) - start, (f.source, f.rows_loaded)
    assert _engine_checksum(target, "bare") == db.checksum("bare")
    columns = [r["name"] for r in open_engine(target).rows("SELECT name FROM system.columns WHERE table = 'bare'")]
    assert not [c for c in columns if c.startswith("_")], columns
    again = load(url, "bare", target, options)
    assert again.ok and again.rows_loaded == 0 and again.table_rows == ROWS


def test_ranges_never_recorded_below_recorded_ones_load_on_the_next_run(db: Db, target: str) -> None:
    """Batches can start out of order (workers sharing a job begin at a random batch; a
    worker's threads race), so a kill can leave the first ranges of a plan unrecorded while
    later ones are: the next run must load every key no recorded range covers, once."""
    db.make_items("gaps", 1, ROWS)
    url = db.url("gaps", query="?rows_per_range=4000")
    assert load(url, "gaps", target).rows_loaded == ROWS
    engine = open_engine(target)
    # As if the kill came before the first three ranges were recorded (nor any of their rows
    # written): their rows and their ledger rows gone, the later ranges as they were.
    first = sorted({r["u"] for r in engine.rows("SELECT DISTINCT unit AS u FROM _chute_ledger")}, key=_range_start)[:3]
    _never_recorded(engine, "gaps", first)
    missing = ROWS - int(engine.rows("SELECT count() AS n FROM gaps")[0]["n"])
    assert missing > 0
    again = load(url, "gaps", target)
    assert again.ok and again.rows_loaded == missing, [(f.source, f.rows_loaded) for f in again.files]
    assert _engine_checksum(target, "gaps") == db.checksum("gaps")
    assert load(url, "gaps", target).rows_loaded == 0


def _never_recorded(engine: Engine, table: str, units: list[str]) -> None:
    """As if a kill came before `units` were recorded: their rows and their ledger rows gone."""
    listed = ", ".join(quote_str(u) for u in units)
    engine.execute(f"ALTER TABLE {table} DELETE WHERE _source IN ({listed}) SETTINGS mutations_sync = 2")
    engine.execute(f"ALTER TABLE _chute_ledger DELETE WHERE unit IN ({listed}) SETTINGS mutations_sync = 2")


def _range_start(unit: str) -> int:
    return int(unit.rsplit("=[", 1)[1].split(",")[0])


def test_mysql_doubles_load_bit_exact(mariadb: MariaDBServer, target: str) -> None:
    """The engine's MySQL reader rounds the shortest text MariaDB writes for a DOUBLE: chute
    parses that text itself, so each value is the very double the server holds."""
    values = [
        "0.30000000000000004",
        "898790.94618649",
        "1.7976931348623157e308",
        "4.9e-324",
        "-2.2250738585072014e-308",
    ]
    mariadb.sql(
        "CREATE TABLE dbl (id INT PRIMARY KEY, v DOUBLE); INSERT INTO dbl VALUES "
        + ", ".join(f"({i}, {v})" for i, v in enumerate(values))
        + ", (9, NULL);"
    )
    url = f"mysql://{TEST_USER}:{TEST_PASSWORD}@{mariadb.address}/{TEST_DATABASE}/dbl"
    report = load(url, "dbl", target)
    assert report.ok and report.rows_loaded == len(values) + 1
    got = {r["id"]: r["v"] for r in open_engine(target).rows("SELECT id, v FROM dbl")}
    assert got == {**{i: float(v) for i, v in enumerate(values)}, 9: None}


def test_postgres_floats_load_bit_exact_subnormals_too(postgres: PostgresServer, target: str) -> None:
    """A subnormal double made the engine's PostgreSQL reader fail its whole range."""
    values = ["0.1", "5e-324", "-2.2250738585072014e-308", "1.7976931348623157e308", "'NaN'", "'-Infinity'"]
    postgres.sql(
        "CREATE TABLE fl (id int PRIMARY KEY, v double precision, r real); INSERT INTO fl VALUES "
        + ", ".join(f"({i}, {v}, {'1e-45' if i == 1 else 1.5})" for i, v in enumerate(values))
        + ", (9, NULL, NULL);"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/public.fl"
    report = load(url, "fl", target)
    assert report.ok and report.rows_loaded == len(values) + 1, [f.error for f in report.files]
    got = {r["id"]: r["v"] for r in open_engine(target).rows("SELECT id, toString(v) AS v FROM fl")}
    expected = [repr(float(v.strip("'"))) for v in values]
    assert [got[i] for i in range(len(values))] == [e.replace("e+", "e") for e in expected], got
    assert open_engine(target).rows("SELECT toString(r) AS r FROM fl WHERE id = 1") == [{"r": "1e-45"}]


def test_postgres_names_the_reader_cannot_quote_are_refused_with_a_way_out(
    postgres: PostgresServer, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine's PostgreSQL reader quotes `"` as `\\"`: such a name fails every read, so the
    load stops at once with one line that says so and what to do; a view that renames it loads."""
    postgres.sql(
        "CREATE TABLE awk (id int PRIMARY KEY, \"a\"\"b\" text); INSERT INTO awk VALUES (1, 'x'), (2, 'y');"
        'CREATE VIEW awk_v AS SELECT id, "a""b" AS ab FROM awk;'
    )
    base = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/public."
    assert main(["load", base + "awk", "--table", "awk", "--target", target]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "double quote" in err and "view" in err, err
    report = load(base + "awk_v", "awk_v", target)
    assert report.ok and report.rows_loaded == 2


def test_values_read_unchecked_are_named_in_the_report(postgres: PostgresServer, target: str) -> None:
    """Arrays, and every column under --where, are read as the engine reads them: the report
    says which columns, and what that can change."""
    postgres.sql(
        "CREATE TABLE unck (id int PRIMARY KEY, n numeric(10, 2), a numeric[], d date[], k int);"
        "INSERT INTO unck VALUES (1, 1.5, '{1.25}', '{2024-01-01}', 1), (2, 2.5, NULL, NULL, 2);"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/public.unck"
    report = load(url, "unck", target, LoadOptions(where="k = 1"))
    assert report.ok and report.rows_loaded == 1
    notes = " | ".join(report.notes)
    assert "with --where, columns n are read as the engine reads them" in notes, notes
    assert "array columns a, d are read as the engine reads them" in notes, notes


def test_postgres_dates_an_18_16_date_cannot_hold_are_rejected_rows(postgres: PostgresServer, server_url: str) -> None:
    """18.16 has no Date32: the column is Date, and a date outside 1970..2149 (or `infinity`) is
    a rejected row naming it; the cast past Date's range failed the whole range before."""
    postgres.sql(
        "CREATE TABLE dd (id int PRIMARY KEY, d date, e date NOT NULL);"
        "INSERT INTO dd SELECT g, date '2024-01-01' + g, date '2024-01-01' FROM generate_series(1, 300) g;"
        "INSERT INTO dd VALUES (301, '1960-01-01', '2024-01-01'), (302, 'infinity', '2024-01-01'),"
        " (303, '2024-01-01', '2200-01-01');"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/public.dd"
    report = load(url, "dd", server_url)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (300, 3), [f.error for f in report.files]
    assert server_query(server_url, "SELECT count(), toString(min(d)) FROM dd FORMAT TSV").split() == [
        "300",
        "2024-01-02",
    ]
    rejects = server_query(server_url, "SELECT _source_row, error FROM dd_rejects ORDER BY _source_row FORMAT TSV")
    assert [line.split("\t")[1] for line in rejects.splitlines()] == [
        "column d: 1960-01-01 does not fit Date",
        "column d: infinity does not fit Date",
        "column e: 2200-01-01 does not fit Date",
    ]


def test_postgres_numerics_wider_than_an_18_16_decimal_keep_every_digit(
    postgres: PostgresServer, server_url: str
) -> None:
    """18.16 has no Decimal past 38 digits ("[69] Wrong precision" when the table was made):
    such a column is String holding each number exactly, with a note."""
    values = ["1234567890123456789012345678901234567890", "-0.0000000001"]
    postgres.sql(
        "CREATE TABLE wide (id int PRIMARY KEY, n numeric(40, 0), m numeric(50, 10));"
        f"INSERT INTO wide VALUES (1, {values[0]}, 1.5), (2, 7, {values[1]});"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/public.wide"
    report = load(url, "wide", server_url)
    assert report.ok and report.rows_loaded == 2, [f.error for f in report.files]
    assert any("more than 38 digits" in n for n in report.notes), report.notes
    got = server_query(server_url, "SELECT n, m FROM wide ORDER BY id FORMAT TSV").splitlines()
    assert got == [f"{values[0]}\t1.5000000000", f"7\t{values[1]}"], got


def test_postgres_numerics_the_reader_cannot_type_are_named_with_the_way_around(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """numeric(80, 10) and numeric(5, -2) failed with the engine's internal DESCRIBE message
    ("Precision 80 and scale 10 are too big", "Unsigned type must not contain '-'"). Now one line
    names the column and the way around it; a view casting it to text loads every digit."""
    big = "12345678901234567890123456789012345678901234567890123456789012345678.0123456789"
    postgres.sql(
        "CREATE TABLE huge (id int PRIMARY KEY, n numeric(80, 10));"
        f"INSERT INTO huge VALUES (1, {big}), (2, 1.5);"
        "CREATE TABLE neg (id int PRIMARY KEY, n numeric(5, -2)); INSERT INTO neg VALUES (1, 12345);"
        "CREATE VIEW huge_text AS SELECT id, n::text AS n FROM huge;"
    )
    base = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/public."
    for table, declared in (("huge", "numeric(80,10)"), ("neg", "numeric(5,-2)")):
        with pytest.raises(UsageError) as caught:
            load(base + table, table, str(tmp_path / table))
        message = str(caught.value)
        assert f"column n {declared}" in message and "view" in message and TEST_PASSWORD not in message
        assert "\n" not in message
    report = load(base + "huge_text", "huge_text", str(tmp_path / "view"))
    assert report.ok and report.rows_loaded == 2, [f.error for f in report.files]
    rows = open_engine(str(tmp_path / "view")).rows("SELECT id, n FROM huge_text ORDER BY id")
    assert [(r["id"], r["n"]) for r in rows] == [(1, big), (2, "1.5000000000")]


def _table(db: Db, name: str) -> str:
    return f"public.{name}" if db.dialect == "postgresql" else name


def _command(url: str, target: Path) -> list[str]:
    return [sys.executable, "-m", "chute.cli", "load", url, "--table", "t", "--target", str(target), "--quiet"]


def _table_checksum(target: Path) -> tuple[int, int, int]:
    """(rows, a checksum of every column, rows whose provenance is wrong), read by a child
    process: this process's engine holds another directory.

    Range bounds come from the catalog's row estimate, which MariaDB's statistics change from
    run to run: a crashed run and a clean one may cut other ranges. So provenance is checked
    row by row instead of compared: `_source` names a range that holds the row's key, and
    `_source_row` is the key's offset in it (+1)."""
    code = (
        "import json, sys; from chute.engine import open_engine; e = open_engine(sys.argv[1]); "
        'print(json.dumps(e.rows("SELECT count() AS n, sum(cityHash64(id, name, amount, at, qty)) AS h, '
        "countIf(NOT (id >= a AND id < b AND _source_row = id - a + 1)) AS wrong FROM (SELECT *, "
        "extractAll(splitByChar('#', _source)[-1], '-?[0-9]+') AS ends, toInt64(ends[1]) AS a, "
        "toInt64(ends[2]) AS b "
        'FROM t)")[0]))'
    )
    out = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, check=True)
    row = json.loads(out.stdout)
    return int(row["n"]), int(row["h"]), int(row["wrong"])


def test_kill_9_then_rerun_equals_a_clean_load(db: Db, tmp_path: Path) -> None:
    db.make_items("crash", 1, CRASH_ROWS)
    # 120 ranges: two batches of the loader (64 units each at most).
    url = db.url("crash", query="?rows_per_range=1000")
    clean = tmp_path / "clean"
    started = time.monotonic()
    subprocess.run(_command(url, clean), check=True)
    took = time.monotonic() - started
    expected = _table_checksum(clean)
    assert expected[0] == CRASH_ROWS and expected[2] == 0

    rng = random.Random()
    for trial in range(3):
        target = tmp_path / f"crashed-{trial}"
        delay = rng.uniform(0.3, 1.0) * took
        process = subprocess.Popen(_command(url, target))
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        subprocess.run(_command(url, target), check=True)
        assert _table_checksum(target) == expected, f"killed after {delay:.2f} s of {took:.2f} s"


def test_bad_password_and_other_errors_are_one_line(
    db: Db, target: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    secret = "Wrong-Secret-4711"
    cases = [
        (db.url("items", password=secret), "cannot connect"),
        (db.url("no_such_table"), "no such table"),
        (f"{db.dialect}://{TEST_USER}:{secret}@127.0.0.1:1/{TEST_DATABASE}/items", "cannot connect"),
    ]
    for url, expected in cases:
        assert main(["load", url, "--table", "t", "--target", target]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err and secret not in err and TEST_PASSWORD not in err, err

    # The password from --password-file, else the usual environment variable.
    password_file = tmp_path / "pw"
    password_file.write_text(TEST_PASSWORD + "\n")
    db.make_items("small", 1, 10)
    report = load(db.url("small", password=None), "small", target, LoadOptions(password_file=str(password_file)))
    assert report.ok and report.rows_loaded == 10


def test_postgres_types(postgres: PostgresServer, target: str) -> None:
    postgres.sql(
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');"
        "CREATE TABLE kinds (id integer PRIMARY KEY, i2 smallint, i8 bigint, f4 real, f8 double precision, "
        "n numeric(20, 4), nfree numeric, b boolean, t text, vc varchar(10), d date, ts timestamp, tstz timestamptz, "
        "tm time, iv interval, j json, jb jsonb, arr integer[], tarr text[], e mood, by bytea, u uuid, ip inet);"
        "INSERT INTO kinds VALUES (1, -32768, 9007199254740993, 1.5, 0.1, 12345678.1234, 3.1415926535897932384, "
        "true, E'tab\\there ''q''', 'vc', '2024-02-29', '2024-02-29 12:34:56.789012', "
        "'2024-02-29 12:34:56.789012+05', '12:34:56', '1 day 2 hours', '{\"a\": 1}', '{\"b\": [1, 2]}', "
        "'{1,NULL,3}', '{\"x\",\"y, z\"}', 'happy', '\\xdeadbeef00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
        "'10.0.0.1'), (2, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/kinds"
    assert load(url, "kinds", target).rows_loaded == 2
    engine = open_engine(target)
    types = {r["name"]: r["type"] for r in engine.rows("DESCRIBE kinds")}
    assert types == {
        "id": "Int32",
        "i2": "Nullable(Int16)",
        "i8": "Nullable(Int64)",
        "f4": "Nullable(Float32)",
        "f8": "Nullable(Float64)",
        "n": "Nullable(Decimal(20, 4))",
        "nfree": "Nullable(Decimal(38, 19))",  # the engine's choice for numeric without precision
        "b": "Nullable(Bool)",  # the engine reads UInt8
        "t": "Nullable(String)",
        "vc": "Nullable(String)",
        "d": "Nullable(Date32)",
        "ts": "Nullable(DateTime64(6, 'UTC'))",  # the wall clock, labelled UTC
        "tstz": "Nullable(DateTime64(6, 'UTC'))",  # the instant
        "tm": "Nullable(String)",
        "iv": "Nullable(String)",
        "j": "Nullable(String)",
        "jb": "Nullable(String)",
        "arr": "Array(Nullable(Int32))",
        "tarr": "Array(Nullable(String))",
        "e": "Nullable(String)",
        "by": "Nullable(String)",  # the bytes, not the engine's '\\x...' text
        "u": "Nullable(UUID)",
        "ip": "Nullable(String)",
        "_source": "LowCardinality(String)",
        "_source_mtime": "DateTime64(3, 'UTC')",
        "_source_row": "UInt64",
        "_load_id": "LowCardinality(String)",
    }
    row = engine.rows(
        "SELECT i8, toString(n) AS n, toString(nfree) AS nfree, b, t, toString(d) AS d, toString(ts) AS ts, "
        "toUnixTimestamp64Micro(tstz) AS tstz, j, jb, arr, tarr, e, hex(by) AS by, toString(u) AS u, tm, iv "
        "FROM kinds WHERE id = 1"
    )[0]
    assert row == {
        "i8": 9007199254740993,
        "n": "12345678.1234",
        "nfree": "3.1415926535897932384",
        "b": True,
        "t": "tab\there 'q'",
        "d": "2024-02-29",
        "ts": "2024-02-29 12:34:56.789012",
        "tstz": 1709192096789012,  # 07:34:56.789012 UTC, though the role's time zone is Asia/Kolkata
        "j": '{"a": 1}',
        "jb": '{"b": [1, 2]}',
        "arr": [1, None, 3],
        "tarr": ["x", "y, z"],
        "e": "happy",
        "by": "DEADBEEF00",
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "tm": "12:34:56",
        "iv": "1 day 02:00:00",
    }
    nulls = engine.rows("SELECT b, isNull(tstz) AS t, isNull(by) AS by, arr FROM kinds WHERE id = 2")[0]
    assert nulls == {"b": False, "t": 1, "by": 1, "arr": []}  # a NULL array is [] (arrays cannot be NULL)


def test_mysql_types(mariadb: MariaDBServer, target: str) -> None:
    mariadb.sql(
        "CREATE TABLE kinds (id INT PRIMARY KEY, tu TINYINT UNSIGNED, b BOOLEAN, bu BIGINT UNSIGNED, f FLOAT, "
        "n DECIMAL(30, 6), bit8 BIT(8), vc VARCHAR(20), bl BLOB, bn BINARY(4), dt DATE, dtm DATETIME, "
        "dtm6 DATETIME(6), tsm TIMESTAMP(3) NULL, tm TIME, yr YEAR, j JSON, e ENUM('sad', 'happy'), "
        "st SET('a', 'b'), u UUID);"
        "SET time_zone = '+00:00';"  # the TIMESTAMP literal below is UTC, whatever the server's zone
        "INSERT INTO kinds VALUES (1, 255, TRUE, 18446744073709551615, 1.5, -123456789012345678.123456, b'10101010', "
        "'vc', X'DEADBEEF00', X'01020304', '2024-02-29', '2024-02-29 12:34:56', '2024-02-29 12:34:56.789012', "
        "'2024-02-29 12:34:56.789', '-12:00:01', 2024, '{\"a\": 1}', 'happy', 'a,b', "
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), "
        "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
        "NULL, NULL, NULL);"
    )
    url = f"mysql://{TEST_USER}:{TEST_PASSWORD}@{mariadb.address}/{TEST_DATABASE}/kinds"
    assert load(url, "kinds", target).rows_loaded == 2
    engine = open_engine(target)
    types = {r["name"]: r["type"] for r in engine.rows("DESCRIBE kinds") if not r["name"].startswith("_")}
    assert types == {
        "id": "Int32",
        "tu": "Nullable(UInt8)",
        "b": "Nullable(Int8)",  # BOOLEAN is TINYINT(1): it holds any small number, kept as is
        "bu": "Nullable(UInt64)",
        "f": "Nullable(Float32)",
        "n": "Nullable(Decimal(30, 6))",
        "bit8": "Nullable(UInt64)",
        "vc": "Nullable(String)",
        "bl": "Nullable(String)",
        "bn": "Nullable(FixedString(4))",
        "dt": "Nullable(Date32)",
        "dtm": "Nullable(DateTime64(0, 'UTC'))",
        "dtm6": "Nullable(DateTime64(6, 'UTC'))",
        "tsm": "Nullable(DateTime64(3, 'UTC'))",
        "tm": "Nullable(String)",
        "yr": "Nullable(UInt16)",  # the engine reads String
        "j": "Nullable(String)",
        "e": "Nullable(String)",
        "st": "Nullable(String)",
        "u": "Nullable(UUID)",  # MariaDB's UUID; the engine reads String
    }
    row = engine.rows(
        "SELECT bu, toString(n) AS n, bit8, hex(bl) AS bl, hex(bn) AS bn, toString(dtm6) AS dtm6, "
        "toUnixTimestamp64Milli(tsm) AS tsm, tm, yr, j, st, toString(u) AS u FROM kinds WHERE id = 1"
    )[0]
    assert row == {
        "bu": 18446744073709551615,
        "n": "-123456789012345678.123456",
        "bit8": 170,
        "bl": "DEADBEEF00",
        "bn": "01020304",
        "dtm6": "2024-02-29 12:34:56.789012",
        "tsm": 1709210096789,  # the instant, read back in the zone the server writes it in
        "tm": "-12:00:01",
        "yr": 2024,
        "j": '{"a": 1}',
        "st": "a,b",
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    }
    assert engine.rows("SELECT isNull(dtm) AS d, isNull(bl) AS bl FROM kinds WHERE id = 2") == [{"d": 1, "bl": 1}]


def _rejects(target: str, table: str) -> list[tuple[int, str]]:
    rows = open_engine(target).rows(f"SELECT _source_row AS r, error FROM {table}_rejects ORDER BY r")
    return [(int(r["r"]), str(r["error"])) for r in rows]


def test_mysql_timestamps_read_as_text(mariadb: MariaDBServer, target: str) -> None:
    """The engine's MySQL reader makes zero dates 1970-01-01 and rolls invalid dates over: chute reads
    DATETIME(p), TIMESTAMP(p) and DATE as text and converts exactly; what does not fit is a reject."""
    mariadb.sql(
        "CREATE TABLE stamps (id INT PRIMARY KEY, dt DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), "
        "ts TIMESTAMP(6) NULL, d DATE);"
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'; SET time_zone = '+00:00';"
        "INSERT INTO stamps VALUES (1, '2024-01-01 01:02:03', '2024-01-01 01:02:03.456', "
        "'2024-01-01 01:02:03.456789', '2024-01-01 01:02:03.000001', '2024-01-01'), "
        "(2, '0000-00-00 00:00:00', NULL, NULL, NULL, NULL), "
        "(3, '1000-01-01 00:00:00', '9999-12-31 23:59:59.999', '1899-12-31 23:59:59.5', "
        "'2038-01-19 03:14:07.999999', '9999-12-31'), "
        "(4, '2024-01-01 00:00:00', '2024-00-10 00:00:00', NULL, NULL, NULL), "
        "(5, NULL, NULL, NULL, NULL, '2024-02-30'), "
        "(6, NULL, NULL, NULL, '0000-00-00 00:00:00', '0000-00-00'), "
        "(7, NULL, NULL, NULL, NULL, NULL);"
    )
    url = f"mysql://{TEST_USER}:{TEST_PASSWORD}@{mariadb.address}/{TEST_DATABASE}/stamps"
    report = load(url, "stamps", target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (3, 4)
    rows = open_engine(target).rows(
        "SELECT id, toString(dt) AS dt, toString(dt3) AS dt3, toString(dt6) AS dt6, toString(ts) AS ts, "
        "toString(d) AS d FROM stamps ORDER BY id"
    )
    assert rows == [
        {"id": 1, "dt": "2024-01-01 01:02:03", "dt3": "2024-01-01 01:02:03.456", "dt6": "2024-01-01 01:02:03.456789",
         "ts": "2024-01-01 01:02:03.000001", "d": "2024-01-01"},
        {"id": 3, "dt": "1000-01-01 00:00:00", "dt3": "9999-12-31 23:59:59.999", "dt6": "1899-12-31 23:59:59.500000",
         "ts": "2038-01-19 03:14:07.999999", "d": "9999-12-31"},
        {"id": 7, "dt": None, "dt3": None, "dt6": None, "ts": None, "d": None},
    ]  # fmt: skip
    assert _rejects(target, "stamps") == [
        (2, "column dt: 0000-00-00 00:00:00 does not fit DateTime64(0, 'UTC')"),
        (4, "column dt3: 2024-00-10 00:00:00.000 does not fit DateTime64(3, 'UTC')"),
        (5, "column d: 2024-02-30 does not fit Date32"),
        (6, "column ts: 0000-00-00 00:00:00.000000 does not fit DateTime64(6, 'UTC')"),
    ]


def test_postgres_values_that_do_not_fit_are_rejects(postgres: PostgresServer, target: str) -> None:
    """NaN, dates BC and infinities: the engine's reader would make them NULL, cut them or fail the
    whole read; chute keeps each as a reject with its reason. A numeric without precision gets the
    type its values need (here 30 digits before the point and 22 after: Decimal(76, 22)), so the
    values past the engine's Decimal(38, 19) load, every digit kept."""
    postgres.sql(
        "CREATE TABLE edge (id int PRIMARY KEY, ts timestamp(3), tstz timestamptz, d date, n numeric, "
        "n2 numeric(12, 2));"
        "INSERT INTO edge VALUES "
        "(1, '2024-01-01 01:02:03.45', '2024-01-01 01:02:03.456789+00', '2024-01-01', 1.50, 1.25),"
        "(2, '1000-01-01 00:00:00', '1000-01-01 00:00:00+00', '1000-01-01', 0.1000000000000000000000, 2),"
        "(3, NULL, NULL, NULL, 3.14159265358979323846, NULL),"
        "(4, NULL, NULL, NULL, 123456789012345678901234567890, NULL),"
        "(5, 'infinity', NULL, NULL, NULL, NULL),"
        "(6, NULL, '-infinity', NULL, NULL, NULL),"
        "(7, NULL, NULL, '0044-03-15 BC', NULL, NULL),"
        "(8, NULL, '0044-03-15 12:00:00+00 BC', NULL, NULL, NULL),"
        "(9, NULL, NULL, NULL, NULL, 'NaN');"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/edge"
    report = load(url, "edge", target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (4, 5)
    rows = open_engine(target).rows(
        "SELECT id, toString(ts) AS ts, toString(tstz) AS tstz, toString(d) AS d, toString(n) AS n, "
        "toString(n2) AS n2 FROM edge ORDER BY id"
    )
    assert rows == [
        {"id": 1, "ts": "2024-01-01 01:02:03.450000", "tstz": "2024-01-01 01:02:03.456789", "d": "2024-01-01",
         "n": "1.5", "n2": "1.25"},
        {"id": 2, "ts": "1000-01-01 00:00:00.000000", "tstz": "1000-01-01 00:00:00.000000", "d": "1000-01-01",
         "n": "0.1", "n2": "2"},
        {"id": 3, "ts": None, "tstz": None, "d": None, "n": "3.14159265358979323846", "n2": None},
        {"id": 4, "ts": None, "tstz": None, "d": None, "n": "123456789012345678901234567890", "n2": None},
    ]  # fmt: skip
    assert _rejects(target, "edge") == [
        (5, "column ts: infinity does not fit DateTime64(6, 'UTC')"),
        (6, "column tstz: -infinity does not fit DateTime64(6, 'UTC')"),
        (7, "column d: 0044-03-15 BC does not fit Date32"),
        (8, "column tstz: 0044-03-15 12:00:00+00 BC does not fit DateTime64(6, 'UTC')"),
        (9, "column n2: NaN does not fit Decimal(12, 2)"),
    ]


def test_cursor_loads_rows_past_the_last_one(postgres: PostgresServer, target: str) -> None:
    postgres.sql(
        "CREATE TABLE events (id bigint PRIMARY KEY, v integer, updated_at timestamptz NOT NULL);"
        "INSERT INTO events SELECT g, g, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' "
        "FROM generate_series(1, 1000) g;"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/events"
    options = LoadOptions(cursor="updated_at")
    first = load(url, "events", target, options)
    assert first.rows_loaded == 1000
    assert [f.source.rsplit("#", 1)[1] for f in first.files] == ["updated_at=(,2024-01-01 00:16:40.000000]&id=[1,1001)"]

    postgres.sql("UPDATE events SET v = -v, updated_at = timestamptz '2025-01-01 00:00:00.25+00' WHERE id % 100 = 0")
    second = load(url, "events", target, options)
    assert [(f.source.rsplit("#", 1)[1], f.rows_loaded) for f in second.files] == [
        ("updated_at=(2024-01-01 00:16:40.000000,2025-01-01 00:00:00.250000]&id=[100,1001)", 10)
    ]
    assert load(url, "events", target, options).files == []
    # Updated rows come again (a new version each); another way of splitting would load rows twice.
    assert open_engine(target).rows("SELECT count() AS n, countIf(v < 0) AS neg FROM events") == [
        {"n": 1010, "neg": 10}
    ]
    with pytest.raises(UsageError, match="rows would load twice"):
        load(url, "events", target)


def test_cursor_window_ranges_never_recorded_load_before_a_new_window(postgres: PostgresServer, target: str) -> None:
    """A kill while a window's batches ran out of order can leave some of its ranges unrecorded:
    the next run loads them (the newest window is finished before a new one starts)."""
    postgres.sql(
        "CREATE TABLE ev2 (id bigint PRIMARY KEY, v integer, updated_at timestamptz NOT NULL);"
        "INSERT INTO ev2 SELECT g, g, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' "
        "FROM generate_series(1, 1000) g;"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/ev2?rows_per_range=200"
    options = LoadOptions(cursor="updated_at")
    assert load(url, "ev2", target, options).rows_loaded == 1000
    engine = open_engine(target)
    units = sorted({r["u"] for r in engine.rows("SELECT DISTINCT unit AS u FROM _chute_ledger")}, key=_range_start)
    assert len(units) == 5
    lost = [units[0], units[3]]  # as if these were never recorded, nor any of their rows written
    _never_recorded(engine, "ev2", lost)
    postgres.sql("INSERT INTO ev2 VALUES (1001, 1001, timestamptz '2025-01-01 00:00:00+00');")
    again = load(url, "ev2", target, options)
    assert again.ok and again.rows_loaded == 400, [(f.source, f.rows_loaded) for f in again.files]
    assert all(f.source.split("#", 1)[1].startswith("updated_at=(,") for f in again.files)
    newer = load(url, "ev2", target, options)
    assert newer.rows_loaded == 1 and load(url, "ev2", target, options).rows_loaded == 0
    assert engine.rows("SELECT count() AS n, uniqExact(id) AS ids FROM ev2") == [{"n": 1001, "ids": 1001}]


def test_postgres_split_by_another_column_and_tables_never_analyzed_or_empty(
    postgres: PostgresServer, target: str
) -> None:
    """The catalog query reads the bounds of the --split-by column (not the primary key), a table never
    analyzed is counted, and an empty table plans nothing."""
    postgres.sql(
        "CREATE TABLE coded (code text PRIMARY KEY, n integer NOT NULL, v text);"
        "INSERT INTO coded SELECT 'c' || g, g + 10, 'v' FROM generate_series(1, 300) g;"
        "CREATE TABLE nothing (id bigint PRIMARY KEY, v text);"
    )
    base = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}"
    report = load(f"{base}/coded?rows_per_range=100", "coded", target, LoadOptions(split_by="n"))
    assert report.ok and report.rows_loaded == 300
    assert [(f.source.rsplit("#", 1)[1], f.rows_loaded) for f in report.files] == [
        ("n=[11,111)", 100),
        ("n=[111,211)", 100),
        ("n=[211,311)", 100),
    ]
    postgres.sql("INSERT INTO coded VALUES ('new', 400, 'w');")
    delta = load(f"{base}/coded?rows_per_range=100", "coded", target, LoadOptions(split_by="n"))
    assert [(f.source.rsplit("#", 1)[1], f.rows_loaded) for f in delta.files] == [("n=[311,401)", 1)]
    empty = load(f"{base}/nothing", "nothing", target)
    assert empty.ok and empty.files == [] and empty.rows_loaded == 0


def test_table_without_key_is_one_unit_recounted(postgres: PostgresServer, target: str) -> None:
    postgres.sql(
        "CREATE TABLE heap (a integer, b text); INSERT INTO heap SELECT g, 'x' FROM generate_series(1, 100) g;"
    )
    url = f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/heap"
    options = LoadOptions(where="a <= 50")
    first = load(url, "heap", target, options)
    assert [(f.source, f.rows_loaded) for f in first.files] == [
        (url.replace(f":{TEST_PASSWORD}", "").replace("/heap", "/public.heap"), 50)
    ]
    assert [f.state for f in load(url, "heap", target, options).files] == ["skipped"]
    postgres.sql("INSERT INTO heap VALUES (1, 'again');")
    changed = load(url, "heap", target, options)
    assert [f.state for f in changed.files] == ["skipped"] and "changed since it was loaded" in changed.notes[0]
    reloaded = load(url, "heap", target, LoadOptions(where="a <= 50", on_change="reload"))
    assert reloaded.rows_loaded == 51 and reloaded.table_rows == 51


def test_odd_names_sparse_keys_and_streams_in_the_report(db: Db, target: str) -> None:
    """Names reach the server's own queries quoted; a key with a huge gap plans from the catalog
    (no count per range) and loads every row once; the report says how many streams read and why."""
    if db.dialect == "postgresql":
        # (The engine cannot read a PostgreSQL name holding a double quote: it writes it as \".)
        table, quoted, key = "odd 't' x", "\"odd 't' x\"", "\"my 'key'\""
        rows = (
            "SELECT g, 'v' || g FROM generate_series(1, 50) g "
            "UNION ALL SELECT 1000000000000 + g, 'w' FROM generate_series(1, 51) g"
        )
    else:
        table, quoted, key = "odd `t` x'", "`odd ``t`` x'`", '`my "key"`'
        rows = (
            "SELECT seq, CONCAT('v', seq) FROM seq_1_to_50 UNION ALL SELECT 1000000000000 + seq, 'w' FROM seq_1_to_51"
        )
    db.sql(f"CREATE TABLE {quoted} ({key} bigint PRIMARY KEY, v text); INSERT INTO {quoted} {rows};")
    url = db.url(urllib.parse.quote(table, safe=""), query="?rows_per_range=20&streams=2")
    report = load(url, "odd", target)
    assert report.ok and report.rows_loaded == 101 and len(report.files) == 6
    assert [n for n in report.notes if "stream" in n] == [
        f"{db.shown}{_table(db, table)}: read by 2 streams: streams=N in the source URL"
    ]
    k = "`my 'key'`" if db.dialect == "postgresql" else '`my "key"`'
    row = open_engine(target).rows(f"SELECT count() AS n, uniqExact({k}) AS k, sum({k} < 100) AS low FROM odd")
    assert row == [{"n": 101, "k": 101, "low": 50}]
    again = load(db.url(urllib.parse.quote(table, safe=""), query="?rows_per_range=20"), "odd", target)
    assert again.ok and again.files == [] and not [n for n in again.notes if "stream" in n]


def test_rows_added_after_planning_wait_for_the_next_run(db: Db, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first load reads the whole table without a server-side filter: rows committed between
    planning and reading, past the planned ranges, are not loaded under those ranges' names."""
    db.make_items("late", 1, 1000)
    planned = DatabaseSource.units

    def units_then_insert(self: DatabaseSource) -> list[Unit]:
        found = planned(self)
        db.make_items("late", 1001, 1100, create=False)
        return found

    monkeypatch.setattr(DatabaseSource, "units", units_then_insert)
    first = load(db.url("late", query="?rows_per_range=300"), "late", target)
    assert first.ok and first.rows_loaded == 1000 and first.table_rows == 1000
    monkeypatch.setattr(DatabaseSource, "units", planned)
    second = load(db.url("late", query="?rows_per_range=300"), "late", target)
    assert [(f.source.rsplit("#", 1)[1], f.rows_loaded) for f in second.files] == [("id=[1001,1101)", 100)]
    assert _engine_checksum(target, "late") == db.checksum("late")


def test_a_row_committed_after_a_higher_key_was_loaded_is_seen(db: Db, target: str) -> None:
    """A writer took key 1001, another committed 1002, a run loaded 1002 and went on past it; 1001
    committed later, below every new range: it was lost without a word. The newest ranges are
    counted again each run: their change is a note, and --on-change reload loads it."""
    db.sql("DROP TABLE IF EXISTS late")
    db.make_items("late", 1, 1000)
    url = db.url("late")
    assert load(url, "late", target).rows_loaded == 1000
    db.make_items("late", 1002, 1002, create=False)
    assert load(url, "late", target).rows_loaded == 1
    quiet = load(url, "late", target)
    assert quiet.files == [] and quiet.notes == []  # the recount found nothing new
    db.make_items("late", 1001, 1001, create=False)  # the late commit
    noted = load(url, "late", target)
    assert noted.rows_loaded == 0 and any("changed since it was loaded" in n for n in noted.notes), noted.notes
    reloaded = load(url, "late", target, LoadOptions(on_change="reload"))
    assert reloaded.ok and reloaded.rows_loaded == 2 and reloaded.table_rows == 1002
    assert _engine_checksum(target, "late") == db.checksum("late")
    assert load(url, "late", target).files == []


def test_a_dropped_table_loads_again_in_the_run_that_says_so(db: Db, target: str) -> None:
    """The ranges were planned from the ledger before the dropped table was noticed: the run
    said they load again and loaded nothing; the next run did."""
    db.sql("DROP TABLE IF EXISTS dropme")
    db.make_items("dropme", 1, 1000)
    url = db.url("dropme")
    assert load(url, "dropme", target).rows_loaded == 1000
    open_engine(target).execute("DROP TABLE dropme")
    again = load(url, "dropme", target)
    assert again.ok and again.rows_loaded == 1000 and again.table_rows == 1000, again.notes
    assert any("was not there" in n for n in again.notes)
    assert _engine_checksum(target, "dropme") == db.checksum("dropme")
    assert load(url, "dropme", target).files == []


def _pg_url(postgres: PostgresServer, table: str) -> str:
    return f"postgresql://{TEST_USER}:{TEST_PASSWORD}@{postgres.address}/{TEST_DATABASE}/public.{table}"


@pytest.mark.parametrize("dest", ["embedded", "server"])
def test_postgres_numeric_without_precision_gets_a_type_that_holds_every_value(
    postgres: PostgresServer, target: str, request: pytest.FixtureRequest, dest: str
) -> None:
    """`numeric(12, 2) / 7` is 0.14285714285714285714: 20 digits after the point, which the
    engine's Decimal(38, 19) cannot hold; every such row was a reject. The server measures the
    column when the run plans: Decimal(38, 20) holds them all, on 18.16 too; no rejects."""
    postgres.sql(
        f"CREATE TABLE divs_{dest} (id int PRIMARY KEY, q numeric, z numeric);"
        f"INSERT INTO divs_{dest} SELECT g, (g * 1.25)::numeric(12, 2) / 7, NULL FROM generate_series(1, 3000) g;"
        f"INSERT INTO divs_{dest} VALUES (3001, 'NaN', NULL), (3002, NULL, 0), (3003, -12345678901234567.5, NULL);"
    )
    where = target if dest == "embedded" else str(request.getfixturevalue("server_url"))
    report = load(_pg_url(postgres, f"divs_{dest}"), "divs", where)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (3002, 1), [f.error for f in report.files]
    assert any(n.startswith("column q: numeric without precision") and "Decimal(38, 20)" in n for n in report.notes)
    expected = postgres.sql(f"SELECT string_agg(q::text, ',' ORDER BY id) FROM divs_{dest} WHERE q <> 'NaN'")
    sql = "SELECT arrayStringConcat(groupArray(toString(q)), ',') FROM (SELECT q FROM divs WHERE q != 0 ORDER BY id)"
    got = open_engine(where).text(sql, "TSVRaw") if dest == "embedded" else server_query(where, sql + " FORMAT TSVRaw")
    assert [decimal.Decimal(v) for v in got.strip().split(",")] == [
        decimal.Decimal(v) for v in expected.strip().split(",")
    ]
    # The next run measures more digits than the table holds: such a value is a reject, never cut.
    postgres.sql(f"INSERT INTO divs_{dest} VALUES (3004, 0.1234567890123456789012, NULL), (3005, 1.5, NULL);")
    again = load(_pg_url(postgres, f"divs_{dest}"), "divs", where)
    assert again.ok and (again.rows_loaded, again.rows_rejected) == (1, 1), [f.error for f in again.files]
    errors = "SELECT error FROM divs_rejects ORDER BY _source_row"
    found = open_engine(where).text(errors, "TSVRaw") if dest == "embedded" else server_query(where, errors)
    assert "column q: 0.1234567890123456789012 does not fit Decimal(38, 20)" in found, found


@pytest.mark.parametrize("dest", ["embedded", "server"])
def test_postgres_numerics_past_38_and_76_digits_keep_every_digit(
    postgres: PostgresServer, target: str, request: pytest.FixtureRequest, dest: str
) -> None:
    """Past 38 digits: Decimal(76, S) in the embedded engine (String with a note on 18.16); past 76:
    String holding each number's text, with a note. A numeric[] whose elements the engine's
    Decimal(38, 19) cuts is String holding the array's text."""
    wide = "1234567890123456789012345.12345678901234567890"  # 25 + 20 digits
    huge = "9" * 60 + "." + "1" * 30  # 90 digits
    postgres.sql(
        f"CREATE TABLE wides_{dest} (id int PRIMARY KEY, w numeric, h numeric, a numeric[], ok numeric[]);"
        f"INSERT INTO wides_{dest} VALUES (1, {wide}, {huge}, ARRAY[0.123456789012345678901, NULL], ARRAY[1.5]),"
        "(2, -1, 1, NULL, NULL);"
    )
    where = target if dest == "embedded" else str(request.getfixturevalue("server_url"))
    report = load(_pg_url(postgres, f"wides_{dest}"), "wides", where)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, 0), [f.error for f in report.files]
    notes = " | ".join(report.notes)
    assert "column w: numeric without precision holds values of up to 25 digits before the point and 20 after" in notes
    assert "column h:" in notes and "String holding each number's text" in notes, notes
    assert "column a: numeric[] without precision" in notes, notes
    sql = "SELECT toString(w), toString(h), ifNull(a, 'NULL'), toString(ok) FROM wides ORDER BY id"
    got = open_engine(where).text(sql, "TSVRaw") if dest == "embedded" else server_query(where, sql + " FORMAT TSVRaw")
    got_rows = [line.split("\t") for line in got.splitlines()]
    assert [decimal.Decimal(r[0]) for r in got_rows] == [decimal.Decimal(wide), -1]
    assert [r[1:3] for r in got_rows] == [[huge, "{0.123456789012345678901,NULL}"], ["1", "NULL"]]
    assert [[decimal.Decimal(v) for v in r[3].strip("[]").split(",") if v] for r in got_rows] == [[1.5], []]
    types = dict(
        line.split("\t")
        for line in (
            open_engine(where).text("SELECT name, type FROM system.columns WHERE table = 'wides'", "TSVRaw")
            if dest == "embedded"
            else server_query(
                where,
                "SELECT name, type FROM system.columns WHERE database = currentDatabase() "
                "AND table = 'wides' FORMAT TSVRaw",
            )
        ).splitlines()
    )
    assert types["w"] == ("Nullable(Decimal(76, 20))" if dest == "embedded" else "Nullable(String)")
    assert types["h"] == "Nullable(String)"


def test_mysql_decimal_keeps_its_declared_type_and_every_digit(mariadb: MariaDBServer, target: str) -> None:
    """MySQL/MariaDB DECIMAL always has a precision (at most 65 digits, 30 after the point): the
    engine's type is the declared one, and every value loads exactly."""
    values = ["12345678901234567890123456789012345.123456789012345678901234567890", "0.142857142857142857142857142857"]
    mariadb.sql(
        "CREATE TABLE decs (id INT PRIMARY KEY, d DECIMAL(65, 30), s DECIMAL(12, 2));"
        f"INSERT INTO decs VALUES (1, {values[0]}, 1.25), (2, {values[1]}, -0.5);"
    )
    report = load(f"mysql://{TEST_USER}:{TEST_PASSWORD}@{mariadb.address}/{TEST_DATABASE}/decs", "decs", target)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (2, 0), [f.error for f in report.files]
    engine = open_engine(target)
    assert {r["name"]: r["type"] for r in engine.rows("DESCRIBE decs")}["d"] == "Nullable(Decimal(65, 30))"
    got = engine.text("SELECT toString(d), toString(s) FROM decs ORDER BY id", "TSVRaw").splitlines()
    assert [[decimal.Decimal(v) for v in line.split("\t")] for line in got] == [
        [decimal.Decimal(values[0]), decimal.Decimal("1.25")],
        [decimal.Decimal(values[1]), decimal.Decimal("-0.5")],
    ]
