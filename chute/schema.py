"""Schema inference, table DDL, and the structure that casts input to the table."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chute.engine import Engine
from chute.sql import TableName, quote_ident, quote_str

RowsQuery = Callable[[str, Any, str], list[dict[str, Any]]]
"""A target's or engine's `rows(sql, settings, context)`."""

PROVENANCE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_source", "LowCardinality(String)"),
    ("_source_mtime", "DateTime64(3, 'UTC')"),
    ("_source_row", "UInt64"),
    ("_load_id", "LowCardinality(String)"),
)
PROVENANCE_NAMES = frozenset(name for name, _ in PROVENANCE_COLUMNS)

# Inference makes a column Nullable only where the sample holds a null.
INFERENCE_SETTINGS = {"schema_inference_make_columns_nullable": "auto"}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    default_kind: str = ""  # "", DEFAULT, MATERIALIZED, ALIAS, EPHEMERAL
    default_expression: str = ""

    @property
    def insertable(self) -> bool:
        return self.default_kind not in ("MATERIALIZED", "ALIAS")

    def structure_sql(self) -> str:
        """The column as written in a file() structure, defaults included."""
        sql = f"{quote_ident(self.name)} {self.type}"
        if self.default_kind == "DEFAULT" and self.default_expression:
            sql += f" DEFAULT {self.default_expression}"
        return sql


def structure(columns: list[Column]) -> str:
    return ", ".join(c.structure_sql() for c in columns)


def describe(
    engine: Engine,
    table_expression: str,
    context: str,
    sample_rows: int | None = None,
    format_settings: Mapping[str, str | int | float] | None = None,
) -> list[Column]:
    """Column names and types the engine infers for a table expression."""
    settings: dict[str, str | int | float] = {**INFERENCE_SETTINGS, **(format_settings or {})}
    if sample_rows is not None:
        settings["input_format_max_rows_to_read_for_schema_inference"] = sample_rows
    rows = engine.rows(f"DESCRIBE {table_expression}", settings=settings, context=context)
    return [Column(r["name"], r["type"]) for r in rows]


def table_columns(rows: RowsQuery, table: TableName, ordered: bool = True) -> list[Column] | None:
    """The table's columns, or None when the table does not exist.

    `ordered` sorts by `position`, which servers before 19.x lack (their
    system.columns lists columns in table order anyway).
    """
    database = quote_str(table.database) if table.database else "currentDatabase()"
    found = rows(
        "SELECT name, type, default_kind, default_expression FROM system.columns "
        f"WHERE database = {database} AND table = {quote_str(table.table)}" + (" ORDER BY position" if ordered else ""),
        None,
        f"reading columns of {table}",
    )
    if not found:
        return None
    return [Column(r["name"], r["type"], r["default_kind"], r["default_expression"]) for r in found]


# Codecs for provenance columns of tables chute creates: row numbers count up and a
# file's mtime repeats, so Delta makes them nearly free on disk (measured: 4.4 MB -> 0.4 MB
# per million rows, same insert time).
PROVENANCE_CODECS = {"_source_row": "CODEC(Delta(8), LZ4)", "_source_mtime": "CODEC(Delta(8), LZ4)"}


def create_table_sql(
    table: TableName,
    columns: list[Column],
    order_by: str,
    partition_by: str | None,
    codecs: bool = False,
) -> str:
    """MergeTree DDL; ORDER BY and PARTITION BY are SQL expressions of the user.
    With `codecs` (the target has them), provenance columns get theirs."""
    body = ",\n    ".join(
        c.structure_sql() + (f" {PROVENANCE_CODECS[c.name]}" if codecs and c.name in PROVENANCE_CODECS else "")
        for c in columns
    )
    sql = f"CREATE TABLE IF NOT EXISTS {table.sql}\n(\n    {body}\n)\nENGINE = MergeTree"
    if partition_by:
        sql += f"\nPARTITION BY {partition_by}"
    sql += f"\nORDER BY {order_by}"
    if not _nullable_safe(order_by, columns):
        sql += "\nSETTINGS allow_nullable_key = 1"
    return sql


def _nullable_safe(order_by: str, columns: list[Column]) -> bool:
    """No Nullable column is named in the ORDER BY (as a whole identifier)."""
    nullable = {c.name for c in columns if c.type.startswith("Nullable(")}
    named = {quoted or plain for quoted, plain in re.findall(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)", order_by)}
    return not (nullable & named)


def with_provenance(columns: list[Column], extra: Sequence[tuple[str, str]] = ()) -> list[Column]:
    """`columns` plus the provenance columns (and a source's `extra` ones) they lack."""
    present = {c.name for c in columns}
    return columns + [Column(n, t) for n, t in (*PROVENANCE_COLUMNS, *extra) if n not in present]
