"""A ClickHouse server over HTTP, any version from 18.16 to current.

The embedded engine (in memory) reads each file, casts every column to the
server table's exact type, adds provenance and emits Native; chute compresses
it with ClickHouse's own ZSTD framing and streams it to `INSERT ... FORMAT
Native` over several connections. Memory stays bounded: one block at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from chute.capabilities import Capabilities
from chute.engine import Engine, Settings, StatementResult, shared_engine
from chute.errors import ChuteError, CommitUncertain, ShardUnavailable, TargetError, TransientTargetError, UsageError
from chute.formats import FileFormat
from chute.nativecompress import NativeCompressor, pipelined
from chute.remote.http import retry
from chute.schema import Column, table_columns
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.cluster import Shard, ShardLayout, replica_rows, replication, shard_layout, wait_for_replicas
from chute.targets.engines import distributed
from chute.targets.staging import PART_WRITER_SETTINGS, CommitCheck, Stage
from chute.transport import HttpClient, ServerAddress, check_connection
from chute.units import Unit

# Formats a server of any version parses from a raw HTTP body (the pass-through method).
PASS_THROUGH_FORMATS = frozenset({"JSONEachRow", "CSV", "TSV", "Native"})
# Reading settings that mean the same on the server (18.16 knows these).
SERVER_FORMAT_SETTINGS = frozenset({"date_time_input_format", "format_csv_delimiter"})

RETRIES = 4
BACKOFF_SECONDS = 0.5
# A system-table read on servers before 19.x fails when another table goes away while
# it is listed (ClickHouse issue 3982): read again. The missing table is someone else's.
_VANISHED_TABLE = re.compile(r"Table (\S+) doesn't exist")
_SYSTEM_READ = re.compile(r"\bFROM\s+system\.", re.IGNORECASE)
SYSTEM_READ_ATTEMPTS = 6
MUTATION_TIMEOUT_SECONDS = 600


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


def _with_retries(write: Callable[[], dict[str, int]]) -> dict[str, int]:
    """Run a staged write again after transient failures, with backoff.

    Safe because each attempt has its own stage table; not after CommitUncertain,
    when rows may already be in: the caller repairs first.
    """
    return _retrying(write)


_T = TypeVar("_T")

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


class _NoNode(ShardUnavailable):
    """No node of the shard answered at all: asking again at once would not help."""


def _retrying(call: Callable[[], _T]) -> _T:
    """`call` again after transient failures (connection lost, timeout, server busy), with backoff."""
    return retry(
        lambda _: call(),
        RETRIES + 1,
        BACKOFF_SECONDS,
        lambda exc: isinstance(exc, TransientTargetError) and not isinstance(exc, (CommitUncertain, _NoNode)),
    )


def _listing_race(sql: str, exc: TargetError) -> bool:
    """A system-table read that failed on a table dropped while it was listed (not a
    missing system table): 18.16 lists every table of a database, then looks each up."""
    vanished = _VANISHED_TABLE.search(str(exc))
    return (
        exc.code == 60
        and _SYSTEM_READ.search(sql) is not None
        and vanished is not None
        and not vanished.group(1).strip("`.").startswith("system.")
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
    ) -> None:
        self.address = address or ServerAddress.parse(url, password_file)
        if insecure and self.address.scheme == "https" and address is None:
            print(
                f"chute: WARNING: TLS certificate checks are OFF for {self.address.display} (--insecure)",
                file=sys.stderr,
            )
        self.insecure = insecure
        self.client = HttpClient(self.address, verify_tls=not insecure)
        version = check_connection(self.client, attempts=connect_attempts)
        self.nodes = [self._node_address(n) for n in nodes]
        """Other nodes of the cluster (--node): where the shards of a Distributed table are written."""
        self._layouts: dict[str, ShardLayout | None] = {}
        self._peers: dict[tuple[str, int], ServerTarget] = {}
        """(cluster, shard) -> the node of that shard that rows go to."""
        self._probed: dict[tuple[str, int, str], int | None] = {}
        """(host, port, cluster) of a node that answered -> its shard in that cluster (None: none)."""
        self._peer_lock = threading.Lock()
        self._round_robin: dict[str, Iterator[int]] = {}
        self.shard_rows: dict[tuple[str, int], int] = {}
        """Rows committed per (cluster, shard) by this load."""
        self.notes: list[str] = []
        self._caps = Capabilities.for_version(version)
        self._engine: Engine | None = None
        self._sent = 0
        self._sent_lock = threading.Lock()
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
        return self._sent + sum(p._sent for p in self._peers.values() if p is not self)

    @property
    def round_trips(self) -> int:
        return self.client.requests + sum(p.client.requests for p in self._peers.values() if p is not self)

    def execute(self, sql: str, settings: Settings | None = None, context: str = "") -> StatementResult:
        if _IDEMPOTENT.match(sql):
            _retrying(lambda: self.client.query(sql, settings, context))
        else:
            self.client.query(sql, settings, context)
        return StatementResult(0, 0, 0.0)

    def rows(self, sql: str, settings: Settings | None = None, context: str = "") -> list[dict[str, Any]]:
        """Rows of a read (the ledger, system tables), read again after transient failures."""
        return _retrying(lambda: self._rows(sql, settings, context))

    def _rows(self, sql: str, settings: Settings | None, context: str) -> list[dict[str, Any]]:
        return retry(
            lambda _: self.client.rows(sql, settings, context),
            SYSTEM_READ_ATTEMPTS,
            0.02,
            lambda exc: isinstance(exc, TargetError) and _listing_race(sql, exc),
        )

    def text(self, sql: str, fmt: str, context: str = "") -> str:
        return self.client.query(f"{sql.rstrip().rstrip(';')} FORMAT {fmt}", context=context)

    def table_columns(self, table: TableName) -> list[Column] | None:
        return table_columns(self.rows, table, ordered=self._caps.version >= (19, 0, 0))

    @property
    def shared(self) -> bool:
        return True

    def guard_commits(self, owner: str, guard: Callable[[], None]) -> None:
        self.stage_owner, self.commit_guard = owner, guard

    def prepare(self, table: TableName, live_owners: Callable[[], set[str]] | None = None) -> None:
        Stage.drop_stale(self, table, live_owners)
        layout = self.layout(table)
        if layout is not None:
            for shard in layout.shards:
                with contextlib.suppress(ChuteError):  # a shard that is down keeps its stages for later
                    Stage.drop_stale(self._shard_peer(layout, shard), layout.local, live_owners)

    def mutate(self, table: TableName, command: str, context: str) -> None:
        layout = self.layout(table)
        if layout is not None:
            # A Distributed table takes no ALTER: each shard's table does (all of them).
            for shard in layout.shards:
                self._on_shard(layout, shard, lambda peer: peer.mutate(layout.local, command, context))
            return
        if self._caps.mutations_sync:
            self.execute(f"ALTER TABLE {table.sql} {command}", {"mutations_sync": 2}, context)
            return
        self.execute(f"ALTER TABLE {table.sql} {command}", context=context)
        self._wait_for_mutations(table, context)

    def _mutate_here(self, table: TableName, command: str, context: str) -> None:
        """An ALTER of a table of this server (a stage: never Distributed), waited for."""
        if self._caps.mutations_sync:
            self.execute(f"ALTER TABLE {table.sql} {command}", {"mutations_sync": 2}, context)
            return
        self.execute(f"ALTER TABLE {table.sql} {command}", context=context)
        self._wait_for_mutations(table, context)

    def delete_sources(self, table: TableName, sources: Sequence[str]) -> None:
        keys = ", ".join(quote_str(k) for k in sources)
        self.mutate(table, f"DELETE WHERE _source IN ({keys})", f"removing earlier rows of {len(sources)} file(s)")

    def _wait_for_mutations(self, table: TableName, context: str) -> None:
        """Servers before 20.1 run mutations in the background: poll until done."""
        database = quote_str(table.database) if table.database else "currentDatabase()"
        deadline = time.monotonic() + MUTATION_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            pending = self.rows(
                f"SELECT count() AS n FROM system.mutations WHERE database = {database} "
                f"AND table = {quote_str(table.table)} AND is_done = 0",
                context=context,
            )
            if int(pending[0]["n"]) == 0:
                return
            time.sleep(0.2)
        raise TargetError(f"{context}: the server did not finish the delete in {MUTATION_TIMEOUT_SECONDS} s")

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
    ) -> dict[str, int]:
        """Stream the batch into a stage table; retry transient failures whole.

        The SELECTs go over as many connections at once as there are (so
        `concurrent` changes nothing, and `written` stays empty); parts always move by ATTACH: a server
        has other writers, so an empty table is never swapped."""
        layout = self.layout(table)
        if layout is not None:

            def fill(peer: ServerTarget, into: TableName, shard: Shard | None) -> None:
                routed = selects if shard is None else [_where(s, layout.condition(shard)) for s in selects]
                peer._send_selects(into, columns, routed, settings, context)

            return self._sharded(layout, context, fill, count_by_source, before_commit)
        return _with_retries(
            lambda: self._write_once(
                table, columns, selects, settings, count_by_source, context, before_commit, missing
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
        ) as stage:
            self._send_selects(stage.table or table, columns, selects, settings, context)
            return stage.commit(count_by_source, before_commit=before_commit)

    def _send_selects(
        self, into: TableName, columns: Sequence[str], selects: Sequence[str], settings: Settings, context: str
    ) -> None:
        """The engine's SELECTs as Native into `into`, over as many connections at once as there are."""
        column_list = ", ".join(quote_ident(c) for c in columns)
        streams = min(self.connections, len(selects))
        groups = [list(selects[i::streams]) for i in range(streams)]
        engine_settings = conversion_settings(settings, streams, self._caps.low_cardinality)
        statement = f"INSERT INTO {into.sql} ({column_list}) FORMAT Native"

        def send(group: list[str]) -> None:
            body = self._native_body(" UNION ALL ".join(group), engine_settings, context)
            self.client.insert(statement, body, context=context, native_compressed=True)

        if streams == 1:
            send(groups[0])
        else:
            with ThreadPoolExecutor(streams) as pool:
                for future in [pool.submit(send, g) for g in groups]:
                    future.result()

    def _native_body(self, select: str, settings: Settings, context: str) -> Iterator[bytes]:
        try:
            for framed in pipelined(self.engine.stream(select, "Native", settings, context), NativeCompressor()):
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
            def fill(peer: ServerTarget, into: TableName, shard: Shard | None) -> None:
                routed = select if shard is None else _where(select, layout.condition(shard))
                peer.execute(f"INSERT INTO {into.sql} ({column_list}) {routed}", settings, context)

            return self._sharded(layout, context, fill, count_by_source, before_commit)
        return self._staged(
            table,
            context,
            lambda into: self.execute(f"INSERT INTO {into.sql} ({column_list}) {select}", settings, context),
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

        return _with_retries(once)

    def accepts_raw(self, fmt: FileFormat, table: TableName | None = None) -> bool:
        # Every version parses these from HTTP bodies, gzip-encoded or plain. Not into a
        # table sharded by a key: the rows of one file go to several shards.
        layout = self.layout(table) if table is not None else None
        if layout is not None and not layout.random:
            return False
        return fmt.format in PASS_THROUGH_FORMATS and fmt.compression in ("gzip", "none")

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
            return self._sharded(
                layout,
                context,
                lambda peer, into, _: peer._post_file(into, columns, unit, format_name, settings, context),
                False,
                before_commit,
            )
        column_list = ", ".join(quote_ident(c) for c in columns)
        server_settings = {k: v for k, v in settings.items() if k in SERVER_FORMAT_SETTINGS}
        server_settings["input_format_skip_unknown_fields"] = 0
        encoding = "gzip" if unit.fmt.compression == "gzip" else None

        return self._staged(
            table,
            context,
            lambda into: self.client.insert(
                f"INSERT INTO {into.sql} ({column_list}) FORMAT {format_name}",
                self._file_body(unit.key),
                settings=server_settings,
                context=context,
                content_encoding=encoding,
            ),
            False,
            before_commit,
        )

    def _post_file(
        self, into: TableName, columns: Sequence[str], unit: Unit, format_name: str, settings: Settings, context: str
    ) -> None:
        column_list = ", ".join(quote_ident(c) for c in columns)
        server_settings = {k: v for k, v in settings.items() if k in SERVER_FORMAT_SETTINGS}
        server_settings["input_format_skip_unknown_fields"] = 0
        self.client.insert(
            f"INSERT INTO {into.sql} ({column_list}) FORMAT {format_name}",
            self._file_body(unit.key),
            settings=server_settings,
            context=context,
            content_encoding="gzip" if unit.fmt.compression == "gzip" else None,
        )

    def insert_file(
        self, into: TableName, columns: Sequence[str], unit: Unit, format_name: str, settings: Settings, context: str
    ) -> None:
        """POST a local file's bytes as they are into `into` (gzip as the body's encoding), with
        exactly `settings`: the server parses them (the server-parse method's stages)."""
        self.client.insert(
            f"INSERT INTO {into.sql} ({', '.join(quote_ident(c) for c in columns)}) FORMAT {format_name}",
            self._file_body(unit.key),
            settings=settings,
            context=context,
            content_encoding="gzip" if unit.fmt.compression == "gzip" else None,
            length=unit.size,
        )

    def _file_body(self, path: str) -> Iterator[bytes]:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                with self._sent_lock:
                    self._sent += len(chunk)
                yield chunk

    def table_stats(self, table: TableName) -> tuple[int, int]:
        layout = self.layout(table)
        if layout is None:
            return Stage.stats(self, table)
        # Counted on each shard's own table: a Distributed count may include rows still
        # on their way (asynchronous inserts of others), or fail on a shard that is down.
        rows = size = 0
        for shard in layout.shards:
            try:
                peer = self._shard_peer(layout, shard)
                n, b = Stage.stats(peer, layout.local)
            except ChuteError as exc:
                self.notes.append(f"shard {shard.num} of {layout.engine.cluster}: not counted ({exc})")
                continue
            rows, size = rows + n, size + b
            loaded = self.shard_rows.get((layout.engine.cluster, shard.num), 0)
            self.notes.append(
                f"shard {shard.num} of {layout.engine.cluster} ({peer.address.host}:{peer.address.port}): "
                f"{loaded:,} rows loaded, {layout.local} holds {n:,}"
            )
        return rows, size

    def books_target(self, table: TableName) -> ServerTarget:
        layout = self.layout(table)
        return self if layout is None else self._shard_peer(layout, layout.shards[0])

    def settle(self, table: TableName) -> None:
        """Wait until every replica of the table (of each shard's table) has fetched the rows."""
        layout = self.layout(table)
        if layout is None:
            note = wait_for_replicas(self.rows, table)
            self.notes.extend([note] if note else [])
            return
        for shard in layout.shards:
            try:
                peer = self._shard_peer(layout, shard)
                note = wait_for_replicas(peer.rows, layout.local, where=f" (shard {shard.num})")
            except ChuteError as exc:
                note = f"shard {shard.num} of {layout.engine.cluster}: replicas not checked ({exc})"
            self.notes.extend([note] if note else [])

    # -- Distributed tables: each shard's table written on a node of that shard ---------

    def layout(self, table: TableName) -> ShardLayout | None:
        """The shards of a Distributed table (read once per load); None for another table."""
        key = str(table)
        if key not in self._layouts:
            database = quote_str(table.database) if table.database else "currentDatabase()"
            found = self.rows(
                f"SELECT engine_full FROM system.tables WHERE database = {database} AND name = {quote_str(table.table)}"
            )
            engine = distributed(str(found[0]["engine_full"])) if found else None
            if engine is None:
                if not found:
                    return None  # not created yet: asked again later
                self._layouts[key] = None
            else:
                layout = shard_layout(lambda sql: self.rows(sql), table, engine)
                if not layout.shards:
                    raise UsageError(f"table {table}: cluster {engine.cluster} is not in this server's remote_servers")
                if layout.engine.sharding_key is None and len(layout.shards) > 1:
                    raise UsageError(
                        f"table {table}: Distributed over {len(layout.shards)} shards without a sharding key "
                        "takes no inserts"
                    )
                self._layouts[key] = layout
        return self._layouts[key]

    def _node_address(self, spec: str) -> ServerAddress:
        """A --node: http(s)://host:port; the user, password and database are the target's."""
        given = ServerAddress.parse(spec if "://" in spec else f"{self.address.scheme}://{spec}")
        return dataclasses.replace(self.address, scheme=given.scheme, host=given.host, port=given.port)

    def placement(self, table: TableName) -> list[dict[str, Any]]:
        """Where the table's rows are: one entry per node that holds a copy (each replica of
        each shard of a Distributed table; each replica of a replicated one, among this node
        and the --node ones), with its rows; a node that does not answer is listed with its
        error. Empty for a table on this node alone."""
        layout = self.layout(table)
        if layout is None and replication(self.rows, table) is None:
            return []
        found = []
        addresses = self._candidates(layout) if layout is not None else [self.address, *self.nodes]
        for address in dict.fromkeys(addresses):
            node = f"{address.host}:{address.port}"
            try:
                peer = self if address == self.address else self._peer_at(address)
                shard = self._shard_of(peer, layout.engine.cluster) if layout is not None else None
                if layout is not None and shard is None:
                    continue  # a node outside the table's cluster
                local = layout.local if layout is not None else table
                if peer.table_columns(local) is None:
                    continue
                found.append(replica_rows(peer.rows, local, shard, node))
            except ChuteError as exc:
                found.append({"shard": None, "replica": "", "node": node, "rows": None, "error": str(exc)})
        return sorted(found, key=lambda r: (r["shard"] or 0, r["replica"], r["node"]))

    def _peer_at(self, address: ServerAddress) -> ServerTarget:
        return ServerTarget(
            None, insecure=self.insecure, connections=self.connections, address=address, connect_attempts=1
        )

    def _candidates(self, layout: ShardLayout) -> list[ServerAddress]:
        """Nodes that may hold a shard: this one, the --node ones, then the cluster's hosts
        at this node's HTTP port (the usual layout: the same port everywhere)."""
        found = [self.address, *self.nodes]
        found += [dataclasses.replace(self.address, host=h) for s in layout.shards for h in s.host_names]
        unique: dict[tuple[str, int], ServerAddress] = {}
        for address in found:
            unique.setdefault((address.host, address.port), address)
        return list(unique.values())

    def _shard_of(self, peer: ServerTarget, cluster: str) -> int | None:
        found = peer.rows(
            f"SELECT shard_num FROM system.clusters WHERE cluster = {quote_str(cluster)} AND is_local = 1 "
            "ORDER BY shard_num LIMIT 1"
        )
        return int(found[0]["shard_num"]) if found else None

    def _shard_peer(self, layout: ShardLayout, shard: Shard) -> ServerTarget:
        """A node of `shard` that answers (asked in turn; remembered): ShardUnavailable if none."""
        cluster = layout.engine.cluster
        with self._peer_lock:
            known = self._peers.get((cluster, shard.num))
            if known is not None:
                return known
            errors = []
            for address in self._candidates(layout):
                probe = (address.host, address.port, cluster)
                if probe in self._probed:
                    continue
                try:
                    peer = (
                        self
                        if address == self.address
                        else ServerTarget(
                            None,
                            insecure=self.insecure,
                            connections=self.connections,
                            address=address,
                            connect_attempts=1,
                        )
                    )
                    num = self._shard_of(peer, cluster)
                except ChuteError as exc:
                    errors.append(f"{address.host}:{address.port}: {exc}")
                    continue
                self._probed[probe] = num
                if num is not None:
                    self._peers.setdefault((cluster, num), peer)
            found = self._peers.get((cluster, shard.num))
            if found is not None:
                return found
        hosts = ", ".join(shard.hosts)
        raise _NoNode(
            f"shard {shard.num} of cluster {cluster} ({hosts}): no node of it answers over HTTP"
            + (f" ({errors[-1]})" if errors else "; give one with --node http(s)://host:port")
        )

    def _on_shard(self, layout: ShardLayout, shard: Shard, call: Callable[[ServerTarget], None]) -> None:
        """`call` on a node of `shard`; where that node fails, once more on another that answers
        (another replica). ShardUnavailable, naming the shard, when none does."""
        for attempt in range(2):
            peer = self._shard_peer(layout, shard)
            try:
                call(peer)
                return
            except TransientTargetError as exc:
                self._forget(layout, shard)
                if attempt == 1:
                    raise ShardUnavailable(
                        f"shard {shard.num} of cluster {layout.engine.cluster} ({peer.address.host}:"
                        f"{peer.address.port}): {exc}",
                        code=exc.code,
                        name=exc.name,
                    ) from exc

    def _forget(self, layout: ShardLayout, shard: Shard) -> None:
        """A shard's node failed: ask its nodes again next time (another replica may answer)."""
        cluster = layout.engine.cluster
        with self._peer_lock:
            peer = self._peers.pop((cluster, shard.num), None)
            if peer is not None:
                self._probed.pop((peer.address.host, peer.address.port, cluster), None)

    def _next_shard(self, layout: ShardLayout) -> Shard:
        """For a random key: the next shard in turn by weight, passing over shards that are down."""
        cluster = layout.engine.cluster
        with self._peer_lock:
            turns = self._round_robin.setdefault(
                cluster, itertools.cycle([s.num for s in layout.shards for _ in range(s.weight)])
            )
            first = next(turns)  # one turn per batch (taking a whole cycle always began with shard 1)
        by_num = {s.num: s for s in layout.shards}
        last: ShardUnavailable | None = None
        for num in [first, *(s.num for s in layout.shards if s.num != first)]:
            try:
                self._shard_peer(layout, by_num[num])
                return by_num[num]
            except ShardUnavailable as exc:
                last = exc
        assert last is not None
        raise last

    def _sharded(
        self,
        layout: ShardLayout,
        context: str,
        fill: Callable[[ServerTarget, TableName, Shard | None], None],
        count_by_source: bool,
        before_commit: CommitCheck | None,
    ) -> dict[str, int]:
        """Write a batch into a Distributed table's shards, all-or-nothing per batch as far as
        the servers allow: every shard's stage is filled (at once) before any is attached, so
        a shard that is down or fails while rows are sent leaves nothing anywhere."""
        cluster = layout.engine.cluster

        def once() -> dict[str, int]:
            shards = [self._next_shard(layout)] if layout.random else list(layout.shards)
            peers = {s.num: self._shard_peer(layout, s) for s in shards}
            with contextlib.ExitStack() as stack:
                stages = {}

                def unavailable(s: Shard, exc: TransientTargetError) -> ShardUnavailable:
                    self._forget(layout, s)
                    return ShardUnavailable(
                        f"shard {s.num} of cluster {cluster} ({peers[s.num].address.host}:"
                        f"{peers[s.num].address.port}): {exc}",
                        code=exc.code,
                        name=exc.name,
                    )

                for s in shards:
                    peer = peers[s.num]
                    peer.stage_owner, peer.commit_guard = self.stage_owner, self.commit_guard
                    try:
                        stages[s.num] = stack.enter_context(
                            Stage(
                                peer,
                                layout.local,
                                context,
                                drop_sync=False,
                                owner=self.stage_owner,
                                guard=self.commit_guard,
                            )
                        )
                    except TransientTargetError as exc:
                        raise unavailable(s, exc) from exc

                def one(s: Shard) -> None:
                    try:
                        fill(peers[s.num], stages[s.num].table or layout.local, None if layout.random else s)
                    except TransientTargetError as exc:
                        raise unavailable(s, exc) from exc

                if len(shards) == 1:
                    one(shards[0])
                else:
                    with ThreadPoolExecutor(len(shards)) as pool:
                        for future in [pool.submit(one, s) for s in shards]:
                            future.result()
                # Every shard's stage counted and checked before any moves in: a shard that fails
                # now leaves nothing anywhere. Once one moved in, a failure is CommitUncertain.
                counted = {}
                for s in shards:
                    try:
                        counted[s.num] = stages[s.num].checked(count_by_source, before_commit)
                    except TransientTargetError as exc:
                        raise unavailable(s, exc) from exc
                totals: dict[str, int] = {}
                for i, s in enumerate(shards):
                    try:
                        counts = stages[s.num].move_in(counted[s.num])
                    except TransientTargetError as exc:
                        if i == 0 and not isinstance(exc, CommitUncertain):
                            raise unavailable(s, exc) from exc
                        raise CommitUncertain(str(exc), code=exc.code, name=exc.name) from exc
                    with self._sent_lock:
                        key = (cluster, s.num)
                        self.shard_rows[key] = self.shard_rows.get(key, 0) + sum(counts.values())
                    for source, n in counts.items():
                        totals[source] = totals.get(source, 0) + n
                return totals

        return _with_retries(once)


def _where(select: str, condition: str) -> str:
    """`select`'s rows for which `condition` holds (the engine or the shard filters them)."""
    return f"SELECT * FROM ({select}) WHERE {condition}"
