"""Issue 47 goals: `chute copy` between two 18.16 servers on loopback.

A table of 2 M rows over 24 monthly partitions (String, Array(String), UInt32,
DateTime, Nullable(Int64), Float64, UInt64: the types whose checksum is
measured equal across versions) is copied from one server to the other:

  - baseline: a hand-written `INSERT INTO dst SELECT * FROM remote(src) WHERE
    <partition>` per partition, run serially on the destination (no check);
  - chute copy, auto (the destination pulls through url()), with its
    verification (row count and checksum of every partition on both sides),
    ledger and per-partition stages; goal <= 1.1x the baseline;
  - chute copy --method stream (chute passes the Native stream through);
    its bytes sent to the destination against the source's own compressed
    Native of the same partitions (`compress=1`); goal <= 1.05x.

Runs are interleaved; each copies into a fresh table. CPU seconds of both
servers and of this process are printed too: on a busy machine they show the
work each method costs, whatever the wall clock says.

    python bench/bench_copy.py [--rows 2000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, print_table, save_results
from chute.copy import CopyOptions, CopyReport, copy
from chute.targets import open_target
from chute.targets.server import ServerTarget
from tests.harness.servers import ClickHouseServer

COLUMNS = (
    "id UInt64, ts DateTime, user_id UInt32, url String, tags Array(String), "
    "referrer Nullable(Int64), amount Float64, agent String"
)
ENGINE = "ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, id)"
ROWS = (
    "SELECT number, toDateTime('2023-01-01 00:00:00') + intDiv(number * 63072000, {n}), "
    "toUInt32(cityHash64(number) % 1000000), concat('https://example.org/', toString(number % 50000), '/page'), "
    "[toString(number % 10), toString(number % 7)], if(number % 4 = 0, NULL, toInt64(number % 9999)), "
    "(number % 100000) / 7, concat('Mozilla/5.0 agent ', toString(number % 300)) FROM numbers({n})"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    src, dst = ClickHouseServer.create(), ClickHouseServer.create()
    src.launch()
    dst.launch()
    try:
        src.wait_ready()
        dst.wait_ready()
        return _run(src, dst, args)
    finally:
        src.remove()
        dst.remove()


def _run(src: ClickHouseServer, dst: ClickHouseServer, args: argparse.Namespace) -> int:
    src.query("CREATE DATABASE bench")
    dst.query("CREATE DATABASE bench")
    src.query(
        f"CREATE TABLE bench.events ({COLUMNS}) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, id)"
    )
    t0 = time.perf_counter()
    src.query("INSERT INTO bench.events " + ROWS.format(n=args.rows))
    src.query("OPTIMIZE TABLE bench.events FINAL")
    partitions = src.query(
        "SELECT partition FROM system.parts WHERE active AND table = 'events' GROUP BY partition ORDER BY partition"
    ).split()
    size = int(src.query("SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND table = 'events'"))
    print(
        f"source: {args.rows:,} rows, {len(partitions)} monthly partitions, {size / 2**20:.0f} MiB on disk "
        f"(made in {time.perf_counter() - t0:.1f} s); {os.cpu_count()} cores; servers 18.16 on loopback"
    )
    source, dest = f"{src.url}/bench", f"{dst.url}/bench"
    check = "SELECT count(), sum(cityHash64(*)) FROM bench.{t} FORMAT TSV"
    expected = src.query(check.format(t="events"))
    runs = {"n": 0}
    reports: dict[str, CopyReport] = {}

    def fresh() -> str:
        runs["n"] += 1
        return f"copy{runs['n']}"

    def baseline() -> None:
        name = fresh()
        dst.query(
            f"CREATE TABLE bench.{name} ({COLUMNS}) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, id)"
        )
        for p in partitions:
            dst.query(
                f"INSERT INTO bench.{name} SELECT * FROM remote('127.0.0.1:{src.tcp_port}', bench, events) "
                f"WHERE toYYYYMM(ts) = {p}"
            )
        assert dst.query(check.format(t=name)) == expected

    def chute_copy(method: str) -> Callable[[], None]:
        def run() -> None:
            name = fresh()
            report = copy("events", source, dest, CopyOptions(dest_table=name, method=method))
            assert report.ok and len(report.copied) == len(partitions), report.failed
            assert dst.query(check.format(t=name)) == expected
            reports[method] = report

        return run

    methods = {
        "hand-written: INSERT ... SELECT FROM remote() per partition, serially": baseline,
        "chute copy (auto: pull), verified": chute_copy("auto"),
        "chute copy --method stream, verified": chute_copy("stream"),
    }
    walls: dict[str, list[float]] = {k: [] for k in methods}
    cpus: dict[str, list[float]] = {k: [] for k in methods}
    for _ in range(args.repeat):
        for name, fn in methods.items():
            c, t = _servers_cpu(src, dst) + _own_cpu(), time.perf_counter()
            fn()
            walls[name].append(time.perf_counter() - t)
            cpus[name].append(_servers_cpu(src, dst) + _own_cpu() - c)
    base = median(walls[next(iter(methods))])
    print_table(
        ["method", "seconds", "x baseline", "CPU s (servers + chute)", "rows/s", "runs"],
        [
            [name, f"{median(w):.3f}", f"{median(w) / base:.2f}", f"{median(cpus[name]):.2f}",
             f"{args.rows / median(w):,.0f}", " ".join(f"{x:.2f}" for x in w)]
            for name, w in walls.items()
        ],
    )  # fmt: skip
    auto = reports["auto"]
    print(f"auto ran {auto.method}: {auto.method_reason}")
    native = _source_native_bytes(source, partitions)
    wire = reports["stream"].wire_bytes
    ratio_time = median(walls["chute copy (auto: pull), verified"]) / base
    print(f"chute copy (verified) / hand-written remote() per partition = {ratio_time:.2f}x (goal <= 1.1x)")
    print(
        f"stream: {wire / 2**20:.1f} MiB sent to the destination; the source's compressed Native (compress=1) of "
        f"the same partitions {native / 2**20:.1f} MiB: {wire / native:.2f}x (goal <= 1.05x)"
    )
    save_results(
        "copy",
        {
            "rows": args.rows,
            "partitions": len(partitions),
            "seconds": dict(walls),
            "cpu_seconds": dict(cpus),
            "ratio_time": ratio_time,
            "wire_bytes": wire,
            "source_native_bytes": native,
            "method_auto": auto.method,
        },
    )
    return 0


def _servers_cpu(*nodes: ClickHouseServer) -> float:
    """CPU seconds (user + system) the servers used so far: the work, whatever else runs on the machine."""
    total = 0.0
    for node in nodes:
        assert node.process is not None
        fields = Path(f"/proc/{node.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _source_native_bytes(source: str, partitions: list[str]) -> int:
    """What the source sends of each partition as compressed Native (its own `compress=1` answer)."""
    target = open_target(source)
    assert isinstance(target, ServerTarget)
    total = 0
    for p in partitions:
        sql = f"SELECT * FROM events WHERE toYYYYMM(ts) = {p} FORMAT Native"
        got = sum(len(b) for b in target.client.stream(sql, {"compress": 1}))
        assert got > 0, f"partition {p}: 18.16 answered nothing compressed (under 1 MiB uncompressed)"
        total += got
    return total


if __name__ == "__main__":
    raise SystemExit(main())
