"""One timed run of bench_honest.py, in a process of its own (not run alone).

Each method runs here so that its wall time includes what a user pays (the
interpreter's start, importing the engine it needs, opening a database) and so
that its peak RSS, read by the parent from wait4, is its own. Only the
imports a method needs are made: the bare engine and the count import chdb,
DuckDB imports duckdb, none imports chute. Prints one JSON object.

    python bench/honest_child.py count GLOB
    python bench/honest_child.py bare DB_DIR GLOB STRUCTURE
    python bench/honest_child.py duckdb DB_FILE GLOB
    python bench/honest_child.py columns DB_DIR TABLE       # (untimed) chute's columns without provenance
    python bench/honest_child.py checksum DB_DIR TABLE      # (untimed) count and a hash of each input column
"""

from __future__ import annotations

import json
import sys


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ident(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def count(glob: str) -> dict[str, object]:
    """The engine's decompress-and-split floor: every line counted, none parsed."""
    import chdb

    out = chdb.query(f"SELECT count() FROM file({_lit(glob)}, LineAsString)", "TSV").bytes()
    return {"rows": int(out)}


def bare(db: str, glob: str, structure: str) -> dict[str, object]:
    """The bare engine: chute's column types and the file's path and row number, nothing checked."""
    import chdb

    conn = chdb.connect(db)
    conn.query(f"CREATE TABLE t ({structure}, _path String, _row_number UInt64) ENGINE = MergeTree ORDER BY tuple()")
    conn.query(f"INSERT INTO t SELECT *, _path, _row_number FROM file({_lit(glob)}, JSONEachRow, {_lit(structure)})")
    rows = int(conn.query("SELECT count() FROM t", "TSV").bytes())
    conn.close()
    return {"rows": rows}


def duck(path: str, glob: str) -> dict[str, object]:
    """DuckDB's own reader and inference into a table of its on-disk database, with each row's file name."""
    import duckdb

    conn = duckdb.connect(path)
    conn.execute(f"CREATE TABLE t AS SELECT * FROM read_json_auto({_lit(glob)}, filename = true)")
    row = conn.execute("SELECT count(*) FROM t").fetchone()
    conn.close()
    return {"rows": int(row[0]) if row else -1}


def _columns(conn: object, table: str) -> list[tuple[str, str]]:
    rows = json.loads(
        conn.query(  # type: ignore[attr-defined]
            "SELECT name, type FROM system.columns WHERE database = currentDatabase() "
            f"AND table = {_lit(table)} ORDER BY position",
            "JSONCompact",
        ).bytes()
    )["data"]
    return [(name, kind) for name, kind in rows if not name.startswith("_")]


def columns(db: str, table: str) -> dict[str, object]:
    import chdb

    conn = chdb.connect(db)
    found = _columns(conn, table)
    conn.close()
    return {"columns": found}


def checksum(db: str, table: str) -> dict[str, object]:
    """Rows and, per input column, the sum of its values' hashes: two tables of equal values match."""
    import chdb

    conn = chdb.connect(db)
    names = [name for name, _ in _columns(conn, table)]
    sums = ", ".join(f"toString(sum(cityHash64({_ident(n)})))" for n in names)
    row = json.loads(conn.query(f"SELECT count(), {sums} FROM {_ident(table)}", "JSONCompact").bytes())["data"][0]
    conn.close()
    return {"rows": int(row[0]), "columns": dict(zip(names, row[1:], strict=True))}


def main(argv: list[str]) -> int:
    kind, *args = argv
    methods = {"count": count, "bare": bare, "duckdb": duck, "columns": columns, "checksum": checksum}
    print(json.dumps(methods[kind](*args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
