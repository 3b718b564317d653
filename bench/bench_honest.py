"""Issue 45's figures, each method a whole process: P0, P1, P1b and P11 with peak RSS.

Two data sets by default: `dumps` (gen_dumps.py: shaped like real API dumps,
nested, keys missing, mixed timestamp forms, quoted numbers, unicode, uneven
files) and the flat `streams` set (gen_streams.py). On each, in interleaved
rounds (count, bare, chute, duckdb, count, bare, ...):

  count   the engine's decompress-only floor: SELECT count() FROM file(glob, LineAsString)
  bare    the bare engine: INSERT INTO t SELECT *, _path, _row_number FROM file(glob, JSONEachRow,
          '<chute's column types>') into a MergeTree of those columns and the two
  chute   `chute load GLOB --table t --target NEW_DIR --quiet`: every check on, provenance, ledger
  duckdb  CREATE TABLE t AS SELECT * FROM read_json_auto(glob, filename = true), an on-disk database

Every figure is the wall time of the whole process (interpreter start, imports,
opening the database, the load, closing), its CPU (user + system, from wait4)
and its peak RSS (ru_maxrss from wait4: that process alone). Ratios are taken
within each round and their median printed beside the ratio of the medians.

P11 (many small files, `--small-files`, default 20,000 files of 5 lines): chute
into a fresh target against the bare engine over the glob, in rounds; then
`--ledger-files` (default 100,000) files loaded once by chute and re-run with
nothing new.

    python bench/bench_honest.py [--sets dumps,streams] [--scale 1.0] [--repeat 3]
                                 [--p11-scale S] [--skip-p11] [--skip-duckdb]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import gen_dumps
from bench.common import DATA_DIR, print_table, save_results

ROOT = Path(__file__).resolve().parent.parent
CHILD = str(Path(__file__).resolve().parent / "honest_child.py")
CHUTE = str(Path(sys.executable).parent / "chute")
METHODS = ["count", "bare", "chute", "duckdb"]
MIB = 1024 * 1024


@dataclass
class Run:
    seconds: float
    cpu: float
    rss: int
    out: dict[str, Any]


@dataclass
class Runs:
    runs: list[Run] = field(default_factory=list)

    def median(self, key: str) -> float:
        return statistics.median(getattr(r, key) for r in self.runs)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (5 min {five:.2f})"


def run(argv: list[str], parse_json: bool = True) -> Run:
    """Start argv, wait for it with wait4: its wall time, CPU and peak RSS alone."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv[:3])} ... failed ({proc.returncode}): {errors.strip()[-800:]}")
    return Run(
        seconds,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss * 1024,
        json.loads(text) if parse_json and text.strip() else {},
    )


def child(*args: str) -> Run:
    return run([sys.executable, CHILD, *args])


def chute_load(source: str, target: str) -> Run:
    return run([CHUTE, "load", source, "--table", "t", "--target", target, "--quiet"], parse_json=False)


def rows_of(db: str) -> int:
    return int(child("checksum", db, "t").out["rows"])


def cached(directory: Path, pattern: str, files: int, command: list[str]) -> list[Path]:
    """The files of a set, made by `command` + the directory when missing. In a process of its own: this
    one must stay small, since a child's ru_maxrss starts at its parent's RSS when it forks."""
    marker = directory / ".complete"
    found = sorted(directory.glob(pattern))
    if marker.exists() and len(found) == files:
        return found
    shutil.rmtree(directory, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *command, str(directory)], check=True, cwd=ROOT)
    marker.write_text("generated\n")
    found = sorted(directory.glob(pattern))
    size = sum(p.stat().st_size for p in found) / 1e6
    print(f"generated {directory.name}: {len(found)} files, {size:.1f} MB in {time.perf_counter() - t0:.1f} s")
    return found


def data_set(name: str, args: argparse.Namespace) -> tuple[list[Path], int]:
    """The set's files (generated once into DATA_DIR) and its rows."""
    files = args.dumps_files if name == "dumps" else args.streams_files
    rows = max(files, round((args.dumps_rows if name == "dumps" else args.streams_rows) * args.scale))
    script = "bench/gen_dumps.py" if name == "dumps" else "bench/gen_streams.py"
    command = [script, "--rows", str(rows), "--files", str(files)] + (["--out"] if name == "dumps" else [])
    paths = cached(DATA_DIR / f"{name}_{rows}_{files}", "*.json.gz", files, command)
    return paths, rows


def warm(paths: list[Path]) -> None:
    """Read every file once so no method pays the first read from disk."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 20):
                pass


def _ratios(a: Runs, b: Runs, key: str = "seconds") -> list[float]:
    return [getattr(x, key) / getattr(y, key) for x, y in zip(a.runs, b.runs, strict=False)]


def bench_set(
    name: str, glob: str, rows: int, input_bytes: int, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    methods = [m for m in METHODS if not (m == "duckdb" and args.skip_duckdb)]
    print(f"\n== {name}: {rows:,} rows, {input_bytes / 1e6:.1f} MB of gzip JSON lines ({glob}); load {load()}")
    # chute's own table gives the bare engine its column types (an untimed first load).
    setup = str(work / "setup")
    chute_load(glob, setup)
    columns = [tuple(c) for c in child("columns", setup, "t").out["columns"]]
    structure = ", ".join(f"`{n}` {t}" for n, t in columns)
    chute_sums = child("checksum", setup, "t").out
    shutil.rmtree(setup, ignore_errors=True)
    print(f"columns (chute's, also the bare engine's): {structure}")

    runs = {m: Runs() for m in methods}
    for round_no in range(args.repeat):
        for m in methods:
            target = str(work / f"{m}-{round_no}")
            if m == "count":
                r = child("count", glob)
            elif m == "bare":
                r = child("bare", target, glob, structure)
            elif m == "chute":
                r = chute_load(glob, target)
                r.out = {"rows": rows_of(target)}
            else:
                r = child("duckdb", target + ".duckdb", glob)
            if r.out.get("rows") != rows:
                raise RuntimeError(f"{name}: {m} holds {r.out.get('rows')} rows, not {rows}")
            if m == "bare" and round_no == 0:
                bare_sums = child("checksum", target, "t").out["columns"]
                differ = [c for c, v in chute_sums["columns"].items() if bare_sums.get(c) != v]
                print(
                    "  values: bare engine = chute in every column"
                    if not differ
                    else f"  values: the bare engine's table differs from chute's in {', '.join(differ)}"
                )
            shutil.rmtree(target, ignore_errors=True)
            Path(target + ".duckdb").unlink(missing_ok=True)
            runs[m].runs.append(r)
            print(
                f"  round {round_no + 1} {m:6} {r.seconds:7.3f} s  cpu {r.cpu:6.2f} s  peak RSS {r.rss / MIB:6.0f} MiB"
                f"  (load {os.getloadavg()[0]:.2f})"
            )

    table = []
    for m in methods:
        s = runs[m].median("seconds")
        table.append(
            [
                m,
                " ".join(f"{r.seconds:.2f}" for r in runs[m].runs),
                f"{s:.3f}",
                f"{runs[m].median('cpu'):.2f}",
                f"{max(r.rss for r in runs[m].runs) / MIB:.0f}",
                f"{rows / s:,.0f}",
            ]
        )
    print()
    print_table(["method", "runs (s)", "median s", "median CPU s", "peak RSS MiB (max)", "rows/s"], table)

    def pair(a: str, b: str, key: str = "seconds") -> dict[str, Any]:
        per_round = _ratios(runs[a], runs[b], key)
        return {
            "per_round": per_round,
            "median": statistics.median(per_round),
            "of_medians": runs[a].median(key) / runs[b].median(key),
        }

    goals = {
        "P0": pair("chute", "count"),
        "P0_cpu": pair("chute", "count", "cpu"),
        "P1": pair("chute", "bare"),
        "P1_cpu": pair("chute", "bare", "cpu"),
    }
    if "duckdb" in runs:
        goals["P1b"] = pair("duckdb", "chute")
        goals["P1b_cpu"] = pair("duckdb", "chute", "cpu")
        goals["P1b_rss"] = pair("chute", "duckdb", "rss")
    return {
        "rows": rows,
        "input_bytes": input_bytes,
        "columns": columns,
        "goals": goals,
        "runs": {m: [r.__dict__ for r in runs[m].runs] for m in methods},
    }


def bench_p11(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    n_small = max(1, round(args.small_files * args.p11_scale))
    n_ledger = max(1, round(args.ledger_files * args.p11_scale))
    gen = ["bench/gen_dumps.py", "--small-files"]
    small = cached(DATA_DIR / f"small_{n_small}", "*.json", n_small, [*gen, str(n_small), "--out"])
    many = cached(DATA_DIR / f"small_{n_ledger}", "*.json", n_ledger, [*gen, str(n_ledger), "--out"])
    rows = n_small * gen_dumps.SMALL_ROWS
    glob = str(small[0].parent / "*.json")
    print(f"\n== P11: {n_small:,} files of {gen_dumps.SMALL_ROWS} JSON lines ({glob}); load {load()}")
    warm(small)
    setup = str(work / "p11-setup")
    chute_load(glob, setup)
    structure = ", ".join(f"`{n}` {t}" for n, t in child("columns", setup, "t").out["columns"])
    shutil.rmtree(setup, ignore_errors=True)
    runs = {"bare": Runs(), "chute": Runs()}
    for round_no in range(args.repeat):
        for m in runs:
            target = str(work / f"p11-{m}-{round_no}")
            r = child("bare", target, glob, structure) if m == "bare" else chute_load(glob, target)
            got = r.out.get("rows") if m == "bare" else rows_of(target)
            if got != rows:
                raise RuntimeError(f"P11: {m} holds {got} rows, not {rows}")
            shutil.rmtree(target, ignore_errors=True)
            runs[m].runs.append(r)
            print(
                f"  round {round_no + 1} {m:6} {r.seconds:7.3f} s  cpu {r.cpu:6.2f} s  peak RSS {r.rss / MIB:6.0f} MiB"
                f"  (load {os.getloadavg()[0]:.2f})"
            )
    per_round = _ratios(runs["chute"], runs["bare"])

    print(f"\n  ledger: {n_ledger:,} files loaded once by chute, then re-run with nothing new; load {load()}")
    warm(many)
    target = str(work / "p11-ledger")
    first = chute_load(str(many[0].parent / "*.json"), target)
    print(f"  first load {first.seconds:.2f} s, cpu {first.cpu:.2f} s, peak RSS {first.rss / MIB:.0f} MiB")
    again = Runs()
    for round_no in range(args.repeat):
        r = chute_load(str(many[0].parent / "*.json"), target)
        again.runs.append(r)
        print(f"  re-run {round_no + 1} {r.seconds:7.3f} s  cpu {r.cpu:6.2f} s  peak RSS {r.rss / MIB:6.0f} MiB")
    if rows_of(target) != n_ledger * gen_dumps.SMALL_ROWS:
        raise RuntimeError("P11: the re-runs changed the table")
    shutil.rmtree(target, ignore_errors=True)
    return {
        "files": n_small,
        "ledger_files": n_ledger,
        "ratio_per_round": per_round,
        "cpu": {
            "per_round": (cpu := _ratios(runs["chute"], runs["bare"], "cpu")),
            "median": statistics.median(cpu),
            "of_medians": runs["chute"].median("cpu") / runs["bare"].median("cpu"),
        },
        "ratio": statistics.median(per_round),
        "of_medians": runs["chute"].median("seconds") / runs["bare"].median("seconds"),
        "runs": {m: [r.__dict__ for r in runs[m].runs] for m in runs},
        "ledger_first": first.__dict__,
        "rerun": [r.__dict__ for r in again.runs],
        "rerun_median": again.median("seconds"),
    }


def _goal(label: str, g: dict[str, Any], target: float | None, at_least: bool = False) -> str:
    """One ratio line; target None: printed for reading only (CPU on a shared box), no goal."""
    rounds = ", ".join(f"{v:.3f}" for v in g["per_round"])
    line = f"{label}: {g['median']:.3f}x (rounds {rounds}; of medians {g['of_medians']:.3f})"
    if target is None:
        return line
    met = g["median"] >= target if at_least else g["median"] <= target
    return f"{line} goal {'>=' if at_least else '<='} {target}x: {'met' if met else 'NOT met'}"


def print_goals(results: dict[str, Any]) -> None:
    print("\n== goals (ratios within each round, median over rounds)")
    for name, res in results.get("sets", {}).items():
        g = res["goals"]
        print(f"[{name}]")
        print("  " + _goal("P0  chute / decompress-only count (wall)", g["P0"], 3.0))
        print("  " + _goal("    the same in CPU seconds", g["P0_cpu"], None))
        print("  " + _goal("P1  chute / bare engine (wall)", g["P1"], 0.85))
        print("  " + _goal("    the same in CPU seconds", g["P1_cpu"], None))
        if "P1b" in g:
            print("  " + _goal("P1b DuckDB / chute (wall)", g["P1b"], 2.0, True))
            print("  " + _goal("    the same in CPU seconds", g["P1b_cpu"], None))
            print("  " + _goal("P1b chute peak RSS / DuckDB peak RSS", g["P1b_rss"], 1.0))
    if "p11" in results:
        p = results["p11"]
        g = {"median": p["ratio"], "per_round": p["ratio_per_round"], "of_medians": p["of_medians"]}
        print(f"[P11, {p['files']:,} files of {gen_dumps.SMALL_ROWS} lines]")
        print("  " + _goal("P11 chute / bare engine over the glob (wall)", g, 1.5))
        print("  " + _goal("    the same in CPU seconds", p["cpu"], None))
        r = p["rerun_median"]
        reruns = ", ".join(f"{x['seconds']:.2f}" for x in p["rerun"])
        print(
            f"  P11 re-run, {p['ledger_files']:,} files in the ledger, nothing new: {r:.2f} s "
            f"(runs {reruns}) goal <= 3 s: {'met' if r <= 3 else 'NOT met'}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="dumps,streams", help="comma-separated: dumps, streams (empty: P11 only)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the rows of each set")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--dumps-rows", type=int, default=gen_dumps.ROWS)
    parser.add_argument("--dumps-files", type=int, default=gen_dumps.FILES)
    parser.add_argument("--streams-rows", type=int, default=1_000_000)
    parser.add_argument("--streams-files", type=int, default=20)
    parser.add_argument("--small-files", type=int, default=20_000, help="P11: files of 5 lines")
    parser.add_argument("--ledger-files", type=int, default=100_000, help="P11: files in the ledger for the re-run")
    parser.add_argument("--p11-scale", type=float, help="multiply P11's file counts (default: --scale)")
    parser.add_argument("--skip-p11", action="store_true")
    parser.add_argument("--skip-duckdb", action="store_true")
    args = parser.parse_args(argv)
    if args.p11_scale is None:
        args.p11_scale = args.scale
    if not args.skip_duckdb and importlib.util.find_spec("duckdb") is None:
        print("duckdb is not installed: pip install -e .[bench] (or --skip-duckdb)", file=sys.stderr)
        return 2

    # A checkout run with PYTHONDONTWRITEBYTECODE=1 would compile chute on every run; an install would not.
    compileall.compile_dir(str(ROOT / "chute"), quiet=1)
    print(
        f"{os.cpu_count()} cores; load average {load()}; every figure is a whole process: interpreter start, "
        "imports, the load, exit; CPU = user + system; peak RSS = that process's ru_maxrss"
    )
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(a child's ru_maxrss starts at this process's RSS when forked: {floor:.0f} MiB at most)")
    results: dict[str, Any] = {"load_start": os.getloadavg(), "sets": {}}
    work = Path(tempfile.mkdtemp(prefix="chute-bench-honest-"))
    try:
        for name in [s for s in args.sets.split(",") if s]:
            if name not in ("dumps", "streams"):
                parser.error(f"unknown set {name!r}")
            paths, n = data_set(name, args)
            warm(paths)
            glob = str(paths[0].parent / "*.json.gz")
            results["sets"][name] = bench_set(name, glob, n, sum(p.stat().st_size for p in paths), args, work)
        if not args.skip_p11:
            results["p11"] = bench_p11(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["load_end"] = os.getloadavg()
    print_goals(results)
    # One file per kind of run, so that a P11-only run does not overwrite the sets' figures.
    parts = [*[n for n in args.sets.split(",") if n], *([] if args.skip_p11 else ["p11"])]
    name = "honest" if parts == ["dumps", "streams", "p11"] else "honest-" + "-".join(parts)
    print(f"\nload average at the end {load()}; results: {save_results(name, results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
