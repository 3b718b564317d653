"""Issue 30, P7: a PostgreSQL or MariaDB table loaded into the embedded target, chute vs a pipe.

A server (tests/harness/extservers.py; `scripts/install-source-servers postgres mariadb`)
gets a table `t` of `--rows` rows. `--shape issue45` (the default, issue 45's P7):
bigint key, text, numeric(14,4), timestamptz / TIMESTAMP(6), boolean, 2 M rows.
`--shape mixed` (the figures before 2026-11-28): bigint key, two text columns,
numeric(12,2), timestamptz / TIMESTAMP(6), integer, boolean, 3 M rows. Then, in
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
Each run's wall time, its client CPU (user + system of the finished processes:
chute, or both ends of the pipe) and the server's CPU (its process and the
backends it reaped) are printed; `--chute-tree NAME=DIR` adds chute run from
another checkout (PYTHONPATH=DIR) to the same rounds, for before/after figures.
Then what bounds it, in the same run: the server's dump alone (to /dev/null),
the engine reading the table through its table function to Null (1 and 2
streams), chute's planning (`units()`, the engine already open) and Python +
chDB start-up.

`--split-cores`: the server pinned to core 0 (every process and thread of it,
right after it starts: backends and threads it starts later inherit that) and
the clients (chute, the pipe, this script) to core 1 (`taskset -c 1`).

    python bench/bench_database.py [--db postgresql|mysql|both] [--shape issue45|mixed] [--rows N] [--repeat 3]
        [--split-cores] [--chute-tree main=/path/to/checkout]
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

CHECKSUM = {
    "mixed": (
        "SELECT count() AS n, sum(id) AS ids, toString(sum(amount)) AS amount, "
        "sum(toUnixTimestamp64Micro(at)) AS at, sum(qty) AS qty, sum(cityHash64(name, note)) AS text, "
        "sum(toUInt8(flag)) AS flags FROM t"
    ),
    "issue45": (
        "SELECT count() AS n, sum(id) AS ids, toString(sum(amount)) AS amounts, countIf(amount IS NULL) AS nulls, "
        "sum(toUnixTimestamp64Micro(at)) AS at, sum(cityHash64(name)) AS text, sum(toUInt8(flag)) AS flags FROM t"
    ),
}
DEFAULT_ROWS = {"issue45": 2_000_000, "mixed": 3_000_000}

PIPE_READER = """
import sys, chdb
from chute.sql import quote_str
conn = chdb.connect(sys.argv[1])
structure, fmt = sys.argv[2], sys.argv[3]
conn.query(f"CREATE TABLE t ({structure}) ENGINE = MergeTree ORDER BY tuple()")
# (mariadb --batch writes NULL as the word)
nulls = ", format_tsv_null_representation = 'NULL'" if fmt == "TSV" else ""
conn.query(
    f"INSERT INTO t SELECT * FROM file('/dev/stdin', {quote_str(fmt)}, {quote_str(structure)}) "
    f"SETTINGS date_time_input_format = 'best_effort'{nulls}"
)
"""


@dataclass
class Side:
    """One kind of server: how to fill it, dump it, and name it to chute and to the engine."""

    dialect: str
    server: PostgresServer | MariaDBServer
    shape: str = "issue45"

    @property
    def url(self) -> str:
        return f"{self.dialect}://{TEST_USER}@{self.server.address}/{TEST_DATABASE}/t"

    @property
    def fmt(self) -> str:
        return "CSV" if self.dialect == "postgresql" else "TSV"

    def make_table(self, rows: int) -> None:
        if self.shape == "issue45":
            self._make_issue45(rows)
        elif self.dialect == "postgresql":
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

    def _make_issue45(self, rows: int) -> None:
        """Issue 45's P7 table: bigint key, text, numeric(14,4) (one NULL in 100), timestamptz with
        fractions, boolean."""
        if self.dialect == "postgresql":
            self.server.sql(
                "DROP TABLE IF EXISTS t;"
                "CREATE TABLE t (id bigint PRIMARY KEY, name text NOT NULL, amount numeric(14, 4), at timestamptz, "
                "flag boolean);"
                "INSERT INTO t SELECT g, 'name ' || g || ' ' || md5(g::text), "
                "CASE WHEN g % 100 = 0 THEN NULL ELSE (g % 10000000) / 10000.0 + g % 7 END, "
                "timestamptz '2024-01-01 00:00:00+00' + g * interval '1.25 second', g % 3 = 0 "
                f"FROM generate_series(1, {rows}) g;"
                "VACUUM ANALYZE t;"
            )
        else:
            self.server.sql(
                "DROP TABLE IF EXISTS t;"
                "CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT NOT NULL, amount DECIMAL(14, 4), "
                "at TIMESTAMP(6) NULL, flag BOOLEAN);"
                "SET time_zone = '+00:00';"
                "INSERT INTO t SELECT seq, CONCAT('name ', seq, ' ', MD5(seq)), "
                "IF(seq % 100 = 0, NULL, (seq % 10000000) / 10000 + seq % 7), "
                "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 1250000 MICROSECOND, seq % 3 = 0 "
                f"FROM seq_1_to_{rows};"
                "ANALYZE TABLE t;"
            )

    def cpu(self) -> float:
        """CPU seconds (user + system) of the server so far: its process and the children it reaped
        (PostgreSQL's backends, once their connection closed); MariaDB's threads are its own."""
        assert self.server.process is not None
        with open(f"/proc/{self.server.process.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

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
        scale = "14, 4" if self.shape == "issue45" else "12, 2"
        others = "qty, note, flag"
        if self.shape == "issue45":
            structure = f"id Int64, name String, amount Nullable(String), at Nullable(String), flag Nullable({flag})"
            others = "flag"
        at = temporal("at", "DateTime64(6, 'UTC')", "UTC", pg, pg)
        setup = [
            "CREATE DATABASE IF NOT EXISTS bench_read ENGINE = Memory",
            "DROP TABLE IF EXISTS bench_read.t",
            f"CREATE TABLE bench_read.t ({structure}) ENGINE = {engine}({quoted})",
        ]
        return setup, (
            f"SELECT id, name, {decimal('amount', f'Decimal({scale})', False)}, {at}, {others} FROM bench_read.t "
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


def checksum(directory: str, shape: str) -> dict[str, object]:
    code = (
        "import json, sys; from chute.engine import open_engine; "
        f"print(json.dumps(open_engine(sys.argv[1]).rows({CHECKSUM[shape]!r})[0]))"
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

    trees = dict(args.chute_tree)
    methods = ["chute", *trees, "pipe"]
    times: dict[str, list[float]] = {m: [] for m in methods}
    cpu: dict[str, list[float]] = {m: [] for m in methods}
    server_cpu: dict[str, list[float]] = {m: [] for m in methods}
    sums: dict[str, dict[str, object]] = {}
    notes: list[str] = []
    for round_ in range(args.repeat):
        for method in methods if round_ % 2 == 0 else methods[::-1]:
            directory = str(work / f"{method}-{round_}")
            before, server_before = _children_cpu(), side.cpu()
            if method != "pipe":
                command = [*client, sys.executable, "-m", "chute.cli", "load", url, "--table", "t"]
                command += ["--target", directory, "--json"]
                env = ENV if method == "chute" else {**ENV, "PYTHONPATH": trees[method]}
                started = time.perf_counter()
                out = subprocess.run(
                    command, env=env, check=True, capture_output=True, text=True, cwd=trees.get(method)
                ).stdout
                seconds = time.perf_counter() - started
                if method == "chute":
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
            time.sleep(0.3)  # the backend's exit, reaped by the server
            server_cpu[method].append(side.cpu() - server_before)
            print(
                f"  round {round_ + 1} {method}: {seconds:.2f} s, client CPU {cpu[method][-1]:.2f} s, "
                f"server CPU {server_cpu[method][-1]:.2f} s, load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            sums[method] = checksum(directory, side.shape)
            shutil.rmtree(directory)
    for method in methods:
        if sums[method] != sums["pipe"] or sums[method]["n"] != args.rows:
            raise SystemExit(f"{side.dialect}: tables differ: {method} {sums[method]} pipe {sums['pipe']}")

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
        ["method", "seconds (median)", "rows/s", "client CPU s", "server CPU s", "CPU s, both", "runs"],
        [
            [
                m,
                f"{median(ts):.2f}",
                f"{args.rows / median(ts):,.0f}",
                f"{median(cpu[m]):.2f}",
                f"{median(server_cpu[m]):.2f}",
                f"{median([c + s for c, s in zip(cpu[m], server_cpu[m], strict=True)]):.2f}",
                " ".join(f"{t:.2f}" for t in ts),
            ]
            for m, ts in times.items()
        ],
    )

    def ratios(values: dict[str, list[float]], method: str) -> list[float]:
        return [p / c for p, c in zip(values["pipe"], values[method], strict=True)]

    both = {m: [c + s for c, s in zip(cpu[m], server_cpu[m], strict=True)] for m in methods}
    summary: dict[str, dict[str, float]] = {}
    for m in methods[:-1]:
        wall, client_cpu, total_cpu = ratios(times, m), ratios(cpu, m), ratios(both, m)
        summary[m] = {"wall": median(wall), "client_cpu": median(client_cpu), "cpu_both": median(total_cpu)}
        rounds = " ".join(f"{r:.2f}" for r in wall)
        print(
            f"\nP7 {side.dialect}, pipe / {m}: wall {median(wall):.2f}x (per round {rounds}; "
            f"ratio of medians {pipe_s / median(times[m]):.2f}x), client CPU {median(client_cpu):.2f}x, "
            f"client + server CPU {median(total_cpu):.2f}x (target >= 1.0)"
        )
    print(f"tables equal: {sums['chute']}")
    print(f"chute planning: {planning:.3f} s (target <= 0.1 s)")
    streams = [n for n in notes if " stream" in n]
    print("streams chute chose, and why: " + ("; ".join(streams) or "(no note)"))
    others = [n for n in notes if n not in streams]
    if others:
        print("chute's other notes: " + "; ".join(others))
    print("\nwhat bounds it (medians of 3):")
    print_table(["step", "seconds"], [[k, f"{v:.3f}"] for k, v in bounds.items()])
    return {
        "shape": side.shape,
        "times": times,
        "client_cpu": cpu,
        "server_cpu": server_cpu,
        "ratio_pipe_over_chute": pipe_s / chute_s,
        "ratios_pipe_over": summary,
        "planning_seconds": planning,
        "bounds": bounds,
        "notes": notes,
        "checksum": sums["chute"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["postgresql", "mysql", "both"], default="both")
    parser.add_argument("--shape", choices=sorted(DEFAULT_ROWS), default="issue45", help="the table's columns")
    parser.add_argument("--rows", type=int, help="default: 2 M for issue45, 3 M for mixed")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--split-cores", action="store_true", help="the server on core 0, the clients on core 1 (taskset)"
    )
    parser.add_argument(
        "--chute-tree",
        action="append",
        default=[],
        type=lambda v: tuple(v.split("=", 1)),
        metavar="NAME=DIR",
        help="also run chute from another checkout (PYTHONPATH=DIR), as method NAME",
    )
    args = parser.parse_args()
    if args.rows is None:
        args.rows = DEFAULT_ROWS[args.shape]
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
            results[name] = bench_one(Side(name, server, args.shape), args, work, client)
        finally:
            if args.split_cores:
                os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
            shutil.rmtree(work, ignore_errors=True)
            server.remove()
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    path = save_results(
        "database-split" if args.split_cores else "database",
        {
            "rows": args.rows,
            "shape": args.shape,
            "cores": os.cpu_count(),
            "split_cores": args.split_cores,
            "results": results,
        },
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
