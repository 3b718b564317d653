"""P1: `chute load` (provenance + ledger) vs the bare engine, same data, same run.

Bare engine: `INSERT INTO t SELECT * FROM file('dir/*.json.gz')` with default
settings into a table of the same inferred columns (no provenance). chute:
`chute.load()` into the same columns plus the four provenance columns, with
its ledger. Both run in this process on the same embedded database, in
alternating order, `--repeat` times; medians are compared.

    python bench/bench_embedded.py [--rows 1000000] [--files 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import chute
from bench.common import DATA_DIR, median, print_table, save_results, timed
from bench.gen_streams import generate
from chute.engine import open_engine
from chute.schema import PROVENANCE_COLUMNS, describe, structure
from chute.sql import quote_str


def ensure_data(rows: int, files: int) -> Path:
    directory = DATA_DIR / f"streams_{rows}_{files}"
    if not directory.exists() or len(list(directory.glob("*.json.gz"))) != files:
        shutil.rmtree(directory, ignore_errors=True)
        generate(directory, rows, files)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    data = ensure_data(args.rows, args.files)
    glob = str(data / "*.json.gz")
    input_bytes = sum(p.stat().st_size for p in data.glob("*.json.gz"))
    workdir = Path(tempfile.mkdtemp(prefix="chute-bench-"))
    db = str(workdir / "db")
    engine = open_engine(db)
    columns = describe(engine, f"file({quote_str(glob)})", "bench")
    plain = structure(columns)
    with_prov = plain + ", " + ", ".join(f"{n} {t}" for n, t in PROVENANCE_COLUMNS)

    def fresh(table: str, body: str) -> None:
        engine.execute(f"DROP TABLE IF EXISTS {table} SYNC")
        engine.execute("DROP TABLE IF EXISTS _chute_ledger SYNC")
        engine.execute(f"CREATE TABLE {table} ({body}) ENGINE = MergeTree ORDER BY tuple()")

    def quiesce() -> None:
        """Wait for background merges (of the last run's parts) to end, so no
        method is timed while an earlier one's merges use the cores."""
        deadline, idle = time.monotonic() + 60, 0
        while time.monotonic() < deadline and idle < 5:
            idle = 0 if int(engine.rows("SELECT count() AS n FROM system.merges")[0]["n"]) else idle + 1
            time.sleep(0.1)

    def parts_of(table: str) -> int:
        return int(engine.rows(f"SELECT count() AS n FROM system.parts WHERE active AND table = '{table}'")[0]["n"])

    def rows_in(table: str) -> int:
        return int(engine.rows(f"SELECT count() AS n FROM {table}")[0]["n"])

    times: dict[str, list[float]] = {"bare": [], "chute": [], "chute_create": []}
    sizes: dict[str, int] = {}
    parts: dict[str, int] = {}
    for _ in range(args.repeat):
        fresh("bare", plain)
        quiesce()
        seconds, _ = timed(lambda: engine.execute(f"INSERT INTO bare SELECT * FROM file({quote_str(glob)})"))
        assert rows_in("bare") == args.rows, "bare engine lost rows"
        times["bare"].append(seconds)
        sizes["bare"] = int(
            engine.rows("SELECT sum(bytes_on_disk) AS b FROM system.parts WHERE active AND table = 'bare'")[0]["b"]
        )

        parts["bare"] = parts_of("bare")
        fresh("t", with_prov)
        quiesce()
        seconds, report = timed(lambda: chute.load([str(data)], table="t", target=db))
        assert report.rows_loaded == args.rows == rows_in("t"), "chute lost rows"
        times["chute"].append(seconds)
        sizes["chute"] = report.table_bytes_on_disk
        parts["chute"] = parts_of("t")

        engine.execute("DROP TABLE IF EXISTS t2 SYNC")
        engine.execute("DROP TABLE IF EXISTS _chute_ledger SYNC")
        quiesce()
        seconds, report = timed(lambda: chute.load([str(data)], table="t2", target=db))
        assert report.rows_loaded == args.rows == rows_in("t2")
        times["chute_create"].append(seconds)
        parts["chute_create"] = parts_of("t2")

    bare = median(times["bare"])
    rows = []
    results = {}
    labels = {
        "bare": "bare engine INSERT SELECT file(glob), defaults",
        "chute": "chute.load, provenance + ledger, existing table",
        "chute_create": "chute.load, provenance + ledger, infers + creates table",
    }
    for key, label in labels.items():
        t = median(times[key])
        results[key] = {"seconds": t, "runs": times[key], "ratio_to_bare": t / bare, "parts": parts[key]}
        rows.append(
            [
                label,
                f"{t:.3f}",
                f"{args.rows / t:,.0f}",
                f"{input_bytes / 2**20 / t:.1f}",
                f"{t / bare:.2f}",
                str(parts[key]),
            ]
        )
    print(
        f"data: {args.files} gzip JSON-lines files, {args.rows:,} rows, {input_bytes / 2**20:.1f} MiB; "
        f"median of {args.repeat} runs"
    )
    print_table(["method", "seconds", "rows/s", "MiB/s in", "ratio to bare", "parts after"], rows)
    print(f"\nP1 chute / bare = {results['chute']['ratio_to_bare']:.3f} (target <= 1.0, goal 0.95)")
    path = save_results(
        "embedded",
        {"rows": args.rows, "files": args.files, "input_bytes": input_bytes, "table_bytes": sizes, "results": results},
    )
    print(f"results: {path}")
    engine.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
