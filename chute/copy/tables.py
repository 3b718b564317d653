"""The two tables of a copy: the source's facts, and the destination made from them or checked
against them before anything is written.

A missing destination table is made with the source's columns (types mapped
where the destination server is older, as `load` maps them), the same
defaults, and the source's engine clause (a Replicated engine without its
ZooKeeper path: another server is another table). An existing one must have
the source's columns with the types the copy would give them, and the same
partition key: partitions are replaced whole, by id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chute.errors import SchemaError, SourceError, UsageError
from chute.schema import Column
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.base import Target
from chute.targets.engines import extended_syntax, replicated, unreplicated


@dataclass(frozen=True)
class TableFacts:
    """What the copy needs of a table: its columns, engine and keys."""

    columns: list[Column]
    engine: str
    engine_full: str
    partition_key: str
    sorting_key: str

    @property
    def data_columns(self) -> list[Column]:
        """The columns `SELECT *` gives and an INSERT takes (not MATERIALIZED or ALIAS)."""
        return [c for c in self.columns if c.insertable]

    @property
    def merge_tree(self) -> bool:
        return self.engine.endswith("MergeTree")

    @property
    def partitioned(self) -> bool:
        return _plain(self.partition_key) not in ("", "tuple()")


def _plain(expr: str) -> str:
    """A key expression without blanks and backquotes: 18.16 and 26.9 print the same key apart."""
    return re.sub(r"[\s`]", "", expr or "")


def read_facts(target: Target, table: TableName) -> TableFacts | None:
    """The table's facts, None when it does not exist."""
    columns = target.table_columns(table)
    if columns is None:
        return None
    database = quote_str(table.database) if table.database else "currentDatabase()"
    found = target.rows(
        f"SELECT engine, engine_full, partition_key, sorting_key FROM system.tables "
        f"WHERE database = {database} AND name = {quote_str(table.table)}",
        context=f"reading the definition of {table}",
    )
    if not found:
        return None
    row = found[0]
    return TableFacts(
        columns,
        str(row["engine"]),
        str(row["engine_full"]),
        str(row.get("partition_key") or ""),
        str(row.get("sorting_key") or ""),
    )


def source_facts(target: Target, table: TableName) -> TableFacts:
    facts = read_facts(target, table)
    if facts is None:
        raise SourceError(f"no table {table} in {target.display_name}")
    if not facts.data_columns:
        raise SourceError(f"{table} in {target.display_name} has no columns to copy")
    return facts


@dataclass(frozen=True)
class Mapped:
    """The destination's columns for the source's (same order), and why any type differs."""

    columns: list[Column]
    source_types: list[str]
    notes: list[str]


def mapped_columns(source: TableFacts, dest: Target) -> Mapped:
    """The source's data columns with the types the destination can store (the same on a
    destination as new as the source)."""
    caps = dest.capabilities
    out, notes = [], []
    for column in source.data_columns:
        type_sql, why = caps.adapt_type_noted(column.type, data=True)
        if why:
            notes.append(f"column {column.name}: {column.type} -> {type_sql} ({why})")
        out.append(Column(column.name, type_sql, column.default_kind, column.default_expression, column.comment))
    return Mapped(out, [c.type for c in source.data_columns], notes)


def check_dest(source: TableFacts, mapped: Mapped, dest: TableFacts, table: TableName) -> None:
    """SchemaError naming the columns that differ, before anything is written."""
    if not dest.merge_tree:
        raise UsageError(
            f"{table} is a {dest.engine} table: copy writes into a MergeTree-family table "
            "(partitions are replaced whole); give another --as or drop it"
        )
    have = {c.name: c for c in dest.columns}
    problems = []
    for column, source_type in zip(mapped.columns, mapped.source_types, strict=True):
        found = have.get(column.name)
        if found is None:
            problems.append(f"{column.name} missing")
        elif not found.insertable:
            problems.append(f"{column.name} is {found.default_kind} in the destination")
        elif found.type not in (column.type, source_type):
            problems.append(f"{column.name} is {found.type}, the source's {source_type}")
    wanted = {c.name for c in mapped.columns}
    for column in dest.columns:
        if column.name not in wanted and column.insertable and not column.default_kind:
            problems.append(f"{column.name} ({column.type}) only in the destination, without a default")
    if problems:
        raise SchemaError(f"{table} differs from the source: {'; '.join(problems)}; nothing was copied")
    if _plain(dest.partition_key) != _plain(source.partition_key):
        raise SchemaError(
            f"{table} is partitioned by {dest.partition_key or 'nothing'}, the source by "
            f"{source.partition_key or 'nothing'}: copy replaces whole partitions, so both need the same key; "
            "nothing was copied"
        )


def dest_types(mapped: Mapped, dest: TableFacts) -> list[Column]:
    """The destination's own type of each copied column (it may keep the source's where it
    differs from the mapped one)."""
    have = {c.name: c.type for c in dest.columns}
    return [Column(c.name, have.get(c.name, c.type)) for c in mapped.columns]


def create_sql(source: TableFacts, mapped: Mapped, table: TableName, cluster: str | None = None) -> str:
    """CREATE TABLE for the destination: the source's columns (mapped) and engine clause; with
    `cluster`, ON CLUSTER as a replicated table at `/clickhouse/tables/{shard}/<db>/<table>`
    (`table` names its database)."""
    if not source.merge_tree:
        raise UsageError(
            f"the source is a {source.engine} table: create the destination table first "
            "(a MergeTree-family table with the same columns), then copy into it"
        )
    by_name = {c.name: c for c in mapped.columns}
    lines = []
    for column in source.columns:
        # Computed columns (MATERIALIZED, ALIAS) keep their expressions; they are not copied.
        type_sql = by_name[column.name].type if column.name in by_name else column.type
        line = f"{quote_ident(column.name)} {type_sql}"
        if column.default_kind and column.default_expression:
            line += f" {column.default_kind} {column.default_expression}"
        if column.comment:
            line += f" COMMENT {quote_str(column.comment)}"
        lines.append(line)
    # (an 18.16 table of the old syntax, `MergeTree(d, k, 8192)`: current engines refuse it)
    engine = extended_syntax(source.engine_full, source.partition_key, source.sorting_key)
    engine = unreplicated(engine) or engine
    on_cluster = ""
    if cluster is not None:
        path = f"/clickhouse/tables/{{shard}}/{table.database}/{table.table}"
        made = replicated(engine, path, "{replica}")
        if made is None:
            raise UsageError(f"--cluster: cannot make a replicated table of the engine {engine!r}")
        engine, on_cluster = made, f" ON CLUSTER {quote_ident(cluster)}"
    body = ",\n    ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {table.sql}{on_cluster}\n(\n    {body}\n)\nENGINE = {engine}"
