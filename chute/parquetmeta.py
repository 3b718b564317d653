"""What a Parquet file's own metadata says about its columns, read without its rows."""

from __future__ import annotations

from collections.abc import Callable

from chute.engine import Engine
from chute.schema import Column, without_nullable
from chute.sql import quote_ident

# Per leaf (a top-level column is one leaf, a list column's elements another): whether every
# row group has statistics, the NULLs they count, and whether the schema makes it required
# (definition level 0: it cannot hold a NULL, whatever the statistics say; the engine's own
# writer gives no NULL count). A list leaf counts an empty or NULL list as a NULL too.
_LEAVES_SQL = (
    "SELECT c.path AS path, min(c.have_statistics) AS stats, sum(ifNull(c.statistics.null_count, 1)) AS nulls, "
    "max(has(required, c.path)) AS required FROM (SELECT arrayJoin(row_groups) AS rg, "
    "arrayMap(x -> x.path, arrayFilter(x -> x.max_definition_level = 0, columns)) AS required FROM {metadata}) "
    "ARRAY JOIN rg.columns AS c GROUP BY path"
)


def _owner(path: str, names: list[str]) -> str | None:
    """The top-level column a leaf's path belongs to (the longest name it starts with)."""
    found = [n for n in names if path == n or path.startswith(n + ".")]
    return max(found, key=len) if found else None


def null_free(
    engine: Engine, metadata: str, columns: list[Column], data: Callable[[str], str] | None = None
) -> set[str]:
    """Columns of a Parquet file that hold no NULL: every leaf is required by the schema, or its
    statistics count none in every row group. A list column whose statistics count some (an
    empty list counts there too) is read (`data(structure)`: the file as a table expression with
    that structure) to count NULL elements, where its type is `Array(Nullable(scalar))`.

    `metadata` reads the file as `ParquetMetadata`; `columns` are the file's, as described."""
    rows = engine.rows(_LEAVES_SQL.format(metadata=metadata), context="reading Parquet statistics")
    names = [c.name for c in columns]
    clean = set(names)
    for r in rows:
        owner = _owner(str(r["path"]), names)
        if owner is not None and not (r["required"] or (r["stats"] and int(r["nulls"]) == 0)):
            clean.discard(owner)
    lists = [c for c in columns if c.name not in clean and _scalar_list(c.type)]
    if lists and data is not None:
        structure = ", ".join(f"{quote_ident(c.name)} {c.type}" for c in lists)
        counts = ", ".join(
            f"sum(arrayCount(x -> isNull(x), {quote_ident(c.name)})) AS n{i}" for i, c in enumerate(lists)
        )
        found = engine.rows(f"SELECT {counts} FROM {data(structure)}", context="counting NULL list elements")
        clean.update(c.name for i, c in enumerate(lists) if found and int(found[0][f"n{i}"] or 0) == 0)
    return clean


def _scalar_list(type_sql: str) -> bool:
    """`Array(Nullable(T))` of a scalar T."""
    head = "Array(Nullable("
    inner = type_sql[len(head) : -2] if type_sql.startswith(head) and type_sql.endswith("))") else ""
    return bool(inner) and not any(w in inner for w in ("Array(", "Tuple(", "Map(", "Nullable(", "Nested("))


def not_nullable(
    columns: list[Column], per_file: list[tuple[str, list[Column], set[str]]]
) -> tuple[list[Column], str | None]:
    """`columns` (inferred from several Parquet files) without Nullable where every sampled file
    (`per_file`: its name, its columns, its `null_free` ones) has the column and holds no NULL in
    it; and a note naming the columns that the files declare optional but are created so."""
    changed: list[str] = []
    result = []
    for c in columns:
        plain = without_nullable(c.type)
        if plain != c.type and all(c.name in free for _, _, free in per_file):
            result.append(Column(c.name, plain, c.default_kind, c.default_expression, c.comment))
            changed.append(c.name)
        else:
            result.append(c)
    if not changed:
        return columns, None
    files = per_file[0][0] + (f" and {len(per_file) - 1} more sampled file(s)" if len(per_file) > 1 else "")
    declare = "declares" if len(per_file) == 1 else "declare"
    note = (
        f"columns {', '.join(changed)}: not Nullable, though {files} {declare} them optional: the statistics "
        "(and list elements) show no NULL; a NULL in a later file loads as the column's default, counted in the report"
    )
    return result, note
