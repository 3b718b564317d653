"""Issue 7 goals: unsorted rows into a day-partitioned table (P4), and big
inputs with bounded memory (P5).

P4, same run: a wide hits-like CSV (100 columns, EventTime unsorted over 400
days, `gen_hits.py`) into
  - a table partitioned by day, by the bare engine: fails with
    TOO_MANY_PARTS (252), which the bench shows;
  - an unpartitioned table, by the bare engine: the baseline;
  - the same day-partitioned table (with provenance columns), by chute.
Target: chute <= 1.3x the baseline, and active parts right after the load
<= 2 x partitions.

P5: a ~5 GB CSV, the same rows as Parquet with large row groups, and a ~5 GB
Parquet file, each loaded by `chute load` in a child process whose peak RSS is
read by `/usr/bin/time -v` (target <= 1 GB), with `--memory-limit 1GB`. The CSV
loads as byte ranges (64 MiB at that limit), one INSERT each; the same CSV into a
day-partitioned table (not split by default) sorts by day with spills
(`--p5-cases partitioned --p5-gb 1`: that load alone, a 1 GB CSV).

With --delete-before N, N files are created and deleted (untimed) before each
timed P4 run of either method, as after a dropped table: on ext4 without a
journal that makes new inodes dear (chute packs its small parts for that).

    python bench/bench_big.py [--rows 2000000] [--repeat 3] [--p5-gb 5] [--p5-cases csv,partitioned,...]
                              [--skip-p4] [--skip-p5] [--delete-before N]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import chute
from bench import gen_hits
from bench.common import DATA_DIR, median, print_table, save_results
from chute.engine import open_engine
from chute.errors import ChuteError
from chute.schema import PROVENANCE_COLUMNS
from chute.sql import quote_ident, quote_str

PARTITION = "toYYYYMMDD(EventTime)"
PARQUET_ROW_BYTES = 186.5  # a hits-like row in Parquet (zstd, 1 M-row row groups), measured


def hits_csv(rows: int) -> Path:
    directory = DATA_DIR / f"hits_{rows}_1"
    if not directory.exists() or len(list(directory.glob("*.csv"))) != 1:
        shutil.rmtree(directory, ignore_errors=True)
        gen_hits.generate(directory, rows, 1)
    return next(directory.glob("*.csv"))


def hits_parquet(rows: int, row_group: int) -> Path:
    directory = DATA_DIR / f"hits_parquet_{rows}_{row_group}"
    path = directory / "hits.parquet"
    if not path.exists():
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        from chute.engine import shared_engine  # (the process's one engine: chDB holds one path)

        shared_engine().execute(
            f"INSERT INTO FUNCTION file({quote_str(str(path))}, 'Parquet') {gen_hits.row_sql(0, rows)} "
            f"SETTINGS output_format_parquet_row_group_size = {row_group}, "
            "output_format_parquet_row_group_size_bytes = 4294967296"
        )
    return path


def peak_rss(command: list[str]) -> tuple[float, int, str]:
    """(seconds, peak RSS bytes, stderr) of a child process, RSS as `time -v` reports it."""
    t0 = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{command}: exit {done.returncode}: {done.stderr[-2000:]}")
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert match, done.stderr
    return seconds, int(match.group(1)) * 1024, done.stderr


def file_creation_seconds(work: Path, files: int = 2000) -> float:
    """Seconds to create one small file in `work`: what writing many parts costs here.
    The files stay until the work directory goes: deleting them would slow what follows."""
    probe = work / "file-creation-probe"
    probe.mkdir()
    t0 = time.perf_counter()
    for i in range(files):
        (probe / str(i)).write_bytes(b"x")
    return (time.perf_counter() - t0) / files


def delete_files(work: Path, files: int) -> None:
    """Create and delete `files` small files in `work`, as dropping a loaded table would:
    on ext4 without a journal, inodes freed in the last minutes are skipped (and scanned)
    when new ones are taken, so the next load's part files cost more."""
    if files <= 0:
        return
    junk = work / f"deleted-{time.time_ns()}"
    junk.mkdir()
    for i in range(files):
        (junk / str(i)).write_bytes(b"x")
    shutil.rmtree(junk)


def p4(rows: int, repeat: int, work: Path, delete_before: int = 0) -> dict[str, object]:
    csv = hits_csv(rows)
    db = str(work / "p4db")
    engine = open_engine(db)
    data_columns = ", ".join(f"{quote_ident(n)} {t}" for n, t in gen_hits.column_types())
    prov_columns = ", ".join(f"{quote_ident(name)} {type_}" for name, type_ in PROVENANCE_COLUMNS)
    source = f"file({quote_str(str(csv))}, 'CSVWithNames')"

    def create(name: str, partitioned: bool, provenance: bool) -> None:
        columns = data_columns + (", " + prov_columns if provenance else "")
        partition = f" PARTITION BY {PARTITION}" if partitioned else ""
        engine.execute(f"CREATE TABLE {name} ({columns}) ENGINE = MergeTree{partition} ORDER BY tuple()")

    create("bare_day", True, False)
    try:
        engine.execute(f"INSERT INTO bare_day SELECT * FROM {source}")
        plain_error = "no error (the engine took it)"
    except ChuteError as exc:
        plain_error = str(exc)[:160]
    print(f"bare engine INSERT into the day-partitioned table: {plain_error}")
    creation = file_creation_seconds(work)
    print(f"file creation in the work directory: {creation * 1e6:.0f} us per file (a part here is ~11 files)")

    def bare(name: str) -> None:
        engine.execute(f"INSERT INTO {name} SELECT * FROM {source}")

    peak: list[int] = []

    def chute_day(name: str) -> None:
        report = chute.load([str(csv)], name, target=db)
        assert report.ok and report.rows_loaded == rows, report.files
        peak.append(report.peak_rss_bytes)

    # Each run gets a table of its own, created before the clock starts; nothing is dropped
    # until the end: on ext4 without a journal, files created minutes after many were deleted
    # cost far more (the inode allocator skips recently freed inodes), which would charge
    # the previous run's clean-up to the one being timed.
    times: dict[str, list[float]] = {"bare engine, unpartitioned": [], "chute, partitioned by day": []}
    parts: dict[str, int] = {}
    tables: dict[str, str] = {}
    for run in range(repeat):
        methods = [
            ("bare engine, unpartitioned", bare, f"bare_flat_{run}", False),
            ("chute, partitioned by day", chute_day, f"chute_day_{run}", True),
        ]
        # Runs slow down as the process and the machine fill up (both methods, 5-20% over
        # five rounds here): every other round goes chute first, so neither always runs later.
        for name, fn, table, partitioned in methods if run % 2 == 0 else methods[::-1]:
            create(table, partitioned, provenance=partitioned)
            delete_files(work, delete_before)
            # The previous run's parts are flushed before the clock starts: neither method
            # pays for the other's writeback.
            os.sync()
            t0 = time.perf_counter()
            fn(table)
            times[name].append(time.perf_counter() - t0)
            got = engine.rows(
                f"SELECT count() AS n, uniqExact(partition) AS p FROM system.parts "
                f"WHERE database = currentDatabase() AND table = {quote_str(table)} AND active"
            )[0]
            parts[name] = int(got["n"])
            parts[name + " partitions"] = int(got["p"])
            tables[name] = table
    hashed = ", ".join(quote_ident(n) for n, _ in gen_hits.column_types())
    same = [engine.rows(f"SELECT count() AS n, sum(cityHash64({hashed})) AS h FROM {t}") for t in tables.values()]
    assert same[0] == same[1], same
    size = csv.stat().st_size
    deleted = f", {delete_before:,} files deleted before each run" if delete_before else ""
    print(f"\nP4: {rows:,} rows, {size / 2**20:.0f} MiB CSV, median of {repeat}{deleted}")
    print_table(
        ["method", "seconds", "rows/s", "active parts", "partitions", "runs"],
        [
            [
                name,
                f"{median(t):.3f}",
                f"{rows / median(t):,.0f}",
                str(parts[name]),
                str(parts[name + " partitions"]),
                " ".join(f"{x:.2f}" for x in t),
            ]
            for name, t in times.items()
        ],
    )
    ratio = median(times["chute, partitioned by day"]) / median(times["bare engine, unpartitioned"])
    partitions = parts["chute, partitioned by day partitions"]
    active = parts["chute, partitioned by day"]
    print(f"P4: chute into the day-partitioned table / bare engine unpartitioned = {ratio:.3f} (target <= 1.3)")
    print(f"    active parts right after the load: {active} for {partitions} partitions (target <= {2 * partitions})")
    print(f"    peak RSS of this process after chute's loads: {max(peak) / 2**30:.2f} GiB (default --memory-limit)")
    engine.close()
    return {
        "rows": rows,
        "times": times,
        "ratio": ratio,
        "parts": active,
        "partitions": partitions,
        "plain": plain_error,
        "file_creation_seconds": creation,
        "peak_rss": max(peak),
        "deleted_before_each_run": delete_before,
    }


P5_CASES = ("csv", "partitioned", "parquet", "big-parquet")
"""P5's loads, in order: the CSV, the CSV into a day-partitioned table, the same rows as Parquet,
a Parquet file of the CSV's size (`--p5-cases` picks some)."""


def p5(gigabytes: float, work: Path, cases: tuple[str, ...] = P5_CASES) -> dict[str, object]:
    row_bytes = 700  # a hits-like CSV row, measured
    rows = int(gigabytes * 1e9 / row_bytes)
    # The Parquet of the same rows is a quarter of the CSV's size: a 5 GB Parquet file too.
    parquet_rows = int(gigabytes * 1e9 / PARQUET_ROW_BYTES)
    loads = {
        "csv": ("CSV", lambda: hits_csv(rows), [], rows),
        "partitioned": (
            "CSV into a day-partitioned table",
            lambda: hits_csv(rows),
            ["--partition-by", PARTITION],
            rows,
        ),
        "parquet": ("Parquet, same rows, 1 M-row row groups", lambda: hits_parquet(rows, 1_000_000), [], rows),
        "big-parquet": (
            f"Parquet, {gigabytes:g} GB, 1 M-row row groups",
            lambda: hits_parquet(parquet_rows, 1_000_000),
            [],
            parquet_rows,
        ),
    }
    results: dict[str, object] = {"rows": rows}
    table_rows = []
    for label, make, extra, count in (loads[case] for case in cases):
        path = make()
        db = work / f"p5_{len(table_rows)}"
        command = [
            *[sys.executable, "-m", "chute.cli", "load", str(path), "--table", "t", "--target", str(db)],
            *["--memory-limit", "1GB"],
        ]
        cpu0 = os.times()
        seconds, rss, _ = peak_rss([*command, *extra, "--quiet"])
        cpu1 = os.times()
        cpu = cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system
        size = path.stat().st_size
        table_rows.append(
            [
                label,
                f"{size / 2**30:.2f} GiB",
                f"{count:,}",
                f"{seconds:.1f}",
                f"{cpu:.1f}",
                f"{count / seconds:,.0f}",
                f"{rss / 2**20:,.0f} MiB",
            ]
        )
        results[label] = {"bytes": size, "rows": count, "seconds": seconds, "cpu_seconds": cpu, "peak_rss": rss}
        shutil.rmtree(db, ignore_errors=True)
    print("\nP5: peak RSS of the whole `chute load` process from /usr/bin/time -v, --memory-limit 1GB")
    print_table(["input", "size", "rows", "seconds", "CPU s", "rows/s", "peak RSS"], table_rows)
    worst = max(int(v["peak_rss"]) for v in results.values() if isinstance(v, dict))
    print(f"P5: largest peak RSS {worst / 2**20:,.0f} MiB (target <= 1024 MiB, the day-partitioned load included)")
    results["worst_peak_rss"] = worst
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of the P4 CSV")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--p5-gb", type=float, default=5.0, help="size of the P5 CSV and of the big Parquet file in GB")
    parser.add_argument("--skip-p5", action="store_true")
    parser.add_argument("--skip-p4", action="store_true")
    parser.add_argument(
        "--p5-cases",
        default=",".join(P5_CASES),
        help=f"P5's loads to run, comma-separated, of {','.join(P5_CASES)} (default: all)",
    )
    parser.add_argument(
        "--delete-before",
        type=int,
        default=0,
        metavar="N",
        help="P4: create and delete N files before each timed run (as after a dropped table)",
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="chute-bench-big-"))
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    results: dict[str, object] = {} if args.skip_p4 else {"p4": p4(args.rows, args.repeat, work, args.delete_before)}
    if not args.skip_p5:
        cases = tuple(c for c in args.p5_cases.split(",") if c)
        unknown = sorted(set(cases) - set(P5_CASES))
        if unknown:
            parser.error(f"--p5-cases: unknown {', '.join(unknown)} (known: {', '.join(P5_CASES)})")
        results["p5"] = p5(args.p5_gb, work, cases)
    path = save_results("big", results)
    print(f"results: {path}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
