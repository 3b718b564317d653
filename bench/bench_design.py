"""P-design: the measured layout advisor vs the default layout and a hand layout.

The same 1 M stream-snapshot rows (bench/gen_streams.py) are loaded with
`chute.load` (no provenance columns) into three tables of one embedded
database, in the same run:

  default  what chute.load creates: inferred types, ORDER BY tuple(), LZ4
  advisor  the DDL of `chute.design.design_sources` (measured on its sample)
  hand     written the way SEEDS.md section 1 did: typed columns,
           LowCardinality, T64/Delta codecs, ORDER BY (user_id, captured_at)

Bytes on disk are read from system.parts after OPTIMIZE TABLE ... FINAL: one
part per table, what background merges converge to. (Sizes as loaded depend
on how far background merges got when they are read: chute.load without
provenance inserts file by file.)
Targets: default / advisor >= 2.5 and advisor / hand <= 1.1.

    python bench/bench_design.py [--rows 1000000] [--files 20] [--sample-rows 300000]
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
from bench.bench_embedded import ensure_data
from bench.common import print_table, save_results
from chute.design import design_sources, render_text
from chute.engine import Engine, open_engine
from chute.sql import quote_str

HAND_DDL = """
CREATE TABLE hand
(
    id UInt64 CODEC(T64, ZSTD(1)),
    user_id UInt64 CODEC(T64, ZSTD(1)),
    user_login LowCardinality(String),
    user_name LowCardinality(String),
    game_id UInt16 CODEC(T64, ZSTD(1)),
    game_name LowCardinality(String),
    type LowCardinality(String),
    title String CODEC(ZSTD(1)),
    viewer_count UInt32 CODEC(T64, ZSTD(1)),
    started_at DateTime('UTC') CODEC(Delta, ZSTD(1)),
    language LowCardinality(String),
    thumbnail_url String CODEC(ZSTD(1)),
    tag_ids Array(UInt16) CODEC(T64, ZSTD(1)),
    is_mature Bool,
    captured_at DateTime('UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = MergeTree
ORDER BY (user_id, captured_at)
"""


def on_disk(engine: Engine, table: str) -> int:
    """Bytes on disk of a table's active parts."""
    row = engine.rows(
        "SELECT sum(bytes_on_disk) AS b FROM system.parts "
        f"WHERE active AND database = currentDatabase() AND table = {quote_str(table)}"
    )[0]
    return int(row["b"])


# The same values, whatever each layout's types: a narrowed type that wrapped would differ.
CHECKSUM = (
    "SELECT toString(sum(toUInt64(id))) AS id, toString(sum(toUInt64(user_id))) AS user_id, "
    "toString(sum(toUInt64(game_id))) AS game_id, toString(sum(viewer_count)) AS viewer_count, "
    "toString(sum(toUnixTimestamp(captured_at))) AS captured_at, "
    "toString(sum(toUnixTimestamp(started_at))) AS started_at, "
    "toString(sum(arraySum(arrayMap(x -> toUInt64(x), tag_ids)))) AS tags, "
    "toString(sum(cityHash64(title, user_login, language, thumbnail_url, toString(is_mature)))) AS text FROM {table}"
)


def load(data: Path, table: str, db: str, rows: int) -> float:
    """chute.load into `table` (created by chute when missing); checks every row arrived."""
    t0 = time.perf_counter()
    report = chute.load([str(data)], table=table, target=db, options=chute.LoadOptions(provenance=False))
    seconds = time.perf_counter() - t0
    assert report.ok and report.files_failed == 0, f"{table}: failed files"
    assert report.rows_loaded == rows == report.table_rows, f"{table}: {report.rows_loaded} rows, expected {rows}"
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--sample-rows", type=int, default=300_000)
    parser.add_argument("--show", action="store_true", help="print the advisor's full evidence")
    args = parser.parse_args(argv)

    data = ensure_data(args.rows, args.files)
    input_bytes = sum(p.stat().st_size for p in data.glob("*.json.gz"))
    workdir = Path(tempfile.mkdtemp(prefix="chute-bench-design-"))
    db = str(workdir / "db")
    engine = open_engine(db)

    t0 = time.perf_counter()
    proposal = design_sources([str(data)], "advisor", target=db, sample_rows=args.sample_rows)
    design_seconds = time.perf_counter() - t0
    engine.execute(proposal.ddl)
    engine.execute(HAND_DDL)
    load_seconds = {
        "default": load(data, "default_layout", db, args.rows),
        "advisor": load(data, "advisor", db, args.rows),
        "hand": load(data, "hand", db, args.rows),
    }
    tables = {"default": "default_layout", "advisor": "advisor", "hand": "hand"}
    sums = {k: engine.rows(CHECKSUM.format(table=t))[0] for k, t in tables.items()}
    assert sums["advisor"] == sums["hand"] == sums["default"], f"values differ between layouts: {sums}"
    for table in tables.values():
        engine.execute(f"OPTIMIZE TABLE {table} FINAL")
    merged = {k: on_disk(engine, t) for k, t in tables.items()}
    leftovers = engine.rows("SELECT name FROM system.tables WHERE startsWith(name, '_chute_design_')")
    assert not leftovers, f"scratch tables left behind: {leftovers}"

    if args.show:
        print(render_text(proposal))
    print(
        f"data: {args.files} gzip JSON-lines files, {args.rows:,} rows, {input_bytes / 2**20:.1f} MiB; "
        f"advisor: {proposal.sample_rows:,} sampled rows, {len(proposal.layouts)} layouts, {design_seconds:.1f} s; "
        f"same values in all three tables (checksums)"
    )
    labels = {
        "default": "default: inferred types, ORDER BY tuple(), LZ4",
        "advisor": f"advisor: ORDER BY {proposal.order_by}",
        "hand": "hand (SEEDS.md 1): ORDER BY (user_id, captured_at)",
    }
    rows = [[labels[k], f"{merged[k]:,}", f"{merged[k] / args.rows:.2f}", f"{load_seconds[k]:.2f}"] for k in tables]
    print_table(["layout (after OPTIMIZE FINAL)", "bytes on disk", "bytes/row", "load s"], rows)
    default_over_advisor = merged["default"] / merged["advisor"]
    advisor_over_hand = merged["advisor"] / merged["hand"]
    print(f"default / advisor = {default_over_advisor:.2f} (target >= 2.5)")
    print(f"advisor / hand    = {advisor_over_hand:.3f} (target <= 1.1)")
    path = save_results(
        "design",
        {
            "rows": args.rows,
            "files": args.files,
            "sample_rows": proposal.sample_rows,
            "design_seconds": design_seconds,
            "order_by": proposal.order_by,
            "ddl": proposal.ddl,
            "bytes_on_disk": merged,
            "default_over_advisor": default_over_advisor,
            "advisor_over_hand": advisor_over_hand,
        },
    )
    print(f"results: {path}")
    engine.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if default_over_advisor >= 2.5 and advisor_over_hand <= 1.1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
