"""Issue 5 goals: error capture costs nothing on clean data, little on dirty data.

Same run, same 1 M-row stream-snapshot set (gzip JSON lines, 20 files):
  - clean data, default (error capture on) vs --strict: target <= 1.03x;
  - 0.1 % bad rows spread over every file, default vs clean --strict: target <= 2x.
Bad rows are made by the engine (every 1000th line gets a text viewer_count).

    python bench/bench_rejects.py [--rows 1000000] [--files 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import chute
from bench.bench_embedded import ensure_data
from bench.common import DATA_DIR, median, print_table, save_results, timed
from chute.engine import open_engine
from chute.schema import create_table_sql, describe, with_provenance
from chute.sql import TableName, quote_str


def make_dirty(clean: Path, every: int) -> Path:
    """A copy of the set where every `every`-th line has text in an integer field."""
    dirty = DATA_DIR / f"{clean.name}_dirty_{every}"
    if dirty.exists() and len(list(dirty.glob("*.json.gz"))) == len(list(clean.glob("*.json.gz"))):
        return dirty
    shutil.rmtree(dirty, ignore_errors=True)
    dirty.mkdir(parents=True)
    engine = open_engine(str(Path(tempfile.mkdtemp(prefix="chute-dirty-")) / "db"))
    for src in sorted(clean.glob("*.json.gz")):
        dst = dirty / src.name
        engine.execute(
            f"INSERT INTO FUNCTION file({quote_str(str(dst))}, 'LineAsString', 'line String', 'gzip') "
            f"SELECT if(_row_number % {every} = {every - 1}, "
            'replaceRegexpOne(line, \'"viewer_count":[0-9]+\', \'"viewer_count":"n/a"\'), line) '
            f"FROM file({quote_str(str(src))}, 'LineAsString', 'line String', 'gzip') "
            "SETTINGS max_threads = 1"
        )
    engine.close()
    return dirty


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    clean = ensure_data(args.rows, args.files)
    dirty = make_dirty(clean, 1000)
    workdir = Path(tempfile.mkdtemp(prefix="chute-bench-rejects-"))

    db = workdir / "db"
    engine = open_engine(str(db))
    # Both data sets go into the table inferred from the clean data (as a user's table would be).
    columns = with_provenance(describe(engine, f"file({quote_str(str(clean / '*.json.gz'))})", "bench"))
    ddl = create_table_sql(TableName(None, "t"), columns, "tuple()", None)

    def run(data: Path, options: chute.LoadOptions, expect_rejects: int | None) -> float:
        for name in ("t", "t_rejects", "_chute_ledger"):
            engine.execute(f"DROP TABLE IF EXISTS {name} SYNC")
        engine.execute(ddl)
        before = resource.getrusage(resource.RUSAGE_SELF)
        seconds, report = timed(lambda: chute.load([str(data)], table="t", target=str(db), options=options))
        after = resource.getrusage(resource.RUSAGE_SELF)
        # CPU seconds of this process (the engine runs in it): less noisy than wall time on a shared box.
        cpu[name_of[id(options)]].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        assert report.rows_read == args.rows, report.rows_read
        if expect_rejects is not None:
            assert report.rows_rejected == expect_rejects, report.rows_rejected
        return float(seconds)

    bad = args.rows // 1000
    methods = {
        "clean, --strict": (clean, chute.LoadOptions(strict=True), 0),
        "clean, error capture (default)": (clean, chute.LoadOptions(), 0),
        "0.1% bad rows, error capture (default)": (dirty, chute.LoadOptions(), bad),
    }
    times: dict[str, list[float]] = {k: [] for k in methods}
    cpu: dict[str, list[float]] = {k: [] for k in methods}
    name_of = {id(opts): name for name, (_, opts, _) in methods.items()}
    for _ in range(args.repeat):
        for name, (data, opts, rejects) in methods.items():
            times[name].append(run(data, opts, rejects))
    base = median(times["clean, --strict"])
    rows = [
        [name, f"{median(t):.3f}", f"{args.rows / median(t):,.0f}", f"{median(t) / base:.3f}"]
        for name, t in times.items()
    ]
    print(
        f"data: {args.files} gzip JSON-lines files, {args.rows:,} rows; {bad:,} bad rows in the dirty copy; "
        f"median of {args.repeat}"
    )
    print_table(["method", "seconds", "rows/s", "ratio to clean --strict"], rows)
    clean_ratio = median(times["clean, error capture (default)"]) / base
    dirty_ratio = median(times["0.1% bad rows, error capture (default)"]) / base
    print(f"\nclean: capture / strict = {clean_ratio:.3f} (target <= 1.03)")
    print(f"0.1% bad: capture / clean strict = {dirty_ratio:.3f} (target <= 2.0)")
    cpu_base = median(cpu["clean, --strict"])
    print(
        f"CPU seconds: strict {cpu_base:.2f}; clean capture / strict = "
        f"{median(cpu['clean, error capture (default)']) / cpu_base:.3f}; 0.1% bad / clean strict = "
        f"{median(cpu['0.1% bad rows, error capture (default)']) / cpu_base:.3f}"
    )
    path = save_results(
        "rejects",
        {
            "rows": args.rows,
            "files": args.files,
            "times": times,
            "clean_ratio": clean_ratio,
            "dirty_ratio": dirty_ratio,
            "cpu_seconds": cpu,
        },
    )
    print(f"results: {path}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
