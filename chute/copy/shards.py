"""A Distributed destination: each unit's rows written by shard, as `load` writes one.

Each shard's rows of a unit go into a stage on a node of that shard (its local
table's stage); the stages are measured and their figures summed (rows, and
checksums modulo 2^64, as `sum` of UInt64 wraps) against the source's. Then
each shard's partition is replaced from its stage (or dropped, where the shard
gets none of the unit's rows), so a copy again of a unit leaves no row of it
twice on any shard. Which rows go to a shard: those its sharding key names
(`toUInt64(key) % total weight` within the shard's slots, evaluated by the
source); with a random key (or none), a whole unit goes to one shard, picked by
weight from a digest of the unit's name (the same shard on every run).

Made with `--cluster NAME` over several shards: `<table>_local` on every node,
`Replicated*MergeTree` at `/clickhouse/tables/{shard}/<db>/<table>_local`, and
`<table>` Distributed over it by `--shard-by` (default `rand()`), both `ON CLUSTER`
(what `chute load --cluster` makes).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from chute.copy.plan import CopyUnit, dest_partitions
from chute.copy.tables import TableFacts, read_facts
from chute.errors import UsageError
from chute.sql import TableName, quote_ident
from chute.targets.base import Target
from chute.targets.cluster import Shard, ShardLayout
from chute.targets.server import ServerTarget


@dataclass(frozen=True)
class Place:
    """Where some of a unit's rows go: a shard's node and its local table."""

    target: Target
    table: TableName
    shard: Shard


class DestShards:
    """The shards of a Distributed destination table, a node of each."""

    def __init__(self, dest: Target, table: TableName) -> None:
        if not isinstance(dest, ServerTarget):
            raise UsageError(f"{table}: a Distributed destination needs a server")
        layout = dest.shards.layout(table)
        if layout is None:
            raise UsageError(f"{table}: not a Distributed table the destination can read")
        self.layout: ShardLayout = layout
        self.places = [Place(dest.shards.peer(layout, s), layout.local, s) for s in layout.shards]

    def local_facts(self) -> TableFacts:
        """The shards' table (as the first shard's node has it): what the copy writes."""
        facts = read_facts(self.places[0].target, self.layout.local)
        if facts is None:
            raise UsageError(
                f"{self.layout.table}: its local table {self.layout.local} is not on "
                f"{self.places[0].target.display_name}"
            )
        return facts

    def conditions(self, unit: CopyUnit) -> list[str | None]:
        """Per place, the condition (on the source) of the unit's rows that go there; None: none."""
        if self.layout.random:
            slot = int(hashlib.sha1(unit.key.encode()).hexdigest()[:12], 16) % self.layout.total_weight
            return ["1" if p.shard.first_slot <= slot <= p.shard.last_slot else None for p in self.places]
        return [self.layout.condition(p.shard) for p in self.places]

    def held(self) -> dict[str, int]:
        """Rows per partition id over every shard's table."""
        total: dict[str, int] = {}
        for place in self.places:
            for pid, rows in dest_partitions(place.target, place.table).items():
                total[pid] = total.get(pid, 0) + rows
        return total


def cluster_ddl(table: TableName, cluster: str, shard_by: str) -> tuple[TableName, str]:
    """(the local table, the Distributed table's DDL over it) for `--cluster` over several
    shards (tables.create_sql makes the local table ON CLUSTER)."""
    assert table.database is not None
    local = TableName(table.database, f"{table.table}_local")
    names = f"{quote_ident(cluster)}, {quote_ident(table.database)}, {quote_ident(local.table)}"
    engine = f"Distributed({names}, {shard_by})"
    on = f"ON CLUSTER {quote_ident(cluster)}"
    return local, f"CREATE TABLE IF NOT EXISTS {table.sql} {on} AS {local.sql}\nENGINE = {engine}"
