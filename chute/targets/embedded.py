"""The embedded target: a ClickHouse database directory opened through chDB.

Each batch is inserted into a stage table of the same structure and then moved
into the target with ATTACH PARTITION ... FROM (hard links, no copy), so a
failed insert never leaves part of a batch in the target table.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from chute.engine import Engine, Settings, StatementResult, open_engine
from chute.schema import Column, table_columns
from chute.sql import TableName, quote_ident, quote_str

STAGE_PREFIX = "_chute_stage_"


class EmbeddedTarget:
    def __init__(self, path: str) -> None:
        self._engine = open_engine(path)
        self.path = path

    @property
    def display_name(self) -> str:
        return self.path

    @property
    def engine(self) -> Engine:
        return self._engine

    def execute(self, sql: str, settings: Settings | None = None, context: str = "") -> StatementResult:
        return self._engine.execute(sql, settings, context)

    def rows(self, sql: str, settings: Settings | None = None, context: str = "") -> list[dict[str, Any]]:
        return self._engine.rows(sql, settings, context)

    def table_columns(self, table: TableName) -> list[Column] | None:
        return table_columns(self._engine, table)

    def _database_literal(self, table: TableName) -> str:
        return quote_str(table.database) if table.database else "currentDatabase()"

    def _supports_staging(self, table: TableName) -> bool:
        rows = self.rows(
            f"SELECT engine FROM system.tables WHERE database = {self._database_literal(table)} "
            f"AND name = {quote_str(table.table)}"
        )
        return bool(rows) and "MergeTree" in rows[0]["engine"]

    def drop_stale_stages(self, table: TableName) -> None:
        """Drop stage tables left by a run that was killed."""
        prefix = f"{STAGE_PREFIX}{table.table}_"
        rows = self.rows(
            f"SELECT name FROM system.tables WHERE database = {self._database_literal(table)} "
            f"AND startsWith(name, {quote_str(prefix)})"
        )
        for row in rows:
            self.execute(f"DROP TABLE IF EXISTS {TableName(table.database, row['name']).sql}")

    def write_batch(
        self,
        table: TableName,
        columns: Sequence[str],
        select_sql: str,
        settings: Settings,
        count_by_source: bool,
        context: str,
    ) -> dict[str, int]:
        column_list = ", ".join(quote_ident(c) for c in columns)
        if not self._supports_staging(table):
            result = self.execute(f"INSERT INTO {table.sql} ({column_list}) {select_sql}", settings, context)
            return {"": result.rows_written}
        stage = TableName(table.database, f"{STAGE_PREFIX}{table.table}_{uuid.uuid4().hex[:12]}")
        self.execute(f"CREATE TABLE {stage.sql} AS {table.sql}", context=context)
        try:
            result = self.execute(f"INSERT INTO {stage.sql} ({column_list}) {select_sql}", settings, context)
            if count_by_source:
                counts = {
                    r["_source"]: int(r["n"])
                    for r in self.rows(f"SELECT _source, count() AS n FROM {stage.sql} GROUP BY _source")
                }
            else:
                counts = {"": result.rows_written}
            partitions = self.rows(
                "SELECT DISTINCT partition_id FROM system.parts WHERE active "
                f"AND database = {self._database_literal(stage)} AND table = {quote_str(stage.table)}"
            )
            for part in partitions:
                self.execute(
                    f"ALTER TABLE {table.sql} ATTACH PARTITION ID {quote_str(part['partition_id'])} FROM {stage.sql}",
                    context=context,
                )
            return counts
        finally:
            self.execute(f"DROP TABLE IF EXISTS {stage.sql} SYNC")

    def table_stats(self, table: TableName) -> tuple[int, int]:
        rows = self.rows(
            "SELECT sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts WHERE active "
            f"AND database = {self._database_literal(table)} AND table = {quote_str(table.table)}"
        )
        if not rows:
            return 0, 0
        return int(rows[0]["rows"] or 0), int(rows[0]["bytes"] or 0)
