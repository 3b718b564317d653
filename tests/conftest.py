"""Shared fixtures, and the tiers: each test folder is a marker.

- tests/unit: no engine (pure functions and classes)
- tests/embedded: the embedded engine (chDB) only
- tests/server: a ClickHouse server (the Debian clickhouse-server, started here)
- tests/external: S3, PostgreSQL, MariaDB, Kafka or HDFS servers (started here)

Every test gets its own embedded database directory: chDB holds one database
directory per process, so each fixture points chute at a fresh directory;
opening it closes the previous one. Server tests are skipped when no
clickhouse-server is installed (`./scripts/test` installs it, and sets
CHUTE_REQUIRE_SERVER=1 so that a failed install fails the run instead).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chute.engine import open_engine

from .harness import servers
from .harness.web import WebServer, serving

TIERS = ("unit", "embedded", "server", "external")
NO_SERVER = "clickhouse-server is not installed: run ./scripts/test, which installs it"


def _require_server() -> bool:
    return os.environ.get("CHUTE_REQUIRE_SERVER", "") == "1"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `pytest -n N`, each test module runs in one process, so its servers start once,
    and every `test_cluster*` module in the same one, so one cluster serves them all.

    (pytest-xdist's own `--dist loadgroup` marks do not reach its scheduler under pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    # Modules go out in collection order, which puts the longest first (`LONGEST_FIRST`).
    config.option.loadscopereorder = False
    return ByModule(config, log)


LONGEST_FIRST = (
    "cluster",
    "tests/server/test_cut_connections.py",
    "tests/embedded/test_crash.py",
    "tests/server/test_server.py",
    "tests/external/test_database_sources.py",
    "tests/server/test_concurrency.py",
    "tests/external/test_kafka_source.py",
    "tests/external/test_hdfs_source.py",
    "tests/server/test_fidelity.py",
    "tests/server/test_corpus.py",
    "tests/server/test_copy.py",
)
"""Test modules (scopes) that take longest in a full run, longest first: started first, so the
two processes finish together instead of one running a long module alone at the end."""


def _scope(nodeid: str) -> str:
    """A test's scheduling scope: its module, or "cluster" for every `test_cluster*` module
    (they share one cluster)."""
    module = nodeid.split("::", 1)[0]
    return "cluster" if Path(module).name.startswith("test_cluster") else module


def _duration_rank(item: pytest.Item) -> int:
    scope = _scope(item.nodeid)
    return LONGEST_FIRST.index(scope) if scope in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its folder's tier; skip server tests when there is no server."""
    here = Path(__file__).parent
    skip_server = pytest.mark.skip(reason=NO_SERVER)
    for item in items:
        try:
            tier = item.path.relative_to(here).parts[0]
        except ValueError:
            continue
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        if tier == "server" and not servers.available() and not _require_server():
            item.add_marker(skip_server)
    if config.pluginmanager.hasplugin("xdist") and getattr(config.option, "numprocesses", None):
        items.sort(key=_duration_rank)  # (stable: a module's tests keep their order)


@pytest.fixture()
def target(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "db")
    yield path


@pytest.fixture()
def engine(target: str):  # type: ignore[no-untyped-def]
    return open_engine(target)


@pytest.fixture(scope="session")
def clickhouse_server():  # type: ignore[no-untyped-def]
    """The Debian clickhouse-server (18.16) on loopback, one per test session."""
    if not servers.available():
        if _require_server():
            pytest.fail(NO_SERVER)
        pytest.skip(NO_SERVER)
    server = servers.ClickHouseServer.create().start()
    yield server
    server.remove()


@pytest.fixture()
def server_url(clickhouse_server) -> str:  # type: ignore[no-untyped-def]
    """A fresh database on the shared server, as a chute target URL."""
    import uuid

    database = f"test_{uuid.uuid4().hex[:10]}"
    clickhouse_server.query(f"CREATE DATABASE {database}")
    return f"{clickhouse_server.url}/{database}"


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """A static HTTP file server on loopback with data files under /data/."""
    with serving(tmp_path_factory.mktemp("www")) as server:
        yield server


@pytest.fixture(scope="session")
def clickhouse_cluster(request):  # type: ignore[no-untyped-def]
    """A real 2-shard x 2-replica ClickHouse cluster (18.16 and ZooKeeper) on loopback, one
    per test session: see tests/harness/cluster.py. Skipped where Java or the ZooKeeper jars
    are missing (`scripts/install-source-servers zookeeper`)."""
    import sys

    from .harness.cluster import ClickHouseCluster, missing
    from .harness.servers import available

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
