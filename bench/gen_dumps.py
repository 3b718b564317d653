"""Deterministic generator of data shaped like real API dumps (issue 45).

The flat streams set is clean: every key in every row, one timestamp form,
numbers as numbers. Real dumps are not, and the checks that keep values honest
cost most on what they are not: so this set has nested objects and arrays, 5-10 %
of the keys missing in each row (different keys in different rows), ISO-8601
timestamps with `T`, `Z`, fractions and sometimes an offset, numbers sometimes
sent as strings, integers of every width (some only fit UInt64), floats,
booleans, nulls, 2-, 3- and 4-byte UTF-8, and files of uneven size (the biggest
over 10x the smallest).

The embedded engine writes each line as text built by one SELECT: every value
is a hash of (seed, row number, field), so the same arguments give the same
rows, and a million rows take seconds, not minutes of Python.

    python bench/gen_dumps.py --out DIR [--rows 933330] [--files 30] [--seed 45]
    python bench/gen_dumps.py --out DIR --small-files 20000      # N plain files of 5 lines each
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROWS = 933_330
FILES = 30
SEED = 45
SMALL_ROWS = 5
"""Rows per file in --small-files mode (P11)."""
MTIME_BASE = 1767225600
"""2026-01-01 00:00:00 UTC: the first file's mtime; file i gets MTIME_BASE + i."""
MISSING_PER_MILLE = 75
"""Chance (in 1/1000) that an optional key is left out of a row: 5-10 % of each row's keys."""

FIRST = ["José", "Zoë", "Łukasz", "Søren", "François", "Müller", "Ана", "Νίκος", "山田", "김", "李", "Ahmed"]
LAST = ["García", "Ødegård", "Straße", "Dvořák", "太郎", "민수", "小明", "Smith", "Núñez", "Иванов", "𠮷野", "O'Brien"]
WORDS = [
    *("ranked", "chill", "speedrun", "co-op", "café", "naïve", "niño", "grüße", "fiancée", "ελληνικά"),
    *("日本語", "配信", "한국어", "🎮", "🔥", "🚀", "👾", '"quoted"', "back\\slash", "tab\there"),
]
TAGS = ["English", "Español", "Français", "日本語", "한국어", "Deutsch", "FPS", "RPG", "Chill", "😀", "Co-op"]
LANGS = ["en", "de", "es", "fr", "ja", "pt", "ru", "ko", "zh", "pl"]
TYPES = ["live", "live", "live", "live", "rerun", "premiere"]
LABELS = ["intro", "gameplay", "break", "outro", "Q&A", "ending ✨"]
OFFSETS = ["+02:00", "-05:00", "+05:30", "+00:00", "+09:00"]
T_LOW = 1622541600
"""2021-06-01 10:00:00 UTC: the first snapshot; one every 5 minutes from here."""
SNAPSHOT_ROWS = 5000
"""Rows per snapshot: they share `captured_at`, as the rows of one poll of an API do."""


def _sql_str(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _pool(values: list[str]) -> str:
    """An SQL array of the values JSON-escaped, without their quotes (the SELECT adds them)."""
    return "[" + ", ".join(_sql_str(json.dumps(v, ensure_ascii=False)[1:-1]) for v in values) + "]"


def _row_sql(seed: int, start: int, count: int) -> str:
    """The SELECT of one JSON line for each row number `n` in [start, start + count)."""

    def h(k: int | str) -> str:
        return f"cityHash64(n, {seed}, {k})"

    def f(k: int) -> str:
        return f"({h(k)} / 18446744073709551616.0)"

    def pick(pool: list[str], k: int | str, index: str | None = None) -> str:
        return f"arrayElement({_pool(pool)}, 1 + ({index or h(k)}) % {len(pool)})"

    def opt(k: int, fragment: str) -> str:
        """A key left out of about 7.5 % of the rows, each key on its own hash."""
        return f"if({h(1000 + k)} % 1000 < {MISSING_PER_MILLE}, '', {fragment})"

    def ts(seconds: str, suffix: str) -> str:
        return f"concat(formatDateTime(toDateTime({seconds}, 'UTC'), '%Y-%m-%dT%H:%i:%S', 'UTC'), {suffix})"

    def frac(k: int, digits: int) -> str:
        return f"concat('.', leftPad(toString({h(k)} % {10**digits}), {digits}, '0'))"

    def obj(fragments: list[str]) -> str:
        return "concat('{', arrayStringConcat(arrayFilter(x -> notEmpty(x), [" + ", ".join(fragments) + "]), ','), '}')"

    uid = "toString(uid)"
    user = obj(
        [
            f"concat('\"id\":', {uid})",
            f"concat('\"login\":\"user_', {uid}, '\"')",
            opt(3, f"concat('\"name\":\"', {pick(FIRST, 0, 'uid')}, ' ', {pick(LAST, 0, 'intDiv(uid, 7)')}, '\"')"),
            opt(
                4,
                f'concat(\'"geo":{{"lat":\', toString(round({f(8)} * 180 - 90, 1)), '
                f"',\"lon\":', toString(round({f(9)} * 360 - 180, 1)), '}}')",
            ),
            opt(5, f"concat('\"verified\":', if({f(10)} < 0.2, 'true', 'false'))"),
        ]
    )
    gid = "toString(gid)"
    game = f'concat(\'"game":{{"id":"\', {gid}, \'","name":"Game \', {gid}, \' \', {pick(WORDS, 0, "gid")}, \'"}}\')'
    title = (
        f'concat(\'"title":"\', arrayStringConcat(arrayMap(i -> {pick(WORDS, 0, h("100 + i"))}, '
        f"range(1 + {h(13)} % 3)), ' '), '\"')"
    )
    viewers = f"toString(if({f(14)} < 0.9, {h(15)} % 2000, 1 + {h(15)} % 5000000))"
    # About one row in eight sends the count as a string, as some APIs do.
    viewer_count = f"concat('\"viewer_count\":', if({f(16)} < 0.125, concat('\"', {viewers}, '\"'), {viewers}))"
    form = f"({h(17)} % 10)"
    # 60 % `...Z`, 20 % milliseconds, 10 % microseconds, 10 % an offset.
    started_suffix = (
        f"multiIf({form} < 6, 'Z', {form} < 8, concat({frac(18, 3)}, 'Z'), {form} < 9, concat({frac(18, 6)}, 'Z'), "
        f"{pick(OFFSETS, 18)})"
    )
    tag = f"concat('\"', {pick(TAGS, 0, h('200 + i'))}, '\"')"
    tags = f"concat('\"tags\":[', arrayStringConcat(arrayMap(i -> {tag}, range({h(19)} % 4)), ','), ']')"
    scores = (
        f"concat('\"scores\":[', arrayStringConcat(arrayMap(i -> toString(toInt64({h('300 + i')} % 1100) - 100), "
        f"range({h(20)} % 3)), ','), ']')"
    )
    segment = (
        f"concat('{{\"start\":', toString({h('400 + i')} % 3600), ',\"duration\":', "
        f'toString(round({h("500 + i")} / 18446744073709551616.0 * 600, 1)), \',"label":"\', '
        f"{pick(LABELS, 0, h('600 + i'))}, '\"}}')"
    )
    # A quarter of the rows have one or two segments, the others an empty array.
    n_segments = f"if({h(21)} % 4 = 0, 1 + {h(37)} % 2, 0)"
    segments = f"concat('\"segments\":[', arrayStringConcat(arrayMap(i -> {segment}, range({n_segments})), ','), ']')"
    # Every trace id is at or above 2^63: only UInt64 holds them. Mixed with small ones in the column, the
    # engine's inference fails when another column of a row is negative (chDB 26.9).
    trace = f"9223372036854775808 + {h(25)} % 100000000"
    updated = ts(f"captured - {h(23)} % 60", f"concat({frac(26, 3)}, 'Z')")
    captured = ts("captured", "'Z'")
    fields = [
        f"concat('\"id\":\"', toString(10000000000 + n * 7 + {h(1)} % 7), '\"')",
        opt(2, f"concat('\"user\":', {user})"),
        opt(6, game),
        opt(7, f"concat('\"type\":\"', {pick(TYPES, 7)}, '\"')"),
        opt(8, title),
        opt(9, viewer_count),
        opt(10, f"concat('\"follower_count\":', toString(1 + {h(22)} % if({f(36)} < 0.9, 100000, 3000000000)))"),
        opt(11, f"concat('\"started_at\":\"', {ts('started', started_suffix)}, '\"')"),
        opt(12, f"concat('\"updated_at\":\"', {updated}, '\"')"),
        opt(13, f"concat('\"language\":\"', {pick(LANGS, 27)}, '\"')"),
        opt(14, tags),
        opt(15, scores),
        opt(16, segments),
        opt(17, f"concat('\"is_mature\":', if({f(28)} < 0.1, 'true', 'false'))"),
        opt(18, f"concat('\"rating\":', if({f(29)} < 0.15, 'null', toString(round({f(30)} * 5, 1))))"),
        opt(19, f"concat('\"trace_id\":', toString({trace}))"),
        opt(20, f"concat('\"delta\":', toString(toInt64({h(31)} % 256) - 128))"),
        opt(21, f"concat('\"bitrate_kbps\":', toString(round(2500 + {f(32)} * 100, 1)))"),
        opt(22, f"concat('\"delay\":', if({f(33)} < 0.7, 'null', toString({h(34)} % 60)))"),
        opt(23, f"concat('\"captured_at\":\"', {captured}, '\"')"),
    ]
    return (
        f"SELECT {obj(fields)} AS line FROM (SELECT number AS n, 1 + {h(6)} % 5000 AS uid, 1 + {h(11)} % 300 AS gid, "
        f"{T_LOW} + intDiv(n, {SNAPSHOT_ROWS}) * 300 AS captured, captured - {h(7)} % 14400 AS started "
        f"FROM numbers({start}, {count}))"
    )


def file_rows(rows: int, files: int, seed: int) -> list[int]:
    """Rows per file, uneven (weights 1 to 13, shuffled by the seed), summing to `rows`."""
    weights = [1 + 12 * (i / max(1, files - 1)) ** 2 for i in range(files)]
    random.Random(seed * 7919 + files).shuffle(weights)
    total = sum(weights)
    counts = [int(rows * w / total) for w in weights]
    counts[counts.index(max(counts))] += rows - sum(counts)
    return counts


def generate(out_dir: Path, rows: int = ROWS, files: int = FILES, seed: int = SEED) -> list[Path]:
    """Write `files` gzip JSON-lines files, `rows` rows in all, as dumps_NNNN.json.gz."""
    import chdb

    out_dir.mkdir(parents=True, exist_ok=True)
    conn = chdb.connect(":memory:")
    paths, first = [], 0
    for i, count in enumerate(file_rows(rows, files, seed)):
        path = out_dir / f"dumps_{i:04d}.json.gz"
        path.unlink(missing_ok=True)
        conn.query(
            f"INSERT INTO FUNCTION file({_sql_str(str(path))}, 'TSVRaw', 'line String') "
            f"{_row_sql(seed, first, count)} SETTINGS output_format_compression_level = 6"
        )
        os.utime(path, (MTIME_BASE + i, MTIME_BASE + i))  # fixed mtimes: provenance repeats too
        paths.append(path)
        first += count
    conn.close()
    return paths


def generate_small(out_dir: Path, files: int, seed: int = SEED, rows_per_file: int = SMALL_ROWS) -> list[Path]:
    """Write `files` plain JSON-lines files of `rows_per_file` rows each (P11: many small files)."""
    import chdb

    out_dir.mkdir(parents=True, exist_ok=True)
    conn = chdb.connect(":memory:")
    text = conn.query(_row_sql(seed, 0, files * rows_per_file), "TSVRaw").bytes()
    conn.close()
    lines = text.splitlines(keepends=True)
    paths = []
    for i in range(files):
        path = out_dir / f"small_{i:06d}.json"
        path.write_bytes(b"".join(lines[i * rows_per_file : (i + 1) * rows_per_file]))
        os.utime(path, (MTIME_BASE + i, MTIME_BASE + i))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="directory to write (made if missing)")
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--small-files", type=int, metavar="N", help=f"write N files of {SMALL_ROWS} lines instead")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    if args.small_files:
        paths = generate_small(args.out, args.small_files, args.seed)
        rows = args.small_files * SMALL_ROWS
    else:
        paths = generate(args.out, args.rows, args.files, args.seed)
        rows = args.rows
    sizes = [p.stat().st_size for p in paths]
    print(
        f"wrote {len(paths)} files, {rows:,} rows, {sum(sizes) / 1e6:.1f} MB "
        f"(files {min(sizes) / 1e6:.2f}-{max(sizes) / 1e6:.2f} MB) to {args.out} in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
