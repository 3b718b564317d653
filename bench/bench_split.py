"""P3 alone: chute into clickhouse-server 18.16 on split cores against the raw gzip POST x4.

The server is pinned to core 0 (`taskset -a -p -c 0`), each client is a process of its own on
core 1 (`bench/split_client.py`), as on two machines. Only the split-core methods of the suite
run, in interleaved rounds (raw, auto, verified, client-convert, server-parse, raw, ...), each
into a fresh table of one server; every table must hold the input's rows and the same checksum.
Each chute method's time is divided by the raw POST's of the same round, and the median of
those ratios is printed beside the medians of wall, client CPU and server CPU seconds (the
machine is shared: CPU seconds say what a method costs when wall times drift).

    python bench/bench_split.py [--repeat 5] [--methods split_auto,split_verified,...] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table, save_results
from bench.suite import METHODS, Bench, BenchError, Result, check_checksums, label_for, make_sets, run_once
from chute.engine import open_engine
from tests.harness.servers import ClickHouseServer

RAW = "split_raw_post"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--streams-rows", type=int, default=1_000_000)
    parser.add_argument("--streams-files", type=int, default=20)
    split = [m.key for m in METHODS if m.split and m.key != RAW]
    parser.add_argument("--methods", default=",".join(split), help=f"of {', '.join(split)}")
    args = parser.parse_args(argv)
    args.sets = "streams"
    wanted = [RAW, *[k for k in args.methods.split(",") if k]]
    methods = [next(m for m in METHODS if m.key == k) for k in wanted]
    if (os.cpu_count() or 1) < 2 or shutil.which("taskset") is None:
        raise SystemExit("split cores need 2 cores and taskset")
    (ds,) = make_sets(args)
    workdir = Path(tempfile.mkdtemp(prefix="chute-split-"))
    server = ClickHouseServer.create(workdir / "server")
    engine = None
    load_before = os.getloadavg()[0]
    results = {m.key: Result(ds.name, m.key, label_for(m, ds), m.target, m.chute) for m in methods}
    ratios: dict[str, list[float]] = {m.key: [] for m in methods}
    try:
        server.start()
        engine = open_engine(str(workdir / "embedded"))
        bench = Bench(server, engine, str(workdir / "embedded"))
        bench.infer_columns(ds)
        print(f"[split] columns: {ds.columns}", file=sys.stderr)
        for round_no in range(1, args.repeat + 1):
            for method in methods:
                result = results[method.key]
                result.input_bytes = ds.input_bytes
                run_once(bench, method, ds, result)
                ratios[method.key].append(result.runs[-1] / results[RAW].runs[-1])
                print(
                    f"[split {round_no}/{args.repeat}] {method.key}: {result.runs[-1]:.2f} s "
                    f"(x{ratios[method.key][-1]:.2f}), client cpu {result.client_cpu[-1]:.2f}, "
                    f"server cpu {result.server_cpu[-1]:.2f}, load {os.getloadavg()[0]:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
        check_checksums(ds, list(results.values()))
    except BenchError as exc:
        print(f"\nBENCH FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if engine is not None:
            engine.close()
        server.remove()
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\n{ds.name}: {ds.rows:,} rows, {len(ds.files)} files, {ds.input_bytes / 2**20:.1f} MiB; "
        f"{args.repeat} interleaved rounds; load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    rows = []
    for key, r in results.items():
        rows.append(
            [
                r.label,
                f"{statistics.median(r.runs):.2f}",
                f"{statistics.median(ratios[key]):.3f}",
                " ".join(f"{x:.2f}" for x in ratios[key]),
                f"{statistics.median(r.client_cpu):.2f}",
                f"{statistics.median(r.server_cpu):.2f}",
                ", ".join(f"{k} {v}" for k, v in r.chute_methods.items()) or "-",
            ]
        )
    headers = ["method", "wall s", "x raw POST (median)", "x raw POST per round", "client cpu s", "server cpu s", "ran"]
    print_table(headers, rows)
    for key, r in results.items():
        for why in r.why:
            print(f"{key}: {why}")
    save_results(
        "split",
        {
            "rows": ds.rows,
            "repeat": args.repeat,
            "results": {
                k: {
                    "runs": r.runs,
                    "ratios": ratios[k],
                    "client_cpu": r.client_cpu,
                    "server_cpu": r.server_cpu,
                    "ran": r.chute_methods,
                    "why": r.why,
                }
                for k, r in results.items()
            },
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
