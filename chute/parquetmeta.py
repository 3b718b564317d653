"""What a Parquet file's own metadata says about its columns, read without its rows."""

from __future__ import annotations

from chute.engine import Engine
from chute.schema import Column

# Top-level columns (path = name): a leaf inside a list counts an empty list as a null.
_NULLS_SQL = (
    "SELECT c.name AS name, min(c.have_statistics) AS stats, sum(ifNull(c.statistics.null_count, 1)) AS nulls "
    "FROM (SELECT arrayJoin(row_groups) AS rg FROM {metadata}) ARRAY JOIN rg.columns AS c "
    "WHERE c.path = c.name GROUP BY name"
)


def optional_without_nulls(engine: Engine, metadata: str) -> set[str]:
    """Top-level columns whose statistics count no NULL in any row group.

    `metadata` reads the file as `ParquetMetadata`."""
    rows = engine.rows(_NULLS_SQL.format(metadata=metadata), context="reading Parquet statistics")
    return {str(r["name"]) for r in rows if r["stats"] and int(r["nulls"]) == 0}


def nullable_note(engine: Engine, metadata: str, key: str, columns: list[Column]) -> str | None:
    """A note naming the columns that are Nullable only because the file declares them optional
    (pyarrow's default), though it holds no NULL in them; None when there are none."""
    nullable = [c.name for c in columns if c.type.startswith("Nullable(")]
    if not nullable:
        return None
    clean = optional_without_nulls(engine, metadata)
    names = [n for n in nullable if n in clean]
    if not names:
        return None
    return (
        f"columns {', '.join(names)}: Nullable, as {key} declares them optional, though it holds no NULL in "
        "them; write them as required (pyarrow: nullable=False) or create the table first to have them not Nullable"
    )
