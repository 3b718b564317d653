"""`chute copy` between two real 18.16 servers, and between a server and the embedded engine."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import chute
from chute.copy import CopyOptions, copy
from chute.copy.copier import Copier
from chute.copy.files import Files
from chute.copy.methods import Mover
from chute.engine import close_engines, open_engine
from chute.errors import SchemaError, UsageError

from ..harness import servers

COLUMNS = (
    "id UInt32, name String, tags Array(String), ts DateTime, maybe Nullable(Int64), ratio Float64, "
    "price Decimal(18, 4), note Nullable(String), kind Enum8('a' = 1, 'b' = 2), code FixedString(3), "
    "day Date, uid UUID, counts Array(Nullable(UInt32)), pair Tuple(UInt8, String), small Int8"
)
ROWS = (
    "SELECT number + {start}, concat('n', toString(number)), [toString(number), 'x'], "
    "{ts}, if(number % 3 = 0, NULL, number - 500), "
    "number / 7, toDecimal64(number / 3, 4), if(number % 4 = 0, NULL, concat('it''s ', toString(number))), "
    "if(number % 2 = 0, 'a', 'b'), toFixedString(toString(number % 1000), 3), toDate('2024-01-01') + number % 180, "
    "toUUID('61f0c404-5cb3-11e7-907b-a6006ad3dba0'), [if(number % 5 = 0, NULL, toUInt32(number)), 1], "
    "(toUInt8(number % 200), toString(number)), toInt8(number % 100 - 50) FROM numbers({n})"
)
SPREAD = "toDateTime('2024-01-01 00:00:00') + (number * 7919) % (86400 * 180)"
EXACT = "SELECT * FROM {table} ORDER BY id FORMAT TSV"


@pytest.fixture(scope="module")
def second_server() -> Iterator[servers.ClickHouseServer]:
    """Another 18.16 server: the other end of the copies."""
    server = servers.ClickHouseServer.create().start()
    yield server
    server.remove()


@pytest.fixture()
def ends(clickhouse_server, second_server) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """(source URL, destination URL): a fresh database on each server; the source holds `src`
    (20,000 rows over 6 monthly partitions)."""
    database = f"test_{uuid.uuid4().hex[:10]}"
    clickhouse_server.query(f"CREATE DATABASE {database}")
    second_server.query(f"CREATE DATABASE {database}")
    clickhouse_server.query(
        f"CREATE TABLE {database}.src ({COLUMNS}) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY id"
    )
    clickhouse_server.query(f"INSERT INTO {database}.src " + ROWS.format(ts=SPREAD, start=0, n=20000))
    return f"{clickhouse_server.url}/{database}", f"{second_server.url}/{database}"


def dump(url: str, table: str) -> str:
    return servers.server_query(url, EXACT.format(table=table))


def test_server_to_server_equal_then_nothing_to_do(ends: tuple[str, str]) -> None:
    source, dest = ends
    report = copy("src", source, dest)
    # 18.16's url() cannot take Decimal(18, 4) in a structure: streamed, and said why.
    assert report.ok and report.method == "stream" and "Decimal(18, 4)" in report.method_reason
    assert report.created_table and len(report.copied) == 6 and report.rows_copied == 20000
    assert all(u.source_checksum == u.dest_checksum and u.source_rows == u.dest_rows for u in report.copied)
    assert dump(dest, "src") == dump(source, "src")
    again = copy("src", source, dest)
    assert again.ok and not again.copied and len(again.skipped) == 6
    # A merge renames the parts, the rows stay: measured, still skipped.
    servers.server_query(source, "OPTIMIZE TABLE src FINAL")
    merged = copy("src", source, dest)
    assert not merged.copied and len(merged.skipped) == 6
    # A partition dropped in the destination after its copy: copied again.
    servers.server_query(dest, "ALTER TABLE src DROP PARTITION 202402")
    dropped = copy("src", source, dest)
    assert [u.partition for u in dropped.copied] == ["202402"] and dump(dest, "src") == dump(source, "src")


def test_pull_where_the_destination_reads_the_source(ends: tuple[str, str]) -> None:
    source, dest = ends
    plain = "id, name, tags, ts, maybe, ratio, note, code, day, counts, small"
    servers.server_query(
        source,
        f"CREATE TABLE simple ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY id AS SELECT {plain} FROM src",
    )
    report = copy("simple", source, dest)
    assert report.ok and report.method == "pull" and report.wire_bytes == 0 and len(report.copied) == 6
    assert dump(dest, "simple") == dump(source, "simple")
    assert not copy("simple", source, dest).copied


def test_a_source_with_a_password_streams_unless_pull_is_asked(ends: tuple[str, str]) -> None:
    """Pull would put the source's password in the url() call the destination runs (and logs)."""
    source, dest = ends
    servers.server_query(
        source, "CREATE TABLE simple ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY id AS SELECT id, ts FROM src"
    )
    secret = source.replace("http://", f"http://{servers.TEST_USER}:{servers.TEST_PASSWORD}@")
    report = copy("simple", secret, dest)
    assert report.ok and report.method == "stream" and "password" in report.method_reason
    assert servers.TEST_PASSWORD not in report.to_json()
    pulled = copy("simple", secret, dest, CopyOptions(dest_table="pulled", method="pull"))
    assert pulled.ok and pulled.method == "pull" and pulled.wire_bytes == 0
    assert dump(dest, "pulled") == dump(dest, "simple") == dump(source, "simple")


def test_files_method_through_a_directory(
    ends: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--method files --via DIR: each partition through a file, removed once in the destination;
    a file a run left (killed before it removed it) is sent again without reading the source."""
    source, dest = ends
    via = tmp_path / "via"
    options = CopyOptions(method="files", via=str(via))
    report = copy("src", source, dest, options)
    assert report.ok and report.method == "files" and len(report.copied) == 6 and report.wire_bytes > 0, [
        (u.partition, u.reason) for u in report.failed
    ]
    assert dump(dest, "src") == dump(source, "src") and not list(via.iterdir())
    assert not copy("src", source, dest, options).copied
    # A run whose files stay (as a kill leaves them), then another into a new table takes them.
    monkeypatch.setattr(Files, "remove", lambda self, name: None)
    copy("src", source, dest, CopyOptions(method="files", via=str(via), dest_table="first"))
    assert len(list(via.iterdir())) == 6
    monkeypatch.undo()
    taken = copy("src", source, dest, CopyOptions(method="files", via=str(via), dest_table="second"))
    assert taken.ok and len(taken.copied) == 6 and taken.wire_bytes == 0, (
        taken.notes,
        [(u.partition, u.reason) for u in taken.failed],
    )
    assert "6 of a killed run" in " ".join(taken.notes)
    assert dump(dest, "second") == dump(source, "src") and not list(via.iterdir())
    with pytest.raises(UsageError, match="--via"):
        copy("src", source, dest, CopyOptions(method="files", dest_table="third"))


def test_partitions_by_a_date_column(ends: tuple[str, str]) -> None:
    """18.16 prints a Date partition bare (2024-01-01): read as a date, not as 2022."""
    source, dest = ends
    servers.server_query(
        source,
        "CREATE TABLE daily ENGINE = MergeTree PARTITION BY day ORDER BY id AS "
        "SELECT id, day FROM src WHERE day < '2024-01-11'",
    )
    report = copy("daily", source, dest)
    assert report.ok and len(report.copied) == 10 and report.rows_copied > 0
    assert dump(dest, "daily") == dump(source, "daily")


def test_stream_sends_no_more_than_the_source_compressed(ends: tuple[str, str]) -> None:
    source, dest = ends
    report = copy("src", source, dest, CopyOptions(method="stream", dest_table="copied"))
    assert report.ok and report.method == "stream" and len(report.copied) == 6
    assert dump(dest, "copied") == dump(source, "src")
    # What the source sends of the same rows as compressed Native (compress=1: whole past 1 MiB
    # on 18.16, so the table at once, not a partition).
    base, database = source.rsplit("/", 1)
    native = subprocess.run(
        ["curl", "-s", f"{base}/?compress=1&database={database}", "--data-binary", "SELECT * FROM src FORMAT Native"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    assert len(native) > 100_000
    assert 0 < report.wire_bytes <= len(native) * 1.05


def test_changed_partition_copied_again_and_only_it(ends: tuple[str, str]) -> None:
    source, dest = ends
    assert copy("src", source, dest).ok
    in_january = ROWS.format(ts="toDateTime('2024-01-02 00:00:00')", start=100000, n=10)
    servers.server_query(source, "INSERT INTO src " + in_january)
    servers.server_query(source, "ALTER TABLE src DELETE WHERE id = 7")
    for _ in range(100):  # (18.16 mutates in the background)
        if servers.server_query(source, "SELECT count() FROM src WHERE id = 7") == "0\n":
            break
        time.sleep(0.1)
    report = copy("src", source, dest)
    assert report.ok
    changed = {u.partition for u in report.copied}
    assert "202401" in changed and len(changed) < 6
    assert dump(dest, "src") == dump(source, "src")


def test_server_to_embedded_and_back_with_as(ends: tuple[str, str], tmp_path: Path) -> None:
    source, dest = ends
    local = str(tmp_path / "db")
    report = copy("src", source, local)
    assert report.ok and report.method == "pull" and report.rows_copied == 20000
    back = copy("src", local, dest, CopyOptions(dest_table="back"))
    assert back.ok and back.method == "stream" and back.wire_bytes > 0
    assert dump(dest, "back") == dump(source, "src")
    assert not copy("src", local, dest, CopyOptions(dest_table="back")).copied
    close_engines()


def test_existing_table_must_match(ends: tuple[str, str]) -> None:
    source, dest = ends
    servers.server_query(dest, "CREATE TABLE other (id UInt64, name String) ENGINE = MergeTree ORDER BY id")
    with pytest.raises(SchemaError) as info:
        copy("src", source, dest, CopyOptions(dest_table="other"))
    message = str(info.value)
    assert "id is UInt64, the source's UInt32" in message and "tags missing" in message
    assert servers.server_query(dest, "SELECT count() FROM other") == "0\n"
    assert "_chute_ledger" not in servers.server_query(dest, "SHOW TABLES")


def test_dry_run_writes_nothing(ends: tuple[str, str]) -> None:
    source, dest = ends
    report = copy("src", source, dest, CopyOptions(dry_run=True, partitions=("202401", "202402")))
    assert report.dry_run and report.method == "stream" and "CREATE TABLE" in report.ddl
    assert [u.state for u in report.units] == ["copy", "copy"] and sum(u.rows for u in report.units) > 0
    assert servers.server_query(dest, "SHOW TABLES") == ""


def test_a_copy_that_differs_fails_with_both_figures(ends: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    source, dest = ends
    real = Mover.write

    def and_one_more(self, where, stage, context, **more):  # type: ignore[no-untyped-def]
        real(self, where, stage, context, **more)
        servers.server_query(dest, f"INSERT INTO {stage.sql} SELECT * FROM {stage.sql} LIMIT 1")

    monkeypatch.setattr(Mover, "write", and_one_more)
    report = copy("src", source, dest, CopyOptions(partitions=("202402",), tries=2))
    assert not report.ok and len(report.failed) == 1
    failed = report.failed[0]
    assert failed.dest_rows == failed.source_rows + 1 and failed.tries == 2
    assert failed.source_checksum != failed.dest_checksum and "after 2 tries" in failed.reason
    assert servers.server_query(dest, "SELECT count() FROM src") == "0\n"  # nothing of it went in


def test_rows_added_during_a_copy_are_copied_on_the_next_try(
    ends: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, dest = ends
    real = Mover.write
    real_figures = Copier.source_figures
    calls: list[int] = []
    written = threading.Event()

    def live(self, where, stage, context, **more):  # type: ignore[no-untyped-def]
        # A writer adds rows to the partition during the first copy: one before it reads the
        # source (the copy has it), one after (the copy lacks it, the source's figures have it).
        if not calls:
            servers.server_query(source, "INSERT INTO src " + ROWS.format(ts=SPREAD, start=500000, n=1))
        real(self, where, stage, context, **more)
        if not calls:
            servers.server_query(source, "INSERT INTO src " + ROWS.format(ts=SPREAD, start=600000, n=1))
        calls.append(1)
        written.set()

    def measured_late(self, unit):  # type: ignore[no-untyped-def]
        # The source is measured while its rows are read: here after the second row, so the
        # first try's figures differ from its copy whatever the threads' timing.
        written.wait(60)
        return real_figures(self, unit)

    monkeypatch.setattr(Mover, "write", live)
    monkeypatch.setattr(Copier, "source_figures", measured_late)
    report = copy("src", source, dest, CopyOptions(partitions=("202401",)))
    assert report.ok and report.copied[0].tries == 2 and report.copied[0].rows == report.copied[0].dest_rows
    assert servers.server_query(dest, "SELECT count() FROM src WHERE id IN (500000, 600000)") == "2\n"


def test_table_without_partitions_in_key_ranges(ends: tuple[str, str]) -> None:
    source, dest = ends
    servers.server_query(source, f"CREATE TABLE flat ({COLUMNS}) ENGINE = MergeTree ORDER BY id")
    servers.server_query(source, "INSERT INTO flat " + ROWS.format(ts=SPREAD, start=0, n=12000))
    options = CopyOptions(rows_per_range=3000)
    report = copy("flat", source, dest, options)
    assert report.ok and len(report.copied) == 3 and report.rows_copied == 12000  # [..4096) [4096, 8192) [8192..)
    assert dump(dest, "flat") == dump(source, "flat")
    assert not copy("flat", source, dest, options).copied
    # New rows in one range: that range again, its old rows replaced, not doubled.
    servers.server_query(source, "INSERT INTO flat " + ROWS.format(ts=SPREAD, start=12000, n=50))
    again = copy("flat", source, dest, options)
    assert again.ok and 1 <= len(again.copied) < len(report.copied)
    assert dump(dest, "flat") == dump(source, "flat")


def test_cli_json_and_exit_code(ends: tuple[str, str]) -> None:
    source, dest = ends
    out = subprocess.run(
        [sys.executable, "-m", "chute", "copy", "src", "--from", source, "--to", dest, "--json"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] and report["partitions_copied"] == 6 and report["rows_copied"] == 20000
    dry = subprocess.run(
        [sys.executable, "-m", "chute", "copy", "src", "--from", source, "--to", dest, "--dry-run"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert dry.returncode == 0 and "would copy 0 of 6 partitions" in dry.stdout


@pytest.mark.slow
def test_kill_9_then_the_same_command_gives_an_equal_table(ends: tuple[str, str]) -> None:
    source, dest = ends
    servers.server_query(source, "INSERT INTO src " + ROWS.format(ts=SPREAD, start=20000, n=200000))
    expected = dump(source, "src")
    rng = random.Random(47)
    # Kills aim inside a copy: at a random moment of a clean run's time (start-up included).
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "chute", "copy", "src", "--from", source, "--to", dest, "--as", "timed", "-q"],
        check=True,
    )
    full = time.monotonic() - started
    kills = 0
    for trial in range(10):
        table = f"trial{trial}"
        command = [sys.executable, "-m", "chute", "copy", "src", "--from", source, "--to", dest, "--as", table, "-q"]
        proc = subprocess.Popen(command)
        time.sleep(rng.uniform(0.2, 0.95) * full)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        subprocess.run(command, check=True)
        assert dump(dest, table) == expected, f"trial {trial} differs from the source"
        assert not copy("src", source, dest, CopyOptions(dest_table=table)).copied
    assert kills >= 7
    leftovers = servers.server_query(dest, "SELECT count() FROM system.tables WHERE name LIKE '_chute_stage_%'")
    assert leftovers == "0\n"


@pytest.mark.parametrize("apart", [0.0, 0.2])
def test_two_copies_into_one_table_at_once_neither_drops_the_other(ends: tuple[str, str], apart: float) -> None:
    """Two real processes copy into one table at once: each partition is copied by one of them
    (the other waits for its claim, then skips it), no stage of the other is dropped."""
    source, dest = ends
    servers.server_query(source, "INSERT INTO src " + ROWS.format(ts=SPREAD, start=20000, n=200000))
    command = [sys.executable, "-m", "chute", "copy", "src", "--from", source, "--to", dest, "--json"]
    command += ["--method", "stream", "--workers", "2"]  # (18.16 pulls nothing of Decimal(18, 4) anyway)
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(apart)  # (at once: both claim the same partitions; 0.2 s: the first is copying)
    second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outs = [p.communicate(timeout=300) for p in (first, second)]
    for proc, (_, err) in zip((first, second), outs, strict=True):
        assert proc.returncode == 0, err
    reports = [json.loads(out) for out, _ in outs]
    copied = [{u["partition"] for u in r["units"] if u["state"] == "copied"} for r in reports]
    assert not copied[0] & copied[1] and len(copied[0] | copied[1]) == 6, copied
    # (they overlapped: one waited for partitions the other held, then skipped them)
    reasons = {u["reason"] for r in reports for u in r["units"]}
    assert "copied by another run of chute copy meanwhile" in reasons, reasons
    assert all(r["ok"] and r["partitions_failed"] == 0 for r in reports)
    assert dump(dest, "src") == dump(source, "src")
    leftovers = servers.server_query(dest, "SELECT count() FROM system.tables WHERE name LIKE '_chute_stage_%'")
    assert leftovers == "0\n"


def test_public_name(ends: tuple[str, str]) -> None:
    source, dest = ends
    assert chute.copy("src", source, dest, chute.CopyOptions(partitions=("202403",))).rows_copied > 0


def test_newer_types_from_the_embedded_engine_into_18_16(ends: tuple[str, str], tmp_path: Path) -> None:
    _, dest = ends
    local = str(tmp_path / "db")
    engine = open_engine(local)
    engine.execute(
        "CREATE TABLE modern (id UInt64, day Date, name LowCardinality(String), at DateTime64(3, 'UTC'), "
        "flag Bool, v Nullable(Decimal(20, 3)), u UUID, tags Array(LowCardinality(String))) "
        "ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY id"
    )
    engine.execute(
        "INSERT INTO modern SELECT number, toDate('2025-01-01') + number % 60, toString(number % 7), "
        "toDateTime64('2025-01-01 00:00:00.123', 3, 'UTC') + number, number % 2, if(number % 3 = 0, NULL, number / 8), "
        "generateUUIDv4(), [toString(number % 3)] FROM numbers(5000)"
    )
    report = copy("modern", local, dest)
    assert report.ok and len(report.copied) == 3, [u.reason for u in report.failed]
    assert any("DateTime64" in n for n in report.notes)
    types = servers.server_query(dest, "SELECT name, type FROM system.columns WHERE table = 'modern' FORMAT TSV")
    assert "at\tString" in types and "flag\tUInt8" in types and "name\tString" in types
    # Each copied value as 26.9 writes it as text: the same text on 18.16.
    assert servers.server_query(dest, "SELECT at FROM modern WHERE id = 1") == "2025-01-01 00:00:01.123\n"
    close_engines()


def test_old_syntax_table_into_the_embedded_engine(ends: tuple[str, str], tmp_path: Path) -> None:
    source, _ = ends
    servers.server_query(source, "CREATE TABLE old (d Date, k UInt32, s String) ENGINE = MergeTree(d, (k, s), 8192)")
    servers.server_query(
        source, "INSERT INTO old SELECT toDate('2024-01-01') + number % 40, number, 'x' FROM numbers(900)"
    )
    local = str(tmp_path / "db")
    report = copy("old", source, local)
    assert report.ok and len(report.copied) == 2
    assert "PARTITION BY toYYYYMM(d) ORDER BY (k, s) SETTINGS index_granularity = 8192" in report.ddl
    close_engines()


def test_where_and_partitions_choose_the_rows(ends: tuple[str, str]) -> None:
    source, dest = ends
    even = CopyOptions(where="id % 2 = 0", partitions=("202401", "202402"))
    report = copy("src", source, dest, even)
    assert report.ok and len(report.copied) == 2
    expected = servers.server_query(
        source, "SELECT * FROM src WHERE id % 2 = 0 AND toYYYYMM(ts) IN (202401, 202402) ORDER BY id FORMAT TSV"
    )
    assert dump(dest, "src") == expected
    assert not copy("src", source, dest, even).copied
    with pytest.raises(UsageError, match="no partition 209912"):
        copy("src", source, dest, CopyOptions(partitions=("209912",)))
    with pytest.raises(UsageError, match="--where must be one SQL expression"):
        copy("src", source, dest, CopyOptions(where="1; DROP TABLE src"))
