"""Many small JSON-lines files (P11): `files` files of `lines` lines each, in one directory.

Each line: an id (UInt64), a name (text, some non-ASCII), a timestamp (ISO-8601 with `T`,
`Z` and milliseconds), a number (a float). Files are written directly (a few hundred bytes
each: an engine INSERT per file would cost more than the data); mtimes are fixed, so a
re-generated set has the same identities.

    python bench/gen_small.py OUT_DIR [--files 20000] [--lines 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

NAMES = ("alpha", "beta", "gamma", "delta", "épsilon", "ζeta", "eta 東京", "theta")
MTIME_BASE = 1_700_000_000


def generate(out_dir: Path, files: int, lines: int = 5) -> list[Path]:
    """Write the set (names `f000000.json` ...); returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        rows = []
        for j in range(lines):
            n = i * lines + j
            seconds = n % 86_400
            rows.append(
                json.dumps(
                    {
                        "id": n,
                        "name": NAMES[n % len(NAMES)],
                        "ts": f"2026-01-{1 + n % 28:02d}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:"
                        f"{seconds % 60:02d}.{n % 1000:03d}Z",
                        "value": round((n * 7919 % 100_000) / 100, 2),
                    },
                    ensure_ascii=False,
                )
            )
        path = out_dir / f"f{i:06d}.json"
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        os.utime(path, (MTIME_BASE + i, MTIME_BASE + i))
        paths.append(path)
    return paths


def ensure(out_dir: Path, files: int, lines: int = 5) -> Path:
    """The set in `out_dir`, generated unless it is there whole."""
    if not out_dir.is_dir() or sum(1 for _ in out_dir.glob("*.json")) != files:
        if out_dir.is_dir():
            for old in out_dir.glob("*.json"):
                old.unlink()
        generate(out_dir, files, lines)
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--lines", type=int, default=5)
    args = parser.parse_args(argv)
    ensure(args.out_dir, args.files, args.lines)
    print(f"{args.files} files of {args.lines} lines in {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
