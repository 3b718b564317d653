"""The `Target` protocol: what the loader, export and the ledger need of a database."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from chute.capabilities import Capabilities
from chute.engine import Engine, Settings, StatementResult
from chute.formats import FileFormat
from chute.schema import Column
from chute.sql import TableName
from chute.targets.staging import CommitCheck
from chute.units import Unit


class Target(Protocol):
    """A ClickHouse database that chute loads into and keeps its ledger in."""

    @property
    def display_name(self) -> str:
        """How the target is named in messages (never with a secret)."""
        ...

    @property
    def is_server(self) -> bool:
        """Whether rows go to a ClickHouse server (over HTTP) rather than the embedded engine."""
        ...

    @property
    def engine(self) -> Engine:
        """The embedded engine that reads sources for this target."""
        ...

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def parallel_streams(self) -> int:
        """How many SELECTs a batch is split into (the embedded engine parallelises one itself)."""
        ...

    @property
    def parallel_inserts(self) -> bool:
        """Whether `write_batch(concurrent=True)` runs its SELECTs as INSERTs of their own at once."""
        ...

    @property
    def bytes_sent(self) -> int:
        """Bytes put on the wire so far (0 for the embedded target)."""
        ...

    @property
    def round_trips(self) -> int:
        """Requests sent to the server so far, every node's (0 for the embedded target)."""
        ...

    def execute(self, sql: str, settings: Settings | None = None, context: str = "") -> StatementResult: ...

    def rows(self, sql: str, settings: Settings | None = None, context: str = "") -> list[dict[str, Any]]: ...

    def text(self, sql: str, fmt: str, context: str = "") -> str:
        """A query's output in the ClickHouse format `fmt`, for people to read."""
        ...

    def table_columns(self, table: TableName) -> list[Column] | None: ...

    @property
    def shared(self) -> bool:
        """Whether other processes may load into this target at the same time (a server:
        loads then take claims; an embedded directory is locked by its one process)."""
        ...

    def guard_commits(self, owner: str, guard: Callable[[], None]) -> None:
        """Name this worker's stage tables after `owner`, and call `guard` just before rows
        move into a table (it raises when this worker's claims ended)."""
        ...

    def prepare(self, table: TableName, live_owners: Callable[[], set[str]] | None = None) -> None:
        """Before a load: drop stage tables that a killed run left behind (not those of
        the owners `live_owners()` names: workers loading now)."""
        ...

    def mutate(self, table: TableName, command: str, context: str) -> None:
        """Run `ALTER TABLE table <command>` (UPDATE/DELETE) and wait until it is done."""
        ...

    def delete_sources(self, table: TableName, sources: Sequence[str], loads: Sequence[str] = ()) -> None:
        """Delete the rows whose `_source` is one of `sources` (and, given `loads`, whose
        `_load_id` is one of them), and wait for it."""
        ...

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
        constants: Mapping[str, str] | None = None,
        tagged: bool = False,
    ) -> dict[str, int]:
        """Insert the rows of the engine SELECTs all-or-nothing; return rows per
        `_source` (or under the key "" when `count_by_source` is false).

        `constants`: columns whose value is the same for every row of the batch (column ->
        SQL expression of the column's type). The SELECTs give them too; a target may leave
        them out of what it sends and fill them where the rows land.

        `tagged` (only for a table that stages): the SELECTs give staging.SOURCE_COLUMN after
        the table's columns (before MASK_COLUMN): each row's file, for a table without
        `_source`; counts are per its values.

        `missing`: the last column is staging.MASK_COLUMN (the table lacks it; only for a
        table that stages); after the commit it holds, keyed as the counts, the rows with a
        missing value and the OR of their masks (sources with none left out).

        `concurrent`: each SELECT is an INSERT of its own, all at once (each
        squashes its rows into blocks on its own), where `parallel_inserts`;
        `written` then gets each one's rows, in order, before `before_commit`.
        `swap_if_empty`: nothing else writes the table during the commit, so a
        table with no parts may take the stage table's place instead of its
        parts (a target that cannot swap moves the parts)."""
        ...

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
        """Run `INSERT ... select` in the target itself, all-or-nothing: for a server,
        the server reads the source (url(), s3(), s3Cluster()); rows per `_source` as write_batch."""
        ...

    def accepts_raw(self, fmt: FileFormat, table: TableName | None = None) -> bool:
        """Whether `write_raw` can send files of this format as they are (into `table`)."""
        ...

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
        """Send one file's bytes for the server to parse (all-or-nothing); rows under ""."""
        ...

    def insert_file(
        self, into: TableName, columns: Sequence[str], unit: Unit, format_name: str, settings: Settings, context: str
    ) -> None:
        """Send one local file's bytes for the server to parse into `into` (a stage), as they are."""
        ...

    def table_stats(self, table: TableName) -> tuple[int, int]:
        """(rows, bytes on disk) of a table (of all its shards' tables, for a Distributed one)."""
        ...

    def books_target(self, table: TableName, cluster: str | None = None) -> Target:
        """Where chute keeps the books of loads into `table`: this target, or for a Distributed
        table (or one not made yet that `cluster` will hold) a node of its first shard."""
        ...

    def settle(self, table: TableName) -> None:
        """After a load: wait until every replica of the table has the rows (a note in
        `notes` names those that did not in time); nothing where it is not replicated."""
        ...

    @property
    def notes(self) -> list[str]:
        """What the target learnt that the load's report should say (replicas, shards)."""
        ...
