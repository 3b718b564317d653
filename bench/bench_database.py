"""Issue 8, P7: a PostgreSQL table loaded into the embedded target, chute vs a COPY pipe.

A PostgreSQL server (tests/harness/extservers.py; `scripts/install-source-servers postgres`)
gets a table of `--rows` rows made by generate_series (bigint key, two text
columns, numeric(12,2), timestamptz, integer). Then, in interleaved rounds, each
a fresh embedded directory and a separate process (both pay Python and chDB
start-up):

  - chute:  `python -m chute.cli load postgresql://... --table t`
            (ranges of the primary key, read by the engine's postgresql(),
            provenance and ledger included)
  - pipe:   seed 5's pipe: `psql -c "COPY t TO STDOUT (FORMAT csv)" | python -c
            '<chDB: INSERT INTO t SELECT * FROM file("/dev/stdin", CSV, structure)>'`
            into a table of the same column types (chDB, the engine chute embeds:
            clickhouse-local is not installed here)

Both tables must hold the same rows (count and a checksum of every column).
Then what bounds it, in the same run: the server's COPY alone (to /dev/null),
the engine reading the table through postgresql() to Null (one stream, and 2
and 4 key ranges at once), and chute's planning (the pass over the key column).

    python bench/bench_database.py [--rows 3000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, print_table, save_results
from chute.engine import open_engine
from chute.sources import SourceOptions
from chute.sources.database import DatabaseSource
from tests.harness.extservers import TEST_DATABASE, TEST_PASSWORD, TEST_USER, PostgresServer

CHECKSUM = (
    "SELECT count() AS n, sum(id) AS ids, toString(sum(amount)) AS amount, "
    "sum(toUnixTimestamp64Micro(at)) AS at, sum(qty) AS qty, sum(cityHash64(name, note)) AS text FROM t"
)

PIPE_READER = """
import sys, chdb
from chute.sql import quote_str
conn = chdb.connect(sys.argv[1])
structure = sys.argv[2]
conn.query(f"CREATE TABLE t ({structure}) ENGINE = MergeTree ORDER BY tuple()")
conn.query(
    f"INSERT INTO t SELECT * FROM file('/dev/stdin', 'CSV', {quote_str(structure)}) "
    "SETTINGS date_time_input_format = 'best_effort'"
)
"""


def make_table(server: PostgresServer, rows: int) -> None:
    server.sql(
        "DROP TABLE IF EXISTS t;"
        "CREATE TABLE t (id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12, 2), at timestamptz, "
        "qty integer, note text);"
        "INSERT INTO t SELECT g, 'name ' || g, (g % 100000) / 100.0, "
        "timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', g % 1000, md5(g::text) "
        f"FROM generate_series(1, {rows}) g;"
        "VACUUM ANALYZE t;"
    )


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
    import json

    return dict(json.loads(out.stdout))


def engine_seconds(sql: str) -> float:
    engine = open_engine(":memory:")
    started = time.perf_counter()
    engine.execute(sql)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not PostgresServer.available():
        print(f"bench_database: {PostgresServer.missing()}", file=sys.stderr)
        return 1

    server = PostgresServer.create().start()
    work = Path(tempfile.mkdtemp(prefix="chute-bench-db-"))
    try:
        t0 = time.perf_counter()
        make_table(server, args.rows)
        print(f"{args.rows:,} rows in PostgreSQL in {time.perf_counter() - t0:.1f} s; {os.cpu_count()} cores")
        url = f"postgresql://{TEST_USER}@{server.address}/{TEST_DATABASE}/t"
        env = {**os.environ, "PGPASSWORD": TEST_PASSWORD, "PGTZ": "UTC"}
        psql = [str(server.bin / "psql"), "-X", "-q", "-h", "127.0.0.1", "-p", str(server.port), "-U", TEST_USER]
        copy = [*psql, "-d", TEST_DATABASE, "-c", "COPY t TO STDOUT (FORMAT csv)"]

        # The pipe's table gets chute's column types (from a first chute load).
        first = str(work / "types")
        run([sys.executable, "-m", "chute.cli", "load", url, "--table", "t", "--target", first, "--quiet"], env=env)
        columns = open_engine(first).rows("SELECT name, type FROM system.columns WHERE table = 't'")
        open_engine(":memory:")
        structure = ", ".join(f"`{c['name']}` {c['type']}" for c in columns if not c["name"].startswith("_"))
        shutil.rmtree(first)

        times: dict[str, list[float]] = {"chute": [], "pipe": []}
        sums: dict[str, dict[str, object]] = {}
        for round_ in range(args.repeat):
            for method in ("chute", "pipe") if round_ % 2 == 0 else ("pipe", "chute"):
                directory = str(work / f"{method}-{round_}")
                if method == "chute":
                    command = [sys.executable, "-m", "chute.cli", "load", url, "--table", "t", "--target", directory]
                    seconds = run([*command, "--quiet"], env=env)
                else:
                    reader = f'{shlex.join(copy)} | {shlex.quote(sys.executable)} -c "$READER" {directory} "$STRUCTURE"'
                    seconds = run(
                        ["bash", "-o", "pipefail", "-c", reader],
                        env={**env, "READER": PIPE_READER, "STRUCTURE": structure},
                    )
                times[method].append(seconds)
                sums[method] = checksum(directory)
                shutil.rmtree(directory)
        if sums["chute"] != sums["pipe"] or sums["chute"]["n"] != args.rows:
            print(f"tables differ: chute {sums['chute']} pipe {sums['pipe']}", file=sys.stderr)
            return 1

        # What bounds it.
        function = f"postgresql('{server.address}', '{TEST_DATABASE}', 't', '{TEST_USER}', '{TEST_PASSWORD}', 'public')"
        os.environ["PGOPTIONS"] = "-c TimeZone=UTC -c DateStyle=ISO -c bytea_output=hex -c extra_float_digits=3"
        bounds = {
            "server COPY csv to /dev/null": median([run(copy, env=env, stdout=subprocess.DEVNULL) for _ in range(3)]),
        }
        for parts in (1, 2, 4):
            step = -(-args.rows // parts)
            union = " UNION ALL ".join(
                f"SELECT * FROM {function} WHERE id > {i * step} AND id <= {(i + 1) * step}" for i in range(parts)
            )
            label = f"engine postgresql() to Null, {parts} stream{'s' if parts > 1 else ''}"
            bounds[label] = median([engine_seconds(f"SELECT * FROM ({union}) FORMAT Null") for _ in range(3)])
        source = DatabaseSource([url.replace(f"{TEST_USER}@", f"{TEST_USER}:{TEST_PASSWORD}@")], SourceOptions())
        bounds["chute planning (units())"] = median([_timed(source.units) for _ in range(3)])
        bounds["python + chDB start-up"] = median(
            [run([sys.executable, "-c", "import chdb; chdb.connect(':memory:').query('SELECT 1')"]) for _ in range(3)]
        )

        chute_s, pipe_s = median(times["chute"]), median(times["pipe"])
        print()
        print_table(
            ["method", "seconds (median)", "rows/s", "runs"],
            [
                [m, f"{median(ts):.2f}", f"{args.rows / median(ts):,.0f}", " ".join(f"{t:.2f}" for t in ts)]
                for m, ts in times.items()
            ],
        )
        print(f"\nP7: pipe / chute = {pipe_s / chute_s:.2f}x (target >= 2x); both tables equal: {sums['chute']}")
        print("\nwhat bounds it (medians of 3):")
        print_table(["step", "seconds"], [[k, f"{v:.2f}"] for k, v in bounds.items()])
        path = save_results(
            "database",
            {
                "rows": args.rows,
                "cores": os.cpu_count(),
                "times": times,
                "ratio_pipe_over_chute": pipe_s / chute_s,
                "bounds": bounds,
                "checksum": sums["chute"],
            },
        )
        print(f"\nresults: {path}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
        server.remove()


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
