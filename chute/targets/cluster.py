"""Replicated and sharded tables on a ClickHouse cluster: replicas caught up, shards laid out.

Any node answers both questions. A replica's progress is in ZooKeeper, which
every node reads (`system.zookeeper`): its `log_pointer` past the table's last
log entry and an empty `queue` mean it has fetched every part committed so far
(what `SYSTEM SYNC REPLICA` waits for on the replica itself). A Distributed
table's shards and weights are in `system.clusters`; the shard a Distributed
insert picks for a row is `key % sum(weights)` mapped through the weight ranges
in shard order, which `ShardLayout.condition` writes as SQL for the engine.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chute.sql import TableName, quote_ident, quote_str
from chute.targets.engines import RANDOM_KEY, DistributedEngine
from chute.transport import HttpClient, ServerAddress, check_connection

REPLICA_WAIT_SECONDS = 120.0
"""How long a load waits for every replica to fetch its rows before it says which lag."""

Rows = Callable[[str], list[dict[str, Any]]]


def _database(table: TableName) -> str:
    return quote_str(table.database) if table.database else "currentDatabase()"


@dataclass(frozen=True)
class Replica:
    name: str
    active: bool
    caught_up: bool


def replication(rows: Rows, table: TableName) -> tuple[str, str] | None:
    """(ZooKeeper path, this node's replica name) of a replicated table; None for another."""
    found = rows(
        f"SELECT zookeeper_path, replica_name FROM system.replicas WHERE database = {_database(table)} "
        f"AND table = {quote_str(table.table)}"
    )
    return (str(found[0]["zookeeper_path"]), str(found[0]["replica_name"])) if found else None


def replicas(rows: Rows, zookeeper_path: str) -> list[Replica]:
    """Every replica of the table at `zookeeper_path`: active, and caught up with its log."""
    path = zookeeper_path.rstrip("/")
    log = rows(f"SELECT name FROM system.zookeeper WHERE path = {quote_str(path + '/log')}")
    last = max((int(str(r["name"]).rsplit("-", 1)[-1]) for r in log if str(r["name"]).startswith("log-")), default=-1)
    found = []
    for r in rows(f"SELECT name FROM system.zookeeper WHERE path = {quote_str(path + '/replicas')}"):
        name = str(r["name"])
        nodes = {
            str(n["name"]): str(n["value"])
            for n in rows(
                f"SELECT name, value FROM system.zookeeper WHERE path = {quote_str(f'{path}/replicas/{name}')}"
            )
        }
        queue = rows(
            f"SELECT count() AS n FROM system.zookeeper WHERE path = {quote_str(f'{path}/replicas/{name}/queue')}"
        )
        pointer = int(nodes.get("log_pointer") or 0)
        found.append(Replica(name, "is_active" in nodes, pointer > last and int(queue[0]["n"]) == 0))
    return found


def wait_for_replicas(
    rows: Rows, table: TableName, timeout: float = REPLICA_WAIT_SECONDS, where: str = ""
) -> str | None:
    """Wait until every active replica of `table` has fetched what is committed; None when
    they have (or the table is not replicated), else a note saying which did not, and why."""
    found = replication(rows, table)
    if found is None:
        return None
    deadline = time.monotonic() + timeout
    pause = 0.02
    while True:
        state = replicas(rows, found[0])
        behind = [r for r in state if r.active and not r.caught_up]
        if not behind:
            down = [r.name for r in state if not r.active]
            if down:
                return f"{table}{where}: replica {', '.join(down)} is not active; it fetches the rows when it is back"
            return None
        if time.monotonic() > deadline:
            return (
                f"{table}{where}: replica {', '.join(r.name for r in behind)} had not fetched every part after "
                f"{timeout:.0f} s; the rows are committed and it fetches them in the background"
            )
        time.sleep(pause)
        pause = min(0.5, pause * 2)


@dataclass(frozen=True)
class Shard:
    num: int
    """1-based, as `system.clusters.shard_num`."""
    weight: int
    first_slot: int
    last_slot: int
    hosts: tuple[str, ...]
    """host:port (TCP) of each replica, as the cluster's configuration names them."""
    host_names: tuple[str, ...]


@dataclass(frozen=True)
class ShardLayout:
    """A Distributed table: where its rows live and how a row picks its shard."""

    table: TableName
    engine: DistributedEngine
    local: TableName
    shards: tuple[Shard, ...]

    @property
    def total_weight(self) -> int:
        return sum(s.weight for s in self.shards)

    @property
    def random(self) -> bool:
        """No key, or one that is no function of the row: whole batches go to one shard."""
        key = self.engine.sharding_key
        return key is None or RANDOM_KEY.search(key) is not None

    def condition(self, shard: Shard) -> str:
        """The SQL condition true for the rows a Distributed insert sends to `shard`
        (18.16: slot `key % total weight`, the key taken as UInt64)."""
        assert self.engine.sharding_key is not None
        slot = f"(toUInt64({self.engine.sharding_key}) % {self.total_weight})"
        if shard.first_slot == shard.last_slot:
            return f"{slot} = {shard.first_slot}"
        return f"{slot} BETWEEN {shard.first_slot} AND {shard.last_slot}"


def shard_layout(rows: Rows, table: TableName, engine: DistributedEngine) -> ShardLayout:
    """The layout of a Distributed table from `system.clusters` (shards in order, weights)."""
    found = rows(
        "SELECT shard_num, shard_weight, replica_num, host_name, port FROM system.clusters "
        f"WHERE cluster = {quote_str(engine.cluster)} ORDER BY shard_num, replica_num"
    )
    by_shard: dict[int, list[dict[str, Any]]] = {}
    for r in found:
        by_shard.setdefault(int(r["shard_num"]), []).append(r)
    shards = []
    slot = 0
    for num, members in sorted(by_shard.items()):
        weight = int(members[0]["shard_weight"])
        hosts = tuple(f"{m['host_name']}:{m['port']}" for m in members)
        shards.append(Shard(num, weight, slot, slot + weight - 1, hosts, tuple(str(m["host_name"]) for m in members)))
        slot += weight
    local = TableName(engine.database or table.database, engine.table)
    return ShardLayout(table, engine, local, tuple(shards))


def replica_rows(rows: Rows, table: TableName, shard: int | None, node: str) -> dict[str, Any]:
    """One node's copy of `table`: its shard (None: not sharded), replica name, rows, and
    whether the replica is writable with every replica of it active."""
    found = rows(
        "SELECT replica_name, is_readonly, active_replicas, total_replicas, queue_size FROM system.replicas "
        f"WHERE database = {_database(table)} AND table = {quote_str(table.table)}"
    )
    count = rows(f"SELECT count() AS n FROM {table.sql}")
    meta = found[0] if found else {}
    return {
        "shard": shard,
        "replica": str(meta.get("replica_name", "")),
        "node": node,
        "rows": int(count[0]["n"]),
        "active_replicas": f"{meta['active_replicas']}/{meta['total_replicas']}" if meta else "",
        "queue": int(meta.get("queue_size", 0) or 0),
        "error": "",
    }


UNKNOWN_DATABASE = 81


def make_database(address: ServerAddress, verify_tls: bool, cluster: str, attempts: int) -> tuple[str, str]:
    """--cluster with a target URL naming a database no node has yet: every query names it (and
    fails `[81] ... doesn't exist`), so it is made ON CLUSTER through a connection that names
    none, as a --table db.t's is (chute.load). The server's version, and the report's note."""
    bare = HttpClient(dataclasses.replace(address, database=""), verify_tls=verify_tls)
    version = check_connection(bare, attempts=attempts)
    database = address.database
    bare.query(
        f"CREATE DATABASE IF NOT EXISTS {quote_ident(database)} ON CLUSTER {quote_ident(cluster)}",
        {"distributed_ddl_task_timeout": 30},
        context=f"making database {database} on cluster {cluster}",
    )
    return version, f"database {database} did not exist: created on every node of {cluster}"
