"""Deterministic NYC-taxi-like trips as gzip CSV or Parquet (SEEDS.md sections 3 and 5).

The embedded engine writes the rows (no Python loop over rows) and every value
is a pure function of the row number, so the same arguments give the same
rows. Files are one slice of consecutive trips each, like the monthly files of
the public data set; CSV files carry a header line, as the published ones do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import generator_main, write_files

FORMATS = {"csv": ("CSVWithNames", ".csv.gz"), "parquet": ("Parquet", ".parquet")}

# `h(k)` is a per-row hash; inner columns are reused so totals add up.
ROW_SQL = """
SELECT
    toUInt8(1 + h1 % 2) AS vendor_id,
    pickup AS pickup_datetime,
    pickup + toIntervalSecond(120 + h2 % 3000) AS dropoff_datetime,
    toUInt8(1 + h3 % 6) AS passenger_count,
    distance AS trip_distance,
    toUInt8(if(h4 % 10 < 9, 1, 2 + h4 % 5)) AS ratecode_id,
    if(h5 % 50 = 0, 'Y', 'N') AS store_and_fwd_flag,
    toUInt16(1 + h6 % 265) AS pu_location_id,
    toUInt16(1 + h7 % 265) AS do_location_id,
    toUInt8(1 + h8 % 4) AS payment_type,
    fare AS fare_amount,
    extra,
    0.5 AS mta_tax,
    tip AS tip_amount,
    tolls AS tolls_amount,
    0.3 AS improvement_surcharge,
    round(fare + extra + 0.5 + tip + tolls + 0.3 + congestion, 2) AS total_amount,
    congestion AS congestion_surcharge
FROM
(
    SELECT
        n,
        cityHash64(n, 1) AS h1, cityHash64(n, 2) AS h2, cityHash64(n, 3) AS h3, cityHash64(n, 4) AS h4,
        cityHash64(n, 5) AS h5, cityHash64(n, 6) AS h6, cityHash64(n, 7) AS h7, cityHash64(n, 8) AS h8,
        toDateTime('2025-01-01 00:00:00', 'UTC') + toIntervalSecond(intDiv(n * 3, 4) + cityHash64(n, 9) % 600)
            AS pickup,
        round((cityHash64(n, 10) % 3000) / 100 + 0.1, 2) AS distance,
        round(3.0 + distance * 2.5, 2) AS fare,
        arrayElement([0.0, 0.5, 1.0, 2.5], 1 + cityHash64(n, 11) % 4) AS extra,
        round((cityHash64(n, 12) % 1500) / 100, 2) AS tip,
        if(cityHash64(n, 13) % 20 = 0, 6.94, 0.0) AS tolls,
        if(cityHash64(n, 14) % 3 = 0, 0.0, 2.5) AS congestion
    FROM (SELECT number AS n FROM numbers({start}, {count}))
)
"""


def generate(out_dir: Path, rows: int, files: int, fmt: str = "csv") -> list[Path]:
    """Write `files` files holding `rows` trips in all; `fmt` is csv (gzip) or parquet."""
    engine_format, extension = FORMATS[fmt]
    return write_files(
        out_dir,
        "trips_{:03d}" + extension,
        files,
        rows,
        engine_format,
        lambda start, count: ROW_SQL.format(start=start, count=count),
        "max_threads = 1",
        1735689600,
    )


def main(argv: list[str] | None = None) -> int:
    def fmt(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--format", dest="fmt", choices=sorted(FORMATS), default="csv")

    return generator_main(__doc__, generate, 2_000_000, 4, argv, fmt)


if __name__ == "__main__":
    raise SystemExit(main())
