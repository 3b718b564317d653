"""Deterministic generator of stream-snapshot JSON lines (SEEDS.md section 1).

The embedded engine writes the rows (no Python loop over rows): every value is
a pure function of the row number, so the same arguments give the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import generator_main, write_files

ROW_SQL = """
SELECT
    toString(cityHash64(n, 1) % 100000000000) AS id,
    toString(cityHash64(n % 20011, 2) % 1000000000) AS user_id,
    concat('user_', toString(n % 20011)) AS user_login,
    concat('User ', toString(n % 20011)) AS user_name,
    toString(cityHash64(n % 20011, 3) % 700) AS game_id,
    concat('Game ', toString(cityHash64(n % 20011, 3) % 700)) AS game_name,
    'live' AS type,
    concat('Stream title ', toString(n % 20011), ' ',
           arrayElement(['Ranked', 'Chill', 'Speedrun', 'Co-op'], 1 + (n % 4))) AS title,
    toUInt32(cityHash64(n, 4) % 5000) AS viewer_count,
    formatDateTime(toDateTime('2026-01-01 00:00:00', 'UTC') + (cityHash64(n % 20011, 5) % 86400) * 30,
                   '%Y-%m-%dT%H:%i:%SZ', 'UTC') AS started_at,
    arrayElement(['en', 'de', 'es', 'fr', 'ja', 'pt', 'ru', 'ko'], 1 + (cityHash64(n % 20011, 6) % 8)) AS language,
    concat('https://thumbs.example/', toString(n % 20011), '-{{width}}x{{height}}.jpg') AS thumbnail_url,
    arrayMap(i -> toString(cityHash64(n % 20011, i) % 1000), range(1 + n % 4)) AS tag_ids,
    CAST((cityHash64(n % 20011, 7) % 10) = 0, 'Bool') AS is_mature,
    formatDateTime(toDateTime('2026-01-01 00:00:00', 'UTC') + intDiv(n, 20011) * 300,
                   '%Y-%m-%dT%H:%i:%SZ', 'UTC') AS captured_at
FROM (SELECT number AS n FROM numbers({start}, {count}))
"""


def generate(out_dir: Path, rows: int, files: int) -> list[Path]:
    """Write `files` gzip JSON-lines files holding `rows` rows in all."""
    return write_files(
        out_dir,
        "streams_{:04d}.json.gz",
        files,
        rows,
        "JSONEachRow",
        lambda start, count: ROW_SQL.format(start=start, count=count),
        "output_format_json_quote_64bit_integers = 0, output_format_json_escape_forward_slashes = 0",
        1767225600,
    )


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, generate, 1_000_000, 20, argv)


if __name__ == "__main__":
    raise SystemExit(main())
