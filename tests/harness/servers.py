"""Start a real ClickHouse server (the Debian package, 18.16) on loopback.

Used by the tests and the benchmarks: each server gets its own config, data
directory and free ports, listens on 127.0.0.1 only, and is stopped at exit.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

SERVER_BINARY = "/usr/sbin/clickhouse-server"
TEST_USER = "chute_test"
TEST_PASSWORD = "s3cr3t-Pa55word"

CONFIG = """<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>{root}/log/server.log</log>
        <errorlog>{root}/log/error.log</errorlog>
    </logger>
    <http_port>{http_port}</http_port>
    <tcp_port>{tcp_port}</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <path>{root}/data/</path>
    <tmp_path>{root}/tmp/</tmp_path>
    <user_files_path>{root}/user_files/</user_files_path>
    <format_schema_path>{root}/format_schemas/</format_schema_path>
    <users_config>{root}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>536870912</mark_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
"""

USERS = """<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>4000000000</max_memory_usage>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
        <{user}>
            <password>{password}</password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </{user}>
    </users>
    <quotas><default></default></quotas>
</yandex>
"""


_ISSUED: set[int] = set()


def free_port() -> int:
    """A loopback port no other caller of this process got, below the kernel's ephemeral
    range (outgoing connections take ports there) and in a block of its own per xdist worker.

    Binding port 0 twice can give the same port when nothing holds the first one yet: a
    cluster's node then got one port for TCP and interserver traffic and exited at start."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    block = int(worker) % 8 if worker.isdigit() else 0
    low = 12000 + block * 2500
    for _ in range(200):
        port = random.randrange(low, low + 2500)
        if port in _ISSUED:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _ISSUED.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {low}-{low + 2499}")


def available() -> bool:
    return os.path.exists(SERVER_BINARY)


@dataclass
class ClickHouseServer:
    """A running server; `url` is its HTTP endpoint on loopback."""

    root: Path
    http_port: int
    tcp_port: int
    process: subprocess.Popen[bytes] | None = None
    open_files: int | None = None
    """The server's open-files limit (soft and hard), where a test wants one lower than the machine's."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @classmethod
    def create(cls, root: Path | None = None) -> ClickHouseServer:
        root = Path(root or tempfile.mkdtemp(prefix="chute-ch-"))
        for sub in ("log", "data", "tmp", "user_files", "format_schemas"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        server = cls(root, free_port(), free_port())
        (root / "config.xml").write_text(CONFIG.format(root=root, http_port=server.http_port, tcp_port=server.tcp_port))
        (root / "users.xml").write_text(USERS.format(user=TEST_USER, password=TEST_PASSWORD))
        return server

    def start(self, timeout: float = 30.0) -> ClickHouseServer:
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it (several servers can start at once)."""
        with open(self.root / "log" / "stdout.log", "ab") as log:
            self.process = subprocess.Popen(
                [SERVER_BINARY, f"--config-file={self.root / 'config.xml'}"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
                preexec_fn=None if self.open_files is None else self._limit_open_files,
            )

    def _limit_open_files(self) -> None:
        assert self.open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    def wait_ready(self, timeout: float = 30.0) -> ClickHouseServer:
        """Poll `/ping` until the launched server answers; stop it and raise if it does not."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"clickhouse-server exited; see {self.root}/log")
            if self.ping():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("clickhouse-server did not answer /ping in time")

    def ping(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/ping", timeout=1) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def query(self, sql: str, database: str | None = None) -> str:
        return self.query_url(self.url, sql, database)

    @staticmethod
    def query_url(base_url: str, sql: str, database: str | None = None) -> str:
        """POST one statement; raise with the server's message on failure."""
        url = base_url + (f"/?database={database}" if database else "/")
        req = urllib.request.Request(url, data=sql.encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return str(resp.read().decode())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(exc.read().decode(errors="replace")) from None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def remove(self) -> None:
        """Kill the server (its directory goes: a clean shutdown keeps nothing) and delete it.
        A SIGTERM'd 18.16 server took up to 20 s (then the kill) at the end of a test process."""
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def server_query(url: str, sql: str) -> str:
    """The text answer of `sql` in the database a target URL names (`http://host:port/db`)."""
    base, database = url.rsplit("/", 1)
    return ClickHouseServer.query_url(base, sql, database)
