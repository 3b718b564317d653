"""Issue 30, P7: a PostgreSQL or MariaDB table loaded into the embedded target, chute vs a pipe.

A server (tests/harness/extservers.py; `scripts/install-source-servers postgres mariadb`)
gets a table of `--rows` rows of mixed types (bigint key, two text columns,
numeric(12,2), timestamptz / TIMESTAMP(6), integer, boolean). Then, in
interleaved rounds, each a fresh embedded directory and a separate process
(both pay Python and chDB start-up):

  - chute:  `python -m chute.cli load postgresql://... --table t` (or mysql://)
            (ranges of the primary key, read by the engine's postgresql() /
            mysql(), provenance and ledger included)
  - pipe:   `psql -c "COPY t TO STDOUT (FORMAT csv)" | python -c '<chDB: INSERT
            INTO t SELECT * FROM file("/dev/stdin", CSV, structure)>'`, or
            `mariadb --batch --quick --skip-column-names -e 'SELECT * FROM t' |
            ... TSV`, into a table of the same column types (chDB, the engine
            chute embeds: clickhouse-local is not installed here)

Both tables must hold the same rows (count and a checksum of every column).
Then what bounds it, in the same run: the server's dump alone (to /dev/null),
the engine reading the table through its table function to Null (1 and 2
streams), chute's planning (`units()`, the engine already open) and Python +
chDB start-up.

`--split-cores`: the server pinned to core 0 (every process and thread of it,
right after it starts: backends and threads it starts later inherit that) and
the clients (chute, the pipe, this script) to core 1 (`taskset -c 1`).

    python bench/bench_database.py [--db postgresql|mysql|both] [--rows 3000000] [--repeat 3] [--split-cores]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, print_table, save_results
from chute.engine import open_engine
from chute.sources import SourceOptions
from chute.sources.database import DatabaseSource
from chute.sources.database.exact import decimal, temporal
from tests.harness.extservers import (
    MARIADB_CLIENT,
    TEST_DATABASE,
    TEST_PASSWORD,
    TEST_USER,
    MariaDBServer,
    PostgresServer,
)

CHECKSUM = (
    "SELECT count() AS n, sum(id) AS ids, toString(sum(amount)) AS amount, "
    "sum(toUnixTimestamp64Micro(at)) AS at, sum(qty) AS qty, sum(cityHash64(name, note)) AS text, "
    "sum(toUInt8(flag)) AS flags FROM t"
)

PIPE_READER = """
import sys, chdb
from chute.sql import quote_str
conn = chdb.connect(sys.argv[1])
structure, fmt = sys.argv[2], sys.argv[3]
conn.query(f"CREATE TABLE t ({structure}) ENGINE = MergeTree ORDER BY tuple()")
conn.query(
    f"INSERT INTO t SELECT * FROM file('/dev/stdin', {quote_str(fmt)}, {quote_str(structure)}) "
    "SETTINGS date_time_input_format = 'best_effort'"
)
"""


@dataclass
class Side:
    """One kind of server: how to fill it, dump it, and name it to chute and to the engine."""

    dialect: str
    server: PostgresServer | MariaDBServer

    @property
    def url(self) -> str:
        return f"{self.dialect}://{TEST_USER}@{self.server.address}/{TEST_DATABASE}/t"

    @property
    def fmt(self) -> str:
        return "CSV" if self.dialect == "postgresql" else "TSV"

    def make_table(self, rows: int) -> None:
        if self.dialect == "postgresql":
            self.server.sql(
                "DROP TABLE IF EXISTS t;"
                "CREATE TABLE t (id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12, 2), at timestamptz, "
                "qty integer, note text, flag boolean);"
                "INSERT INTO t SELECT g, 'name ' || g, (g % 100000) / 100.0, "
                "timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', g % 1000, md5(g::text), g % 3 = 0 "
                f"FROM generate_series(1, {rows}) g;"
                "VACUUM ANALYZE t;"
            )
        else:
            self.server.sql(
                "DROP TABLE IF EXISTS t;"
                "CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT NOT NULL, amount DECIMAL(12, 2), "
                "at TIMESTAMP(6) NULL, qty INT, note VARCHAR(32), flag BOOLEAN);"
                "SET time_zone = '+00:00';"
                "INSERT INTO t SELECT seq, CONCAT('name ', seq), (seq % 100000) / 100, "
                "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND, seq % 1000, MD5(seq), seq % 3 = 0 "
                f"FROM seq_1_to_{rows};"
                "ANALYZE TABLE t;"
            )

    def dump(self) -> list[str]:
        """The server's whole table as text on stdout: the pipe's first half."""
        if isinstance(self.server, PostgresServer):
            return [
                str(self.server.bin / "psql"),
                "-X",
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.server.port),
                "-U",
                TEST_USER,
                "-d",
                TEST_DATABASE,
                "-c",
                "COPY t TO STDOUT (FORMAT csv)",
            ]
        return [
            MARIADB_CLIENT,
            "--no-defaults",
            "--protocol=TCP",
            "-h",
            "127.0.0.1",
            "-P",
            str(self.server.port),
            "-u",
            TEST_USER,
            "--batch",
            "--quick",
            "--skip-column-names",
            "-e",
            "SELECT * FROM t",
            TEST_DATABASE,
        ]

    def function(self, where: str) -> str:
        """The engine's table function over the table, filtered."""
        args = [self.server.address, TEST_DATABASE, "t", TEST_USER, TEST_PASSWORD]
        if self.dialect == "postgresql":
            args.append("public")
        quoted = ", ".join(f"'{a}'" for a in args)
        return f"SELECT * FROM {self.dialect}({quoted}) WHERE {where}"

    def text_read(self, rows: int) -> tuple[list[str], str]:
        """The whole table as chute reads it (numeric and timestamps as text, converted exactly), to Null."""
        args = [self.server.address, TEST_DATABASE, "t", TEST_USER, TEST_PASSWORD]
        if self.dialect == "postgresql":
            args.append("public")
        engine = "PostgreSQL" if self.dialect == "postgresql" else "MySQL"
        quoted = ", ".join(f"'{a}'" for a in args)
        pg = self.dialect == "postgresql"
        flag = "UInt8" if pg else "Int8"
        structure = (
            "id Int64, name String, amount Nullable(String), at Nullable(String), qty Nullable(Int32), "
            f"note Nullable(String), flag Nullable({flag})"
        )
        at = temporal("at", "DateTime64(6, 'UTC')", "UTC", pg, pg)
        setup = [
            "CREATE DATABASE IF NOT EXISTS bench_read ENGINE = Memory",
            "DROP TABLE IF EXISTS bench_read.t",
            f"CREATE TABLE bench_read.t ({structure}) ENGINE = {engine}({quoted})",
        ]
        return setup, (
            f"SELECT id, name, {decimal('amount', 'Decimal(12, 2)', False)}, {at}, qty, note, flag FROM bench_read.t "
            f"WHERE id >= 1 AND id < {rows + 1} FORMAT Null"
        )


ENV = {
    **os.environ,
    "PGPASSWORD": TEST_PASSWORD,
    "MYSQL_PWD": TEST_PASSWORD,
    "PGTZ": "UTC",
    "TZ": "UTC",
}


def run(args: list[str], **kwargs: object) -> float:
    started = time.perf_counter()
    subprocess.run(args, check=True, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - started


def checksum(directory: str) -> dict[str, object]:
    code = (
        "import json, sys; from chute.engine import open_engine; "
        f"print(json.dumps(open_engine(sys.argv[1]).rows({CHECKSUM!r})[0]))"
    )
    out = subprocess.run([sys.executable, "-c", code, directory], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def engine_seconds(sql: str, setup: list[str] | None = None) -> float:
    engine = open_engine(":memory:")
    for statement in setup or []:
        engine.execute(statement)
    started = time.perf_counter()
    engine.execute(sql)
    return time.perf_counter() - started


def pin_server(server: PostgresServer | MariaDBServer, core: int) -> int:
    """The server's process and its children (PostgreSQL's start sessions of their own), each of their
    threads, onto `core`; how many tasks."""
    assert server.process is not None
    parents: dict[int, int] = {}
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                parents[pid] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    pinned = 0
    for pid in parents:
        ancestor = pid
        while ancestor not in (server.process.pid, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        try:
            if ancestor != server.process.pid:
                continue
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(tid), {core})
                pinned += 1
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
    return pinned


def bench_one(side: Side, args: argparse.Namespace, work: Path, client: list[str]) -> dict[str, object]:
    t0 = time.perf_counter()
    side.make_table(args.rows)
    print(f"\n== {side.dialect}: {args.rows:,} rows in {time.perf_counter() - t0:.1f} s ==")
    url = side.url

    # The pipe's table gets chute's column types (from a first chute load).
    first = str(work / "types")
    run(
        [*client, sys.executable, "-m", "chute.cli", "load", url, "--table", "t", "--target", first, "--quiet"], env=ENV
    )
    columns = open_engine(first).rows("SELECT name, type FROM system.columns WHERE table = 't'")
    open_engine(":memory:")
    structure = ", ".join(f"`{c['name']}` {c['type']}" for c in columns if not c["name"].startswith("_"))
    shutil.rmtree(first)

    times: dict[str, list[float]] = {"chute": [], "pipe": []}
    cpu: dict[str, list[float]] = {"chute": [], "pipe": []}
    sums: dict[str, dict[str, object]] = {}
    notes: list[str] = []
    for round_ in range(args.repeat):
        for method in ("chute", "pipe") if round_ % 2 == 0 else ("pipe", "chute"):
            directory = str(work / f"{method}-{round_}")
            before = _children_cpu()
            if method == "chute":
                command = [*client, sys.executable, "-m", "chute.cli", "load", url, "--table", "t"]
                command += ["--target", directory, "--json"]
                started = time.perf_counter()
                out = subprocess.run(command, env=ENV, check=True, capture_output=True, text=True).stdout
                seconds = time.perf_counter() - started
                notes = json.loads(out).get("notes", [])
            else:
                reader = (
                    f"{shlex.join([*client, *side.dump()])} | "
                    f'{shlex.join([*client, sys.executable])} -c "$READER" {directory} "$STRUCTURE" {side.fmt}'
                )
                seconds = run(
                    ["bash", "-o", "pipefail", "-c", reader],
                    env={**ENV, "READER": PIPE_READER, "STRUCTURE": structure},
                )
            times[method].append(seconds)
            cpu[method].append(_children_cpu() - before)
            sums[method] = checksum(directory)
            shutil.rmtree(directory)
    if sums["chute"] != sums["pipe"] or sums["chute"]["n"] != args.rows:
        raise SystemExit(f"{side.dialect}: tables differ: chute {sums['chute']} pipe {sums['pipe']}")

    # What bounds it.
    os.environ["PGOPTIONS"] = "-c TimeZone=UTC -c DateStyle=ISO -c bytea_output=hex -c extra_float_digits=3"
    what = "COPY csv" if side.dialect == "postgresql" else "--batch --quick SELECT"
    bounds = {
        f"server {what} to /dev/null": median([run(side.dump(), env=ENV, stdout=subprocess.DEVNULL) for _ in range(3)]),
    }
    for parts in (1, 2):
        step = -(-args.rows // parts)
        union = " UNION ALL ".join(side.function(f"id > {i * step} AND id <= {(i + 1) * step}") for i in range(parts))
        label = f"engine {side.dialect}() to Null, {parts} stream{'s' if parts > 1 else ''}"
        bounds[label] = median([engine_seconds(f"SELECT * FROM ({union}) FORMAT Null") for _ in range(3)])
    as_chute = f"engine {side.dialect} read as chute reads it (numeric, timestamps as text, converted), 1 stream"
    bounds[as_chute] = median(
        [engine_seconds(side.text_read(args.rows)[1], side.text_read(args.rows)[0]) for _ in range(3)]
    )
    source = DatabaseSource([url.replace(f"{TEST_USER}@", f"{TEST_USER}:{TEST_PASSWORD}@")], SourceOptions())
    _ = source.engine
    planning = median([_timed(source.units) for _ in range(5)])
    bounds["chute planning (units(), median of 5)"] = planning
    bounds["python + chDB start-up"] = median(
        [run([sys.executable, "-c", "import chdb; chdb.connect(':memory:').query('SELECT 1')"]) for _ in range(3)]
    )

    chute_s, pipe_s = median(times["chute"]), median(times["pipe"])
    print_table(
        ["method", "seconds (median)", "rows/s", "client CPU s (median)", "runs"],
        [
            [
                m,
                f"{median(ts):.2f}",
                f"{args.rows / median(ts):,.0f}",
                f"{median(cpu[m]):.2f}",
                " ".join(f"{t:.2f}" for t in ts),
            ]
            for m, ts in times.items()
        ],
    )
    print(f"\nP7 {side.dialect}: pipe / chute = {pipe_s / chute_s:.2f}x (target >= 1.0); tables equal: {sums['chute']}")
    print(f"chute planning: {planning:.3f} s (target <= 0.1 s)")
    streams = [n for n in notes if " stream" in n]
    print("streams chute chose, and why: " + ("; ".join(streams) or "(no note)"))
    others = [n for n in notes if n not in streams]
    if others:
        print("chute's other notes: " + "; ".join(others))
    print("\nwhat bounds it (medians of 3):")
    print_table(["step", "seconds"], [[k, f"{v:.3f}"] for k, v in bounds.items()])
    return {
        "times": times,
        "client_cpu": cpu,
        "ratio_pipe_over_chute": pipe_s / chute_s,
        "planning_seconds": planning,
        "bounds": bounds,
        "notes": notes,
        "checksum": sums["chute"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["postgresql", "mysql", "both"], default="both")
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--split-cores", action="store_true", help="the server on core 0, the clients on core 1 (taskset)"
    )
    args = parser.parse_args()
    kinds = {"postgresql": PostgresServer, "mysql": MariaDBServer}
    wanted = list(kinds) if args.db == "both" else [args.db]
    for name in wanted:
        if not kinds[name].available():
            print(f"bench_database: {kinds[name].missing()}", file=sys.stderr)
            return 1
    if args.split_cores and (os.cpu_count() or 1) < 2:
        print("bench_database: --split-cores needs 2 cores", file=sys.stderr)
        return 1

    # An installed package has its bytecode; a checkout run with PYTHONDONTWRITEBYTECODE=1 would compile
    # every module of chute on each run (~0.1 s of CPU the pipe, importing little, does not pay).
    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "chute"), quiet=1)
    results: dict[str, object] = {}
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; split cores: {args.split_cores}")
    for name in wanted:
        server = kinds[name].create().start()
        work = Path(tempfile.mkdtemp(prefix="chute-bench-db-"))
        try:
            client: list[str] = []
            if args.split_cores:
                print(f"{name}: {pin_server(server, 0)} server tasks pinned to core 0; clients on core 1")
                client = ["taskset", "-c", "1"]
                os.sched_setaffinity(0, {1})
            results[name] = bench_one(Side(name, server), args, work, client)
        finally:
            if args.split_cores:
                os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
            shutil.rmtree(work, ignore_errors=True)
            server.remove()
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    path = save_results(
        "database-split" if args.split_cores else "database",
        {"rows": args.rows, "cores": os.cpu_count(), "split_cores": args.split_cores, "results": results},
    )
    print(f"results: {path}")
    return 0


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children: chute, or both ends of the pipe."""
    t = os.times()
    return t.children_user + t.children_system


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
