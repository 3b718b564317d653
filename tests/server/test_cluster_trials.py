"""Exactly once on a real cluster, under failure (issue #27): a commit whose answer was lost,
chute SIGKILLed at random moments, a replica killed mid-load, a whole shard down, and four
workers through four nodes with two of them killed. Each trial ends with the table a clean
run gives: the same count and the same order-independent checksum over the data and the
provenance, on every replica.

One 2-shard x 2-replica cluster of 18.16 servers and ZooKeeper per session (the
`clickhouse_cluster` fixture); each test works in a database of its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import chute
from chute.errors import CommitUncertain
from chute.targets.staging import Stage

from ..harness.cluster import ClickHouseCluster, ClusterNode
from . import test_cluster_harness

pytestmark = pytest.mark.cluster

ROWS = 40
COLUMNS = "(id UInt64, s String, _source String, _source_mtime DateTime, _source_row UInt64, _load_id String)"
CHECKSUM = "SELECT count() AS n, sum(cityHash64(id, s, _source, _source_mtime, _source_row)) AS h FROM {table}"
"""Over the data and the provenance: `_load_id` alone differs from one run to the next."""

cluster = test_cluster_harness.cluster
db = test_cluster_harness.db


def files(folder: Path, count: int, start: int = 0, rows: int = ROWS) -> Path:
    """`count` JSON-lines files of `rows` rows each, ids unique across files; one mtime."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(start, start + count):
        path = folder / f"f{f:04d}.jsonl"
        path.write_text("".join(json.dumps({"id": f * rows + i, "s": f"v{f}-{i}"}) + "\n" for i in range(rows)))
        os.utime(path, (1_700_000_000, 1_700_000_000))
    return folder


def replicated(cluster: ClickHouseCluster, db: str, table: str = "ev") -> None:
    """A ReplicatedMergeTree on shard 1's two replicas (nodes 0, 1), three partitions."""
    cluster.node(0).query(
        f"CREATE TABLE {db}.{table} ON CLUSTER c1x2 {COLUMNS} "
        f"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{db}/{table}', '{{replica}}') "
        "PARTITION BY id % 3 ORDER BY id"
    )


def distributed(cluster: ClickHouseCluster, db: str, table: str = "ev", over: str = "c2x2") -> None:
    """`<table>_local` replicated on every node, `<table>` Distributed over `over` by cityHash64(id)."""
    local = f"{table}_local"
    node = cluster.node(0)
    node.query(
        f"CREATE TABLE {db}.{local} ON CLUSTER c2x2 {COLUMNS} "
        f"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{db}/{local}', '{{replica}}') "
        "PARTITION BY id % 3 ORDER BY id"
    )
    node.query(
        f"CREATE TABLE {db}.{table} ON CLUSTER c2x2 AS {db}.{local} "
        f"ENGINE = Distributed({over}, {db}, {local}, cityHash64(id))"
    )


def nodes(cluster: ClickHouseCluster) -> list[str]:
    """Every node's HTTP address (`--node`): the cluster's configuration names TCP ports only."""
    return [f"http://127.0.0.1:{n.http_port}" for n in cluster]


def options(cluster: ClickHouseCluster, **more: object) -> chute.LoadOptions:
    return chute.LoadOptions(nodes=tuple(nodes(cluster)), **more)  # type: ignore[arg-type]


def checksum(node: ClusterNode, db: str, table: str) -> tuple[int, int]:
    got = node.query(CHECKSUM.format(table=f"{db}.{table}")).split()
    return int(got[0]), int(got[1])


def clean_checksum(cluster: ClickHouseCluster, db: str, data: Path) -> tuple[int, int]:
    """What one clean run gives: the same files loaded into a plain MergeTree on node 0."""
    table = f"clean_{abs(hash(str(data))) % 10**8}"
    cluster.node(0).query(f"CREATE TABLE {db}.{table} {COLUMNS} ENGINE = MergeTree ORDER BY id")
    report = chute.load(str(data), table, cluster.node(0).target_url(db))
    assert report.ok, report.files[0].error
    return checksum(cluster.node(0), db, table)


def assert_exact(cluster: ClickHouseCluster, db: str, table: str, expected: tuple[int, int], sharded: bool) -> None:
    """Every replica holds what a clean run gives: for a Distributed table, the sum over the
    shards (each shard's replicas equal); else each replica of shard 1 holds all of it."""
    local = f"{table}_local" if sharded else table
    for node in cluster if sharded else cluster.shard_nodes(1):
        node.query(f"SYSTEM SYNC REPLICA {db}.{local}", receive_timeout=60)
    if not sharded:
        for node in cluster.shard_nodes(1):
            assert checksum(node, db, table) == expected, f"node {node.index}"
        return
    per_shard = []
    for shard in range(1, cluster.shards + 1):
        sums = {checksum(node, db, local) for node in cluster.shard_nodes(shard)}
        assert len(sums) == 1, f"the replicas of shard {shard} differ: {sums}"
        per_shard.append(sums.pop())
    total = (sum(n for n, _ in per_shard), sum(h for _, h in per_shard) % 2**64)
    assert total == expected, per_shard


@pytest.mark.parametrize("sharded", [False, True], ids=["replicated", "distributed"])
def test_commit_answer_lost_then_repaired(
    cluster: ClickHouseCluster, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharded: bool
) -> None:
    """The ATTACH of a batch commits but its answer is lost (CommitUncertain): the load removes
    the batch's rows by `_source` and writes it again. 18.16 takes an ATTACH of a part whose
    checksums it has seen for a duplicate (the block id in ZooKeeper is `<partition>_replace_from_
    <hash of the part>`) and skips it: written again the same way, the same rows under the same
    `_load_id` would be gone. Every row must be there once, on every replica."""
    (distributed if sharded else replicated)(cluster, db)
    data = files(tmp_path / "data", 6)
    expected = clean_checksum(cluster, db, data)
    real = Stage._move_in
    lost: list[str] = []

    def answer_lost(self: Stage, counts: dict[str, int]) -> dict[str, int]:
        moved = real(self, counts)
        if not lost:
            lost.append(str(self.target))
            raise CommitUncertain("connection reset after the ATTACH (injected by the test)")
        return moved

    monkeypatch.setattr(Stage, "_move_in", answer_lost)
    report = chute.load(str(data), "ev", cluster.node(0).target_url(db), options(cluster))
    assert lost, ("the injected failure never ran", [f.error for f in report.files], report.notes)
    assert report.ok and report.rows_loaded == expected[0], [f.error for f in report.files]
    assert report.table_rows == expected[0]
    assert_exact(cluster, db, "ev", expected, sharded)
