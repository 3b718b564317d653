"""A ClickHouse server over HTTP, any version from 18.16 to current.

The embedded engine (in memory) reads each file, casts every column to the
server table's exact type, adds provenance and emits Native; chute compresses it with ZSTD
(ClickHouse's framing) and streams it to `INSERT ... FORMAT Native`, one block at a time.

Files the server parses itself are POSTed as they are (`chute.targets.rawpost`);
a Distributed table's rows go to a node of each shard (`chute.targets.sharding`).
"""

from __future__ import annotations

import dataclasses
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chute.capabilities import Capabilities
from chute.engine import Engine, Settings, StatementResult, shared_engine
from chute.errors import ChuteError, TargetError, UsageError
from chute.formats import FileFormat
from chute.nativecompress import NativeCompressor, pipelined
from chute.remote.http import retry
from chute.schema import Column, table_columns
from chute.sql import TableName, quote_ident, sources_filter
from chute.targets.cluster import UNKNOWN_DATABASE, Shard, ShardLayout, make_database, shard_layout, wait_for_replicas
from chute.targets.engines import DistributedEngine
from chute.targets.gate import StreamGate
from chute.targets.mutations import wait_for_mutations
from chute.targets.partmemory import PartMemory
from chute.targets.rawpost import passes_through, post_file, server_settings
from chute.targets.retries import SYSTEM_READ_ATTEMPTS, listing_race, retrying
from chute.targets.sharding import Shards, where
from chute.targets.staging import PART_WRITER_SETTINGS, CommitCheck, Stage, unsent
from chute.transport import HttpClient, ServerAddress, check_connection
from chute.units import Unit

_DELETE = "DELETE WHERE "
DELETE_ATTEMPTS = 3
"""DELETEs sent for rows that are still there after the server called the last one done."""


def conversion_settings(settings: Settings, streams: int, low_cardinality: bool) -> dict[str, str | int | float]:
    """The load's settings for the local engine's SELECT that makes the Native stream.

    Part-writer settings are left out: they say how a stage table in this
    process writes its parts, and some are table settings only, which the
    engine refuses in a query (`min_bytes_for_full_part_storage`, which
    partition-aware loads set wherever the server reports its partition key).
    """
    engine_settings = {k: v for k, v in settings.items() if k not in PART_WRITER_SETTINGS}
    engine_settings["max_threads"] = max(1, int(engine_settings.get("max_threads", 1)) // streams)
    engine_settings["low_cardinality_allow_in_native_format"] = int(low_cardinality)
    return engine_settings


# Statements that do the same when sent twice: setup DDL, safe to send again after a
# connection failure (the first may have run or not).
# Also: rows appended to chute's own books (a ledger or claims row sent twice is the same
# state twice), and deleting rows by a condition (deleting them again deletes nothing more).
_IDEMPOTENT = re.compile(
    r"^\s*(?:CREATE\s+(?:TABLE|DATABASE)\s+IF\s+NOT\s+EXISTS|DROP\s+TABLE\s+IF\s+EXISTS"
    r"|INSERT\s+INTO\s+(?:`[^`]*`\.)?`?_chute_(?:ledger|claims)`?"
    r"|ALTER\s+TABLE\s+\S+\s+DELETE\s+WHERE)\s",
    re.IGNORECASE,
)


class ServerTarget:
    def __init__(
        self,
        url: str | None,
        password_file: str | None = None,
        insecure: bool = False,
        connections: int = 2,
        nodes: Sequence[str] = (),
        address: ServerAddress | None = None,
        connect_attempts: int = 3,
        via_distributed: bool = False,
        cluster: str | None = None,
    ) -> None:
        self.address = address or ServerAddress.parse(url, password_file)
        if insecure and self.address.scheme == "https" and address is None:
            print(
                f"chute: WARNING: TLS certificate checks are OFF for {self.address.display} (--insecure)",
                file=sys.stderr,
            )
        self.insecure = insecure
        self.client = HttpClient(self.address, verify_tls=not insecure)
        self.notes: list[str] = []
        try:
            version = check_connection(self.client, attempts=connect_attempts)
        except TargetError as exc:
            if exc.code != UNKNOWN_DATABASE or cluster is None or not self.address.database:
                raise
            version, note = make_database(self.address, not insecure, cluster, connect_attempts)
            self.notes.append(note)
        self.part_memory = PartMemory(lambda sql: self.rows(sql), self.notes)
        """A wide table's INSERTs: the server's part writer reserves memory a column file."""
        self.shards = Shards(self, [self._node_address(n) for n in nodes], self._peer_at)
        """The shards of Distributed tables: where their rows are written."""
        self.shards.via_distributed = via_distributed
        self._caps = Capabilities.for_version(version)
        self._engine: Engine | None = None
        self._sent = 0
        self._sent_lock = threading.Lock()
        self._streaming = threading.Lock()
        """Held by the batch whose rows stream now (see StreamGate)."""
        self.connections = max(1, connections)
        self.stage_owner = ""
        """The tag of this worker's stage tables (see `Stage.drop_stale`)."""
        self.commit_guard: Callable[[], None] | None = None
        """Checked just before rows move into a table: raises when this worker may not commit."""

    @property
    def display_name(self) -> str:
        return self.address.display

    @property
    def is_server(self) -> bool:
        return True

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            # Reuse a directory engine this process already has; chDB holds one.
            self._engine = shared_engine()
        return self._engine

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    @property
    def parallel_inserts(self) -> bool:
        return False

    @property
    def parallel_streams(self) -> int:
        return self.connections

    @property
    def bytes_sent(self) -> int:
        return self._sent + sum(p._sent for p in self.shards.peers())

    @property
    def round_trips(self) -> int:
        return self.client.requests + sum(p.client.requests for p in self.shards.peers())

    def execute(self, sql: str, settings: Settings | None = None, context: str = "") -> StatementResult:
        if _IDEMPOTENT.match(sql):
            retrying(lambda: self.client.query(sql, settings, context))
        else:
            self.client.query(sql, settings, context)
        return StatementResult(0, 0, 0.0)

    def rows(self, sql: str, settings: Settings | None = None, context: str = "") -> list[dict[str, Any]]:
        """Rows of a read (the ledger, system tables), read again after transient failures."""
        return retrying(lambda: self._rows(sql, settings, context))

    def _rows(self, sql: str, settings: Settings | None, context: str) -> list[dict[str, Any]]:
        return retry(
            lambda _: self.client.rows(sql, settings, context),
            SYSTEM_READ_ATTEMPTS,
            0.02,
            lambda exc: isinstance(exc, TargetError) and listing_race(sql, exc),
        )

    def text(self, sql: str, fmt: str, context: str = "") -> str:
        # The format as the HTTP interface's default: a statement's own FORMAT clause wins, and
        # one that returns nothing (INSERT, CREATE) is not made wrong by a clause after it.
        return self.client.query(sql.rstrip().rstrip(";"), {"default_format": fmt}, context=context)

    def table_columns(self, table: TableName) -> list[Column] | None:
        return table_columns(self.rows, table, ordered=self._caps.version >= (19, 0, 0))

    @property
    def shared(self) -> bool:
        return True

    def guard_commits(self, owner: str, guard: Callable[[], None]) -> None:
        self.stage_owner, self.commit_guard = owner, guard

    def allowing_missing_shards(self, allowed: bool) -> ServerTarget:
        """This target with --allow-missing-shards as given (see LoadOptions.allow_missing_shards)."""
        self.shards.allow_missing = allowed
        return self

    def prepare(self, table: TableName, live_owners: Callable[[], set[str]] | None = None) -> None:
        Stage.drop_stale(self, table, live_owners)
        layout = self.layout(table)
        if layout is not None:
            self.shards.prepare(layout, live_owners)

    def mutate(self, table: TableName, command: str, context: str) -> None:
        layout = self.layout(table)
        if layout is not None:
            # A Distributed table takes no ALTER: each shard's table does (all of them).
            for shard in layout.shards:
                self.shards.on_shard(layout, shard, lambda peer: peer.mutate(layout.local, command, context))
            return
        if self._caps.mutations_sync:
            self.execute(f"ALTER TABLE {table.sql} {command}", {"mutations_sync": 2}, context)
            return
        self.execute(f"ALTER TABLE {table.sql} {command}", context=context)
        wait_for_mutations(self.rows, table, context)  # (servers before 20.1)
        if command.startswith(_DELETE):
            self._deleted(table, command, context)

    def _deleted(self, table: TableName, command: str, context: str) -> None:
        """The rows a DELETE named are gone, else it goes again. 18.16 skipped one of two DELETEs
        made at once on one replicated table for some parts: they were mutated past both, kept
        the rows, and `system.mutations` said done (a killed run's rows stayed twice)."""
        where = command[len(_DELETE) :]
        left = 0
        for _ in range(DELETE_ATTEMPTS):
            left = int(str(self.rows(f"SELECT count() AS n FROM {table.sql} WHERE {where}", context=context)[0]["n"]))
            if not left:
                return
            self.execute(f"ALTER TABLE {table.sql} {command}", context=context)
            wait_for_mutations(self.rows, table, context)
        raise TargetError(f"{context}: {left} row(s) still there after {DELETE_ATTEMPTS} deletes of them")

    def _mutate_here(self, table: TableName, command: str, context: str) -> None:
        """An ALTER of a table of this server (a stage: never Distributed), waited for."""
        if self._caps.mutations_sync:
            self.execute(f"ALTER TABLE {table.sql} {command}", {"mutations_sync": 2}, context)
            return
        self.execute(f"ALTER TABLE {table.sql} {command}", context=context)
        wait_for_mutations(self.rows, table, context)  # (servers before 20.1)

    def delete_sources(self, table: TableName, sources: Sequence[str], loads: Sequence[str] = ()) -> None:
        where = sources_filter(sources, loads)
        self.mutate(table, f"DELETE WHERE {where}", f"removing earlier rows of {len(sources)} file(s)")

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
        """Stream the batch into a stage table; retry transient failures whole.

        The SELECTs go over as many connections at once as there are (so
        `concurrent` changes nothing, and `written` stays empty); parts always move by ATTACH: a server
        has other writers, so an empty table is never swapped."""
        layout = self.layout(table)
        if layout is not None and self.shards.via_distributed and not layout.random:

            def send(into: TableName, routing: Settings, filled: Mapping[str, str]) -> None:
                self._send_selects(into, *unsent(columns, selects, filled), settings, context, routing)

            return self.shards.write_routed(layout, context, send, count_by_source, before_commit, constants)
        if layout is not None:

            def fill(peer: ServerTarget, into: TableName, shard: Shard | None, filled: Mapping[str, str]) -> None:
                routed = selects if shard is None else [where(s, layout.condition(shard)) for s in selects]
                peer._send_selects(into, *unsent(columns, routed, filled), settings, context)

            return self.shards.write(layout, context, fill, count_by_source, before_commit, constants)
        return retrying(
            lambda: self._write_once(
                table, columns, selects, settings, count_by_source, context, before_commit, missing, constants, tagged
            )
        )

    def _write_once(
        self,
        table: TableName,
        columns: Sequence[str],
        selects: Sequence[str],
        settings: Settings,
        count_by_source: bool,
        context: str,
        before_commit: CommitCheck | None = None,
        missing: dict[str, tuple[int, int]] | None = None,
        constants: Mapping[str, str] | None = None,
        tagged: bool = False,
    ) -> dict[str, int]:
        with Stage(
            self,
            table,
            context,
            drop_sync=False,
            owner=self.stage_owner,
            guard=self.commit_guard,
            missing=missing,
            mutate=self._mutate_here,
            defaults=constants,
            tagged=tagged,
        ) as stage:
            self._send_selects(stage.table or table, *unsent(columns, selects, stage.defaults), settings, context)
            return stage.commit(count_by_source, before_commit=before_commit)

    def _send_selects(
        self,
        into: TableName,
        columns: Sequence[str],
        selects: Sequence[str],
        settings: Settings,
        context: str,
        server_settings: Settings | None = None,
    ) -> None:
        """The engine's SELECTs as Native into `into`, over as many connections at once as there
        are (`server_settings`: the INSERT's own)."""
        column_list = ", ".join(quote_ident(c) for c in columns)
        streams = min(self.connections, len(selects))
        groups = [list(selects[i::streams]) for i in range(streams)]
        engine_settings = conversion_settings(settings, streams, self._caps.low_cardinality)
        statement = f"INSERT INTO {into.sql} ({column_list}) FORMAT Native"

        gate = StreamGate(self._streaming, streams)

        wide = self.part_memory.over(server_settings, len(columns))

        def send(group: list[str]) -> None:
            body = gate.passing(self._native_body(" UNION ALL ".join(group), engine_settings, context))
            self.client.insert(statement, body, wide, context=context, native_compressed=True)

        with gate:
            if streams == 1:
                send(groups[0])
            else:
                with ThreadPoolExecutor(streams) as pool:
                    for future in [pool.submit(send, g) for g in groups]:
                        future.result()

    def _native_body(self, select: str, settings: Settings, context: str) -> Iterator[bytes]:
        try:
            for framed in pipelined(self.engine.stream_views(select, "Native", settings, context), NativeCompressor()):
                with self._sent_lock:
                    self._sent += len(framed)
                yield framed
        except ChuteError:
            raise
        except Exception as exc:  # an engine failure inside the HTTP body
            raise TargetError(f"{context}: {exc}") from exc

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
        """The server runs the INSERT ... SELECT itself (it reads the source), into a stage."""
        column_list = ", ".join(quote_ident(c) for c in columns)
        layout = self.layout(table)
        if layout is not None:
            # Each shard's node reads the source itself and keeps its own rows.
            def fill(peer: ServerTarget, into: TableName, shard: Shard | None, _: Mapping[str, str]) -> None:
                routed = select if shard is None else where(select, layout.condition(shard))
                wide = peer.part_memory.over(settings, len(columns))
                peer.execute(f"INSERT INTO {into.sql} ({column_list}) {routed}", wide, context)

            return self.shards.write(layout, context, fill, count_by_source, before_commit)
        return self._staged(
            table,
            context,
            lambda into: self.execute(
                f"INSERT INTO {into.sql} ({column_list}) {select}",
                self.part_memory.over(settings, len(columns)),
                context,
            ),
            count_by_source,
            before_commit,
        )

    def _staged(
        self,
        table: TableName,
        context: str,
        write: Callable[[TableName], object],
        count_by_source: bool,
        before_commit: CommitCheck | None,
    ) -> dict[str, int]:
        """`write(table)` into a fresh stage table, then move its rows in; retried whole."""

        def once() -> dict[str, int]:
            with Stage(self, table, context, drop_sync=False, owner=self.stage_owner, guard=self.commit_guard) as stage:
                write(stage.table or table)
                return stage.commit(count_by_source, before_commit=before_commit)

        return retrying(once)

    def accepts_raw(self, fmt: FileFormat, table: TableName | None = None) -> bool:
        # Every version parses these from HTTP bodies, gzip-encoded or plain. Not into a
        # table sharded by a key: the rows of one file go to several shards.
        layout = self.layout(table) if table is not None else None
        if layout is not None and not layout.random:
            return False
        return passes_through(fmt)

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
        """POST the file as it is into a stage table; the server parses it."""
        layout = self.layout(table)
        if layout is not None:
            if not layout.random:
                raise UsageError(f"{unit.key}: files cannot pass through into {table}, which is sharded by a key")
            return self.shards.write(
                layout,
                context,
                lambda peer, into, _shard, _filled: peer.insert_file(
                    into, columns, unit, format_name, server_settings(settings), context, sized=False
                ),
                False,
                before_commit,
            )
        return self._staged(
            table,
            context,
            lambda into: self.insert_file(
                into, columns, unit, format_name, server_settings(settings), context, sized=False
            ),
            False,
            before_commit,
        )

    def insert_file(
        self,
        into: TableName,
        columns: Sequence[str],
        unit: Unit,
        format_name: str,
        settings: Settings,
        context: str,
        sized: bool = True,
    ) -> None:
        """POST a local file's bytes as they are into `into` (gzip as the body's encoding), with
        exactly `settings`: the server parses them (the server-parse method's stages). `sized`:
        send the file's size as Content-Length (else the body goes chunked)."""
        length = unit.size if sized else None
        wide = self.part_memory.over(settings, len(columns))
        post_file(self.client, into, columns, unit, format_name, wide, context, self._count_sent, length)

    def _count_sent(self, n: int) -> None:
        with self._sent_lock:
            self._sent += n

    def table_stats(self, table: TableName) -> tuple[int, int]:
        layout = self.layout(table)
        if layout is not None:
            return self.shards.stats(layout)
        return Stage.stats(self, table, table_totals=self._caps.table_totals)

    def books_target(self, table: TableName, cluster: str | None = None) -> ServerTarget:
        layout = self.layout(table)
        if layout is None and cluster is not None and self.table_columns(table) is None:
            # To be made ON CLUSTER by this load: its books on the first shard, where all look.
            layout = shard_layout(self.rows, table, DistributedEngine(cluster, "", f"{table.table}_local", None))
        return self if layout is None or not layout.shards else self.shards.books_target(layout)

    def settle(self, table: TableName) -> None:
        """Wait until every replica of the table (of each shard's table) has fetched the rows."""
        layout = self.layout(table)
        if layout is None:
            note = wait_for_replicas(self.rows, table)
            self.notes.extend([note] if note else [])
            return
        self.shards.settle(layout)

    def layout(self, table: TableName) -> ShardLayout | None:
        """The shards of a Distributed table (read once per load); None for another table."""
        return self.shards.layout(table)

    def placement(self, table: TableName) -> list[dict[str, Any]]:
        """Where the table's rows are, node by node (see `Shards.placement`)."""
        return self.shards.placement(table)

    def _node_address(self, spec: str) -> ServerAddress:
        """A --node: http(s)://host:port; the user, password and database are the target's."""
        given = ServerAddress.parse(spec if "://" in spec else f"{self.address.scheme}://{spec}")
        return dataclasses.replace(self.address, scheme=given.scheme, host=given.host, port=given.port)

    def _peer_at(self, address: ServerAddress) -> ServerTarget:
        """Another node of the cluster, reached as this target is."""
        return ServerTarget(
            None, insecure=self.insecure, connections=self.connections, address=address, connect_attempts=1
        )
