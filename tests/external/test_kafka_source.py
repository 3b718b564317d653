"""kafka:// sources against a real Apache Kafka broker (KRaft) on loopback.

Every check is by (partition, offset): the producer's delivery reports say
where each message went, and the table must hold each of them exactly once,
with `_source` naming the partition and `_source_row` the offset.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import chute
from chute.engine import open_engine
from chute.errors import UsageError
from chute.sources import SourceOptions
from chute.sources.kafka import KafkaSpec, follow, parse_key, unit_key

from ..harness.extservers import KafkaBroker, running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaBroker]:
    pytest.importorskip("confluent_kafka", reason="pip install 'chute[kafka]' (confluent-kafka)")
    with running(KafkaBroker) as server:
        yield server


def _topic(broker: KafkaBroker, partitions: int = 3) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"t_{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    return name


Placed = tuple[int, int]  # (partition, offset)


def _produce(
    broker: KafkaBroker,
    topic: str,
    values: list[bytes | None],
    transactional: bool = False,
    keys: list[bytes | None] | None = None,
    stamps: list[int] | None = None,
) -> list[Placed]:
    """Send `values` (keyed by their index unless `keys` are given, so they spread over
    partitions; with `stamps`, timestamps in ms); where each went."""
    from confluent_kafka import Producer

    config: dict[str, Any] = {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"}
    if transactional:
        config["transactional.id"] = f"tx-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    placed: list[Placed | None] = [None] * len(values)

    def report(i: int) -> Any:
        def done(err: Any, msg: Any) -> None:
            assert err is None, err
            placed[i] = (msg.partition(), msg.offset())

        return done

    if transactional:
        producer.init_transactions(30)
    for start in range(0, len(values), 50 if transactional else len(values) or 1):
        if transactional:
            producer.begin_transaction()
        for i in range(start, min(len(values), start + (50 if transactional else len(values)))):
            key = str(i).encode() if keys is None else keys[i]
            extra = {} if stamps is None else {"timestamp": stamps[i]}
            producer.produce(topic, values[i], key=key, on_delivery=report(i), **extra)
            if i % 1000 == 0:
                producer.poll(0)
        if transactional:
            producer.commit_transaction(30)
    assert producer.flush(30) == 0
    assert all(p is not None for p in placed)
    return [p for p in placed if p is not None]


def _events(first: int, count: int) -> list[bytes | None]:
    return [
        json.dumps({"id": i, "name": f"user {i}", "score": i % 97, "ok": i % 2 == 0}).encode()
        for i in range(first, first + count)
    ]


def _rows(target: str, table: str = "t", columns: str = "id") -> dict[Placed, Any]:
    """(partition, offset) -> row, from `_source` and `_source_row`; fails on a double."""
    engine = open_engine(target)
    found = engine.rows(
        f"SELECT _source, _source_row, {columns} FROM {table} ORDER BY _source, _source_row",
    )
    rows: dict[Placed, Any] = {}
    for row in found:
        unit = parse_key(row["_source"])
        assert unit is not None, row["_source"]
        offset = int(row["_source_row"])
        assert unit.start <= offset < unit.end, (row["_source"], offset)
        place = (unit.partition, offset)
        assert place not in rows, f"{place} twice"
        rows[place] = row
    return rows


def _load(topic: str, broker: KafkaBroker, target: str, query: str = "batch=400", **kw: Any) -> Any:
    return chute.load([f"kafka://{broker.bootstrap}/{topic}?{query}"], "t", target=target, **kw)


# -- no broker needed -----------------------------------------------------------


# -- against the broker -----------------------------------------------------------


def test_bounded_load_rerun_and_new_messages(broker: KafkaBroker, target: str) -> None:
    topic = _topic(broker)
    placed = _produce(broker, topic, _events(0, 3000))
    report = _load(topic, broker, target)
    assert report.ok and report.rows_loaded == 3000
    assert len({parse_key(f.source).partition for f in report.files}) == 3  # type: ignore[union-attr]
    assert len(report.files) > 3  # several units per partition (batch=400)
    rows = _rows(target)
    assert {place: row["id"] for place, row in rows.items()} == {p: i for i, p in enumerate(placed)}

    again = _load(topic, broker, target)
    assert again.ok and again.rows_loaded == 0 and again.files_total == 0

    more = _produce(broker, topic, _events(3000, 1000))
    third = _load(topic, broker, target)
    assert third.ok and third.rows_loaded == 1000
    rows = _rows(target)
    assert {place: row["id"] for place, row in rows.items()} == {p: i for i, p in enumerate(placed + more)}
    mtimes = open_engine(target).rows("SELECT min(_source_mtime) AS lo FROM t")[0]
    assert str(mtimes["lo"]) > "2000"  # the messages' own time


def test_small_batches_hold_every_message_once(
    broker: KafkaBroker, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches bounded in bytes (KafkaSource.batch_bytes): many INSERTs, each committed with its
    ledger rows, the next fetched meanwhile; every message once, with its offset and key."""
    from chute.load import loader
    from chute.sources.kafka import KafkaSource

    seen: list[list[int]] = []
    planned = loader.batches

    def recorded(*args: Any) -> Any:
        found = planned(*args)
        seen.append([len(b) for b in found])
        return found

    monkeypatch.setattr(loader, "batches", recorded)
    monkeypatch.setattr(KafkaSource, "batch_bytes", 40_000)  # about two units of 400 messages
    topic = _topic(broker)
    placed = _produce(broker, topic, _events(0, 6000))
    report = _load(topic, broker, target)
    assert report.ok and report.rows_loaded == 6000
    assert len(seen) == 1 and len(seen[0]) >= 5 and max(seen[0]) <= 3, seen
    rows = _rows(target, columns="id, _source_key")
    assert {place: row["id"] for place, row in rows.items()} == {p: i for i, p in enumerate(placed)}
    assert all(row["_source_key"] == str(row["id"]) for row in rows.values())


def test_bad_messages_go_to_rejects_with_their_offsets(broker: KafkaBroker, target: str) -> None:
    topic = _topic(broker)
    first = _produce(broker, topic, _events(0, 500))
    assert _load(topic, broker, target).rows_loaded == 500  # makes the table: id Int64, score Int64, ...
    values = _events(500, 1500)
    bad = {510: b"{not json", 777: b'{"id": "seven", "name": "x", "score": 1, "ok": true}', 1999: b"[1, 2]"}
    for i, value in bad.items():
        values[i - 500] = value
    second = _produce(broker, topic, values)
    report = _load(topic, broker, target)
    assert report.ok and report.rows_loaded == 1497 and report.rows_rejected == 3
    placed = first + second
    rows = _rows(target)
    assert {place: row["id"] for place, row in rows.items()} == {p: i for i, p in enumerate(placed) if i not in bad}
    rejects = open_engine(target).rows("SELECT _source, _source_row, raw, error FROM t_rejects ORDER BY raw")
    found = {}
    for row in rejects:
        unit = parse_key(row["_source"])
        assert unit is not None and unit.start <= int(row["_source_row"]) < unit.end
        found[(unit.partition, int(row["_source_row"]))] = row["raw"].encode()
    assert found == {placed[i]: value for i, value in bad.items()}


def test_offsets_with_gaps_and_tombstones(broker: KafkaBroker, target: str) -> None:
    """Transaction markers take offsets, tombstones hold no row: `_source_row` is still the offset."""
    topic = _topic(broker, partitions=2)
    values = _events(0, 600)
    for i in (3, 250, 599):
        values[i] = None
    placed = _produce(broker, topic, values, transactional=True)
    report = _load(topic, broker, target, "batch=170")
    assert report.ok and report.rows_loaded == 597
    rows = _rows(target)
    expected = {p: i for i, p in enumerate(placed) if values[i] is not None}
    assert {place: row["id"] for place, row in rows.items()} == expected
    assert max(offset for _, offset in rows) > 300  # markers made gaps: offsets outrun the count


def test_raw_messages_keep_every_byte(broker: KafkaBroker, target: str) -> None:
    topic = _topic(broker, partitions=1)
    values: list[bytes | None] = [b"plain", b"tab\there", b"new\nline", b"back\\slash \\n", b"cr\r\n", b""]
    values.append("ünï".encode())
    placed = _produce(broker, topic, values)
    report = _load(topic, broker, target, "format=raw")
    assert report.ok and report.rows_loaded == len(values)
    rows = _rows(target, columns="message")
    assert {place: row["message"].encode() for place, row in rows.items()} == dict(zip(placed, values, strict=True))


def test_group_offsets_are_committed_for_information(broker: KafkaBroker, target: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = _topic(broker, partitions=2)
    placed = _produce(broker, topic, _events(0, 800))
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert _load(topic, broker, target, f"group={group}").rows_loaded == 800
    _load(topic, broker, target, f"group={group}")  # commits what the ledger holds
    ends = {p: max(o for q, o in placed if q == p) + 1 for p, _ in placed}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    committed = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=10)
    consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == ends


def _load_command(broker: KafkaBroker, topic: str, db: Path, batch: int = 500) -> list[str]:
    url = f"kafka://{broker.bootstrap}/{topic}?batch={batch}"
    return [sys.executable, "-m", "chute.cli", "load", url, "--table", "t", "--target", str(db), "--quiet"]


def test_sigkill_during_a_load_then_rerun(broker: KafkaBroker, tmp_path: Path) -> None:
    topic = _topic(broker)
    placed = _produce(broker, topic, _events(0, 60_000))
    expected = {p: i for i, p in enumerate(placed)}
    # Many small batches (one INSERT and two ledger writes each): many moments to die in.
    command = [*_load_command(broker, topic, tmp_path / "clean"), "--batch-mb", "1"]
    began = time.monotonic()
    subprocess.run(command, check=True)
    duration = time.monotonic() - began
    assert {p: r["id"] for p, r in _rows(str(tmp_path / "clean")).items()} == expected

    db = tmp_path / "db"
    command = [*_load_command(broker, topic, db), "--batch-mb", "1"]
    rng = random.Random(9)
    interrupted = 0
    for _ in range(3):
        proc = subprocess.Popen(command)
        time.sleep(rng.uniform(0.2, 0.5) * duration)  # later runs have less left to do
        interrupted += proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert interrupted >= 2, f"the loads ended before the kills ({duration:.2f} s each)"
    subprocess.run(command, check=True)
    assert {p: r["id"] for p, r in _rows(str(db)).items()} == expected


def test_follow_until_stopped(broker: KafkaBroker, target: str) -> None:
    topic = _topic(broker, partitions=2)
    placed = _produce(broker, topic, _events(0, 500))
    stop = threading.Event()
    reports: list[Any] = []
    urls = [f"kafka://{broker.bootstrap}/{topic}?batch=100"]
    thread = threading.Thread(
        target=follow,
        args=(urls, lambda p: chute.load(p, "t", target=target)),
        kwargs={"idle_seconds": 0.2, "units_per_pass": 3, "stop": stop, "on_pass": reports.append},
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while sum(r.rows_loaded for r in reports) < 500 and time.monotonic() < deadline:
            time.sleep(0.1)
        placed += _produce(broker, topic, _events(500, 300))
        while sum(r.rows_loaded for r in reports) < 800 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert len(reports) > 3  # passes of at most 3 units each
    rows = _rows(target)
    assert {place: row["id"] for place, row in rows.items()} == {p: i for i, p in enumerate(placed)}


def test_sigkill_and_sigterm_while_following(broker: KafkaBroker, tmp_path: Path) -> None:
    """A producer keeps sending while `chute load --follow` is killed at random moments and restarted."""
    topic = _topic(broker, partitions=2)
    url = f"kafka://{broker.bootstrap}/{topic}?batch=700"
    db = tmp_path / "db"
    placed: list[Placed] = []
    command = [sys.executable, "-m", "chute.cli", "load", url, "--table", "t", "--target", str(db), "--follow", "-q"]
    rng = random.Random(5)
    for trial in range(6):
        placed += _produce(broker, topic, _events(len(placed), 4000))
        proc = subprocess.Popen(command)
        time.sleep(rng.uniform(0.5, 2.0))
        placed += _produce(broker, topic, _events(len(placed), 2000))
        time.sleep(rng.uniform(0.0, 0.5))
        if trial == 5:  # after five SIGKILLs, a SIGTERM
            proc.send_signal(signal.SIGTERM)  # the current pass ends, then it stops: exit 0
            assert proc.wait(60) == 0
        else:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    subprocess.run(_load_command(broker, topic, db), check=True)  # a bounded run picks up the rest
    rows = _rows(str(db))
    assert {place: row["id"] for place, row in rows.items()} == {p: i for i, p in enumerate(placed)}


def test_units_come_from_the_ledger_not_the_group(broker: KafkaBroker) -> None:
    """Started and failed units are planned again under their own names; new ones follow the largest end."""
    from chute.sources.kafka import KafkaSource

    topic = _topic(broker, partitions=1)
    _produce(broker, topic, _events(0, 1000))
    host = broker.bootstrap
    loaded = (
        (unit_key(host, topic, 0, 0, 300), "done"),
        (unit_key("other-name:9092", topic, 0, 300, 500), "started"),
        (unit_key(host, topic, 0, 500, 600), "failed"),
        (unit_key(host, topic, 0, 600, 700), "done"),
    )
    source = KafkaSource([f"kafka://{host}/{topic}?batch=200"], SourceOptions(loaded=loaded))
    try:
        keys = [u.key for u in source.units()]
    finally:
        source.close()
    assert keys == [
        unit_key("other-name:9092", topic, 0, 300, 500),
        unit_key(host, topic, 0, 500, 600),
        unit_key(host, topic, 0, 700, 900),
        unit_key(host, topic, 0, 900, 1000),
    ]


def test_load_into_a_server_target(broker: KafkaBroker, server_url: str, clickhouse_server: Any) -> None:
    """The embedded engine reads each unit's buffer and sends Native to the server (18.16 here)."""
    topic = _topic(broker)
    placed = _produce(broker, topic, _events(0, 2000))
    report = chute.load([f"kafka://{broker.bootstrap}/{topic}?batch=300"], "t", server_url)
    assert report.ok and report.rows_loaded == 2000 and report.table_rows == 2000
    assert chute.load([f"kafka://{broker.bootstrap}/{topic}"], "t", server_url).rows_loaded == 0
    database = server_url.rsplit("/", 1)[1]
    text = clickhouse_server.query("SELECT _source, _source_row, id FROM t FORMAT TSV", database)
    found = {}
    for line in text.splitlines():
        source, row, ident = line.split("\t")
        unit = parse_key(source)
        assert unit is not None and unit.start <= int(row) < unit.end
        found[(unit.partition, int(row))] = int(ident)
    assert found == {p: i for i, p in enumerate(placed)}


def test_keys_and_timestamps_are_provenance(broker: KafkaBroker, target: str) -> None:
    """Each row carries its message's key (`_source_key`, null without one) and
    timestamp (`_source_mtime`), also for rows of the careful pass."""
    topic = _topic(broker, partitions=2)
    base = 1_700_000_000_000
    values = _events(0, 900)
    values[444] = b"{broken"
    messages = [(None if i % 5 == 0 else f"k\t{i}\n".encode(), v, base + i * 1001) for i, v in enumerate(values)]
    placed = _produce(broker, topic, values, keys=[k for k, _, _ in messages], stamps=[t for _, _, t in messages])
    report = _load(topic, broker, target, "batch=200")
    assert report.ok and report.rows_loaded == 899 and report.rows_rejected == 1
    rows = _rows(target, columns="id, _source_key, toUnixTimestamp64Milli(_source_mtime) AS ms")
    expected = {p: messages[i] for i, p in enumerate(placed) if i != 444}
    assert {p: (r["_source_key"], int(r["ms"])) for p, r in rows.items()} == {
        p: (k.decode() if k is not None else None, ms) for p, (k, _, ms) in expected.items()
    }
    columns = {r["name"]: r["type"] for r in open_engine(target).rows("DESCRIBE TABLE t")}
    assert columns["_source_key"] == "Nullable(String)"


def test_keys_with_gaps_in_offsets(broker: KafkaBroker, target: str) -> None:
    """Transaction markers and tombstones leave gaps: keys are looked up by offset."""
    topic = _topic(broker, partitions=1)
    values = _events(0, 300)
    values[7] = None
    placed = _produce(broker, topic, values, transactional=True)  # key = the index
    report = _load(topic, broker, target, "batch=120")
    assert report.ok and report.rows_loaded == 299
    rows = _rows(target, columns="id, _source_key")
    assert {p: r["_source_key"] for p, r in rows.items()} == {
        p: str(i) for i, p in enumerate(placed) if values[i] is not None
    }


def test_csv_messages(broker: KafkaBroker, target: str) -> None:
    topic = _topic(broker, partitions=2)
    engine = open_engine(target)
    engine.execute(
        "CREATE TABLE t (id Int64, name String, score Float64, _source LowCardinality(String), "
        "_source_mtime DateTime64(3, 'UTC'), _source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id"
    )  # an existing table without `_source_key`: loads fill what it has
    values: list[bytes | None] = [f'{i},"user {i}",{i / 4}'.encode() for i in range(600)]
    values[10] = b'10,"two\nlines, and a comma",2.5\r\n'
    values[20] = b"20,too few"
    values[30] = b"thirty,x,1"
    placed = _produce(broker, topic, values)
    report = _load(topic, broker, target, "format=csv&batch=150")
    assert report.ok and report.rows_loaded == 598 and report.rows_rejected == 2
    rows = _rows(target, columns="id, name")
    assert {p: r["id"] for p, r in rows.items()} == {p: i for i, p in enumerate(placed) if i not in (20, 30)}
    assert rows[placed[10]]["name"] == "two\nlines, and a comma"
    rejects = engine.rows("SELECT raw FROM t_rejects ORDER BY raw")
    assert [r["raw"] for r in rejects] == ["20,too few", "thirty,x,1"]


@pytest.mark.parametrize("confluent", [False, True])
def test_avro_messages_with_a_schema_file(broker: KafkaBroker, target: str, tmp_path: Path, confluent: bool) -> None:
    """Bare Avro datums (or Confluent's framing: magic byte + schema id) with the writer's schema."""
    import io

    fastavro = pytest.importorskip("fastavro")
    schema = {
        "type": "record",
        "name": "Event",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
            {"name": "score", "type": ["null", "double"]},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
        ],
    }
    path = tmp_path / "event.avsc"
    path.write_text(json.dumps(schema))
    parsed = fastavro.parse_schema(schema)
    values: list[bytes | None] = []
    for i in range(700):
        out = io.BytesIO()
        if confluent:
            out.write(b"\x00" + (42).to_bytes(4, "big"))
        record = {"id": i, "name": f"user {i}", "score": None if i % 3 else i / 2, "tags": [str(i)] * (i % 3)}
        fastavro.schemaless_writer(out, parsed, record)
        values.append(out.getvalue())
    placed = _produce(broker, topic := _topic(broker), values)
    fmt = "avro-confluent" if confluent else "avro"
    report = _load(topic, broker, target, f"format={fmt}&schema={path}&batch=250")
    assert report.ok and report.rows_loaded == 700, [f.error for f in report.files if f.error]
    rows = _rows(target, columns="id, name, score, tags, _source_key")
    assert {p: r["id"] for p, r in rows.items()} == {p: i for i, p in enumerate(placed)}
    sample = rows[placed[9]]
    assert (sample["name"], sample["score"], sample["tags"], sample["_source_key"]) == ("user 9", 4.5, [], "9")
    with pytest.raises(UsageError, match="schema="):
        KafkaSpec.parse([f"kafka://{broker.bootstrap}/{topic}?format=avro"])


def test_sasl_login_and_secrets_kept_out_of_output(broker: KafkaBroker, tmp_path: Path) -> None:
    """A SASL PLAIN listener: the right password loads (from $KAFKA_PASSWORD or the URL); a wrong
    one or none gives one line, exit 2, and the password shows nowhere."""
    topic = _topic(broker, partitions=2)
    placed = _produce(broker, topic, _events(0, 500))
    db = tmp_path / "db"
    user, secret = KafkaBroker.SASL_USER, KafkaBroker.SASL_PASSWORD
    url = f"kafka://{user}@{broker.sasl_bootstrap}/{topic}"
    base = [sys.executable, "-m", "chute.cli", "load", "--table", "t", "--target", str(db), "--json"]
    env = {**os.environ, "KAFKA_PASSWORD": secret}
    done = subprocess.run([*base, url], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows_loaded"] == 500
    rows = _rows(str(db))
    assert {p: r["id"] for p, r in rows.items()} == {p: i for i, p in enumerate(placed)}
    assert all(user not in source for source in {r["_source"] for r in rows.values()})

    base[base.index(str(db))] = str(tmp_path / "other")  # (this process holds `db` open now)
    wrong = f"kafka://{user}:not-{secret}@{broker.sasl_bootstrap}/{topic}"
    for args, environment in (
        ([*base, wrong], os.environ),
        ([*base, url], {k: v for k, v in os.environ.items() if k != "KAFKA_PASSWORD"}),
    ):
        failed = subprocess.run(args, capture_output=True, text=True, env=dict(environment), timeout=120)
        assert failed.returncode != 0
        message = failed.stderr.strip()
        assert message and "\n" not in message and "Traceback" not in message, message
        assert secret not in failed.stdout + failed.stderr
        assert ("refused" in message) if args[-1] == wrong else ("needs a password" in message), message


def test_offsets_below_recorded_units_that_were_never_recorded_load_on_the_next_run(
    broker: KafkaBroker, target: str
) -> None:
    """A killed run's batches start out of order (a server target spreads them for other workers),
    so units it planned below recorded ones may never have been recorded: a re-run went on
    from the largest offset in the ledger, and those messages were lost for good."""
    topic = _topic(broker)
    placed = _produce(broker, topic, _events(0, 3000))
    assert _load(topic, broker, target).rows_loaded == 3000
    engine = open_engine(target)
    lowest = [
        str(r["u"])
        for r in engine.rows("SELECT DISTINCT unit AS u FROM _chute_ledger WHERE unit LIKE '%#offsets=[0,%'")
    ]
    assert len(lowest) == 3  # the first unit of each partition: as if the killed run never reached it
    units = ", ".join("'" + u.replace("'", "\\'") + "'" for u in lowest)
    for table in ("t", "_chute_ledger"):
        column = "_source" if table == "t" else "unit"
        engine.execute(f"ALTER TABLE {table} DELETE WHERE {column} IN ({units})", settings={"mutations_sync": 2})
    assert len(_rows(target)) < 3000
    again = _load(topic, broker, target)
    assert again.ok and sorted(f.source for f in again.files) == sorted(lowest)
    assert {place: row["id"] for place, row in _rows(target).items()} == {p: i for i, p in enumerate(placed)}
    assert _load(topic, broker, target).files_total == 0
