"""Helpers shared by the bench scripts: timing, medians, tables, results."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("CHUTE_BENCH_DATA", BENCH_DIR / "data"))
RESULTS_DIR = BENCH_DIR / "results"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def median(values: list[float]) -> float:
    return statistics.median(values)


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def save_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    return path


def write_files(
    out_dir: Path,
    name: str,
    files: int,
    rows: int,
    engine_format: str,
    select: Callable[[int, int], str],
    settings: str,
    mtime_base: int,
) -> list[Path]:
    """Write `files` files (names from `name`, formatted with the file number) of
    `rows` rows in all; the engine writes them from `select(start, count)`.

    The engine is the one this process already has open (chDB holds one database path
    per process: a bench that opened its database first cannot connect to another), else
    one in memory."""
    from chute.engine import shared_engine

    out_dir.mkdir(parents=True, exist_ok=True)
    engine = shared_engine()
    per_file = -(-rows // files)
    paths = []
    for i in range(files):
        start = i * per_file
        count = max(0, min(per_file, rows - start))
        path = out_dir / name.format(i)
        if path.exists():
            path.unlink()
        escaped = str(path).replace("\\", "\\\\").replace("'", "\\'")
        engine.execute(
            f"INSERT INTO FUNCTION file('{escaped}', '{engine_format}') {select(start, count)} SETTINGS {settings}"
        )
        # A fixed mtime keeps provenance values reproducible across runs.
        os.utime(path, (mtime_base + i, mtime_base + i))
        paths.append(path)
    return paths


def generator_main(
    doc: str | None,
    generate: Callable[..., list[Path]],
    rows: int,
    files: int,
    argv: list[str] | None,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """The command line every data generator shares: OUT_DIR --rows --files [extra]."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--rows", type=int, default=rows)
    parser.add_argument("--files", type=int, default=files)
    if extra:
        extra(parser)
    args = vars(parser.parse_args(argv))
    out_dir, n_rows, n_files = args.pop("out_dir"), args.pop("rows"), args.pop("files")
    paths = generate(out_dir, n_rows, n_files, **args)
    total = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} files, {n_rows} rows, {total / 2**20:.1f} MiB to {out_dir}", file=sys.stderr)
    return 0
