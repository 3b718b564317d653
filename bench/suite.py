"""The benchmark suite: chute against the seeds' methods, same data, same run.

Every method loads the same files into its own fresh database and table (the
same column types for all; chute's tables add its provenance columns, the seed-1
Python loader's add `_source_filename` and `_file_ts`). A method's time counts
only if its table then holds exactly the input's rows, and every table's
checksum of the input columns must match the others': a fast wrong load fails
the suite. Server methods run against a real clickhouse-server started here on
loopback; embedded methods run in this process's chDB.

Data sets (generated once, cached under bench/common.DATA_DIR):
  streams       gzip JSON lines, many small files (SEEDS.md 1): every method
  taxi-csv      gzip CSV with a header, a few files (SEEDS.md 3, 5)
  taxi-parquet  the same trips as Parquet (SEEDS.md 5)
  hits          one wide (100 columns) unsorted CSV into a monthly-partitioned table (SEEDS.md 2)

    python bench/suite.py [--sets streams,taxi-csv,taxi-parquet,hits] [--scale 1.0]
                          [--streams-rows N] [--taxi-rows N] [--hits-rows N] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import chute
from bench import baselines, gen_hits, gen_streams, gen_taxi
from bench.common import DATA_DIR, print_table, save_results
from chute.capabilities import Capabilities
from chute.engine import Engine, open_engine
from chute.schema import PROVENANCE_COLUMNS, describe
from chute.sql import quote_ident, quote_str
from tests.harness.servers import ClickHouseServer

PARALLEL = 4
"""The seeds' client-side parallelism (4 processes, parallel -j4)."""

SERVER_SETTINGS = {"date_time_input_format": "best_effort"}
"""ISO timestamps with `T` and `Z` (the streams set) need the best-effort parser on every server path."""

PY_LOADER_COLUMNS = [("_source_filename", "String"), ("_file_ts", "DateTime")]


class BenchError(RuntimeError):
    """A method produced a wrong table or failed: the suite stops rather than report it."""


# -- data sets ----------------------------------------------------------------


@dataclass
class DataSet:
    name: str
    description: str
    files: list[Path]
    rows: int
    server_format: str
    """Format name for INSERT ... FORMAT on the server (the client and raw POST paths)."""
    gzipped: bool
    columns: list[tuple[str, str]] = field(default_factory=list)
    """Input columns with types every target can store (the server's, adapted like chute does)."""
    order_by: str = "tuple()"
    partition_by: str | None = None

    @property
    def directory(self) -> Path:
        return self.files[0].parent

    @property
    def input_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files)


def _cached(directory: Path, pattern: str, files: int, make: Callable[[Path], list[Path]]) -> list[Path]:
    """Generated files, made again only when the set is missing or was left half-written."""
    marker = directory / ".complete"
    found = sorted(directory.glob(pattern))
    if marker.exists() and len(found) == files:
        return found
    shutil.rmtree(directory, ignore_errors=True)
    t0 = time.perf_counter()
    paths = sorted(make(directory))
    marker.write_text("generated\n")
    size = sum(p.stat().st_size for p in paths) / 2**20
    log(f"generated {directory.name}: {len(paths)} files, {size:.1f} MiB in {time.perf_counter() - t0:.1f} s")
    return paths


def make_sets(args: argparse.Namespace) -> list[DataSet]:
    scale: float = args.scale

    def rows(value: int) -> int:
        return max(1, round(value * scale))

    wanted = args.sets.split(",")
    sets: list[DataSet] = []
    if "streams" in wanted:
        n, k = rows(args.streams_rows), args.streams_files
        files = _cached(DATA_DIR / f"streams_{n}_{k}", "*.json.gz", k, lambda d: gen_streams.generate(d, n, k))
        sets.append(DataSet("streams", f"{k} gzip JSON-lines files", files, n, "JSONEachRow", True))
    if "taxi-csv" in wanted or "taxi-parquet" in wanted:
        n, k = rows(args.taxi_rows), args.taxi_files
        if "taxi-csv" in wanted:
            files = _cached(DATA_DIR / f"taxi_csv_{n}_{k}", "*.csv.gz", k, lambda d: gen_taxi.generate(d, n, k, "csv"))
            sets.append(DataSet("taxi-csv", f"{k} gzip CSV files with a header", files, n, "CSVWithNames", True))
        if "taxi-parquet" in wanted:
            files = _cached(
                DATA_DIR / f"taxi_parquet_{n}_{k}", "*.parquet", k, lambda d: gen_taxi.generate(d, n, k, "parquet")
            )
            sets.append(DataSet("taxi-parquet", f"{k} Parquet files", files, n, "Parquet", False))
    if "hits" in wanted:
        n = rows(args.hits_rows)
        files = _cached(DATA_DIR / f"hits_{n}_1", "*.csv", 1, lambda d: gen_hits.generate(d, n, 1))
        sets.append(
            DataSet(
                "hits",
                "1 wide CSV file (100 columns, EventTime unsorted over 400 days)",
                files,
                n,
                "CSVWithNames",
                False,
                columns=gen_hits.column_types(),
                order_by="(CounterID, EventDate, UserID, EventTime, WatchID)",
                partition_by="toYYYYMM(EventDate)",
            )
        )
    unknown = set(wanted) - {"streams", "taxi-csv", "taxi-parquet", "hits"}
    if unknown:
        raise SystemExit(f"unknown data set(s): {', '.join(sorted(unknown))}")
    return sets


def checksum_sql(columns: list[tuple[str, str]]) -> str:
    """An order-free checksum of the input columns, the same in chDB and in every server version.

    Floats are compared in millionths: clickhouse-server 18.16 parses some
    decimal text one ulp away from the nearest double (1.14 -> 1.1400000000000001),
    which is the server's parser, not a lost or changed row.
    """
    exprs = [f"toInt64(round({quote_ident(n)} * 1000000))" if "Float" in t else quote_ident(n) for n, t in columns]
    return f"sum(cityHash64({', '.join(exprs)}))"


# -- results ------------------------------------------------------------------


@dataclass
class Result:
    dataset: str
    method: str
    label: str
    target: str  # server | embedded
    chute: bool
    seconds: float = 0.0
    runs: list[float] = field(default_factory=list)
    rows: int = 0
    input_bytes: int = 0
    wire_bytes: int | None = None
    disk_bytes: int = 0
    parts: int = 0
    checksum: str = ""
    client_cpu: list[float] = field(default_factory=list)
    """CPU seconds of this process and its children (chDB, clickhouse-client, gunzip) per run."""
    server_cpu: list[float] = field(default_factory=list)
    """CPU seconds of the clickhouse-server process per run (0 for embedded methods)."""
    skipped: str = ""
    """Why the method could not run on this data set (then nothing else is set)."""
    chute_methods: dict[str, int] = field(default_factory=dict)
    """chute into a server: files per method that ran (the report's `methods`)."""
    why: list[str] = field(default_factory=list)
    """chute into a server: why each method ran (the report's `method_why`)."""

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# -- the two targets ----------------------------------------------------------


class Bench:
    """A server and an embedded database, and one fresh database per method run."""

    def __init__(self, server: ClickHouseServer, engine: Engine, embedded_path: str) -> None:
        self.server = server
        self.engine = engine
        self.embedded_path = embedded_path
        self.server_version = server.query("SELECT version()").strip()
        self.caps = Capabilities.for_version(self.server_version)
        self.server_formats = {fmt: self._server_reads(fmt) for fmt in ("JSONEachRow", "CSVWithNames", "Parquet")}
        self._runs = 0

    def _server_reads(self, fmt: str) -> bool:
        try:
            self.server.query(f"SELECT 1 FORMAT {fmt}")
        except RuntimeError as exc:
            if "Unknown format" in str(exc):
                return False
            raise
        return True

    def sql(self, target: str, statement: str) -> str:
        if target == "server":
            return self.server.query(statement)
        return self.engine.text(statement, fmt="TSV")

    def infer_columns(self, ds: DataSet) -> None:
        """The input columns as chute infers them, in types the server can store too."""
        if ds.columns:
            return
        inferred = describe(
            self.engine,
            f"file({quote_str(str(ds.files[0]))})",
            context=f"{ds.name}: inferring the schema",
            format_settings={"date_time_input_format": "best_effort", "input_format_csv_detect_header": 1},
        )
        ds.columns = [(c.name, self.caps.adapt_type(c.type)) for c in inferred]

    @contextmanager
    def fresh_table(self, target: str, ds: DataSet, method: str, extra: list[tuple[str, str]]) -> Iterator[str]:
        """A new database with table `t`; yields the database name, drops it afterwards."""
        self._runs += 1
        database = re.sub(r"[^a-z0-9]+", "_", f"b{self._runs}_{ds.name}_{method}".lower())
        columns = ", ".join(f"{quote_ident(n)} {t}" for n, t in ds.columns + extra)
        ddl = f"CREATE TABLE {database}.t ({columns}) ENGINE = MergeTree"
        if ds.partition_by:
            ddl += f" PARTITION BY {ds.partition_by}"
        ddl += f" ORDER BY {ds.order_by}"
        self.sql(target, f"CREATE DATABASE {database}")
        self.sql(target, ddl)
        try:
            yield database
        finally:
            self.sql(target, f"DROP DATABASE IF EXISTS {database}" + (" SYNC" if target == "embedded" else ""))

    def provenance_columns(self, target: str) -> list[tuple[str, str]]:
        if target == "server":
            return [(n, self.caps.adapt_type(t)) for n, t in PROVENANCE_COLUMNS]
        return list(PROVENANCE_COLUMNS)

    def inspect(self, target: str, ds: DataSet, database: str, result: Result) -> None:
        """Row count (must equal the input's), size on disk, parts, checksum of the input columns."""
        rows = int(self.sql(target, f"SELECT count() FROM {database}.t").strip())
        if rows != ds.rows:
            raise BenchError(f"{ds.name} / {result.label}: the table holds {rows:,} rows, the input {ds.rows:,}")
        stats = self.sql(
            target,
            "SELECT sum(bytes_on_disk), count() FROM system.parts "
            f"WHERE active AND database = {quote_str(database)} AND table = 't'",
        ).split()
        result.rows = rows
        result.disk_bytes = result.disk_bytes or int(stats[0])
        result.parts = int(stats[1])
        result.checksum = self.sql(target, f"SELECT {checksum_sql(ds.columns)} FROM {database}.t").strip()

    # -- methods: each loads ds into database.t and returns the bytes it sent (None: not measured)

    def http_insert(self, database: str, ds: DataSet, fmt: str) -> baselines.HttpInsert:
        return baselines.HttpInsert(
            "127.0.0.1",
            self.server.http_port,
            database,
            f"INSERT INTO t FORMAT {fmt}",
            tuple(SERVER_SETTINGS.items()),
        )

    def raw_post(self, ds: DataSet, database: str, pool: Executor | None) -> int | None:
        target = self.http_insert(database, ds, ds.server_format)
        return baselines.run_all(pool, baselines.post_file, [(target, f, ds.gzipped) for f in ds.files])

    def python_loader(self, ds: DataSet, database: str, pool: Executor | None, library: str) -> int | None:
        target = self.http_insert(database, ds, "JSONEachRow")
        return baselines.run_all(pool, baselines.python_loader_file, [(target, f, library) for f in ds.files])

    def client(self, ds: DataSet, database: str, pool: Executor | None) -> int | None:
        command = baselines.ClientCommand(
            self.server.tcp_port, database, f"INSERT INTO t FORMAT {ds.server_format}", SERVER_SETTINGS
        )
        baselines.run_all(pool, baselines.client_pipe, [(command, f, ds.gzipped) for f in ds.files])
        return None

    def split(self, method: Method, ds: DataSet, database: str, result: Result) -> tuple[float, int | None]:
        """The server on core 0, the client on core 1 (as on two machines); (seconds, wire bytes).
        The client is a process of its own that times itself after its imports."""
        pid = self.server.process.pid if self.server.process is not None else None
        if pid is None:
            raise BenchError("split cores: no server process to pin")
        if method.chute:
            args = ["chute", method.chute_method, f"{self.server.url}/{database}", str(ds.directory), method.spare]
        else:
            args = ["raw", "127.0.0.1", str(self.server.http_port), database, ds.server_format]
            args += ["1" if ds.gzipped else "0", *[str(f) for f in ds.files]]
        all_cores = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        subprocess.run(["taskset", "-a", "-p", "-c", "0", str(pid)], check=True, capture_output=True)
        try:
            done = subprocess.run(
                ["taskset", "-c", "1", sys.executable, str(SPLIT_CLIENT), *args],
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            subprocess.run(["taskset", "-a", "-p", "-c", all_cores, str(pid)], check=True, capture_output=True)
        if done.returncode != 0:
            raise BenchError(f"{ds.name} / {result.label}: {done.stderr.strip()[-500:]}")
        out = json.loads(done.stdout.strip().splitlines()[-1])
        result.client_cpu.append(float(out["cpu"]))
        result.chute_methods = dict(out.get("methods", {}))
        result.why = list(out.get("why", []))
        return float(out["seconds"]), int(out["sent"])

    def bare_engine(self, ds: DataSet, database: str) -> int | None:
        pattern = str(ds.directory / ("*" + "".join(ds.files[0].suffixes)))
        self.engine.execute(f"INSERT INTO {database}.t SELECT * FROM file({quote_str(pattern)})")
        return None

    def chute_load(self, ds: DataSet, database: str, target: str, result: Result, method: str = "auto") -> int | None:
        spec = self.embedded_path if target == "embedded" else f"{self.server.url}/{database}"
        table = f"{database}.t" if target == "embedded" else "t"
        options = chute.LoadOptions(method=method) if target == "server" else None
        report = chute.load([str(ds.directory)], table=table, target=spec, options=options)
        result.chute_methods = dict(report.methods)
        if not report.ok or report.rows_loaded != ds.rows:
            failed = [f"{f.source}: {f.error}" for f in report.files if f.state == "failed"]
            raise BenchError(f"{ds.name} / {result.label}: chute loaded {report.rows_loaded:,} rows; {failed}")
        if target == "embedded":
            result.disk_bytes = report.table_bytes_on_disk
            return None
        return report.bytes_sent


# -- the plan: which methods on which data set ----------------------------------


@dataclass(frozen=True)
class Method:
    key: str
    label: str
    target: str
    chute: bool = False
    parallel: int = 1
    processes: bool = False
    extra: str = ""  # "", "provenance" (chute's), "py" (the seed-1 loader's columns)
    chute_method: str = "auto"
    """chute's --method for a server target."""
    split: bool = False
    """Split cores: the server pinned to core 0, the client (a process of its own) to core 1."""
    spare: str = ""
    """chute's --spare-client / --spare-server (`client`, `server`), or neither."""


STREAMS_ONLY = {"py_json", "py_orjson"}

METHODS = [
    Method("bare", "bare engine INSERT SELECT file(glob)", "embedded"),
    Method(
        "chute_embedded", "chute.load -> embedded (provenance + ledger)", "embedded", chute=True, extra="provenance"
    ),
    Method("raw_post", "raw POST per file (seed 1 direct)", "server", parallel=PARALLEL),
    Method(
        "py_json", "Python loader + provenance, json (seed 1)", "server", parallel=PARALLEL, processes=True, extra="py"
    ),
    Method(
        "py_orjson",
        "Python loader + provenance, orjson (seed 1)",
        "server",
        parallel=PARALLEL,
        processes=True,
        extra="py",
    ),
    Method("client_seq", "gunzip | clickhouse-client, sequential (seed 5)", "server"),
    Method("client_par", "gunzip | clickhouse-client, 4 parallel (seed 5)", "server", parallel=PARALLEL),
    Method(
        "chute_server", "chute.load -> server, auto (provenance + ledger)", "server", chute=True, extra="provenance"
    ),
    Method(
        "chute_server_parse",
        "chute.load -> server, server-parse (provenance + ledger)",
        "server",
        chute=True,
        extra="provenance",
        chute_method="server-parse",
    ),
    Method(
        "chute_client_convert",
        "chute.load -> server, client-convert (provenance + ledger)",
        "server",
        chute=True,
        extra="provenance",
        chute_method="client-convert",
    ),
    Method("split_raw_post", "split cores: raw POST per file, 4 parallel", "server", split=True),
    Method(
        "split_server_parse",
        "split cores: chute -> server, server-parse",
        "server",
        chute=True,
        extra="provenance",
        chute_method="server-parse",
        split=True,
    ),
    Method(
        "split_auto",
        "split cores: chute -> server, auto",
        "server",
        chute=True,
        extra="provenance",
        split=True,
    ),
    Method(
        "split_verified",
        "split cores: chute -> server, server-parse checked (--spare-client)",
        "server",
        chute=True,
        extra="provenance",
        spare="client",
        split=True,
    ),
    Method(
        "split_client_convert",
        "split cores: chute -> server, client-convert",
        "server",
        chute=True,
        extra="provenance",
        chute_method="client-convert",
        split=True,
    ),
]
SPLIT_CLIENT = Path(__file__).resolve().parent / "split_client.py"


def label_for(method: Method, ds: DataSet) -> str:
    """The method's name as it applies to this data set (how many in parallel, whether gunzip is in the pipe)."""
    label = method.label
    if not ds.gzipped:
        label = label.replace("gunzip | clickhouse-client", "clickhouse-client < file")
    if method.key == "raw_post":
        body = "gzip " if ds.gzipped else ""
        label = (
            f"raw {body}POST per file, {min(PARALLEL, len(ds.files))} parallel (seed 1 direct)"
            if len(ds.files) > 1
            else f"raw {body}POST, 1 connection (seed 2 serial HTTP)"
        )
    return label


def applicable(bench: Bench, method: Method, ds: DataSet) -> str | None:
    """None: not planned for this set; "": runs; else why it cannot run here (shown as n/a)."""
    if method.key in STREAMS_ONLY and ds.name != "streams":
        return None  # the seed-1 Python loader parses JSON lines only
    if method.key == "client_par" and len(ds.files) < 2:
        return None
    if method.split and ((os.cpu_count() or 1) < 2 or shutil.which("taskset") is None):
        return "needs 2 cores and taskset"
    if method.target == "server" and not method.chute and not bench.server_formats.get(ds.server_format, True):
        return f"server {bench.server_version} cannot read {ds.server_format}"
    return ""


@contextmanager
def client_pool(method: Method, ds: DataSet) -> Iterator[Executor | None]:
    """The method's client-side parallelism, started (and warmed) before the clock runs."""
    if method.parallel < 2 or len(ds.files) < 2:
        yield None
        return
    workers = min(method.parallel, len(ds.files))
    pool: Executor
    if method.processes:
        # Fresh interpreters, as the seed's processes (forking this process would copy chDB's threads).
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        library = "orjson" if method.key == "py_orjson" else "json"
        list(pool.map(baselines.warm_up, [library] * workers))
    else:
        pool = ThreadPoolExecutor(workers)
    try:
        yield pool
    finally:
        pool.shutdown()


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _server_cpu(bench: Bench) -> float:
    """utime + stime of the server process, from /proc (Linux)."""
    process = bench.server.process
    if process is None:
        return 0.0
    try:
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(bench: Bench, method: Method, ds: DataSet, result: Result) -> None:
    """One timed load into a fresh table, then the checks; appends the time to `result.runs`."""
    extra = {"": [], "provenance": bench.provenance_columns(method.target), "py": PY_LOADER_COLUMNS}[method.extra]
    with client_pool(method, ds) as pool, bench.fresh_table(method.target, ds, method.key, extra) as database:
        result.disk_bytes = 0
        cpu0, server0 = _own_cpu(), _server_cpu(bench)
        t0 = time.perf_counter()
        seconds: float | None = None
        if method.split:
            seconds, wire = bench.split(method, ds, database, result)
        elif method.key == "bare":
            wire = bench.bare_engine(ds, database)
        elif method.chute:
            wire = bench.chute_load(ds, database, method.target, result, method.chute_method)
        elif method.key == "raw_post":
            wire = bench.raw_post(ds, database, pool)
        elif method.key in STREAMS_ONLY:
            wire = bench.python_loader(ds, database, pool, method.key.removeprefix("py_"))
        else:
            wire = bench.client(ds, database, pool)
        if seconds is None:
            seconds = time.perf_counter() - t0
            result.client_cpu.append(_own_cpu() - cpu0)
        result.server_cpu.append(_server_cpu(bench) - server0)
        bench.inspect(method.target, ds, database, result)
    result.runs.append(seconds)
    result.wire_bytes = wire
    result.seconds = statistics.median(result.runs)


def run_set(bench: Bench, ds: DataSet, repeat: int) -> list[Result]:
    """Every planned method on one data set; rounds interleave methods so drift hits all alike."""
    bench.infer_columns(ds)
    planned: list[tuple[Method, Result]] = []
    for method in METHODS:
        why = applicable(bench, method, ds)
        if why is not None:
            result = Result(ds.name, method.key, label_for(method, ds), method.target, method.chute, skipped=why)
            result.input_bytes = ds.input_bytes
            planned.append((method, result))
    for round_no in range(1, repeat + 1):
        for method, result in planned:
            if not result.skipped:
                run_once(bench, method, ds, result)
                log(f"{ds.name} [{round_no}/{repeat}] {result.label}: {result.runs[-1]:.2f} s")
    results = [r for _, r in planned]
    check_checksums(ds, results)
    return results


# -- output ---------------------------------------------------------------------


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.1f}"


def fastest_baseline(results: list[Result]) -> Result | None:
    done = [r for r in results if not r.chute and not r.skipped]
    return min(done, key=lambda r: r.seconds) if done else None


def print_set(ds: DataSet, results: list[Result]) -> None:
    runs = max((len(r.runs) for r in results), default=0)
    print(
        f"\n== {ds.name}: {ds.description}, {ds.rows:,} rows, {ds.input_bytes / 2**20:.1f} MiB in; "
        f"median of {runs} run{'s' if runs != 1 else ''}"
    )
    best = fastest_baseline(results)
    rows = []
    for r in results:
        if r.skipped:
            rows.append(["  " + r.label, "n/a", "", "", "", "", "", "", "", "", r.skipped])
            continue
        ratio = f"{r.seconds / best.seconds:.2f}" if best else "-"
        rows.append(
            [
                ("* " if r.chute else "  ") + r.label,
                f"{r.seconds:.2f}",
                f"{r.rows_per_s:,.0f}",
                f"{r.input_bytes / 2**20 / r.seconds:.1f}",
                _mb(r.wire_bytes),
                _mb(r.disk_bytes),
                str(r.parts),
                f"{statistics.median(r.client_cpu):.2f}",
                f"{statistics.median(r.server_cpu):.2f}",
                ratio,
                " ".join(f"{t:.2f}" for t in r.runs),
            ]
        )
    headers = [
        "method",
        "seconds",
        "rows/s",
        "MiB/s in",
        "wire MiB",
        "disk MiB",
        "parts",
        "client cpu s",
        "server cpu s",
        "x fastest baseline",
        "runs (s)",
    ]
    print_table(headers, rows)
    if best:
        print(f"fastest baseline: {best.label}; * = chute; wire MiB '-' = not measured (native TCP) or local")


def check_checksums(ds: DataSet, results: list[Result]) -> None:
    """Every method must have stored the same values; a fast wrong load is not a result."""
    sums = {r.checksum for r in results if not r.skipped}
    if len(sums) > 1:
        detail = "; ".join(f"{r.label}: {r.checksum}" for r in results if not r.skipped)
        raise BenchError(f"{ds.name}: the tables hold different values: {detail}")


REMOTE = {
    "auto": ("chute_server", "split_auto"),
    "server-parse": ("chute_server_parse", "split_server_parse"),
    "client-convert": ("chute_client_convert", "split_client_convert"),
}
"""chute's remote methods: (shared-cores row, split-cores row)."""


def goals(by_set: dict[str, list[Result]]) -> dict[str, Any]:
    """P1, P2, P3 as ratios measured in this run (None where a set or method did not run)."""

    def get(ds: str, key: str) -> Result | None:
        for r in by_set.get(ds, []):
            if r.method == key and not r.skipped:
                return r
        return None

    def ratio(a: Result | None, b: Result | None) -> float | None:
        return a.seconds / b.seconds if a and b else None

    out: dict[str, Any] = {}
    for ds in by_set:
        bare, emb, srv, raw = (get(ds, k) for k in ("bare", "chute_embedded", "chute_server", "raw_post"))
        conv = get(ds, "chute_client_convert")
        split_raw, orj = get(ds, "split_raw_post"), get(ds, "py_orjson")
        entry: dict[str, Any] = {
            "P1_chute_embedded_over_bare": ratio(emb, bare),
            "P3_chute_server_over_raw_post": ratio(srv, raw),
            # (the wire goal is client-convert's: auto may send the files as they are)
            "P3_wire_over_input_bytes": (conv.wire_bytes or 0) / conv.input_bytes if conv else None,
        }
        if orj and srv:
            entry["P2_orjson_loader_over_chute_server"] = orj.seconds / srv.seconds
        methods: dict[str, dict[str, Any]] = {}
        for name, (shared_key, split_key) in REMOTE.items():
            shared, split = get(ds, shared_key), get(ds, split_key) if split_key else None
            if shared is None:
                continue
            methods[name] = {
                "ran": shared.chute_methods,
                "seconds": shared.seconds,
                "client_cpu": statistics.median(shared.client_cpu),
                "server_cpu": statistics.median(shared.server_cpu),
                "wire_bytes": shared.wire_bytes,
                "P3_over_raw_post": ratio(shared, raw),
                "P3_split_over_raw_post": ratio(split, split_raw),
                "split_seconds": split.seconds if split else None,
                "P2_orjson_over_it": ratio(orj, shared),
                "server_cpu_over_raw_post": statistics.median(shared.server_cpu) / statistics.median(raw.server_cpu)
                if raw and statistics.median(raw.server_cpu)
                else None,
                "wire_over_input_bytes": (shared.wire_bytes or 0) / shared.input_bytes,
            }
        entry["remote_methods"] = methods
        out[ds] = entry
    return out


def _goal(label: str, value: float | None, target: float, at_least: bool, unit: str = "") -> str:
    if value is None:
        return f"{label} = n/a"
    met = value >= target if at_least else value <= target
    sign = ">=" if at_least else "<="
    return f"{label} = {value:.3f}{unit} (target {sign} {target:g}{unit}) {'MET' if met else 'MISSED'}"


def print_goals(g: dict[str, Any]) -> None:
    print("\n== performance goals (ratios measured in this run)")
    s = g.get("streams")
    if s:
        print(_goal("P1 streams: chute embedded / bare engine", s["P1_chute_embedded_over_bare"], 1.0, False))
        print(
            _goal(
                "P2 streams: orjson provenance loader / chute server (auto)",
                s.get("P2_orjson_loader_over_chute_server"),
                5.0,
                True,
                "x",
            )
        )
        print(
            _goal(
                "P3 streams: chute server (auto) / raw gzip POST 4 parallel",
                s["P3_chute_server_over_raw_post"],
                1.0,
                False,
            )
        )
        print(
            _goal(
                "P3 streams: chute client-convert bytes on the wire / gzip input bytes",
                s["P3_wire_over_input_bytes"],
                0.4,
                False,
            )
        )
    for name, e in g.items():
        if name != "streams":
            print(f"   {name}:")
            print("      " + _goal("P1 chute embedded / bare engine", e["P1_chute_embedded_over_bare"], 1.0, False))
            print("      " + _goal("chute server / raw POST", e["P3_chute_server_over_raw_post"], 1.0, False))
        for method, m in e.get("remote_methods", {}).items():
            wire = "-" if m["wire_bytes"] is None else f"{m['wire_bytes'] / 2**20:.1f} MiB"
            ran = ", ".join(f"{k} {v}" for k, v in m["ran"].items()) or "-"
            print(
                f"   {name} / {method} (ran: {ran}): {m['seconds']:.2f} s, client cpu {m['client_cpu']:.2f} s, "
                f"server cpu {m['server_cpu']:.2f} s, wire {wire}"
            )
            print("      " + _goal("P3 shared cores / raw POST", m["P3_over_raw_post"], 1.0, False))
            print("      " + _goal("P3 split cores / raw POST split", m["P3_split_over_raw_post"], 1.0, False))
            if name == "streams":
                print("      " + _goal("P2 orjson loader / it", m["P2_orjson_over_it"], 5.0, True, "x"))
            if method == "client-convert":
                print("      " + _goal("server cpu / raw POST's", m["server_cpu_over_raw_post"], 0.55, False))
                print("      " + _goal("wire bytes / input bytes", m["wire_over_input_bytes"], 0.4, False))


# -- main -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="streams,taxi-csv,taxi-parquet,hits", help="comma-separated data sets")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every set's row count")
    parser.add_argument("--streams-rows", type=int, default=1_000_000)
    parser.add_argument("--streams-files", type=int, default=20)
    parser.add_argument("--taxi-rows", type=int, default=2_000_000)
    parser.add_argument("--taxi-files", type=int, default=4)
    parser.add_argument("--hits-rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per method; the median is reported")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    sets = make_sets(args)
    workdir = Path(tempfile.mkdtemp(prefix="chute-suite-"))
    server = ClickHouseServer.create(workdir / "server")
    engine: Engine | None = None
    try:
        server.start()
        embedded_path = str(workdir / "embedded")
        engine = open_engine(embedded_path)
        bench = Bench(server, engine, embedded_path)
        log(f"clickhouse-server {bench.server_version} on {server.url} (tcp {server.tcp_port}); chDB in process")
        by_set: dict[str, list[Result]] = {}
        for ds in sets:
            by_set[ds.name] = run_set(bench, ds, args.repeat)
    except BenchError as exc:
        print(f"\nBENCH FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if engine is not None:
            engine.close()
        server.remove()
        shutil.rmtree(workdir, ignore_errors=True)

    load_after = os.getloadavg()[0]
    print(
        f"\nmachine: {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"clickhouse-server {bench.server_version} on loopback; chute and the bare engine in chDB; "
        f"1-min load average {load_before:.1f} before, {load_after:.1f} after (other work skews times)"
    )
    for ds in sets:
        print_set(ds, by_set[ds.name])
    g = goals(by_set)
    print_goals(g)
    path = save_results(
        "suite",
        {
            "cores": os.cpu_count(),
            "server_version": bench.server_version,
            "seconds_total": time.perf_counter() - started,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "repeat": args.repeat,
            "sets": {
                ds.name: {
                    "description": ds.description,
                    "rows": ds.rows,
                    "files": len(ds.files),
                    "input_bytes": ds.input_bytes,
                    "columns": ds.columns,
                    "results": [asdict(r) | {"rows_per_s": r.rows_per_s} for r in by_set[ds.name]],
                }
                for ds in sets
            },
            "goals": g,
        },
    )
    print(f"\nresults: {path}  (suite took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
