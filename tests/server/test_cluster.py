"""chute on a real cluster (issue #27): replicated targets, replicated books, workers on
different replicas, Distributed targets written shard by shard, and tables made ON CLUSTER.

One 2-shard x 2-replica cluster of 18.16 servers and ZooKeeper per session (the
`clickhouse_cluster` fixture; nodes 0, 1 are shard 1, nodes 2, 3 shard 2); each test
works in a database of its own.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import chute
from chute.errors import ShardUnavailable

from ..harness.cluster import ClickHouseCluster, ClusterNode
from . import test_cluster_harness

pytestmark = pytest.mark.cluster

ROWS = 50
COLUMNS = "(id UInt64, s String, _source String, _source_mtime DateTime, _source_row UInt64, _load_id String)"


def _files(folder: Path, count: int, start: int = 0) -> Path:
    """`count` JSON-lines files of ROWS rows each, ids unique across files."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(start, start + count):
        lines = [json.dumps({"id": f * ROWS + i, "s": f"v{f}-{i}"}) for i in range(ROWS)]
        (folder / f"f{f:03d}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _n(node: ClusterNode, sql: str, db: str) -> int:
    return int(node.value(sql, db))


def _nodes(cluster: ClickHouseCluster) -> list[str]:
    return [f"http://127.0.0.1:{n.http_port}" for n in cluster]


# The session's cluster with every node running again after each test, and a fresh database on every node.
cluster = test_cluster_harness.cluster
db = test_cluster_harness.db


def _replicated(cluster: ClickHouseCluster, db: str, table: str, engine: str = "MergeTree", tail: str = "") -> None:
    path = f"/clickhouse/tables/{{shard}}/{db}/{table}"
    params = ", ".join([f"'{path}'", "'{replica}'", *([tail] if tail else [])])
    cluster.node(0).query(
        f"CREATE TABLE {db}.{table} ON CLUSTER c1x2 {COLUMNS} ENGINE = Replicated{engine}({params}) "
        "PARTITION BY id % 3 ORDER BY id"
    )


def test_replicated_target_every_replica_once(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """Loaded through node 0 into a ReplicatedMergeTree: node 1 holds each row once, with
    provenance, as soon as the load returns; the books are replicated, so a re-run through
    node 1 loads nothing; the stage never took the target's ZooKeeper path."""
    _replicated(cluster, db, "ev")
    data = _files(tmp_path / "data", 8)
    report = chute.load(str(data), "ev", cluster.node(0).target_url(db))
    assert report.ok and report.rows_loaded == 8 * ROWS and report.table_rows == 8 * ROWS
    other = cluster.node(1)
    assert _n(other, "SELECT count() FROM ev", db) == 8 * ROWS
    assert _n(other, "SELECT uniqExact(id) FROM ev", db) == 8 * ROWS
    assert _n(other, "SELECT uniqExact(_source, _source_row) FROM ev WHERE _source_row > 0", db) == 8 * ROWS
    ledger = f"SELECT engine FROM system.tables WHERE database = '{db}' AND name = '_chute_ledger'"
    assert cluster.node(0).value(ledger) == "ReplicatedMergeTree"
    again = chute.load(str(data), "ev", other.target_url(db))
    assert other.value(ledger) == "ReplicatedMergeTree"  # made there, and caught up before the plan
    assert again.ok and again.rows_loaded == 0 and {f.state for f in again.files} == {"skipped"}
    assert _n(cluster.node(0), "SELECT count() FROM ev", db) == 8 * ROWS
    # Only the target's own replicas live under its path.
    replicas = cluster.node(0).query(
        f"SELECT name FROM system.zookeeper WHERE path = '/clickhouse/tables/1/{db}/ev/replicas'"
    )
    assert sorted(replicas.split()) == ["r1", "r2"]


def test_replicated_target_without_provenance(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """A replicated table without provenance columns: several files a batch, each counted by the
    stage's own column (dropped before its parts are attached); the other replica holds each
    row once, the table never gets the column, and a re-run through it loads nothing."""
    path = f"/clickhouse/tables/{{shard}}/{db}/bare"
    cluster.node(0).query(
        f"CREATE TABLE {db}.bare ON CLUSTER c1x2 (id UInt64, s String) "
        f"ENGINE = ReplicatedMergeTree('{path}', '{{replica}}') PARTITION BY id % 3 ORDER BY id"
    )
    data = _files(tmp_path / "data", 6)
    options = chute.LoadOptions(provenance=False)
    report = chute.load(str(data), "bare", cluster.node(0).target_url(db), options)
    assert report.ok and report.rows_loaded == 6 * ROWS
    assert [f.rows_loaded for f in report.files] == [ROWS] * 6
    other = cluster.node(1)
    assert _n(other, "SELECT count() FROM bare", db) == 6 * ROWS
    assert _n(other, "SELECT uniqExact(id) FROM bare", db) == 6 * ROWS
    columns = f"SELECT count() FROM system.columns WHERE database = '{db}' AND table = 'bare'"
    assert _n(other, columns, db) == 2
    again = chute.load(str(data), "bare", other.target_url(db), options)
    assert again.ok and again.rows_loaded == 0


def test_replicated_replacing_target(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """The Replicated*MergeTree family: a ReplacingMergeTree with a version column stages into
    a plain ReplacingMergeTree of the same parameters; every row reaches the other replica."""
    _replicated(cluster, db, "rep", "ReplacingMergeTree", "_source_row")
    data = _files(tmp_path / "data", 4)
    report = chute.load(str(data), "rep", cluster.node(1).target_url(db))
    assert report.ok and report.rows_loaded == 4 * ROWS
    assert _n(cluster.node(0), "SELECT count() FROM rep", db) == 4 * ROWS
    assert _n(cluster.node(0), "SELECT count() FROM rep FINAL", db) == 4 * ROWS


def _worker(data: Path, url: str, worker: str) -> subprocess.Popen[bytes]:
    args = ["load", str(data), "-t", "ev", "--target", url, "--json", "--batch-mb", "1", "--worker-id", worker]
    return subprocess.Popen([sys.executable, "-m", "chute.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_workers_on_two_replicas(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """Two workers at once on the same 40 files, one through each replica: the claims (quorum
    writes, sequentially consistent reads) keep each file to one of them; every row once."""
    _replicated(cluster, db, "ev")
    data = _files(tmp_path / "data", 40)
    # An earlier load through each replica made its copy of the books (the workers find two replicas).
    seed = _files(tmp_path / "seed", 1, start=100)
    assert chute.load(str(seed), "ev", cluster.node(0).target_url(db)).ok
    assert chute.load(str(seed), "ev", cluster.node(1).target_url(db)).rows_loaded == 0
    workers = [_worker(data, cluster.node(i).target_url(db), f"w{i}") for i in (0, 1)]
    reports = []
    for proc in workers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        reports.append(json.loads(out))
    loaded = [sum(1 for f in r["files"] if f["state"] == "loaded") for r in reports]
    assert sum(loaded) == 40, loaded
    for node in (cluster.node(0), cluster.node(1)):
        node.query(f"SYSTEM SYNC REPLICA {db}.ev")
        assert _n(node, "SELECT count() FROM ev", db) == 41 * ROWS
        assert _n(node, "SELECT uniqExact(id) FROM ev", db) == 41 * ROWS


def _distributed(cluster: ClickHouseCluster, db: str, name: str, over: str, key: str) -> None:
    local = f"{name}_local"
    path = f"/clickhouse/tables/{{shard}}/{db}/{local}"
    node = cluster.node(0)
    node.query(
        f"CREATE TABLE {db}.{local} ON CLUSTER c2x2 {COLUMNS} "
        f"ENGINE = ReplicatedMergeTree('{path}', '{{replica}}') ORDER BY id"
    )
    node.query(
        f"CREATE TABLE {db}.{name} ON CLUSTER c2x2 AS {db}.{local} ENGINE = Distributed({over}, {db}, {local}, {key})"
    )


@pytest.mark.parametrize("via_distributed", [False, True], ids=["split here", "via distributed"])
def test_distributed_rows_on_the_shard_of_their_key(
    cluster: ClickHouseCluster, db: str, tmp_path: Path, via_distributed: bool
) -> None:
    """A Distributed table over 2 shards of 2 replicas, sharded by cityHash64(id): each shard
    (both replicas) holds exactly the rows a Distributed insert sends it; counts exact. Split
    here (each shard's rows sent to it) or sent once and routed by the target node
    (--insert-via-distributed: the bytes of one node's load, no stage or route table left)."""
    _distributed(cluster, db, "ev", "c2x2", "cityHash64(id)")
    _distributed(cluster, db, "twin", "c2x2", "cityHash64(id)")
    data = _files(tmp_path / "data", 12)
    options = chute.LoadOptions(nodes=tuple(_nodes(cluster)), insert_via_distributed=via_distributed)
    report = chute.load(str(data), "ev", cluster.node(0).target_url(db), options)
    assert report.ok and report.rows_loaded == 12 * ROWS and report.table_rows == 12 * ROWS
    assert any("shard 2 of c2x2" in n for n in report.notes)
    if via_distributed:
        cluster.node(0).query(f"CREATE TABLE {db}.one {COLUMNS} ENGINE = MergeTree ORDER BY id")
        single = chute.load(str(data), "one", cluster.node(0).target_url(db))
        assert report.bytes_sent <= single.bytes_sent * 1.02, (report.bytes_sent, single.bytes_sent)
    for node in cluster:
        left = "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name LIKE '_chute_stage_%'"
        assert _n(node, left, db) == 0
    # What a Distributed insert does with the same rows.
    cluster.node(0).query(f"INSERT INTO {db}.twin SELECT * FROM {db}.ev", insert_distributed_sync=1)
    cluster.sync_replicas("twin_local", db)
    per_shard = []
    for node in cluster:
        got = _n(node, "SELECT count() FROM ev_local", db)
        assert got == _n(node, "SELECT count() FROM twin_local", db)
        assert _n(node, "SELECT count() FROM ev_local WHERE id NOT IN (SELECT id FROM twin_local)", db) == 0
        assert _n(node, f"SELECT count() FROM ev_local WHERE cityHash64(id) % 2 != {node.shard - 1}", db) == 0
        # The load id is filled where the rows land (the stage, or the route table), not sent per row.
        wrong = f"SELECT count() FROM ev_local WHERE _load_id != '{report.load_id}' OR _source = ''"
        assert _n(node, wrong, db) == 0
        per_shard.append(got)
    assert per_shard[0] == per_shard[1] and per_shard[2] == per_shard[3] and per_shard[0] + per_shard[2] == 12 * ROWS
    again = chute.load(str(data), "ev", cluster.node(2).target_url(db), options)
    assert again.ok and again.rows_loaded == 0


@pytest.mark.parametrize("via_distributed", [False, True], ids=["split here", "via distributed"])
def test_distributed_shard_down_then_back(
    cluster: ClickHouseCluster, db: str, tmp_path: Path, via_distributed: bool
) -> None:
    """Shard 2 down: the files fail with a message naming it, nothing of them anywhere; after
    it is back, a re-run loads them, each row once on its shard."""
    _distributed(cluster, db, "ev", "c2x1", "cityHash64(id)")
    options = chute.LoadOptions(nodes=tuple(_nodes(cluster)), insert_via_distributed=via_distributed)
    url = cluster.node(0).target_url(db)
    assert chute.load(str(_files(tmp_path / "a", 3)), "ev", url, options).ok
    cluster.kill_shard(2)
    data = _files(tmp_path / "b", 4, start=10)
    down = chute.load(str(data), "ev", url, options)
    assert not down.ok and {f.state for f in down.files} == {"failed"}
    assert all("shard 2 of cluster c2x1" in (f.error or "") for f in down.files), down.files[0].error
    assert _n(cluster.node(0), "SELECT count() FROM ev_local WHERE id >= 500", db) == 0
    cluster.start_shard(2)
    back = chute.load(str(data), "ev", url, options)
    assert back.ok and back.rows_loaded == 4 * ROWS
    total = sum(_n(cluster.node(i), "SELECT count() FROM ev_local", db) for i in (0, 2))
    assert total == 7 * ROWS == _n(cluster.node(0), "SELECT uniqExact(id) FROM ev", db)


def test_cluster_option_makes_tables_on_every_node(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """--cluster: chute makes `<t>_local` (ReplicatedMergeTree, macros) and `<t>` (Distributed,
    --shard-by) on every node, the books too; --add-columns reaches every node."""
    data = _files(tmp_path / "data", 6)
    options = chute.LoadOptions(cluster="c2x2", shard_by="cityHash64(id)", nodes=tuple(_nodes(cluster)))
    report = chute.load(str(data), "made", cluster.node(1).target_url(db), options)
    assert report.ok and report.rows_loaded == 6 * ROWS and report.table_rows == 6 * ROWS
    for node in cluster:
        engines = dict(
            line.split("\t")
            for line in node.query(f"SELECT name, engine FROM system.tables WHERE database = '{db}'").splitlines()
        )
        assert engines["made_local"] == "ReplicatedMergeTree"
        assert engines["made"] == "Distributed"
        assert engines["_chute_ledger"] == "ReplicatedMergeTree"
        assert _n(node, f"SELECT count() FROM made_local WHERE cityHash64(id) % 2 != {node.shard - 1}", db) == 0
    wide = tmp_path / "wide"
    wide.mkdir()
    (wide / "w.jsonl").write_text(json.dumps({"id": 10_000, "s": "x", "extra": 7}) + "\n")
    more = chute.load(
        str(wide),
        "made",
        cluster.node(0).target_url(db),
        dataclasses.replace(options, add_columns=True),
    )
    assert more.ok and more.rows_loaded == 1, more.files[0].error
    for node in cluster:
        columns = node.query(f"SELECT table FROM system.columns WHERE database = '{db}' AND name = 'extra'").split()
        assert sorted(columns) == ["made", "made_local"]
    assert _n(cluster.node(3), "SELECT sum(extra) FROM made", db) == 7


def test_random_key_spreads_batches_over_shards(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """Sharded by rand(): whole batches go to one shard, in turn, so both shards get some
    (each batch took a whole cycle of turns, and every batch went to shard 1)."""
    _distributed(cluster, db, "ev", "c2x1", "rand()")
    data = _files(tmp_path / "data", 8)
    report = chute.load(
        str(data), "ev", cluster.node(0).target_url(db), chute.LoadOptions(nodes=tuple(_nodes(cluster)))
    )
    assert report.ok and report.rows_loaded == report.table_rows == 8 * ROWS
    shards = [_n(cluster.node(i), "SELECT count() FROM ev_local", db) for i in (0, 2)]
    assert sum(shards) == 8 * ROWS and min(shards) > 0, shards


def test_a_table_made_through_another_shard_keeps_its_books_on_the_first(
    cluster: ClickHouseCluster, db: str, tmp_path: Path
) -> None:
    """--cluster through a node of shard 2: the books were made there (the table did not exist
    yet, so its first shard was not known), while every later load through another node looked
    for them on shard 1, found none and loaded every file again (each row twice)."""
    data = _files(tmp_path / "data", 4)
    options = chute.LoadOptions(cluster="c2x2", shard_by="cityHash64(id)", nodes=tuple(_nodes(cluster)))
    second = next(n for n in cluster if n.shard == 2)
    first = chute.load(str(data), "ev", second.target_url(db), options)
    assert first.ok and first.rows_loaded == 4 * ROWS, first.files
    for node in cluster:
        again = chute.load(str(data), "ev", node.target_url(db), chute.LoadOptions(nodes=tuple(_nodes(cluster))))
        assert again.ok and again.rows_loaded == 0, (node.index, again.files)
    assert _n(cluster.node(0), "SELECT count() FROM ev", db) == 4 * ROWS
    assert _n(cluster.node(0), "SELECT uniqExact(id) FROM ev", db) == 4 * ROWS
    shard_one = next(n for n in cluster if n.shard == 1)
    assert _n(shard_one, "SELECT uniqExact(unit) FROM _chute_ledger WHERE state = 'done'", db) == 4


def test_cluster_makes_a_missing_database_on_every_node(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """--table newdb.ev with --cluster: the books are made ON CLUSTER in the table's database
    before the table is, so the database is made on every node first."""
    data = _files(tmp_path / "data", 2)
    newdb = f"{db}_made"
    options = chute.LoadOptions(cluster="c2x2", shard_by="cityHash64(id)", nodes=tuple(_nodes(cluster)))
    try:
        report = chute.load(str(data), f"{newdb}.ev", cluster.node(0).target_url(db), options)
        assert report.ok and report.rows_loaded == 2 * ROWS, report.files
        assert any(n.startswith(f"database {newdb} did not exist") for n in report.notes), report.notes
        for node in cluster:
            assert node.query(f"SELECT count() FROM system.databases WHERE name = '{newdb}'").strip() == "1"
        assert _n(cluster.node(3), f"SELECT count() FROM {newdb}.ev", db) == 2 * ROWS
    finally:
        cluster.node(0).query(f"DROP DATABASE IF EXISTS {newdb} ON CLUSTER c2x2")


def test_a_replica_that_dies_mid_load_gives_way_to_the_other(
    cluster: ClickHouseCluster, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node writing shard 2 dies after the first batch: the next batches go to the other
    replica of shard 2 (found when the shard's nodes were first asked). Before, the failed node
    was forgotten but the other one, asked already, was never taken: every later batch failed."""
    loader_module = importlib.import_module("chute.load.loader")
    _distributed(cluster, db, "ev", "c2x2", "cityHash64(id)")
    data = _files(tmp_path / "data", 6)
    original = loader_module.done
    killed: list[int] = []

    def done_then_kill(*args: object, **kwargs: object) -> None:
        original(*args, **kwargs)  # type: ignore[arg-type]
        if not killed:
            killed.append(2)
            cluster.node(2).kill()  # (the first node of shard 2 in --node order: the one in use)

    monkeypatch.setattr(loader_module, "done", done_then_kill)
    options = chute.LoadOptions(nodes=tuple(_nodes(cluster)), batch_files=1)
    report = chute.load(str(data), "ev", cluster.node(0).target_url(db), options)
    assert killed
    failed = [f for f in report.files if f.state == "failed"]
    assert len(failed) <= 1, [f.error for f in failed]  # (at most the batch on its way when the node died)
    loaded = sum(f.rows_loaded for f in report.files)
    # (the first batch's rows may still be on node 2 alone: back, and node 3 caught up, they count)
    cluster.node(2).start()
    cluster.node(3).query(f"SYSTEM SYNC REPLICA {db}.ev_local")
    assert _n(cluster.node(3), "SELECT count() FROM ev", db) == loaded == (6 - len(failed)) * ROWS


def test_a_shard_chute_cannot_reach_fails_the_load_unless_allowed(
    cluster: ClickHouseCluster, db: str, tmp_path: Path
) -> None:
    """Sharded by rand(), no --node: shard 2 is not at the target's HTTP port, so chute reaches
    shard 1 alone. Every batch went there and the load said ok (exit 0), a note saying only
    "not counted". Now the load fails naming the shard and the ways on, nothing written;
    --allow-missing-shards loads into the shards that answer, with a note."""
    _distributed(cluster, db, "ev", "c2x1", "rand()")
    data = _files(tmp_path / "data", 4)
    url = cluster.node(0).target_url(db)
    with pytest.raises(ShardUnavailable) as failed:
        chute.load(str(data), "ev", url)
    error = str(failed.value)
    assert "shard 2 of cluster c2x1" in error and "--node" in error and "--allow-missing-shards" in error, error
    assert _n(cluster.node(0), "SELECT count() FROM ev_local", db) == 0
    allowed = chute.load(str(data), "ev", url, chute.LoadOptions(allow_missing_shards=True))
    assert allowed.ok and allowed.rows_loaded == 4 * ROWS, allowed.files
    assert any("shard 2 of cluster c2x1" in n and "--allow-missing-shards" in n for n in allowed.notes), allowed.notes
    assert _n(cluster.node(0), "SELECT count() FROM ev_local", db) == 4 * ROWS


def test_cluster_makes_the_database_named_in_the_url(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """--cluster with a target URL naming a database no node has yet (http://host:port/newdb):
    it failed `[81] Database newdb doesn't exist` (the URL's database is every query's); now
    it is made ON CLUSTER first, as for --table newdb.ev."""
    data = _files(tmp_path / "data", 2)
    newdb = f"{db}_url"
    options = chute.LoadOptions(cluster="c2x2", shard_by="cityHash64(id)", nodes=tuple(_nodes(cluster)))
    try:
        report = chute.load(str(data), "ev", cluster.node(0).target_url(newdb), options)
        assert report.ok and report.rows_loaded == 2 * ROWS, report.files
        assert any(n.startswith(f"database {newdb} did not exist") for n in report.notes), report.notes
        for node in cluster:
            assert node.query(f"SELECT count() FROM system.databases WHERE name = '{newdb}'").strip() == "1"
        assert _n(cluster.node(3), f"SELECT count() FROM {newdb}.ev", db) == 2 * ROWS
    finally:
        cluster.node(0).query(f"DROP DATABASE IF EXISTS {newdb} ON CLUSTER c2x2")


def test_two_workers_making_the_books_at_once(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """Two workers start at once, one through each replica, before any books exist: each makes
    its replica of the books while the other makes its own. One exited 1 saying a replica of the
    books "is down" (the other's, made a moment before and not active yet). Now the race is
    benign: both finish, every row once."""
    data = _files(tmp_path / "data", 6)
    for trial in range(3):
        table = f"ev{trial}"
        _replicated(cluster, db, table)
        args = ["load", str(data), "-t", table, "--json", "--batch-mb", "1"]
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "chute.cli", *args, "--target", cluster.node(i).target_url(db)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for i in (0, 1)
        ]
        for proc in workers:
            _, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, (trial, err.decode())
        for node in (cluster.node(0), cluster.node(1)):
            node.query(f"SYSTEM SYNC REPLICA {db}.{table}")
            assert _n(node, f"SELECT count() FROM {table}", db) == 6 * ROWS
            assert _n(node, f"SELECT uniqExact(id) FROM {table}", db) == 6 * ROWS


def test_a_books_replica_not_active_yet_is_waited_for(cluster: ClickHouseCluster, db: str, tmp_path: Path) -> None:
    """The books' quorum writes need every replica active. A replica another worker has just made
    is not, for a moment (two workers making the books at once): the load failed at once saying a
    replica "is down". Here node 1's replica of the ledger is inactive for a few seconds (detached,
    then attached again): the load through node 0 waits for it and finishes."""
    _replicated(cluster, db, "ev")
    seed = _files(tmp_path / "seed", 1, start=100)
    assert chute.load(str(seed), "ev", cluster.node(0).target_url(db)).ok
    assert chute.load(str(seed), "ev", cluster.node(1).target_url(db)).rows_loaded == 0
    other = cluster.node(1)
    other.query(f"DETACH TABLE {db}._chute_ledger")
    back = threading.Timer(3.0, lambda: other.query(f"ATTACH TABLE {db}._chute_ledger"))
    back.start()
    try:
        report = chute.load(str(_files(tmp_path / "data", 2)), "ev", cluster.node(0).target_url(db))
    finally:
        back.join()
    assert report.ok and report.rows_loaded == 2 * ROWS, report.files
