"""Where chute keeps its books (ledger, claims, rejects) on a replicated target, and how.

On one server they are plain MergeTree tables. Where the load's table is
replicated, or `--cluster` names the cluster, they are ReplicatedMergeTree
tables of their own, so that every replica answers for them and a worker that
reaches another replica sees the same books:

- with a cluster: made `ON CLUSTER`, at `/clickhouse/tables/{shard}/<db>/<name>`
  with replica `{replica}` (the server's macros): one set per shard;
- without: next to the target's own ZooKeeper path (`<its directory>/<name>`
  where that directory is named after the database, the usual layout; else
  `<its directory>/<db>.<name>`), with the target's replica name.

Ledger and claims rows are written with `insert_quorum` = every replica (a
short `insert_quorum_timeout`) and read with `select_sequential_consistency`:
a row is on every replica when its insert returns, so a worker on any replica
sees the claims and ledger rows of the others. (18.16 hides non-quorum parts
newer than the last quorum part from such reads: these tables are written with
the quorum or not at all.)
"""

from __future__ import annotations

import posixpath
import random
import re
import threading
import time
from typing import Any

from chute.engine import Settings, render_settings
from chute.errors import ChuteError, TargetError
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.base import Target
from chute.targets.engines import distributed
from chute.targets.retries import retrying

QUORUM_TIMEOUT_MS = 10_000
"""How long a quorum insert waits for the other replicas: a replica that died still counts
as active until its ZooKeeper session ends, and the default (10 minutes) would hang the load."""
QUORUM_BUSY_SECONDS = 60.0
"""How long a write waits while other workers' quorum inserts are in flight (18.16 takes one
quorum insert per table at a time: `Quorum for previous write has not been satisfied yet`)."""
REPLICA_START_SECONDS = 15.0
"""How long a quorum write waits for a replica of the books that is not active: one that another
worker has just made (two workers making the books at once) becomes active within moments."""
QUORUM_BUSY = 286
TOO_FEW_REPLICAS = 285
DDL_TIMEOUT_SECONDS = 20
SYNC_SECONDS = 300


_TSV_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "0": "\0", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}
_TSV_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _unescape(field: str) -> str:
    """A TSV field as it was: the engine escapes \\, tab, line breaks and a few more (and `'` on old servers)."""
    return _TSV_ESCAPE.sub(lambda m: _TSV_ESCAPES.get(m.group(1), m.group(1)), field)


def _database(table: TableName) -> str:
    return quote_str(table.database) if table.database else "currentDatabase()"


class Books:
    """The engine and settings of chute's own tables next to one load's table."""

    def __init__(self, target: Target, table: TableName, cluster: str | None = None) -> None:
        self.entry = target
        self._target: Target | None = None
        self.table = table
        self.given_cluster = cluster
        self._lock = threading.Lock()
        self._placement: tuple[str, str, str] | None = None
        """(ON CLUSTER clause, ZooKeeper directory, replica name); ("", "", "") for plain tables."""
        self._quorum: dict[str, int] = {}
        """Per table of the books: 1 replicated, -1 plain."""
        self._quorum_lock = threading.Lock()

    # -- where ----------------------------------------------------------------

    @property
    def target(self) -> Target:
        """Where the books are read and written: the node the load reaches, or for a
        Distributed table a node of its first shard (every worker, through any node, then
        keeps one set of books)."""
        if self._target is None:
            self._target = self.entry.books_target(self.table, self.given_cluster)
        return self._target

    def placement(self) -> tuple[str, str, str]:
        with self._lock:
            if self._placement is None:
                self._placement = self._find_placement()
            return self._placement

    def _find_placement(self) -> tuple[str, str, str]:
        if not self.target.is_server:
            return "", "", ""
        db = self.table.database or str(self.target.rows("SELECT currentDatabase() AS d")[0]["d"])
        cluster = self.given_cluster
        meta = self.target.rows(
            f"SELECT engine, engine_full FROM system.tables WHERE database = {_database(self.table)} "
            f"AND name = {quote_str(self.table.table)}"
        )
        if cluster is None and meta and meta[0]["engine"] == "Distributed":
            found = distributed(str(meta[0]["engine_full"]))
            cluster = found.cluster if found else None
        if cluster is not None:
            return f" ON CLUSTER {quote_ident(cluster)}", f"/clickhouse/tables/{{shard}}/{db}/", "{replica}"
        replicated = self.target.rows(
            f"SELECT zookeeper_path, replica_name FROM system.replicas WHERE database = {_database(self.table)} "
            f"AND table = {quote_str(self.table.table)}"
        )
        if not replicated:
            return "", "", ""
        directory = posixpath.dirname(str(replicated[0]["zookeeper_path"]).rstrip("/"))
        prefix = directory if posixpath.basename(directory) == db else f"{directory}/{db}."
        return "", prefix if prefix.endswith(".") else prefix + "/", str(replicated[0]["replica_name"])

    @property
    def replicated(self) -> bool:
        return bool(self.placement()[1])

    def create(self, name: TableName, body: str, order_by: str, context: str) -> None:
        """CREATE TABLE IF NOT EXISTS one of the books, replicated where the target is."""
        on_cluster, directory, replica = self.placement()
        if not directory:
            self.target.execute(
                f"CREATE TABLE IF NOT EXISTS {name.sql} ({body}) ENGINE = MergeTree ORDER BY {order_by}",
                context=context,
            )
            return
        if self.target.table_columns(name) is not None:
            return  # made before (perhaps plain: then only this node has it, as before)
        path = directory + name.table
        engine = f"ReplicatedMergeTree({quote_str(path)}, {quote_str(replica)})"
        sql = f"CREATE TABLE IF NOT EXISTS {name.sql}{on_cluster} ({body}) ENGINE = {engine} ORDER BY {order_by}"
        try:
            self.target.execute(sql, {"distributed_ddl_task_timeout": DDL_TIMEOUT_SECONDS}, context)
        except TargetError as exc:
            # ON CLUSTER with a node down: the others made it, that node will when it is back.
            if not on_cluster or exc.code != 159 or self.target.table_columns(name) is None:
                raise
        # A new replica starts empty and fetches what the others have: wait for it, or this
        # worker would read the books as empty and load what others loaded.
        self.target.execute(f"SYSTEM SYNC REPLICA {name.sql}", {"receive_timeout": SYNC_SECONDS}, context)

    # -- how ------------------------------------------------------------------

    def quorum(self, name: TableName) -> int:
        """Every replica of `name` (0: not replicated, or one replica). Read each time for a
        replicated table (a few ms): a replica that joins during the load counts from its first
        moment. A plain table is never replicated later: its engine is read once (and once
        for all the threads that ask at the same time)."""
        key = str(name)
        with self._quorum_lock:
            kind = self._quorum.get(key)
            if kind is None:
                found = self.target.rows(
                    f"SELECT engine FROM system.tables WHERE database = {_database(name)} "
                    f"AND name = {quote_str(name.table)}"
                )
                if not found:
                    return 0  # not there (yet): asked again next time
                kind = 1 if str(found[0]["engine"]).startswith("Replicated") else -1
                self._quorum[key] = kind
        if kind == -1:
            return 0
        found = self.target.rows(
            f"SELECT total_replicas AS n FROM system.replicas WHERE database = {_database(name)} "
            f"AND table = {quote_str(name.table)}"
        )
        n = int(found[0]["n"]) if found else 0
        return n if n > 1 else 0

    def read_settings(self, name: TableName) -> Settings | None:
        return {"select_sequential_consistency": 1} if self.quorum(name) else None

    def rows(self, name: TableName, sql: str, context: str) -> list[dict[str, Any]]:
        return self.target.rows(sql, self.read_settings(name), context)

    def tsv(self, name: TableName, sql: str, context: str) -> list[list[str]]:
        """A read of many rows, as fields of TSV (unescaped): one split, not a JSON object a row.
        For the ledger of a load of many files (100,000 rows: 0.1 s, not 2 s)."""
        query = sql + render_settings(self.read_settings(name))
        text = retrying(lambda: self.target.text(query, "TSV", context))
        rows = [line.split("\t") for line in text.split("\n") if line]
        if "\\" in text:
            rows = [[_unescape(f) if "\\" in f else f for f in row] for row in rows]
        return rows

    def insert(self, name: TableName, sql: str, context: str) -> None:
        """An insert into one of the books: on every replica when it returns (quorum)."""
        quorum = self.quorum(name)
        if not quorum:
            self.target.execute(sql, context=context)
            return
        settings = {"insert_quorum": quorum, "insert_quorum_timeout": QUORUM_TIMEOUT_MS}
        began = time.monotonic()
        deadline = began + QUORUM_BUSY_SECONDS
        pause = 0.01
        while True:
            try:
                self.target.execute(sql, settings, context)
                return
            except ChuteError as exc:
                code = exc.code
                # A replica that is not active yet: another worker made it a moment ago (or it is down).
                if code == TOO_FEW_REPLICAS and time.monotonic() - began > REPLICA_START_SECONDS:
                    raise TargetError(self._too_few(name, context, exc), code=code) from None
                if code not in (QUORUM_BUSY, TOO_FEW_REPLICAS) or time.monotonic() > deadline:
                    raise
            time.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(0.2, pause * 2)

    def _too_few(self, name: TableName, context: str, exc: ChuteError) -> str:
        """Why a quorum write of the books failed for good: how many of their replicas are active."""
        found = self.target.rows(
            f"SELECT total_replicas AS n, active_replicas AS a FROM system.replicas "
            f"WHERE database = {_database(name)} AND table = {quote_str(name.table)}"
        )
        active = f"{found[0]['a']} of its {found[0]['n']} replicas are" if found else "not every replica is"
        return (
            f"{context}: {name} needs every one of its replicas (each keeps chute's books); {active} active "
            f"after {REPLICA_START_SECONDS:.0f} s (a replica another worker has just made is active within "
            f"moments): one is down: start it again, then run again ({exc})"
        )
