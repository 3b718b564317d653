"""Issue 27 goals: a 2-shard x 2-replica cluster against one node, same data, same run.

A real cluster on loopback (tests/harness/cluster.py: ZooKeeper and four 18.16 servers,
2 shards x 2 replicas); the stream-snapshot set (gzip JSON lines). Interleaved rounds:
  - single: `chute load DIR -t ev --target node0/db --method client-convert` (a MergeTree
    table chute makes; the method the shards are written with);
  - cluster by key: the same through node 0 with `--cluster c2x2 --shard-by 'cityHash64(id)'`
    (chute makes `ev_local` replicated on every node and `ev` Distributed, and writes each
    shard's table on a node of that shard: each file's rows split between the shards);
  - cluster by user: the same sharded by `cityHash64(user_id)`;
  - cluster rand(): the same with `--shard-by 'rand()'` (whole batches to one shard, in turn).
Each result is checked (every row once: count = uniqExact(_source, _source_row) = input
rows, on every replica). Reported: rows/s, bytes chute sent (goal: <= 1.05x single: each
row crosses the wire once), and each server's CPU seconds during the load (utime + stime
from /proc): each shard should do about half of what the single node does (its second
replica only fetches the parts).

    python bench/bench_cluster.py [--rows 500000] [--files 16] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_embedded import ensure_data
from bench.common import median, print_table, save_results
from tests.harness.cluster import ClickHouseCluster, ClusterNode

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(node: ClusterNode) -> float:
    """The server's user + system CPU seconds so far (/proc/PID/stat)."""
    assert node.process is not None
    with open(f"/proc/{node.process.pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


KINDS = {
    "single": "",
    "cluster by key": "cityHash64(id)",
    "cluster by user": "cityHash64(user_id)",
    "cluster rand()": "rand()",
    "cluster by key, routed": "cityHash64(id) --insert-via-distributed",
}
"""Each target: a MergeTree on node 0; the 2x2 cluster sharded by a key of the row (each
file's rows split between the shards): the row's own `id`, or the `user_id` its stream
belongs to (an entity key, as users shard to keep an entity's rows together); by rand()
(whole batches to one shard, in turn); by `id` again, each batch sent once to node 0, whose
Distributed engine routes the rows (--insert-via-distributed)."""


def load(cluster: ClickHouseCluster, data: Path, database: str, shard_by: str) -> tuple[float, dict[str, object]]:
    node0 = cluster.node(0)
    command = [sys.executable, "-m", "chute.cli", "load", str(data), "-t", "ev", "--json", "--quiet"]
    command += ["--target", node0.target_url(database)]
    if shard_by:
        key, *flags = shard_by.split(" --")
        command += ["--cluster", cluster.name, "--shard-by", key, *(f"--{f}" for f in flags)]
        for node in cluster:
            command += ["--node", f"http://127.0.0.1:{node.http_port}"]
    else:
        # As into the shards (their rows are split or routed from chute's read): a single node
        # would have auto let it parse the gzip files itself, another method and other bytes.
        command += ["--method", "client-convert"]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"load failed: {done.stderr.strip() or done.stdout.strip()}")
    report: dict[str, object] = json.loads(done.stdout)
    return seconds, report


def check(cluster: ClickHouseCluster, database: str, rows: int, sharded: bool) -> None:
    """Every row once: on the single node; on each replica of each shard, the shards adding up."""
    if not sharded:
        got = cluster.node(0).query("SELECT count(), uniqExact(_source, _source_row) FROM ev", database).split()
        if got != [str(rows), str(rows)]:
            raise SystemExit(f"{database}: {got} rows / distinct rows, expected {rows}")
        return
    per_shard: dict[int, set[str]] = {}
    for node in cluster:
        node.query(f"SYSTEM SYNC REPLICA {database}.ev_local", receive_timeout=120)
        got = node.query("SELECT count(), uniqExact(_source, _source_row) FROM ev_local", database).split()
        if got[0] != got[1]:
            raise SystemExit(f"{database} node {node.index}: {got} rows / distinct rows")
        per_shard.setdefault(node.shard, set()).add(got[0])
    if any(len(v) != 1 for v in per_shard.values()) or sum(int(v.pop()) for v in per_shard.values()) != rows:
        raise SystemExit(f"{database}: shards hold {per_shard}, expected {rows} in all")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)

    data = ensure_data(args.rows, args.files)
    results: dict[str, dict[str, list[float]]] = {
        kind: {"seconds": [], "bytes": [], **{f"cpu{i}": [] for i in range(4)}} for kind in KINDS
    }
    with ClickHouseCluster(shards=2, replicas=2) as cluster:
        for round_ in range(args.repeat):
            for n, (kind, shard_by) in enumerate(KINDS.items()):
                sharded = bool(shard_by)
                database = f"b_{n}_{round_}"
                cluster.node(0).query(f"CREATE DATABASE {database} ON CLUSTER {cluster.name}")
                before = [cpu_seconds(n) for n in cluster]
                seconds, report = load(cluster, data, database, shard_by)
                check(cluster, database, args.rows, sharded)
                after = [cpu_seconds(n) for n in cluster]
                results[kind]["seconds"].append(seconds)
                results[kind]["bytes"].append(float(report["bytes_sent"]))  # type: ignore[arg-type]
                for i, (b, a) in enumerate(zip(before, after, strict=True)):
                    results[kind][f"cpu{i}"].append(a - b)
                cluster.node(0).query(f"DROP DATABASE {database} ON CLUSTER {cluster.name}")

    single, clustered, spread = results["single"], results["cluster by key"], results["cluster rand()"]
    print(f"data: {args.files} gzip JSON-lines files, {args.rows:,} rows; 18.16 servers on loopback; 2 cores")
    rows = []
    for kind, got in results.items():
        seconds = median(got["seconds"])
        rows.append(
            [
                kind,
                f"{seconds:.2f}",
                f"{args.rows / seconds:,.0f}",
                f"{median(got['bytes']) / 2**20:.1f}",
                *(f"{median(got[f'cpu{i}']):.2f}" for i in range(4)),
            ]
        )
    print_table(
        ["target", "median s", "rows/s", "MiB sent", "cpu node0 s", "cpu node1 s", "cpu node2 s", "cpu node3 s"],
        rows,
    )
    speed = median(single["seconds"]) / median(clustered["seconds"])
    wire = median(clustered["bytes"]) / median(single["bytes"])
    wire_rand = median(spread["bytes"]) / median(single["bytes"])
    wire_user = median(results["cluster by user"]["bytes"]) / median(single["bytes"])
    routed = results["cluster by key, routed"]
    wire_routed = median(routed["bytes"]) / median(single["bytes"])
    print(
        f"rows/s, cluster by key / single: {speed:.2f}x; cluster rand() / single: "
        f"{median(single['seconds']) / median(spread['seconds']):.2f}x"
    )
    print(
        f"bytes sent / single: cluster by key {wire:.3f}x, by user {wire_user:.3f}x, "
        f"rand() {wire_rand:.3f}x, by key routed by node 0 {wire_routed:.3f}x (goal <= 1.05)"
    )
    print(f"rows/s, cluster by key routed / single: {median(single['seconds']) / median(routed['seconds']):.2f}x")
    kinds = (("by key", clustered), ("by user", results["cluster by user"]), ("rand()", spread), ("routed", routed))
    for kind, got in kinds:
        shard1, shard2 = median(got["cpu0"]), median(got["cpu2"])
        print(
            f"cluster {kind}: server CPU of the node each shard is written through: shard 1 {shard1:.2f} s, "
            f"shard 2 {shard2:.2f} s ({shard1 / (shard1 + shard2):.0%} / {shard2 / (shard1 + shard2):.0%}); "
            f"single node {median(single['cpu0']):.2f} s"
        )
    save_results(
        "cluster",
        {
            "rows": args.rows,
            "files": args.files,
            "results": results,
            "speed": speed,
            "wire": [wire, wire_user, wire_rand, wire_routed],
        },
    )
    return 0 if max(wire_rand, wire_routed) <= 1.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
