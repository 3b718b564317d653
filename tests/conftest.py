"""Shared fixtures: every test gets its own embedded database directory.

chDB holds one database directory per process, so each fixture points chute
at a fresh directory; opening it closes the previous one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from chute.engine import open_engine


@pytest.fixture()
def target(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "db")
    yield path


@pytest.fixture()
def engine(target: str):  # type: ignore[no-untyped-def]
    return open_engine(target)


def write_with_engine(engine, path: Path, fmt: str, select: str, compression: str | None = None) -> Path:  # type: ignore[no-untyped-def]
    """Write a data file with the engine itself (so every format is real)."""
    from chute.sql import quote_str

    comp = f", {quote_str(compression)}" if compression else ""
    if path.exists():
        path.unlink()
    engine.execute(f"INSERT INTO FUNCTION file({quote_str(str(path))}, {quote_str(fmt)}, 'auto'{comp}) {select}")
    return path


def table_checksum(db: Path, checksum_sql: str, table: str = "t") -> tuple[int, int]:
    """(rows, hash) from `checksum_sql` (columns n and h) in a database directory; (0, 0)
    when the table is not there yet. Opens and closes the directory's engine."""
    engine = open_engine(str(db))
    try:
        if not engine.rows(f"SELECT count() AS n FROM system.tables WHERE name = '{table}'")[0]["n"]:
            return 0, 0
        row = engine.rows(checksum_sql)[0]
        return int(row["n"]), int(row["h"])
    finally:
        engine.close()


def kill_trials(
    command: Callable[[Path], list[str]],
    work: Path,
    checksum: Callable[[Path], tuple[int, int]],
    expected: tuple[int, int],
    full: float,
    idle: float,
    env: Mapping[str, str] | None = None,
) -> tuple[int, int]:
    """SIGKILL `command(db)` at random moments inside a load (past `idle`, the start-up of
    a run with nothing to do, within `full`, a clean load), re-run it, and check the table
    equals the clean one; until three kills landed and two left a partial table (at most
    eight trials: the timing varies by machine). Returns (kills, partial tables)."""
    rng = random.Random(8)
    kills = partial = 0
    for trial in range(8):
        if kills >= 3 and partial >= 2:
            break
        db = work / f"trial{trial}"
        proc = subprocess.Popen(command(db), env=env)
        time.sleep(idle + rng.uniform(0.05, 0.9) * max(full - idle, 0.1))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        partial += 0 < checksum(db)[0] < expected[0]
        subprocess.run(command(db), check=True, env=env)
        assert checksum(db) == expected, f"trial {trial} differs from the clean load"
    return kills, partial


def set_mtime(path: Path, seconds: int) -> None:
    os.utime(path, (seconds, seconds))


@pytest.fixture(scope="session")
def clickhouse_server():  # type: ignore[no-untyped-def]
    """The Debian clickhouse-server (18.16) on loopback, one per test session."""
    from .servers import ClickHouseServer, available

    if not available():
        pytest.fail("clickhouse-server is not installed: run ./scripts/test, which installs it")
    server = ClickHouseServer.create().start()
    yield server
    server.remove()


@pytest.fixture()
def server_url(clickhouse_server) -> str:  # type: ignore[no-untyped-def]
    """A fresh database on the shared server, as a chute target URL."""
    import uuid

    database = f"test_{uuid.uuid4().hex[:10]}"
    clickhouse_server.query(f"CREATE DATABASE {database}")
    return f"{clickhouse_server.url}/{database}"


@pytest.fixture(scope="session")
def clickhouse_cluster(request):  # type: ignore[no-untyped-def]
    """A real 2-shard x 2-replica ClickHouse cluster (18.16 and ZooKeeper) on loopback, one
    per test session: see tests/harness/cluster.py. Skipped where Java or the ZooKeeper jars
    are missing (`scripts/install-source-servers zookeeper`)."""
    import sys

    from .harness.cluster import ClickHouseCluster, missing
    from .servers import available

    if not available():
        pytest.fail("clickhouse-server is not installed: run ./scripts/test, which installs it")
    if why := missing():
        pytest.skip(f"no ClickHouse cluster: {why}")
    cluster = ClickHouseCluster(shards=2, replicas=2).start()
    # Past pytest's capture, so every run shows the start-up time.
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(
            f"\nclickhouse_cluster: {cluster.name} ({len(cluster.nodes)} servers and ZooKeeper) "
            f"ready in {cluster.startup_seconds:.1f} s",
            file=sys.stderr,
        )
    try:
        yield cluster
    finally:
        cluster.remove()
