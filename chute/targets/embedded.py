"""The embedded target: a ClickHouse database directory opened through chDB.

Each batch is inserted into a stage table of the same structure and then moved
into the target with ATTACH PARTITION ... FROM (hard links, no copy), so a
failed insert never leaves part of a batch in the target table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from chute.capabilities import EMBEDDED, Capabilities
from chute.engine import Engine, Settings, StatementResult, open_engine
from chute.errors import UsageError
from chute.formats import FileFormat
from chute.schema import Column, table_columns
from chute.sql import TableName, quote_ident, quote_str, sources_filter
from chute.targets.mutations import outlasting_cancels
from chute.targets.staging import PART_WRITER_SETTINGS, CommitCheck, Stage
from chute.units import Unit


class EmbeddedTarget:
    def __init__(self, path: str, reading: bool = False) -> None:
        self._engine = open_engine(path, reading=reading)
        self.path = path
        self._merge_tree_settings: frozenset[str] | None = None
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def _changing(self, table: TableName) -> threading.Lock:
        """Held by a mutation of `table` and by a batch's move into it: attaching parts cancels a
        running mutation (chute.targets.mutations), which is then postponed, again and again while
        batches keep moving in."""
        with self._locks_lock:
            return self._locks.setdefault(table.sql, threading.Lock())

    def _known(self, names: Iterable[str]) -> set[str]:
        """Those of `names` this engine has as MergeTree settings (read once): a setting an
        engine version drops must not fail a load."""
        if self._merge_tree_settings is None:
            listed = ", ".join(quote_str(n) for n in sorted(PART_WRITER_SETTINGS))
            found = self._engine.rows(f"SELECT name FROM system.merge_tree_settings WHERE name IN ({listed})")
            self._merge_tree_settings = frozenset(str(r["name"]) for r in found)
        return set(names) & self._merge_tree_settings

    @property
    def display_name(self) -> str:
        return self.path

    @property
    def is_server(self) -> bool:
        return False

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def capabilities(self) -> Capabilities:
        return EMBEDDED

    @property
    def parallel_inserts(self) -> bool:
        return True

    @property
    def parallel_streams(self) -> int:
        return 1

    @property
    def bytes_sent(self) -> int:
        return 0

    @property
    def round_trips(self) -> int:
        return 0

    def execute(self, sql: str, settings: Settings | None = None, context: str = "") -> StatementResult:
        return self._engine.execute(sql, settings, context)

    def rows(self, sql: str, settings: Settings | None = None, context: str = "") -> list[dict[str, Any]]:
        return self._engine.rows(sql, settings, context)

    def text(self, sql: str, fmt: str, context: str = "") -> str:
        return self._engine.text(sql, fmt=fmt, context=context)

    def table_columns(self, table: TableName) -> list[Column] | None:
        return table_columns(self._engine.rows, table)

    @property
    def shared(self) -> bool:
        return False

    def guard_commits(self, owner: str, guard: Callable[[], None]) -> None:
        """Nothing to do: one process holds the directory."""

    def prepare(self, table: TableName, live_owners: Callable[[], set[str]] | None = None) -> None:
        Stage.drop_stale(self, table, live_owners)

    def mutate(self, table: TableName, command: str, context: str) -> None:
        # Mutations run in the merge pool: a stage table holding merges would never finish one.
        self.execute(f"SYSTEM START MERGES {table.sql}", context=context)
        with self._changing(table):
            outlasting_cancels(
                lambda: self.execute(f"ALTER TABLE {table.sql} {command}", {"mutations_sync": 2}, context),
                self.rows,
                table,
                context,
            )

    def _mutate_held(self, table: TableName, command: str, context: str) -> None:
        """A mutation of a stage that holds its merges: they resume for it alone."""
        self.mutate(table, command, context)
        self.execute(f"SYSTEM STOP MERGES {table.sql}", context=context)

    def delete_sources(self, table: TableName, sources: Sequence[str], loads: Sequence[str] = ()) -> None:
        context = f"removing earlier rows of {len(sources)} file(s)"
        delete = f"DELETE FROM {table.sql} WHERE {sources_filter(sources, loads)}"
        with self._changing(table):
            outlasting_cancels(
                lambda: self.execute(delete, context=context),
                self.rows,
                table,
                context,
            )

    def write_batch(
        self,
        table: TableName,
        columns: Sequence[str],
        selects: Sequence[str],
        settings: Settings,
        count_by_source: bool,
        context: str,
        before_commit: CommitCheck | None = None,
        concurrent: bool = False,
        swap_if_empty: bool = False,
        written: list[int] | None = None,
        missing: dict[str, tuple[int, int]] | None = None,
        constants: Mapping[str, str] | None = None,  # in this process a constant costs nothing to pass on
        tagged: bool = False,
    ) -> dict[str, int]:
        column_list = ", ".join(quote_ident(c) for c in columns)
        query_settings = {k: v for k, v in settings.items() if k not in PART_WRITER_SETTINGS}
        known = self._known(k for k in settings if k in PART_WRITER_SETTINGS)
        part_settings = {k: v for k, v in settings.items() if k in known}
        with Stage(
            self,
            table,
            context,
            drop_sync=False,
            hold_merges=True,
            modern=True,
            part_settings=part_settings,
            swap_if_empty=swap_if_empty,
            missing=missing,
            mutate=self._mutate_held,
            tagged=tagged,
            moving=self._changing,
        ) as stage:
            insert = f"INSERT INTO {(stage.table or table).sql} ({column_list})"
            if concurrent and len(selects) > 1:
                results = self._at_once([f"{insert} {s}" for s in selects], query_settings, context)
                if written is not None:
                    written.extend(r.rows_written for r in results)
            else:
                results = [self.execute(f"{insert} {' UNION ALL '.join(selects)}", query_settings, context)]
            return stage.commit(count_by_source, sum(r.rows_written for r in results), before_commit)

    def _at_once(self, statements: list[str], settings: Settings, context: str) -> list[StatementResult]:
        """Run statements at once, a thread (and engine connection) each; the first error is raised
        after all have ended, so none still writes into a stage that is being dropped."""
        with ThreadPoolExecutor(len(statements)) as pool:
            futures = [pool.submit(self.execute, sql, settings, context) for sql in statements]
            wait(futures)
        return [f.result() for f in futures]

    def write_select(
        self,
        table: TableName,
        columns: Sequence[str],
        select: str,
        settings: Settings,
        count_by_source: bool,
        context: str,
        before_commit: CommitCheck | None = None,
    ) -> dict[str, int]:
        return self.write_batch(table, columns, [select], settings, count_by_source, context, before_commit)

    def accepts_raw(self, fmt: FileFormat, table: TableName | None = None) -> bool:
        return False  # the engine reads files itself: there is nothing to pass through

    def write_raw(
        self,
        table: TableName,
        columns: Sequence[str],
        unit: Unit,
        format_name: str,
        settings: Settings,
        context: str,
        before_commit: CommitCheck | None = None,
    ) -> dict[str, int]:
        raise UsageError("server-parse is for server targets; the embedded engine reads files itself")

    def insert_file(
        self, into: TableName, columns: Sequence[str], unit: Unit, format_name: str, settings: Settings, context: str
    ) -> None:
        raise UsageError("server-parse is for server targets; the embedded engine reads files itself")

    def table_stats(self, table: TableName) -> tuple[int, int]:
        return Stage.stats(self, table)

    def books_target(self, table: TableName, cluster: str | None = None) -> EmbeddedTarget:
        return self

    def settle(self, table: TableName) -> None:
        return None  # one process, no replicas

    @property
    def notes(self) -> list[str]:
        return []
