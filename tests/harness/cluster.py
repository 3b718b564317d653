"""A real ClickHouse cluster on loopback: one ZooKeeper and N clickhouse-server 18.16 nodes.

For tests and benchmarks of replicated and sharded targets (issue #27). In the
style of tests/servers.py: every process gets its own directory (config, data,
logs) in a temp dir and free ports, listens on 127.0.0.1 only, and is stopped
on `stop()` / `remove()` and at interpreter exit.

Layout: `ClickHouseCluster(shards=2, replicas=2)` starts shards x replicas
servers, numbered shard by shard (node 0 and 1 are shard 1, node 2 and 3 shard
2). Each has the macros `{shard}` (1, 2, ...) and `{replica}` (r1, r2, ...),
so `ReplicatedMergeTree('/clickhouse/tables/{shard}/t', '{replica}')` works
unchanged on every node; and these clusters in `<remote_servers>`:

- `c{S}x{R}` (default `c2x2`): every node, S shards of R replicas;
- `c1x{R}` (`c1x2`): the first shard's replicas only;
- `c{S}x1` (`c2x1`): the first replica of each shard, one replica per shard.

Shards are numbered from 1 as in `{shard}` and `system.clusters.shard_num`;
nodes from 0 (`cluster.node(i)`). Replicas of a shard are in
`internal_replication` mode: a Distributed table writes each row to one replica
and replication copies it. `ON CLUSTER` DDL goes through
`/clickhouse/task_queue/ddl` in ZooKeeper.

ZooKeeper comes from Maven jars (`scripts/install-source-servers zookeeper`),
run with the machine's Java; `missing()` says what is not installed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .servers import CONFIG, TEST_PASSWORD, TEST_USER, USERS, ClickHouseServer, free_port
from .servers import available as clickhouse_available

REPO = Path(__file__).resolve().parent.parent.parent
# Keep in step with scripts/install-source-servers.
CACHE = Path(os.environ.get("CHUTE_SOURCE_SERVERS") or REPO / ".cache" / "source-servers")
ZOOKEEPER_VERSION = "3.9.5"
DDL_PATH = "/clickhouse/task_queue/ddl"

# ZooKeeper's tick bounds the session timeouts it grants (2 to 20 ticks). ClickHouse's
# session is short so that a killed replica's `is_active` node expires soon and the
# restarted server can take its place (18.16 waits for that before it starts the table).
ZOOKEEPER_TICK_MS = 500
SESSION_TIMEOUT_MS = 4000

ZOO_CFG = """tickTime={tick}
initLimit=10
syncLimit=5
dataDir={root}/data
clientPort={port}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr
autopurge.purgeInterval=0
"""

CLUSTER_CONFIG = """    <interserver_http_port>{interserver_port}</interserver_http_port>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <zookeeper>
        <node><host>127.0.0.1</host><port>{zookeeper_port}</port></node>
        <session_timeout_ms>{session_timeout_ms}</session_timeout_ms>
        <operation_timeout_ms>10000</operation_timeout_ms>
    </zookeeper>
    <macros>
        <shard>{shard}</shard>
        <replica>{replica}</replica>
    </macros>
    <remote_servers>
{remote_servers}    </remote_servers>
    <distributed_ddl>
        <path>{ddl_path}</path>
    </distributed_ddl>
    <!-- A replica killed while it fetched a part keeps the fetch's tmp_ directory, and after its
         restart 18.16 retries the fetch into the same name for good ("Directory
         tmp_replace_from_fetch_... already exists") until the directory is older than
         temporary_directories_lifetime (a day by default), looked for every cleanup_delay_period.
         The trials kill replicas mid-load: here such directories go after 10 s. -->
    <merge_tree>
        <temporary_directories_lifetime>10</temporary_directories_lifetime>
        <cleanup_delay_period>5</cleanup_delay_period>
    </merge_tree>
"""


def missing() -> str | None:
    """Why the cluster cannot run here (what to install), or None."""
    if not clickhouse_available():
        return "clickhouse-server is not installed: run scripts/test, which installs it"
    if not shutil.which("java"):
        return "java (17 or newer) is not on PATH: run scripts/install-source-servers zookeeper"
    if not (zookeeper_jars().parent / "complete").exists():
        return f"no ZooKeeper jars in {zookeeper_jars()}: run scripts/install-source-servers zookeeper"
    return None


def zookeeper_jars() -> Path:
    return CACHE / f"zookeeper-{ZOOKEEPER_VERSION}" / "jars"


def _terminate(processes: Iterable[subprocess.Popen[bytes] | None], timeout: float = 20.0) -> None:
    """SIGTERM every live process group at once, then wait; SIGKILL what is still there."""
    live = [p for p in processes if p is not None and p.poll() is None]
    for proc in live:
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in live:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


@dataclass
class ZooKeeper:
    """A standalone ZooKeeper server; `address` is host:port."""

    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def create(cls, root: Path) -> ZooKeeper:
        for sub in ("data", "log"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        zk = cls(root, free_port())
        (root / "zoo.cfg").write_text(ZOO_CFG.format(tick=ZOOKEEPER_TICK_MS, root=root, port=zk.port))
        return zk

    def command(self) -> list[str]:
        java = shutil.which("java") or "java"
        return [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # starts in half a second; a test's load is small
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            f"{zookeeper_jars()}/*",
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self.root / "zoo.cfg"),
        ]

    def launch(self) -> None:
        with open(self.root / "log" / "stdout.log", "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
            )

    def four_letter(self, word: str, timeout: float = 1.0) -> str:
        """Send one of ZooKeeper's four-letter commands (ruok, srvr, mntr); its answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def ready(self) -> bool:
        """Serving requests: `srvr` names the mode (`ruok` says imok before the server takes sessions)."""
        try:
            return "Mode: standalone" in self.four_letter("srvr")
        except OSError:
            return False

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"zookeeper exited during start; see {self.root}/log/stdout.log")
            if self.ready():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"zookeeper did not answer in {timeout:.0f} s; see {self.root}/log/stdout.log")

    def start(self, timeout: float = 30.0) -> ZooKeeper:
        self.launch()
        self.wait_ready(timeout)
        return self

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        _terminate([self.process])


@dataclass(eq=False)
class ClusterNode(ClickHouseServer):
    """One server of a cluster: a ClickHouseServer with its place in the layout."""

    index: int = 0
    shard: int = 1
    """1-based, as the `{shard}` macro and `system.clusters.shard_num`."""
    replica: int = 1
    """1-based within the shard; the `{replica}` macro is `r<replica>`."""
    interserver_port: int = 0

    @property
    def replica_name(self) -> str:
        return f"r{self.replica}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def target_url(self, database: str, user: str = TEST_USER, password: str = TEST_PASSWORD) -> str:
        """A chute target URL for `database` on this node, with the test user's credentials."""
        return f"http://{user}:{password}@127.0.0.1:{self.http_port}/{database}"

    def query(self, sql: str, database: str | None = None, **settings: Any) -> str:
        """POST one statement (as the default user); `settings` go in the URL. Raises
        RuntimeError with the server's message (which starts with its error code) on failure."""
        params = {**({"database": database} if database else {}), **{k: str(v) for k, v in settings.items()}}
        url = f"{self.url}/" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        req = urllib.request.Request(url, data=sql.encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return str(resp.read().decode())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(exc.read().decode(errors="replace").strip()) from None

    def value(self, sql: str, database: str | None = None, **settings: Any) -> str:
        """The single value a query returns, as text."""
        return self.query(sql, database, **settings).strip()

    def start(self, timeout: float = 60.0) -> ClusterNode:
        """Start (or restart, after kill()/stop(), with the same data directory) and wait for /ping."""
        if not self.running:
            self.launch()
        self.wait_ready(timeout)
        return self

    def wait_zookeeper(self, timeout: float = 30.0) -> None:
        """Wait until this server reads ZooKeeper (its session is up)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.query("SELECT count() FROM system.zookeeper WHERE path = '/'")
                return
            except (RuntimeError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {self.index} does not reach ZooKeeper: {exc}") from None
                time.sleep(0.1)


def _remote_servers(clusters: Mapping[str, Sequence[Sequence[int]]], nodes: Sequence[ClusterNode]) -> str:
    out = []
    for name, shards in clusters.items():
        out.append(f"        <{name}>\n")
        for replicas in shards:
            out.append("            <shard>\n                <internal_replication>true</internal_replication>\n")
            for i in replicas:
                out.append(
                    f"                <replica><host>127.0.0.1</host><port>{nodes[i].tcp_port}</port></replica>\n"
                )
            out.append("            </shard>\n")
        out.append(f"        </{name}>\n")
    return "".join(out)


_LIVE: list[ClickHouseCluster] = []
_LIVE_LOCK = threading.Lock()


def _stop_all_at_exit() -> None:
    with _LIVE_LOCK:
        clusters = list(_LIVE)
    for cluster in clusters:
        cluster.remove()


atexit.register(_stop_all_at_exit)


@dataclass(eq=False)
class ClickHouseCluster:
    """ZooKeeper plus `shards` x `replicas` clickhouse-server nodes on loopback.

    `clusters` maps extra cluster names to shards, each a list of node indices;
    the default ones (see the module's doc) are always defined.
    """

    shards: int = 2
    replicas: int = 2
    root: Path | None = None
    clusters: dict[str, list[list[int]]] = field(default_factory=dict)
    nodes: list[ClusterNode] = field(default_factory=list, init=False)
    zookeeper: ZooKeeper | None = field(default=None, init=False)
    startup_seconds: float = field(default=0.0, init=False)
    _made_root: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.shards < 1 or self.replicas < 1:
            raise ValueError("a cluster needs at least one shard of one replica")
        grid = [[s * self.replicas + r for r in range(self.replicas)] for s in range(self.shards)]
        defaults = {
            self.name: grid,
            f"c1x{self.replicas}": grid[:1],
            f"c{self.shards}x1": [shard[:1] for shard in grid],
        }
        self.clusters = {**defaults, **self.clusters}

    @property
    def name(self) -> str:
        """The cluster of every node, e.g. `c2x2`."""
        return f"c{self.shards}x{self.replicas}"

    def create(self) -> ClickHouseCluster:
        """Write every config (ports picked now); start() calls this when it was not called."""
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="chute-cluster-"))
            self._made_root = True
        self.root.mkdir(parents=True, exist_ok=True)
        self.zookeeper = ZooKeeper.create(self.root / "zookeeper")
        self.nodes = []
        for s in range(self.shards):
            for r in range(self.replicas):
                index = len(self.nodes)
                node_root = self.root / f"node{index}"
                for sub in ("log", "data", "tmp", "user_files", "format_schemas"):
                    (node_root / sub).mkdir(parents=True, exist_ok=True)
                self.nodes.append(
                    ClusterNode(
                        node_root,
                        free_port(),
                        free_port(),
                        index=index,
                        shard=s + 1,
                        replica=r + 1,
                        interserver_port=free_port(),
                    )
                )
        remote = _remote_servers(self.clusters, self.nodes)
        for node in self.nodes:
            base = CONFIG.format(root=node.root, http_port=node.http_port, tcp_port=node.tcp_port)
            extra = CLUSTER_CONFIG.format(
                interserver_port=node.interserver_port,
                zookeeper_port=self.zookeeper.port,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                shard=node.shard,
                replica=node.replica_name,
                remote_servers=remote,
                ddl_path=DDL_PATH,
            )
            (node.root / "config.xml").write_text(base.replace("</yandex>", extra + "</yandex>"))
            (node.root / "users.xml").write_text(USERS.format(user=TEST_USER, password=TEST_PASSWORD))
        return self

    def start(self, timeout: float = 60.0) -> ClickHouseCluster:
        """Start ZooKeeper and every node at once; return when each answers /ping and reads
        ZooKeeper. Prints nothing; `startup_seconds` says how long it took."""
        if missing_what := missing():
            raise RuntimeError(missing_what)
        began = time.monotonic()
        if self.zookeeper is None:
            self.create()
        assert self.zookeeper is not None
        with _LIVE_LOCK:
            if self not in _LIVE:
                _LIVE.append(self)
        try:
            # ZooKeeper first: an 18.16 server whose first ZooKeeper session failed at start
            # crashed (SIGSEGV in zkutil::ZooKeeper::createImpl) on its first ON CLUSTER query.
            self.zookeeper.start(timeout)
            for node in self.nodes:
                node.launch()
            for node in self.nodes:
                node.wait_ready(max(timeout - (time.monotonic() - began), 1.0))
            for node in self.nodes:
                node.wait_zookeeper(max(timeout - (time.monotonic() - began), 1.0))
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def node(self, i: int) -> ClusterNode:
        return self.nodes[i]

    def __iter__(self) -> Iterator[ClusterNode]:
        return iter(self.nodes)

    def shard_nodes(self, shard: int) -> list[ClusterNode]:
        """The replicas of shard `shard` (1-based, as `{shard}`)."""
        if not 1 <= shard <= self.shards:
            raise ValueError(f"shards are numbered 1 to {self.shards}, not {shard}")
        return [n for n in self.nodes if n.shard == shard]

    def kill_shard(self, shard: int) -> None:
        """SIGKILL every replica of shard `shard` (1-based), as a lost shard would be."""
        for node in self.shard_nodes(shard):
            node.kill()

    def start_shard(self, shard: int, timeout: float = 60.0) -> None:
        """Restart every replica of shard `shard` (1-based) with its data; wait for each."""
        nodes = self.shard_nodes(shard)
        for node in nodes:
            if not node.running:
                node.launch()
        for node in nodes:
            node.wait_ready(timeout)

    def sync_replicas(self, table: str, database: str | None = None, timeout: float = 60.0) -> None:
        """Wait until every running replica of `table` has fetched what its shard has:
        `SYSTEM SYNC REPLICA` on each (18.16 has it)."""
        for node in self.nodes:
            if node.running:
                node.query(f"SYSTEM SYNC REPLICA {table}", database, receive_timeout=int(timeout))

    def stop(self) -> None:
        """Stop every process (all at once); the directories stay."""
        _terminate([n.process for n in self.nodes])
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def remove(self) -> None:
        """Stop everything and delete the cluster's directory (when this made it). A directory
        this made goes anyway: its processes are killed, not stopped (an 18.16 server with many
        replicated tables takes seconds to shut down)."""
        if self._made_root:
            for node in self.nodes:
                node.kill()
            if self.zookeeper is not None:
                self.zookeeper.kill()
        self.stop()
        with _LIVE_LOCK:
            if self in _LIVE:
                _LIVE.remove(self)
        if self._made_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ClickHouseCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.remove()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tests.harness.cluster [SHARDS REPLICAS]`: start a cluster, print its
    nodes' URLs, and keep it up until Ctrl-C (for trying things by hand)."""
    args = list(sys.argv[1:] if argv is None else argv)
    shards, replicas = (int(args[0]), int(args[1])) if len(args) >= 2 else (2, 2)
    cluster = ClickHouseCluster(shards, replicas).start()
    print(f"cluster {cluster.name} ready in {cluster.startup_seconds:.1f} s; ZooKeeper {cluster.zookeeper.address}")  # type: ignore[union-attr]
    for node in cluster:
        print(f"node {node.index}: shard {node.shard} replica {node.replica_name} {node.url}")
    print("clusters: " + ", ".join(cluster.clusters))
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.remove()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
