"""Issue 24 goals: several chute workers on one job cost no more than one, and claims are cheap.

Same run, same stream-snapshot set (gzip JSON lines), a real 18.16 server on loopback:
  - 1 worker (`chute load DIR --target URL`) against N workers started together with
    the same command, into fresh databases, interleaved rounds; each result checked:
    every row once (count = uniqExact(_source, _source_row) = input rows);
    target: N workers <= 1.1x one worker on this 2-core box (no spare cores here);
  - the claim overhead: `Claims.claim` + `release` of 1 unit and of 64 units at a time,
    in milliseconds per unit (round trips to the server included).

    python bench/bench_workers.py [--rows 1000000] [--files 20] [--workers 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_embedded import ensure_data
from bench.common import median, print_table, save_results
from chute.load.claims import Claims
from chute.sql import TableName
from chute.targets.server import ServerTarget
from tests.harness.servers import ClickHouseServer


def _run_workers(data: Path, url: str, workers: int) -> tuple[float, list[dict[str, object]]]:
    command = [sys.executable, "-m", "chute.cli", "load", str(data), "-t", "ev", "--target", url, "--json"]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(workers)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a worker failed: {err.strip()}")
        reports.append(json.loads(out))
    return time.perf_counter() - t0, reports


def _check(server: ClickHouseServer, database: str, rows: int) -> None:
    got = server.query("SELECT count(), uniqExact(_source, _source_row) FROM ev", database=database).split()
    if got != [str(rows), str(rows)]:
        raise SystemExit(f"{database}: {got} rows / distinct rows, expected {rows}: not reported")


def _claim_cost(url: str, per_call: int, calls: int) -> float:
    """Milliseconds per unit to claim and release `per_call` units at a time."""
    claims = Claims(ServerTarget(url), TableName(None, "bench"), "bench", 30)
    claims.ensure()
    t0 = time.perf_counter()
    for call in range(calls):
        units = [f"/bench/unit-{call}-{i}" for i in range(per_call)]
        won, _ = claims.claim(units)
        claims.release(won)
    return (time.perf_counter() - t0) * 1000 / (calls * per_call)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    data = ensure_data(args.rows, args.files)
    server = ClickHouseServer.create().start()
    try:
        times: dict[str, list[float]] = {"1 worker": [], f"{args.workers} workers": []}
        shares: list[list[int]] = []
        for round_ in range(args.repeat):
            for label, workers in (("1 worker", 1), (f"{args.workers} workers", args.workers)):
                database = f"w{workers}_{round_}"
                server.query(f"CREATE DATABASE {database}")
                seconds, reports = _run_workers(data, f"{server.url}/{database}", workers)
                _check(server, database, args.rows)
                times[label].append(seconds)
                if workers > 1:
                    shares.append([int(r["rows_loaded"]) for r in reports])  # type: ignore[call-overload]
                server.query(f"DROP DATABASE {database}")
        url = f"{server.url}/default"
        one_ms = _claim_cost(url, 1, 200)
        batch_ms = _claim_cost(url, 64, 20)
    finally:
        server.remove()

    one, many = median(times["1 worker"]), median(times[f"{args.workers} workers"])
    print(f"data: {args.files} gzip JSON-lines files, {args.rows:,} rows; server 18.16 on loopback; 2 cores")
    print_table(
        ["method", "median s", "runs"],
        [[k, f"{median(v):.3f}", ", ".join(f"{x:.2f}" for x in v)] for k, v in times.items()],
    )
    print(f"rows loaded per worker, each round: {shares}")
    ratio = many / one
    print(f"{args.workers} workers / 1 worker: {ratio:.3f}x (target <= 1.1)")
    print(f"claim + release: {one_ms:.2f} ms per unit one at a time; {batch_ms:.2f} ms per unit 64 at a time")
    save_results(
        "workers",
        {"times": times, "ratio": ratio, "shares": shares, "claim_ms_single": one_ms, "claim_ms_batch64": batch_ms},
    )
    return 0 if ratio <= 1.1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
