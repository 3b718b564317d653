"""`chute copy` with a cluster at either end (the session's 2x2 cluster of 18.16 servers and
ZooKeeper): a Distributed table over Replicated tables to one server, and one server to a
cluster of one shard with --cluster (made ON CLUSTER, replicated), to a cluster of two shards
(a Distributed table over replicated ones, written by shard), and into an existing Distributed table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from chute.copy import CopyOptions, copy
from chute.errors import UsageError

from ..harness import servers
from ..harness.cluster import ClickHouseCluster
from . import test_cluster_harness

pytestmark = pytest.mark.cluster

cluster = test_cluster_harness.cluster
db = test_cluster_harness.db

COLUMNS = "(id UInt64, day Date, name String, tags Array(String), v Nullable(Int64))"
ROWS = (
    "SELECT number + {start}, toDate('2025-01-01') + number % 75, concat('n', toString(number)), "
    "[toString(number % 5)], if(number % 3 = 0, NULL, toInt64(number)) FROM numbers({n})"
)
EXACT = "SELECT * FROM {table} ORDER BY id FORMAT TSV"


@pytest.fixture()
def server(clickhouse_server) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A fresh database on the single server of the session, as a URL."""
    database = f"test_{uuid.uuid4().hex[:10]}"
    clickhouse_server.query(f"CREATE DATABASE {database}")
    yield f"{clickhouse_server.url}/{database}"


def _sharded(cluster: ClickHouseCluster, db: str) -> None:
    node = cluster.node(0)
    path = f"/clickhouse/tables/{{shard}}/{db}/events_local"
    node.query(
        f"CREATE TABLE {db}.events_local ON CLUSTER c2x2 {COLUMNS} "
        f"ENGINE = ReplicatedMergeTree('{path}', '{{replica}}') PARTITION BY toYYYYMM(day) ORDER BY id"
    )
    distributed = f"Distributed(c2x2, {db}, events_local, id)"
    node.query(f"CREATE TABLE {db}.events ON CLUSTER c2x2 AS {db}.events_local ENGINE = {distributed}")
    node.query(f"INSERT INTO {db}.events " + ROWS.format(start=0, n=9000), insert_distributed_sync=1)
    for other in cluster:  # (a Distributed read may ask a replica that has not fetched yet)
        other.query(f"SYSTEM SYNC REPLICA {db}.events_local")


def test_distributed_cluster_to_one_server(cluster: ClickHouseCluster, db: str, server: str) -> None:
    _sharded(cluster, db)
    nodes = tuple(f"http://127.0.0.1:{n.http_port}" for n in cluster)
    source = cluster.node(0).target_url(db)
    report = copy("events", source, server, CopyOptions(nodes=nodes))
    assert report.ok and len(report.copied) == 3 and report.rows_copied == 9000, report.failed
    assert "ENGINE = MergeTree() PARTITION BY toYYYYMM(day)" in report.ddl  # the local table's, unreplicated
    expected = cluster.node(0).query(EXACT.format(table=f"{db}.events"))
    assert servers.server_query(server, EXACT.format(table="events")) == expected
    assert not copy("events", source, server, CopyOptions(nodes=nodes)).copied
    # Rows added on one shard: only their partition again.
    cluster.node(2).query(f"INSERT INTO {db}.events_local " + ROWS.format(start=100000, n=1))
    again = copy("events", source, server, CopyOptions(nodes=nodes))
    assert [u.partition for u in again.copied] == ["202501"]
    assert servers.server_query(server, EXACT.format(table="events")) == cluster.node(0).query(
        EXACT.format(table=f"{db}.events")
    )


def test_one_server_to_a_cluster_of_one_shard(cluster: ClickHouseCluster, db: str, server: str) -> None:
    servers.server_query(
        server, f"CREATE TABLE src {COLUMNS} ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY id"
    )
    servers.server_query(server, "INSERT INTO src " + ROWS.format(start=0, n=6000))
    dest = cluster.node(0).target_url(db)
    report = copy("src", server, dest, CopyOptions(cluster="c1x2"))
    assert report.ok and report.created_table and len(report.copied) == 3
    assert "ON CLUSTER `c1x2`" in report.ddl and "ReplicatedMergeTree('/clickhouse/tables/{shard}/" in report.ddl
    expected = servers.server_query(server, EXACT.format(table="src"))
    cluster.node(1).query(f"SYSTEM SYNC REPLICA {db}.src")
    for node in cluster.shard_nodes(1):  # every replica of the shard
        assert node.query(EXACT.format(table=f"{db}.src")) == expected
    # A partition dropped at the destination, then copied again into the replicated table.
    cluster.node(0).query(f"ALTER TABLE {db}.src DROP PARTITION 202502")
    again = copy("src", server, dest, CopyOptions(cluster="c1x2"))
    assert [u.partition for u in again.copied] == ["202502"]
    assert cluster.node(0).query(EXACT.format(table=f"{db}.src")) == expected
    # A node's table on a cluster of several shards would be one shard's rows: refused.
    with pytest.raises(UsageError, match="2 shards"):
        copy("src", server, dest, CopyOptions(cluster="c2x2"))


def _local_rows(cluster: ClickHouseCluster, db: str, table: str) -> list[int]:
    """Rows of the local table on the first replica of each shard."""
    return [int(cluster.shard_nodes(s)[0].value(f"SELECT count() FROM {db}.{table}")) for s in (1, 2)]


@pytest.mark.parametrize("shard_by", ["id", "rand()"])
def test_one_server_to_a_cluster_of_two_shards(cluster: ClickHouseCluster, db: str, server: str, shard_by: str) -> None:
    """--cluster over 2 shards: `src_local` replicated on every node, `src` Distributed over it,
    each partition written by shard (by the key's rows, or whole to one shard by rand())."""
    servers.server_query(
        server, f"CREATE TABLE src {COLUMNS} ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY id"
    )
    servers.server_query(server, "INSERT INTO src " + ROWS.format(start=0, n=9000))
    dest = cluster.node(0).target_url(db)
    nodes = tuple(f"http://127.0.0.1:{n.http_port}" for n in cluster)
    options = CopyOptions(cluster="c2x2", shard_by=shard_by, dest_nodes=nodes)
    report = copy("src", server, dest, options)
    assert report.ok and report.created_table and len(report.copied) == 3 and report.rows_copied == 9000
    assert f"ENGINE = Distributed(`c2x2`, `{db}`, `src_local`, {shard_by})" in report.ddl
    expected = servers.server_query(server, EXACT.format(table="src"))
    assert cluster.node(0).query(EXACT.format(table=f"{db}.src")) == expected
    per_shard = _local_rows(cluster, db, "src_local")
    assert sum(per_shard) == 9000, per_shard
    if shard_by == "rand()":  # each partition whole on one shard
        months = "SELECT DISTINCT toYYYYMM(day) FROM {db}.src_local ORDER BY 1 FORMAT TSV"
        held = [cluster.shard_nodes(s)[0].query(months.format(db=db)).split() for s in (1, 2)]
        assert sorted(held[0] + held[1]) == ["202501", "202502", "202503"], held
    else:
        assert all(per_shard), per_shard
        for num, node in ((1, cluster.shard_nodes(1)[0]), (2, cluster.shard_nodes(2)[0])):
            assert node.value(f"SELECT count() FROM {db}.src_local WHERE id % 2 != {num - 1}") == "0"
    assert not copy("src", server, dest, options).copied
    # A partition dropped on a shard that holds some of it: copied again, every shard's part replaced.
    holders = [cluster.shard_nodes(s)[0] for s in (1, 2)]
    held = "SELECT count() FROM {db}.src_local WHERE toYYYYMM(day) = 202501"
    holder = next(n for n in holders if int(n.value(held.format(db=db))))
    holder.query(f"ALTER TABLE {db}.src_local DROP PARTITION 202501")
    again = copy("src", server, dest, options)
    assert [u.partition for u in again.copied] == ["202501"]
    assert cluster.node(0).query(EXACT.format(table=f"{db}.src")) == expected
    assert sum(_local_rows(cluster, db, "src_local")) == 9000


def test_into_an_existing_distributed_table(cluster: ClickHouseCluster, db: str, server: str) -> None:
    """A Distributed destination made by the user (sharded by id) is written by shard."""
    _sharded(cluster, db)
    servers.server_query(
        server, f"CREATE TABLE src {COLUMNS} ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY id"
    )
    servers.server_query(server, "INSERT INTO src " + ROWS.format(start=50000, n=4000))
    nodes = tuple(f"http://127.0.0.1:{n.http_port}" for n in cluster)
    options = CopyOptions(dest_table="events", dest_nodes=nodes, partitions=("202501",))
    report = copy("src", server, cluster.node(0).target_url(db), options)
    assert report.ok and not report.created_table and len(report.copied) == 1
    # Partition 202501 is the source's now (its old rows replaced on both shards), the others as they were.
    wanted = "SELECT * FROM {table} WHERE toYYYYMM(day) = 202501 ORDER BY id FORMAT TSV"
    got = cluster.node(0).query(wanted.format(table=f"{db}.events"))
    assert got == servers.server_query(server, wanted.format(table="src"))
    others = cluster.node(0).value(f"SELECT count() FROM {db}.events WHERE toYYYYMM(day) != 202501")
    assert int(others) > 0
    for num in (1, 2):
        node = cluster.shard_nodes(num)[0]
        assert node.value(f"SELECT count() FROM {db}.events_local WHERE id >= 50000 AND id % 2 != {num - 1}") == "0"
