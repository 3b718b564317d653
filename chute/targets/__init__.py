"""Targets: where rows end up. The embedded directory today, servers next.

The loader speaks to a target only through `Target`; a new target is one new
module here plus one line in `open_target`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

from chute.engine import Engine, Settings, StatementResult
from chute.errors import UsageError
from chute.schema import Column
from chute.sql import TableName

DEFAULT_TARGET = "./chute.db"


class Target(Protocol):
    """A ClickHouse database that chute loads into and keeps its ledger in."""

    @property
    def display_name(self) -> str:
        """How the target is named in messages (never with a secret)."""
        ...

    @property
    def engine(self) -> Engine:
        """The embedded engine that reads sources for this target."""
        ...

    def execute(self, sql: str, settings: Settings | None = None, context: str = "") -> StatementResult: ...

    def rows(self, sql: str, settings: Settings | None = None, context: str = "") -> list[dict[str, Any]]: ...

    def table_columns(self, table: TableName) -> list[Column] | None: ...

    def write_batch(
        self,
        table: TableName,
        columns: Sequence[str],
        select_sql: str,
        settings: Settings,
        count_by_source: bool,
        context: str,
    ) -> dict[str, int]:
        """Insert the rows of `select_sql` all-or-nothing; rows per `_source`
        (or under the key "" when `count_by_source` is false)."""
        ...

    def table_stats(self, table: TableName) -> tuple[int, int]:
        """(rows, bytes on disk) of a table."""
        ...


def open_target(spec: str | None) -> Target:
    """A target from `--target`, `CHUTE_TARGET`, or the default directory."""
    spec = spec or os.environ.get("CHUTE_TARGET") or DEFAULT_TARGET
    if spec.startswith(("http://", "https://")):
        raise UsageError("server targets (http/https) are not available in this version yet")
    if "://" in spec:
        raise UsageError(f"unknown target scheme in {spec.split('://', 1)[0]!r}: give a directory path")
    from chute.targets.embedded import EmbeddedTarget

    return EmbeddedTarget(spec)
