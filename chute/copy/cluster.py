"""Clusters at either end of a copy.

- A `Distributed` source is read through its Distributed engine (one replica of
  each shard answers); its units are the partitions of its local table, listed
  from a node of every shard (the cluster's hosts at the source's port, or
  `--node`), a partition's rows summed over the shards. The destination takes
  the local table's engine and keys.
- `--cluster NAME` at the destination: a missing table is made `ON CLUSTER`, as
  `Replicated*MergeTree` at `/clickhouse/tables/{shard}/<db>/<table>` (replica
  `{replica}`), and so are the ledger's books; every replica gets the rows by
  replication. Over several shards, that is `<table>_local`, and `<table>` is a
  Distributed table over it, written by shard (chute.copy.shards).
"""

from __future__ import annotations

from chute.copy.tables import TableFacts, read_facts
from chute.errors import UsageError
from chute.sql import TableName, quote_str
from chute.targets.base import Target
from chute.targets.cluster import shard_layout
from chute.targets.engines import distributed
from chute.targets.server import ServerTarget

DDL_TIMEOUT_SECONDS = 30
"""How long an `ON CLUSTER` statement waits for every node."""

PartSource = tuple[str, Target, TableName]
"""(a tag for its part names, a node, the table whose parts it lists)."""


def sharded_source(source: Target, table: TableName, facts: TableFacts) -> tuple[TableFacts, list[PartSource]]:
    """For a Distributed source: its columns with the local table's engine and keys, and a node
    of each shard with the local table (where the partitions are listed)."""
    engine = distributed(facts.engine_full)
    if engine is None or not isinstance(source, ServerTarget):
        raise UsageError(f"{table}: cannot read the Distributed engine {facts.engine_full!r}")
    layout = shard_layout(source.rows, table, engine)
    if not layout.shards:
        raise UsageError(f"{table}: cluster {engine.cluster} is not in the source's remote_servers")
    nodes: list[PartSource] = [(f"{s.num}/", source.shards.peer(layout, s), layout.local) for s in layout.shards]
    local = read_facts(nodes[0][1], layout.local)
    if local is None:
        raise UsageError(f"{table}: its local table {layout.local} is not on {nodes[0][1].display_name}")
    shape = TableFacts(facts.columns, local.engine, local.engine_full, local.partition_key, local.sorting_key)
    return shape, nodes


def check_cluster(dest: Target, cluster: str) -> int:
    """The number of shards of `cluster` (UsageError unless the destination server knows it)."""
    if not dest.is_server:
        raise UsageError("--cluster needs a server destination")
    found = dest.rows(
        f"SELECT uniqExact(shard_num) AS shards FROM system.clusters WHERE cluster = {quote_str(cluster)}",
        context="reading the destination's clusters",
    )
    shards = int(found[0]["shards"]) if found else 0
    if shards == 0:
        raise UsageError(f"--cluster {cluster}: the destination has no such cluster in its remote_servers")
    return shards


CLUSTER_DDL_SETTINGS = {"distributed_ddl_task_timeout": DDL_TIMEOUT_SECONDS}
