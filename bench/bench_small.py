"""P11: many small files. chute against the bare engine over one glob, whole processes each.

20,000 JSON-lines files of 5 lines (`gen_small.py`: id, name, an ISO timestamp, a number):

- bare engine: `INSERT INTO t SELECT *, _path, _row_number FROM file('dir/*.json', JSONEachRow,
  '<chute's column types>')` into a MergeTree of those columns, in a process of its own;
- chute: `chute load dir --table t --target db` (provenance, ledger, every value check).

Each round runs both, in turn (the order alternates), into fresh directories; the medians of
wall time and the peak RSS of each process are printed, and the ratio (goal <= 1.5). Then the
re-run: `--rerun-files` one-line files are loaded once, and `chute load` again with nothing new
is timed (goal <= 3 s at 100,000).

    python bench/bench_small.py [--files 20000] [--lines 5] [--repeat 3] [--rerun-files 100000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DATA_DIR, median, print_table, save_results
from bench.gen_small import ensure

BARE = """
import sys
from chdb import session
db, pattern, columns = sys.argv[1:4]
s = session.Session(db)
s.query("CREATE TABLE b (" + columns + ", _path LowCardinality(String), _row_number UInt64) "
        "ENGINE = MergeTree ORDER BY tuple()")
s.query("INSERT INTO b SELECT *, _path, _row_number FROM file('" + pattern + "', JSONEachRow, '" + columns + "')")
n = s.query("SELECT count() FROM b", "CSV").bytes().decode().strip()
print(n)
"""

COLUMNS = """
import sys
from chdb import session
s = session.Session(sys.argv[1])
rows = s.query("SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 't' "
               "AND name NOT LIKE '\\\\_%' ORDER BY position", "TSV").bytes().decode()
print(", ".join(n + " " + t for n, t in (line.split("\\t") for line in rows.splitlines())))
"""


def run(command: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes; 0: not measured) and output of one whole process."""
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode:
        raise SystemExit(f"{' '.join(command[:4])}: exit {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return seconds, 0, proc.stdout.decode()


CPU: dict[str, list[float]] = {}
"""CPU seconds (user + system) of each measured process, by its label: on a shared machine
wall time says more about the neighbours than CPU time does."""


def run_measured(command: list[str], label: str = "") -> tuple[float, int, str]:
    """`run` with the peak RSS and CPU of the child itself (GNU time's %M, %U and %S where there)."""
    timer = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None
    if timer is None:
        return run(command)
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as note:
        seconds, _, out = run([timer, "-f", "%M %U %S", "-o", note.name, *command])
        fields = (note.read().strip().splitlines() or [""])[-1].split()
    if len(fields) != 3:
        return seconds, 0, out
    CPU.setdefault(label, []).append(float(fields[1]) + float(fields[2]))
    return seconds, int(fields[0]) * 1024, out


def chute_load(directory: Path, db: Path) -> list[str]:
    return [sys.executable, "-m", "chute", "load", str(directory), "--table", "t", "--target", str(db), "--quiet"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--lines", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rerun-files", type=int, default=100_000, help="0: no re-run")
    parser.add_argument("--rerun-repeat", type=int, default=3)
    args = parser.parse_args(argv)

    data = ensure(DATA_DIR / f"small_{args.files}_{args.lines}", args.files, args.lines)
    work = Path(tempfile.mkdtemp(prefix="chute-bench-small-"))
    try:
        # chute's own column types, from a load not timed.
        run(chute_load(data, work / "types"))
        columns = run([sys.executable, "-c", COLUMNS, str(work / "types")])[2].strip()
        shutil.rmtree(work / "types")
        times: dict[str, list[float]] = {"bare": [], "chute": []}
        peaks: dict[str, list[int]] = {"bare": [], "chute": []}
        for i in range(args.repeat):
            order = ["bare", "chute"] if i % 2 == 0 else ["chute", "bare"]
            for method in order:
                db = work / f"{method}{i}"
                if method == "bare":
                    command = [sys.executable, "-c", BARE, str(db), str(data / "*.json"), columns]
                else:
                    command = chute_load(data, db)
                seconds, rss, _ = run_measured(command, method)
                times[method].append(seconds)
                peaks[method].append(rss)
                shutil.rmtree(db, ignore_errors=True)
        bare, chute = median(times["bare"]), median(times["chute"])
        cpu = {m: median(CPU[m]) if CPU.get(m) else 0.0 for m in ("bare", "chute")}
        rows = [
            [
                m,
                f"{median(times[m]):.2f}",
                " ".join(f"{t:.2f}" for t in times[m]),
                f"{cpu[m]:.2f}",
                f"{max(peaks[m]) / 2**20:.0f}",
            ]
            for m in ("bare", "chute")
        ]
        print(f"P11: {args.files} JSON-lines files of {args.lines} lines, {args.repeat} interleaved rounds")
        print_table(["method", "median s", "runs", "median CPU s", "peak RSS MiB"], rows)
        ratio_cpu = f"; CPU {cpu['chute'] / cpu['bare']:.2f}x" if cpu["bare"] else ""
        print(f"P11 chute / bare = {chute / bare:.2f}x (goal <= 1.5){ratio_cpu}")
        results: dict[str, object] = {
            "files": args.files,
            "lines": args.lines,
            "times": times,
            "peak_rss": peaks,
            "ratio": chute / bare,
            "cpu": CPU,
        }
        if args.rerun_files:
            many = ensure(DATA_DIR / f"small_{args.rerun_files}_1", args.rerun_files, 1)
            db = work / "rerun"
            first, first_rss, _ = run_measured(chute_load(many, db), "first")
            again = [run_measured(chute_load(many, db), "rerun") for _ in range(args.rerun_repeat)]
            rerun = median([s for s, _, _ in again])
            rss = max(r for _, r, _ in again)
            print(
                f"{args.rerun_files} one-line files: first load {first:.1f} s (peak RSS {first_rss / 2**20:.0f} MiB); "
                f"re-run with nothing new {rerun:.2f} s (median of {args.rerun_repeat}; "
                f"runs {' '.join(f'{s:.2f}' for s, _, _ in again)}; CPU {median(CPU.get('rerun', [0.0])):.2f} s; "
                f"peak RSS {rss / 2**20:.0f} MiB; goal <= 3 s)"
            )
            results.update(rerun_files=args.rerun_files, first_load=first, rerun=[s for s, _, _ in again])
        print(f"results: {save_results('small', results)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
