"""Smoke tests of the real ClickHouse cluster harness (tests/harness/cluster.py), and the
18.16 behaviours that cluster support (issue #27) relies on; docs/internals/cluster-18.16.md
records them. One 2-shard x 2-replica cluster per session (the `clickhouse_cluster`
fixture); each test works in a database of its own, and a test that stops servers starts
them again before it ends.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from ..harness.cluster import ClickHouseCluster, ClusterNode
from ..harness.servers import TEST_PASSWORD, TEST_USER

pytestmark = pytest.mark.cluster

COLUMNS = "(id UInt64, s String)"


def replicated(database: str, table: str = "t") -> str:
    """The ENGINE clause of a replicated table whose ZooKeeper path is its own."""
    return f"ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{database}/{table}', '{{replica}}') ORDER BY id"


def count(node: ClusterNode, table: str, where: str = "1", **settings: object) -> int:
    return int(node.value(f"SELECT count() FROM {table} WHERE {where}", **settings))


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll `check` until true; the seconds it took. Fails the test after `timeout`."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - began


def server_error(call: Callable[[], object]) -> str:
    """The server's error text of a statement expected to fail."""
    with pytest.raises(RuntimeError) as info:
        call()
    return str(info.value)


@pytest.fixture()
def cluster(clickhouse_cluster: ClickHouseCluster) -> Iterator[ClickHouseCluster]:
    """The session's cluster, with every node running again after the test."""
    yield clickhouse_cluster
    for shard in range(1, clickhouse_cluster.shards + 1):
        clickhouse_cluster.start_shard(shard)


@pytest.fixture()
def db(cluster: ClickHouseCluster) -> Iterator[str]:
    """A fresh database on every node (made ON CLUSTER c2x2)."""
    name = f"cl_{uuid.uuid4().hex[:10]}"
    cluster.node(0).query(f"CREATE DATABASE {name} ON CLUSTER c2x2")
    yield name
    with contextlib.suppress(RuntimeError):  # the cluster goes at the end of the session anyway
        cluster.node(0).query(f"DROP DATABASE IF EXISTS {name} ON CLUSTER c2x2", distributed_ddl_task_timeout=20)


def test_cluster_layout(cluster: ClickHouseCluster) -> None:
    """Four servers on loopback, each with its macros, all seeing the three named clusters."""
    assert cluster.startup_seconds < 20
    macros = [dict(line.split("\t") for line in n.query("SELECT * FROM system.macros").splitlines()) for n in cluster]
    assert macros == [
        {"shard": "1", "replica": "r1"},
        {"shard": "1", "replica": "r2"},
        {"shard": "2", "replica": "r1"},
        {"shard": "2", "replica": "r2"},
    ]
    for node in cluster:
        assert node.value("SELECT version()") == "18.16.1"
        assert node.url.startswith("http://127.0.0.1:")
        layout = node.query(
            "SELECT cluster, shard_num, replica_num, host_address, port FROM system.clusters"
            " ORDER BY cluster, shard_num, replica_num"
        ).splitlines()
        ports = [n.tcp_port for n in cluster]
        expect = [
            ("c1x2", 1, 1, ports[0]),
            ("c1x2", 1, 2, ports[1]),
            ("c2x1", 1, 1, ports[0]),
            ("c2x1", 2, 1, ports[2]),
            ("c2x2", 1, 1, ports[0]),
            ("c2x2", 1, 2, ports[1]),
            ("c2x2", 2, 1, ports[2]),
            ("c2x2", 2, 2, ports[3]),
        ]
        assert layout == [f"{c}\t{s}\t{r}\t127.0.0.1\t{p}" for c, s, r, p in expect]
        # The test user of tests/servers.py logs in on every node (18.16 has no currentUser()).
        assert node.value("SELECT 1", user=TEST_USER, password=TEST_PASSWORD) == "1"
        assert "Code: 193" in server_error(lambda n=node: n.query("SELECT 1", user=TEST_USER, password="wrong"))


def test_on_cluster_create_and_replication(cluster: ClickHouseCluster, db: str) -> None:
    n0, n1, n2, n3 = cluster.nodes
    out = n0.query(f"CREATE TABLE {db}.t ON CLUSTER c2x2 {COLUMNS} ENGINE = {replicated(db)}")
    # One line per host: host, port, status, error, hosts left, hosts active.
    hosts = sorted((int(line.split("\t")[1]), line.split("\t")[2]) for line in out.splitlines())
    assert hosts == sorted((n.tcp_port, "0") for n in cluster)
    for node in cluster:
        assert node.value(f"SELECT engine FROM system.tables WHERE database = '{db}' AND name = 't'") == (
            "ReplicatedMergeTree"
        )
    n0.query(f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')")
    n1.query(f"SYSTEM SYNC REPLICA {db}.t")  # 18.16 has it: waits for the replica's queue
    assert count(n1, f"{db}.t") == 2
    assert count(n2, f"{db}.t") == count(n3, f"{db}.t") == 0  # the other shard: its own data
    # An identical block inserted again is dropped by the replicated table's block hash.
    n0.query(f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')")
    assert count(n0, f"{db}.t") == 2


def test_distributed_insert_lands_on_named_shard(cluster: ClickHouseCluster, db: str) -> None:
    n0, n1, n2, n3 = cluster.nodes
    n0.query(f"CREATE TABLE {db}.t ON CLUSTER c2x2 {COLUMNS} ENGINE = {replicated(db)}")
    n0.query(f"CREATE TABLE {db}.d ON CLUSTER c2x2 AS {db}.t ENGINE = Distributed(c2x2, {db}, t, id)")
    # From node 3 (shard 2), so shard 1's rows cross the network.
    n3.query(f"INSERT INTO {db}.d SELECT number, 'x' FROM numbers(10)", insert_distributed_sync=1)
    # id % 2 == 0 -> shard 1 (nodes 0, 1); 1 -> shard 2 (nodes 2, 3): on one replica at once.
    shard1 = [n for n in (n0, n1) if count(n, f"{db}.t") == 5]
    shard2 = [n for n in (n2, n3) if count(n, f"{db}.t") == 5]
    assert shard1 and shard2
    cluster.sync_replicas(f"{db}.t")
    assert n0.value(f"SELECT groupArray(id) FROM (SELECT id FROM {db}.t ORDER BY id)") == "[0,2,4,6,8]"
    assert n2.value(f"SELECT groupArray(id) FROM (SELECT id FROM {db}.t ORDER BY id)") == "[1,3,5,7,9]"
    for node in cluster:
        assert count(node, f"{db}.t") == 5
        assert count(node, f"{db}.d") == 10
    # c2x1 over the same tables: one replica per shard, the same split.
    n0.query(f"CREATE TABLE {db}.d21 ON CLUSTER c2x1 AS {db}.t ENGINE = Distributed(c2x1, {db}, t, id)")
    n0.query(f"INSERT INTO {db}.d21 VALUES (10, 'y'), (11, 'y')", insert_distributed_sync=1)
    assert count(n0, f"{db}.t", "id >= 10") == 1
    assert count(n2, f"{db}.t", "id >= 10") == 1


def test_attach_partition_from_stage_reaches_other_replica(cluster: ClickHouseCluster, db: str) -> None:
    n0, n1 = cluster.node(0), cluster.node(1)
    n0.query(f"CREATE TABLE {db}.t ON CLUSTER c1x2 {COLUMNS} ENGINE = {replicated(db)}")
    n0.query(f"CREATE TABLE {db}.stage {COLUMNS} ENGINE = MergeTree ORDER BY id")  # on node 0 only
    n0.query(f"INSERT INTO {db}.stage SELECT number + 1000, 'st' FROM numbers(50)")
    assert n0.value(f"SELECT DISTINCT partition FROM system.parts WHERE database = '{db}' AND table = 'stage'") == (
        "tuple()"
    )
    n0.query(f"ALTER TABLE {db}.t ATTACH PARTITION tuple() FROM {db}.stage")
    n1.query(f"SYSTEM SYNC REPLICA {db}.t")
    assert count(n1, f"{db}.t") == 50
    assert count(n0, f"{db}.stage") == 50  # a copy: the stage keeps its rows
    # Attaching the same stage again is a no-op: the attached part's hash is a dedup block.
    n0.query(f"ALTER TABLE {db}.t ATTACH PARTITION ID 'all' FROM {db}.stage")
    n1.query(f"SYSTEM SYNC REPLICA {db}.t")
    assert count(n0, f"{db}.t") == count(n1, f"{db}.t") == 50
    # A stage made `AS` the replicated table copies its ZooKeeper path too.
    error = server_error(lambda: n0.query(f"CREATE TABLE {db}.stage2 AS {db}.t"))
    assert "Code: 253" in error and "already exists" in error


def test_insert_quorum_and_sequential_consistency(cluster: ClickHouseCluster, db: str) -> None:
    n0, n1 = cluster.node(0), cluster.node(1)
    n0.query(f"CREATE TABLE {db}.t ON CLUSTER c1x2 {COLUMNS} ENGINE = {replicated(db)}")
    for i in range(5):
        n0.query(f"INSERT INTO {db}.t VALUES ({i}, 'q')", insert_quorum=2)
        # The quorum insert returns once both replicas have the part: the other one sees it now.
        assert count(n1, f"{db}.t", f"id = {i}", select_sequential_consistency=1) == 1
    error = server_error(lambda: n0.query(f"INSERT INTO {db}.t VALUES (99, 'q')", insert_quorum=3))
    assert "Code: 285" in error and "less than requested quorum (3)" in error
    assert count(n0, f"{db}.t", "id = 99") == 0


def test_replica_down_then_catch_up(cluster: ClickHouseCluster, db: str) -> None:
    n0, n1 = cluster.node(0), cluster.node(1)
    n0.query(f"CREATE TABLE {db}.t ON CLUSTER c1x2 {COLUMNS} ENGINE = {replicated(db)}")
    n0.query(f"INSERT INTO {db}.t VALUES (1, 'before')")
    n1.query(f"SYSTEM SYNC REPLICA {db}.t")
    n1.kill()
    n0.query(f"INSERT INTO {db}.t VALUES (2, 'during')")  # no quorum: accepted at once
    # Until its ZooKeeper session expires (4 s here) the dead replica counts as active: a
    # quorum insert writes its part, waits for the quorum, and gives up with "unknown status".
    error = server_error(
        lambda: n0.query(f"INSERT INTO {db}.t VALUES (3, 'quorum')", insert_quorum=2, insert_quorum_timeout=1500)
    )
    assert "Code: 319" in error and "Timeout while waiting for quorum" in error
    assert count(n0, f"{db}.t") == 3  # the part is there...
    assert count(n0, f"{db}.t", select_sequential_consistency=1) == 2  # ...but not for a quorum read
    expiry = wait_for(
        lambda: n0.value(f"SELECT active_replicas FROM system.replicas WHERE database = '{db}'") == "1",
        30,
        "the killed replica's session expiry",
    )
    assert expiry < 15
    # Once it is inactive, a quorum insert is refused up front, and writes nothing.
    error = server_error(lambda: n0.query(f"INSERT INTO {db}.t VALUES (4, 'refused')", insert_quorum=2))
    assert "Code: 285" in error and "Number of alive replicas (1)" in error
    n1.start()
    n1.query(f"SYSTEM SYNC REPLICA {db}.t")
    assert n1.value(f"SELECT groupArray(s) FROM (SELECT s FROM {db}.t ORDER BY id)") == "['before','during','quorum']"
    assert n0.value(f"SELECT active_replicas FROM system.replicas WHERE database = '{db}'") == "2"
    # The replica's return completes the pending quorum: the row is now visible to quorum reads.
    wait_for(lambda: count(n0, f"{db}.t", select_sequential_consistency=1) == 3, 30, "the late quorum")


def test_replica_restart_before_session_expiry(cluster: ClickHouseCluster, db: str) -> None:
    """18.16 takes its replica back at once even while its old session's `is_active` is there."""
    n0, n1 = cluster.node(0), cluster.node(1)
    n0.query(f"CREATE TABLE {db}.t ON CLUSTER c1x2 {COLUMNS} ENGINE = {replicated(db)}")
    n1.kill()
    n0.query(f"INSERT INTO {db}.t VALUES (1, 'a')")
    n1.start()
    assert n1.value(f"SELECT is_readonly, active_replicas FROM system.replicas WHERE database = '{db}'") == "0\t2"
    n1.query(f"INSERT INTO {db}.t VALUES (2, 'b')")
    n1.query(f"SYSTEM SYNC REPLICA {db}.t")
    assert count(n1, f"{db}.t") == 2


def test_shard_down(cluster: ClickHouseCluster, db: str) -> None:
    n0 = cluster.node(0)
    n0.query(f"CREATE TABLE {db}.t ON CLUSTER c2x2 {COLUMNS} ENGINE = {replicated(db)}")
    n0.query(f"CREATE TABLE {db}.d ON CLUSTER c2x2 AS {db}.t ENGINE = Distributed(c2x2, {db}, t, id)")
    cluster.kill_shard(2)
    error = server_error(
        lambda: n0.query(f"INSERT INTO {db}.d SELECT number, 'x' FROM numbers(10)", insert_distributed_sync=1)
    )
    assert "Code: 279" in error and "All connection tries failed" in error
    for node in cluster.shard_nodes(1):  # the sync insert wrote nothing, not even shard 1's rows
        node.query(f"SYSTEM SYNC REPLICA {db}.t")
        assert count(node, f"{db}.t") == 0
    assert "Code: 279" in server_error(lambda: count(n0, f"{db}.d"))
    # Without insert_distributed_sync the insert is queued on the sending node.
    n0.query(f"INSERT INTO {db}.d SELECT number, 'x' FROM numbers(10)")
    assert count(n0, f"{db}.d", skip_unavailable_shards=1) == 5
    cluster.start_shard(2)
    wait_for(lambda: count(n0, f"{db}.d") == 10, 60, "the queued rows reaching shard 2")
