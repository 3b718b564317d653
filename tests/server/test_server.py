"""The server target against the real Debian clickhouse-server (18.16) on loopback."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.errors import TargetError
from chute.targets.server import conversion_settings
from chute.targets.staging import PART_WRITER_SETTINGS

from ..harness.data import UNSORTED, write_with_engine
from ..harness.servers import TEST_PASSWORD, TEST_USER, ClickHouseServer, server_query

FORMATS = [
    ("JSONEachRow", "json.gz", "gzip"),
    ("CSVWithNames", "csv.zst", "zstd"),
    ("TSVWithNames", "tsv", None),
    ("Parquet", "parquet", None),
    ("Native", "native.gz", "gzip"),
    ("ORC", "orc", None),
    ("Avro", "avro", None),
    ("Arrow", "arrow", None),
]
ROWS = (
    "SELECT number AS id, concat('name_', toString(number)) AS name, number * 1.5 AS score, "
    "toDateTime('2026-01-01 00:00:00', 'UTC') + number AS at FROM numbers(2000)"
)


@pytest.mark.parametrize("fmt,ext,compression", FORMATS, ids=[f[1] for f in FORMATS])
def test_every_format_into_the_server(
    tmp_path: Path, target: str, server_url: str, fmt: str, ext: str, compression: str | None
) -> None:
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / f"data.{ext}", fmt, ROWS, compression)
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.ok, report.files
    assert report.rows_loaded == 2000 and report.table_rows == 2000
    assert report.bytes_sent > 0
    at_type = server_query(
        server_url, "SELECT type FROM system.columns WHERE database = currentDatabase() AND table = 't' AND name = 'at'"
    ).strip()
    # Parquet and ORC hold timestamps with a fraction: 18.16 (no DateTime64) keeps their exact text.
    at = (
        "toUnixTimestamp(toDateTime(substring(min(at), 1, 19), 'UTC'))"
        if "String" in at_type
        else "toUnixTimestamp(toDateTime(min(at)))"
    )
    got = server_query(
        server_url,
        f"SELECT sum(id), uniqExact(name), sum(score), {at}, countIf(_source_row = id + 1) FROM t FORMAT TSV",
    ).split("\t")
    if "String" in at_type:
        assert fmt in ("Parquet", "ORC") and server_query(server_url, "SELECT min(at) FROM t").startswith(
            "2026-01-01 00:00:00.000"
        )
    assert got[0] == str(sum(range(2000))) and got[1] == "2000"
    assert float(got[2]) == pytest.approx(sum(i * 1.5 for i in range(2000)))
    assert got[3] == "1767225600" and got[4].strip() == "2000"


def test_provenance_rerun_and_delta(tmp_path: Path, target: str, server_url: str) -> None:
    engine = open_engine(target)
    for i in range(3):
        p = write_with_engine(
            engine,
            tmp_path / f"f{i}.json.gz",
            "JSONEachRow",
            f"SELECT number AS id FROM numbers({i * 100}, 100)",
            "gzip",
        )
        os.utime(p, (1_760_000_000 + i, 1_760_000_000 + i))
    first = chute.load([str(tmp_path)], table="events", target=server_url)
    assert first.rows_loaded == 300 and first.files_loaded == 3
    rows = (
        server_query(
            server_url,
            "SELECT _source, toUnixTimestamp(any(_source_mtime)), min(_source_row), max(_source_row), "
            "any(_load_id), count() FROM events GROUP BY _source ORDER BY _source FORMAT TSV",
        )
        .strip()
        .splitlines()
    )
    assert rows[0].split("\t") == [str(tmp_path / "f0.json.gz"), "1760000000", "1", "100", first.load_id, "100"]
    again = chute.load([str(tmp_path)], table="events", target=server_url)
    assert again.rows_loaded == 0 and again.files_skipped == 3
    # Every request to the server is counted; a run with nothing to load makes fewer.
    assert 0 < again.server_round_trips < first.server_round_trips
    assert again.to_dict()["server_round_trips"] == again.server_round_trips
    assert chute.load([str(tmp_path / "f0.json.gz")], table="e", target=target).server_round_trips == 0
    write_with_engine(
        engine, tmp_path / "f3.json.gz", "JSONEachRow", "SELECT number AS id FROM numbers(300, 50)", "gzip"
    )
    delta = chute.load([str(tmp_path)], table="events", target=server_url)
    assert delta.files_loaded == 1 and delta.rows_loaded == 50
    assert server_query(server_url, "SELECT count(), uniqExact(id) FROM events FORMAT TSV").split() == ["350", "350"]
    status = chute.status("events", server_url)
    assert len(status) == 4 and {r["state"] for r in status} == {"done"}


def test_changed_file_reload_on_the_server(tmp_path: Path, target: str, server_url: str) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text("".join(f'{{"id": {i}}}\n' for i in range(10)))
    chute.load([str(path)], table="t", target=server_url)
    path.write_text("".join(f'{{"id": {i}}}\n' for i in range(15)))
    os.utime(path, (1_900_000_000, 1_900_000_000))
    report = chute.load([str(path)], table="t", target=server_url, options=chute.LoadOptions(on_change="reload"))
    assert report.rows_loaded == 15
    assert server_query(server_url, "SELECT count() FROM t FORMAT TSV").strip() == "15"


def test_bad_rows_go_to_the_rejects_table_on_the_server(tmp_path: Path, server_url: str) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"id": 1}\n{"id": "x"}\n{"id": 3\n{"id": 4}\n')
    server_query(
        server_url,
        "CREATE TABLE t (id UInt32, _source String, _source_mtime DateTime, _source_row UInt64, _load_id String) "
        "ENGINE = MergeTree ORDER BY id",
    )
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.rows_loaded == 2 and report.rows_rejected == 2
    rows = server_query(server_url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row FORMAT TSV")
    lines = rows.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["2", "3"]
    assert "invalid JSON" in lines[1]
    assert (
        server_query(server_url, "SELECT groupArray(id) FROM (SELECT id FROM t ORDER BY id) FORMAT TSV").strip()
        == "[1,4]"
    )


def test_wrong_password_and_unknown_host_are_one_line(tmp_path: Path, clickhouse_server: ClickHouseServer) -> None:
    (tmp_path / "a.jsonl").write_text('{"a": 1}\n')
    bad = clickhouse_server.url.replace("http://", f"http://{TEST_USER}:not-{TEST_PASSWORD}@")
    proc = run_cli("load", str(tmp_path / "a.jsonl"), "-t", "t", "--target", bad)
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0 and "Wrong password" in proc.stderr
    assert TEST_PASSWORD not in proc.stderr + proc.stdout
    proc = run_cli("load", str(tmp_path / "a.jsonl"), "-t", "t", "--target", "http://no-such-host.invalid:8123")
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0 and "cannot reach" in proc.stderr


def test_password_never_printed(tmp_path: Path, clickhouse_server: ClickHouseServer) -> None:
    (tmp_path / "a.jsonl").write_text('{"a": 1}\n{"a": "text"}\n')
    (tmp_path / "b.jsonl").write_text('{"a": 2}\n')
    pw_file = tmp_path / "pw"
    pw_file.write_text(TEST_PASSWORD + "\n")
    url = clickhouse_server.url.replace("http://", f"http://{TEST_USER}@")
    outputs = []
    for args in (
        ("load", str(tmp_path / "b.jsonl"), "-t", "pw_t", "--target", url, "--password-file", str(pw_file), "--json"),
        ("load", str(tmp_path / "a.jsonl"), "-t", "pw_t", "--target", url, "--password-file", str(pw_file)),
        ("status", "--target", url.replace("@", f":{TEST_PASSWORD}@")),
        ("query", "SELECT * FROM nowhere", "--target", url.replace("@", f":{TEST_PASSWORD}@")),
        ("--debug", "query", "SELECT * FROM nowhere", "--target", url.replace("@", f":{TEST_PASSWORD}@")),
    ):
        proc = run_cli(*args)
        outputs.append(proc.stdout + proc.stderr)
    assert json.loads(outputs[0].split("\n", 0)[0])["rows_loaded"] == 1
    joined = "\n".join(outputs)
    assert "pw_t_rejects" in joined and "nowhere" in joined
    assert TEST_PASSWORD not in joined
    env = {
        "CLICKHOUSE_HOST": "127.0.0.1",
        "CLICKHOUSE_PORT": str(clickhouse_server.http_port),
        "CLICKHOUSE_USER": TEST_USER,
        "CLICKHOUSE_PASSWORD": TEST_PASSWORD,
    }
    env_proc = run_cli("query", "SELECT 42", env=env)
    assert env_proc.returncode == 0 and env_proc.stdout.strip() == "42"
    env_proc = run_cli("query", "SELECT 42", env={**env, "CLICKHOUSE_PASSWORD": "wrong-" + TEST_PASSWORD})
    assert env_proc.returncode == 2 and "Wrong password for user chute_test" in env_proc.stderr
    assert TEST_PASSWORD not in env_proc.stderr


def test_terminal_errors_keep_the_server_code(tmp_path: Path, server_url: str) -> None:
    with pytest.raises(TargetError) as info:
        chute.query("SELECT * FROM no_such_table", target=server_url)
    assert info.value.code == 60


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", *args], capture_output=True, text=True, timeout=300, env=full_env
    )


def _make_files(directory: Path, files: int, rows: int) -> None:
    code = (
        "import sys; from pathlib import Path; from tests.harness.data import write_with_engine; "
        "from chute.engine import open_engine; import os; "
        "d = Path(sys.argv[1]); d.mkdir(); e = open_engine(str(d) + '.gen'); "
        f"[write_with_engine(e, d / f'p{{i:03d}}.json.gz', 'JSONEachRow', "
        f"f'SELECT number AS id, toString(number) AS s FROM numbers({{i * {rows}}}, {rows})', 'gzip') "
        f"for i in range({files})]; "
        f"[os.utime(d / f'p{{i:03d}}.json.gz', (1_750_000_000 + i,) * 2) for i in range({files})]"
    )
    subprocess.run([sys.executable, "-c", code, str(directory)], check=True, cwd=Path(__file__).parents[2])


def _load_command(data: Path, url: str) -> list[str]:
    """`chute load` in small batches (many commit points for a kill to land between)."""
    return [
        sys.executable,
        "-m",
        "chute.cli",
        "load",
        str(data),
        "-t",
        "t",
        "--target",
        url,
        "--batch-mb",
        "1",
        "--quiet",
    ]


def _checksum(url: str) -> tuple[str, ...]:
    sql = "SELECT count(), sum(cityHash64(id, s, _source, _source_row, _source_mtime)) FROM t FORMAT TSV"
    try:
        return tuple(server_query(url, sql).split())
    except Exception:
        return ("0", "0")


def _wait_for_done_units(url: str, units: int, proc: subprocess.Popen[bytes], limit: float) -> None:
    """Until the ledger holds `units` done rows (or the process ended, or `limit` seconds)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            done = int(server_query(url, "SELECT countIf(state = 'done') FROM _chute_ledger FORMAT TSV").strip() or 0)
        except Exception:
            done = 0
        if done >= units:
            return
        time.sleep(0.01)


@pytest.mark.slow
def test_sigkill_of_chute_then_rerun_gives_the_same_table(tmp_path: Path, clickhouse_server: ClickHouseServer) -> None:
    data = tmp_path / "data"
    _make_files(data, files=60, rows=40_000)
    base = clickhouse_server.url

    def fresh(name: str) -> str:
        clickhouse_server.query(f"CREATE DATABASE {name}")
        return f"{base}/{name}"

    def cmd(url: str) -> list[str]:
        return _load_command(data, url)

    suffix = str(int(time.time() * 1000))[-8:]
    clean = fresh(f"clean_{suffix}")
    t0 = time.monotonic()
    subprocess.run(cmd(clean), check=True)
    full = time.monotonic() - t0
    expected = _checksum(clean)
    assert expected[0] == str(60 * 40_000)
    rng = random.Random(4)
    partial = 0
    for trial in range(6):
        url = fresh(f"trial{trial}_{suffix}")
        proc = subprocess.Popen(cmd(url))
        # Kill it mid-load, not by luck: once the ledger shows some units done (a different
        # number each trial), and at a random moment of the batch after them.
        _wait_for_done_units(url, rng.randint(1, 8), proc, full * 3)
        time.sleep(rng.uniform(0, 0.3))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        partial += 0 < int(_checksum(url)[0]) < 60 * 40_000
        subprocess.run(cmd(url), check=True)
        assert _checksum(url) == expected, f"trial {trial}"
    assert partial >= 4, partial


@pytest.mark.slow
def test_server_killed_and_restarted_mid_load(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _make_files(data, files=60, rows=40_000)
    server = ClickHouseServer.create(tmp_path / "server").start()
    try:
        server.query("CREATE DATABASE r")
        url = f"{server.url}/r"
        cmd = _load_command(data, url)
        t0 = time.monotonic()
        subprocess.run(cmd, check=True)
        full = time.monotonic() - t0
        expected = _checksum(url)
        server.query("DROP DATABASE r")
        server.query("CREATE DATABASE r")
        rng = random.Random(7)
        for trial in range(5):
            server.query("DROP TABLE IF EXISTS r.t")
            server.query("DROP TABLE IF EXISTS r._chute_ledger")
            proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
            time.sleep(rng.uniform(0.1, full * 0.9))
            server.kill()
            time.sleep(rng.uniform(0.0, 1.0))
            server.start()
            _, err = proc.communicate(timeout=300)
            # Either chute rode out the restart with its retries, or it stopped with one line.
            if proc.returncode != 0:
                assert err.strip().count("\n") == 0, err
            subprocess.run(cmd, check=True)
            assert _checksum(url) == expected, f"trial {trial}"
    finally:
        server.remove()


def test_pass_through_without_provenance(tmp_path: Path, target: str, server_url: str) -> None:
    engine = open_engine(target)
    for i in range(4):
        write_with_engine(
            engine,
            tmp_path / f"p{i}.json.gz",
            "JSONEachRow",
            f"SELECT number AS id, toString(number) AS s FROM numbers({i * 1000}, 1000)",
            "gzip",
        )
    bad = tmp_path / "q_bad.jsonl"
    bad.write_text('{"id": 9000, "s": "ok"}\n{"id": "oops", "s": "bad"}\n')
    opts = chute.LoadOptions(provenance=False, method="pass-through")
    report = chute.load([str(tmp_path)], table="raw", target=server_url, options=opts)
    sizes = sum(p.stat().st_size for p in tmp_path.glob("*.json*"))
    # The files travelled as they are (the careful pass re-sends the bad one as Native).
    assert report.bytes_sent >= sizes - bad.stat().st_size
    assert report.rows_loaded == 4001 and report.rows_rejected == 1
    assert server_query(server_url, "SELECT count(), uniqExact(id) FROM raw FORMAT TSV").split() == ["4001", "4001"]
    # The old name of server-parse: with provenance too (filled by the stage's defaults).
    prov_opts = chute.LoadOptions(method="pass-through")
    prov = chute.load([str(tmp_path)], table="prov", target=server_url, options=prov_opts)
    assert prov.rows_loaded == 4001 and prov.methods.get("server-parse") == 4
    again = chute.load([str(tmp_path)], table="raw", target=server_url, options=opts)
    assert again.rows_loaded == 0


def test_failure_after_moving_rows_in_is_not_retried(tmp_path: Path, server_url: str) -> None:
    """The server gone right after ATTACH (the stage's DROP fails): the write succeeded and
    must not be retried whole, or its rows would be in twice (seen once in the restart test)."""
    from chute.errors import TransientTargetError
    from chute.targets.server import ServerTarget

    (tmp_path / "a.jsonl").write_text("".join(f'{{"id": {i}}}\n' for i in range(100)))
    real_execute = ServerTarget.execute
    failed = {"n": 0}

    def flaky_execute(self, sql, settings=None, context=""):  # type: ignore[no-untyped-def]
        if sql.startswith("DROP TABLE IF EXISTS") and "_chute_stage_t_" in sql and not failed["n"]:
            failed["n"] += 1
            raise TransientTargetError("connection reset by peer")
        return real_execute(self, sql, settings, context)

    ServerTarget.execute = flaky_execute  # type: ignore[method-assign]
    try:
        report = chute.load([str(tmp_path)], table="t", target=server_url)
    finally:
        ServerTarget.execute = real_execute  # type: ignore[method-assign]
    assert failed["n"] == 1
    assert report.ok and report.rows_loaded == 100
    assert server_query(server_url, "SELECT count() FROM t FORMAT TSV").strip() == "100"
    again = chute.load([str(tmp_path)], table="t", target=server_url)  # and the stage left behind goes
    assert again.rows_loaded == 0
    stages = server_query(server_url, "SELECT count() FROM system.tables WHERE name LIKE '_chute_stage_%' FORMAT TSV")
    assert stages.strip() == "0"


def test_failure_while_moving_rows_in_is_repaired_not_doubled(tmp_path: Path, server_url: str) -> None:
    """A connection lost during ATTACH (the commit) must not lead to a blind retry."""
    from chute.errors import CommitUncertain
    from chute.targets import staging

    (tmp_path / "a.jsonl").write_text("".join(f'{{"id": {i}}}\n' for i in range(100)))
    real_commit = staging.Stage.commit
    calls = {"n": 0}

    def flaky_commit(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        counts = real_commit(self, *args, **kwargs)  # the rows are in ...
        calls["n"] += 1
        if calls["n"] == 1 and self.target.table == "t":
            raise CommitUncertain("connection reset while attaching")  # ... but the answer was lost
        return counts

    staging.Stage.commit = flaky_commit  # type: ignore[method-assign]
    try:
        report = chute.load([str(tmp_path)], table="t", target=server_url)
    finally:
        staging.Stage.commit = real_commit  # type: ignore[method-assign]
    assert report.ok and report.rows_loaded == 100
    assert server_query(server_url, "SELECT count() FROM t FORMAT TSV").strip() == "100"


def test_unsorted_rows_into_a_partitioned_server_table(tmp_path: Path, target: str, server_url: str) -> None:
    """Events over 400 days into a table chute creates partitioned by day on the server:
    every row once, at most two parts per partition. 18.16 does not report its partition
    key, so no part settings arise here; the next test covers them on the engine."""
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / "events.csv", "CSVWithNames", UNSORTED.format(rows=20_000))
    options = chute.LoadOptions(partition_by="toYYYYMMDD(ts)", memory_limit=400 * 2**20)
    report = chute.load([str(path)], table="t", target=server_url, options=options)
    assert report.ok and report.rows_loaded == 20_000, report.files
    got = server_query(
        server_url,
        "SELECT count(), uniqExact(id), uniqExact(toYYYYMMDD(ts)), countIf(_source_row != id) FROM t FORMAT TSV",
    )
    assert got.split() == ["20000", "20000", "400", "0"]
    parts = server_query(
        server_url,
        "SELECT count(), uniqExact(partition) FROM system.parts WHERE database = currentDatabase() "
        "AND table = 't' AND active FORMAT TSV",
    ).split()
    assert int(parts[1]) == 400 and int(parts[0]) <= 2 * 400


def test_the_conversion_select_takes_no_part_writer_settings(target: str) -> None:
    """A partition-aware load's settings (newer servers report the partition key; 18.16
    does not) include table-only part settings; the engine's SELECT that makes the
    Native stream must run with what is left of them."""
    settings = {"max_threads": 2, **{k: 2**20 for k in PART_WRITER_SETTINGS}}
    engine = open_engine(target)
    with pytest.raises(TargetError, match="UNKNOWN_SETTING"):
        engine.rows("SELECT 1 AS x", settings)
    chosen = conversion_settings(settings, streams=2, low_cardinality=False)
    assert not set(chosen) & PART_WRITER_SETTINGS and chosen["max_threads"] == 1
    assert engine.rows("SELECT 1 AS x", chosen) == [{"x": 1}]


def test_system_reads_ride_out_tables_dropped_meanwhile(server_url: str) -> None:
    """18.16 fails a system.tables/system.parts read when another table is dropped while it
    lists them (code 60 naming that table): parallel batches drop their stage tables all
    the time, and a failed stage lookup sent a good file the slow way (seen once in CI)."""
    import threading

    from chute.targets.server import ServerTarget

    tgt = ServerTarget(server_url)
    database = server_url.rsplit("/", 1)[1]
    tgt.execute("CREATE TABLE raw (id UInt64) ENGINE = MergeTree ORDER BY tuple()")
    races = {"n": 0}
    real_rows = tgt.client.rows

    def counting_rows(sql, settings=None, context=""):  # type: ignore[no-untyped-def]
        try:
            return real_rows(sql, settings, context)
        except TargetError as exc:
            races["n"] += exc.code == 60
            raise

    tgt.client.rows = counting_rows  # type: ignore[method-assign]
    stop = threading.Event()

    def churn(worker: int) -> None:
        for i in range(10**6):
            if stop.is_set():
                return
            tgt.execute(f"CREATE TABLE `_chute_stage_raw_{worker}_{i}` AS raw")
            tgt.execute(f"DROP TABLE IF EXISTS `_chute_stage_raw_{worker}_{i}`")

    threads = [threading.Thread(target=churn, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    reads = 0
    try:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            assert tgt.rows(f"SELECT engine FROM system.tables WHERE database = '{database}' AND name = 'raw'") == [
                {"engine": "MergeTree"}
            ]
            tgt.rows(f"SELECT DISTINCT partition_id FROM system.parts WHERE database = '{database}' AND table = 'raw'")
            reads += 2
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    print(f"{reads} system reads, {races['n']} listing races ridden out")
    # A table that is really missing still fails at once (one try each), with its code.
    before = races["n"]
    for sql in ("SELECT * FROM system.no_such_table", "SELECT * FROM no_such_table"):
        with pytest.raises(TargetError) as missing:
            tgt.rows(sql)
        assert missing.value.code == 60
    assert races["n"] == before + 2


def test_batch_constants_are_filled_by_the_stage(
    tmp_path: Path, server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load id (and a lone file's name) are not sent a row at a time: the stage fills them.
    Every row still carries them exactly, for hostile file names, one file alone and several in
    a batch; the table's own definition keeps no such default, and no stage is left."""
    from chute.targets.server import ServerTarget

    sent: list[list[str]] = []
    send = ServerTarget._send_selects

    def watched(self, into, columns, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(list(columns))
        return send(self, into, columns, *args, **kwargs)

    monkeypatch.setattr(ServerTarget, "_send_selects", watched)
    engine = open_engine(str(tmp_path / "db"))
    lone, many = tmp_path / "lone", tmp_path / "many"
    lone.mkdir(), many.mkdir()
    names = ["it's a \\ q`uo\"te ünï.json.gz", "b\\'c.json.gz", "DEFAULT ''.json.gz"]
    write_with_engine(engine, lone / names[0], "JSONEachRow", "SELECT number AS id FROM numbers(3000)", "gzip")
    for i, name in enumerate(names):
        sql = f"SELECT number AS id FROM numbers({i * 1000}, 1000)"
        write_with_engine(engine, many / name, "JSONEachRow", sql, "gzip")
    for directory, table in ((lone, "lone"), (many, "many")):
        sent.clear()
        report = chute.load([str(directory)], table=table, target=server_url)
        assert report.ok and report.rows_loaded == 3000, report.files
        assert sent and all("_load_id" not in c and "_source_row" in c for c in sent), sent
        # A lone file's name is filled by the stage; a batch of several files sends theirs.
        assert any("_source" in c for c in sent) == (directory is many), sent
        got = server_query(
            server_url,
            f"SELECT _source, _load_id, count(), min(_source_row), max(_source_row) FROM {table} "
            "GROUP BY _source, _load_id ORDER BY _source FORMAT JSONEachRow",
        )
        rows = [json.loads(line) for line in got.splitlines()]
        expected = sorted(str(directory / n) for n in (names[:1] if directory is lone else names))
        assert [r["_source"] for r in rows] == expected
        assert {r["_load_id"] for r in rows} == {report.load_id}
        per_file = 3000 // len(expected)
        assert all(
            (int(r["count()"]), int(r["min(_source_row)"]), int(r["max(_source_row)"])) == (per_file, 1, per_file)
            for r in rows
        )
        ddl = server_query(server_url, f"SHOW CREATE TABLE {table}")
        assert "DEFAULT" not in ddl, ddl
    tables = server_query(server_url, "SELECT name FROM system.tables WHERE database = currentDatabase() FORMAT TSV")
    assert "_chute_stage" not in tables


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_several_files_a_batch_without_provenance(
    tmp_path: Path, target: str, server_url: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table without provenance columns loads several files a batch too (once one stage and
    one ATTACH per file): each file's rows and missing values are counted by a column of the
    stage's own, which the table never gets. Names a single file() call cannot read together
    (a comma, braces) go in the same batch; a bad file is loaded apart, its bad row rejected."""
    from chute.targets import staging

    tagged: list[bool] = []
    make = staging.Stage.__init__

    def watched(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        tagged.append(bool(kwargs.get("tagged")))
        make(self, *args, **kwargs)

    monkeypatch.setattr(staging.Stage, "__init__", watched)
    dest = target if where == "embedded" else server_url
    data = tmp_path / "data"
    data.mkdir()
    sizes = {"a.csv": 7, "b.csv": 300, "c,{d}.csv": 41, "it's.csv": 1}
    for n, (name, rows) in enumerate(sizes.items()):
        lines = [f"{n * 1000 + i},{'' if i % 4 == 0 else i}" for i in range(rows)]
        (data / name).write_text("id,v\n" + "\n".join(lines) + "\n")
    (data / "z_bad.csv").write_text("id,v\n5000,1\nnot a number,2\n5001,3\n")
    query = open_engine(target).rows if where == "embedded" else None
    opts = chute.LoadOptions(provenance=False)
    columns = "(id UInt32, v UInt32) ENGINE = MergeTree ORDER BY id"
    if query is not None:
        open_engine(target).execute(f"CREATE TABLE t {columns}")
    else:
        server_query(server_url, f"CREATE TABLE t {columns}")
    report = chute.load([str(data)], table="t", target=dest, options=opts)
    loaded = {Path(f.source).name: (f.rows_loaded, f.rows_defaulted, f.rows_rejected) for f in report.files}
    expected = {name: (rows, len(range(0, rows, 4)), 0) for name, rows in sizes.items()}
    assert loaded == {**expected, "z_bad.csv": (2, 0, 1)}, report.files
    assert report.rows_loaded == sum(sizes.values()) + 2
    assert any(tagged), tagged  # (several files went in one stage)
    sql = "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 't' ORDER BY name"
    names = [r["name"] for r in query(sql)] if query is not None else server_query(server_url, sql).split()
    assert names == ["id", "v"]
    total = "SELECT count() AS n, uniqExact(id) AS u FROM t"
    got = query(total)[0] if query is not None else json.loads(server_query(server_url, total + " FORMAT JSONEachRow"))
    assert (int(got["n"]), int(got["u"])) == (report.rows_loaded, report.rows_loaded)
    again = chute.load([str(data)], table="t", target=dest, options=opts)
    assert again.rows_loaded == 0 and again.files_skipped == len(sizes) + 1


def test_query_keeps_a_statement_s_own_format_and_runs_inserts(server_url: str) -> None:
    from chute.inspect import query

    assert query("SELECT 1 AS x FORMAT JSONEachRow", server_url) == '{"x":1}\n'
    assert query("CREATE TABLE qq (a UInt8) ENGINE = Memory", server_url) == ""
    assert query("INSERT INTO qq VALUES (1), (2);", server_url) == ""
    assert query("SELECT sum(a) FROM qq", server_url, "TSV") == "3\n"
