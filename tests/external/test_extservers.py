"""Smoke tests of the real source servers in tests/harness/extservers.py: start, one real operation, stop.

Each is skipped, with what to install, when scripts/install-source-servers has not
installed its server on this machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ..harness.extservers import (
    TEST_DATABASE,
    TEST_PASSWORD,
    TEST_USER,
    HdfsServer,
    KafkaBroker,
    MariaDBServer,
    PostgresServer,
    S3Server,
    running,
)

pytestmark = pytest.mark.slow


@pytest.fixture()
def postgres() -> Iterator[PostgresServer]:
    with running(PostgresServer) as server:
        yield server


@pytest.fixture()
def mariadb() -> Iterator[MariaDBServer]:
    with running(MariaDBServer) as server:
        yield server


@pytest.fixture()
def s3() -> Iterator[S3Server]:
    with running(S3Server) as server:
        yield server


@pytest.fixture()
def kafka() -> Iterator[KafkaBroker]:
    with running(KafkaBroker) as server:
        yield server


def test_postgres_table_reads_through_the_engine(postgres: PostgresServer, engine) -> None:  # type: ignore[no-untyped-def]
    postgres.sql(
        "CREATE TABLE items (id integer PRIMARY KEY, name text, price numeric(10, 2));"
        "INSERT INTO items SELECT g, 'item ' || g, g * 1.5 FROM generate_series(1, 500) g;"
    )
    assert postgres.sql("SELECT count(*) FROM items").strip() == "500"
    source = f"postgresql('{postgres.address}', '{TEST_DATABASE}', 'items', '{TEST_USER}', '{TEST_PASSWORD}')"
    assert engine.rows(f"SELECT count() AS n, sum(id) AS s, max(name) AS m FROM {source}") == [
        {"n": 500, "s": 125250, "m": "item 99"}
    ]


def test_mariadb_table_reads_through_the_engine(mariadb: MariaDBServer, engine) -> None:  # type: ignore[no-untyped-def]
    mariadb.sql(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), at DATETIME);"
        "INSERT INTO items SELECT seq, CONCAT('item ', seq), '2024-01-02 03:04:05' FROM seq_1_to_500;"
    )
    assert mariadb.sql("SELECT COUNT(*) FROM items").strip() == "500"
    source = f"mysql('{mariadb.address}', '{TEST_DATABASE}', 'items', '{TEST_USER}', '{TEST_PASSWORD}')"
    assert engine.rows(f"SELECT count() AS n, sum(id) AS s, max(at) AS t FROM {source}") == [
        {"n": 500, "s": 125250, "t": "2024-01-02 03:04:05"}
    ]


@pytest.fixture()
def hdfs() -> Iterator[HdfsServer]:
    with running(HdfsServer) as server:
        yield server


def test_hdfs_puts_over_webhdfs_and_reads_through_the_engine(hdfs: HdfsServer, engine) -> None:  # type: ignore[no-untyped-def]
    for i in range(20):
        hdfs.put(f"/in/part-{i:02d}.csv", f"{i},name {i}\n".encode())
    hdfs.put("/in/part-00.csv", b"100,replaced\n")  # overwritten in place
    assert hdfs.status("/in/part-07.csv")["length"] == len(b"7,name 7\n")
    hdfs.set_mtime("/in/part-07.csv", 1_700_000_000_000)
    assert hdfs.status("/in/part-07.csv")["modificationTime"] == 1_700_000_000_000

    source = f"hdfs('{hdfs.url('/in/*.csv')}', 'CSV', 'id UInt32, name String')"
    rows = engine.rows(f"SELECT count() AS n, sum(id) AS s, uniqExact(_path) AS p FROM {source}")
    assert rows == [{"n": 20, "s": sum(range(1, 20)) + 100, "p": 20}]
    hdfs.delete("/in/part-00.csv")
    assert engine.rows(f"SELECT count() AS n FROM {source}") == [{"n": 19}]


def test_s3_lists_ranges_and_reads_through_the_engine(s3: S3Server, engine) -> None:  # type: ignore[no-untyped-def]
    etags = {}
    for i in range(300):
        etags[f"in/part-{i:03d}.csv"] = s3.put_object(f"in/part-{i:03d}.csv", f"{i},name {i}\n".encode())
    s3.put_object("other/skip.csv", b"0,skip\n")
    assert s3.list_keys("in/", page_size=100) == sorted(etags)
    assert s3.get_object("in/part-042.csv", byte_range="bytes=3-6") == b"name"
    assert all(tag.startswith('"') for tag in etags.values())

    source = f"s3('{s3.url('in/*.csv')}', '{s3.access_key}', '{s3.secret_key}', 'CSV', 'id UInt32, name String')"
    rows = engine.rows(f"SELECT count() AS n, sum(id) AS s, uniqExact(_etag) AS e FROM {source}")
    assert rows == [{"n": 300, "s": 44850, "e": 300}]


def test_kafka_produces_and_consumes(kafka: KafkaBroker) -> None:
    kafka.create_topic("events", partitions=2)
    messages = [json.dumps({"id": i, "name": f"event {i}"}) for i in range(100)]
    kafka.produce("events", [f"{i}|{m}" for i, m in enumerate(messages)], key_separator="|")
    got = kafka.consume("events", max_messages=100, group="smoke")
    assert sorted(got, key=lambda m: json.loads(m)["id"]) == messages
