"""Many chute workers on one job: claims with leases keep every unit to one worker.

Against the real 18.16 server: workers started together, workers killed mid-load,
a dead remote worker's lease running out, a live claim respected, and the claim
race itself forced hundreds of times. On the embedded target: a second process
gets one line naming the process that holds the directory.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.errors import AttachedLate, TargetError
from chute.formats import FileFormat
from chute.load.claims import CLAIMS_TABLE, ClaimLost, Claims
from chute.load.ledger import LEDGER_TABLE, Ledger
from chute.sql import TableName, quote_str
from chute.targets.server import ServerTarget
from chute.targets.staging import STAGE_PREFIX, Stage
from chute.units import Unit

from .servers import ClickHouseServer
from .test_server import _make_files

ROOT = Path(__file__).parent.parent
FILES = 200
ROWS = 2_000


def _chute(*args: str) -> list[str]:
    return [sys.executable, "-m", "chute.cli", *args]


def _load(data: Path, url: str, *extra: str) -> list[str]:
    return _chute("load", str(data), "-t", "ev", "--target", url, "--json", "--batch-mb", "1", *extra)


@pytest.fixture(scope="module")
def many_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("many") / "data"
    _make_files(data, files=FILES, rows=ROWS)
    return data


def _fresh(server: ClickHouseServer, name: str) -> str:
    database = f"{name}_{random.randrange(10**9)}"
    server.query(f"CREATE DATABASE {database}")
    return f"{server.url}/{database}"


def _q(server: ClickHouseServer, url: str, sql: str) -> list[str]:
    database = url.rsplit("/", 1)[1]
    return server.query(sql, database=database).split()


def _assert_exactly_once(server: ClickHouseServer, url: str, files: int = FILES, reloads: int = 0) -> None:
    count, unique = _q(server, url, "SELECT count(), uniqExact(_source, _source_row) FROM ev")
    assert int(count) == int(unique) == files * ROWS, (count, unique)
    per_file = _q(
        server,
        url,
        "SELECT uniqExact(_source), max(c), min(c) FROM (SELECT _source, count() AS c FROM ev GROUP BY _source)",
    )
    assert per_file == [str(files), str(ROWS), str(ROWS)], per_file
    done = _q(
        server,
        url,
        f"SELECT uniqExact(unit), countIf(state = 'done'), uniqExactIf(unit, state = 'done') FROM {LEDGER_TABLE}",
    )
    # Every file `done` exactly once in the ledger (no second load of a unit by anyone).
    assert done == [str(files), str(files + reloads), str(files)], done
    stages = _q(
        server,
        url,
        f"SELECT count() FROM system.tables WHERE database = currentDatabase() AND startsWith(name, '{STAGE_PREFIX}')",
    )
    assert stages == ["0"]


def _wait_all(procs: list[subprocess.Popen[str]]) -> list[dict[str, object]]:
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    return reports


@pytest.mark.slow
def test_workers_started_together_load_each_row_once(many_files: Path, clickhouse_server: ClickHouseServer) -> None:
    rng = random.Random(24)
    for trial in range(10):
        url = _fresh(clickhouse_server, f"together{trial}")
        procs = []
        for _ in range(rng.randint(2, 4)):
            procs.append(
                subprocess.Popen(_load(many_files, url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            )
            time.sleep(rng.uniform(0, 0.4))
        reports = _wait_all(procs)
        assert sum(int(r["rows_loaded"]) for r in reports) == FILES * ROWS  # type: ignore[call-overload]
        _assert_exactly_once(clickhouse_server, url)


@pytest.mark.slow
def test_a_worker_killed_mid_load_is_finished_by_the_others(
    many_files: Path, clickhouse_server: ClickHouseServer
) -> None:
    rng = random.Random(7)
    landed = 0
    for trial in range(4):
        url = _fresh(clickhouse_server, f"killed{trial}")
        victim = subprocess.Popen(_load(many_files, url), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Kill it only once it is loading: a unit of it `started` in the ledger.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and victim.poll() is None:
            try:
                started = _q(clickhouse_server, url, f"SELECT countIf(state = 'started') FROM {LEDGER_TABLE}")
            except Exception:
                started = ["0"]
            if started != ["0"]:
                break
            time.sleep(0.02)
        others = [
            subprocess.Popen(_load(many_files, url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        time.sleep(rng.uniform(0, 0.3))
        if victim.poll() is None:
            victim.send_signal(signal.SIGKILL)
            landed += 1
        victim.wait()
        _wait_all(others)
        _assert_exactly_once(clickhouse_server, url)
        again = subprocess.run(_load(many_files, url), capture_output=True, text=True, check=True)
        assert json.loads(again.stdout)["rows_loaded"] == 0
    assert landed >= 2


def _server_target(url: str) -> ServerTarget:
    return ServerTarget(url)


def _race(
    claims: Claims, unit: str, barrier: threading.Barrier, won: list[str], done: threading.Event, seed: int
) -> None:
    """As the loader does: a worker that withdrew tries again a moment later, until one holds the unit."""
    rng = random.Random(seed)
    barrier.wait()
    for _ in range(50):
        mine, _ = claims.claim([unit])
        if mine:
            won.append(claims.worker)
            done.set()
            return
        if done.is_set():
            return
        time.sleep(rng.uniform(0, 0.03))


def test_claim_race_has_at_most_one_winner(clickhouse_server: ClickHouseServer) -> None:
    """Workers that claim the same unit at the same instant, 200 times over."""
    url = _fresh(clickhouse_server, "race")
    table = TableName(None, "ev")
    workers = [Claims(_server_target(url), table, f"w{i}", 30) for i in range(3)]
    workers[0].ensure()
    for round_ in range(200):
        unit = f"/data/unit-{round_}"
        barrier = threading.Barrier(len(workers))
        won: list[str] = []
        done = threading.Event()

        threads = [
            threading.Thread(target=_race, args=(c, unit, barrier, won, done, round_ * 10 + i))
            for i, c in enumerate(workers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1, (round_, won)  # never two loaders; and not a livelock either
        for claims in workers:
            claims.release([unit])


def test_a_dead_remote_workers_lease_runs_out_then_its_unit_is_repaired(
    tmp_path: Path, clickhouse_server: ClickHouseServer
) -> None:
    data = tmp_path / "data"
    _make_files(data, files=6, rows=ROWS)
    url = _fresh(clickhouse_server, "lease")
    subprocess.run(_load(data, url), check=True, capture_output=True)
    victim = str(data / "p002.json.gz")
    # A worker on another host started this file again and died holding it: its rows are
    # in twice, the ledger says `started`, and its lease has 4 s to run.
    database = url.rsplit("/", 1)[1]
    clickhouse_server.query(f"INSERT INTO ev SELECT * FROM ev WHERE _source = {quote_str(victim)}", database=database)
    clickhouse_server.query(
        f"INSERT INTO {LEDGER_TABLE} SELECT `table`, unit, identity, size, mtime, 'started', 0, 0, 'remote', '', at, "
        f"seq + 1000000000000 FROM {LEDGER_TABLE} WHERE unit = {quote_str(victim)}",
        database=database,
    )
    clickhouse_server.query(
        f"INSERT INTO {CLAIMS_TABLE} VALUES ('ev', {quote_str(victim)}, 'remote0000ab.1', 'other-host:77', "
        "'other-host/boot', '77:1', 'held', now() + 4, now())",
        database=database,
    )
    started = time.monotonic()
    run = subprocess.run(_load(data, url), capture_output=True, text=True, check=True)
    waited = time.monotonic() - started
    assert waited >= 2.5, waited  # the live claim was respected until its lease ended
    assert json.loads(run.stdout)["rows_loaded"] == ROWS  # then repaired and loaded once
    _assert_exactly_once(clickhouse_server, url, files=6, reloads=1)


def test_a_repair_that_reaches_the_server_late_takes_no_later_workers_rows(
    tmp_path: Path, clickhouse_server: ClickHouseServer
) -> None:
    """Worker A sends the repair DELETE of an interrupted file, then its network stalls past its
    lease; worker B takes the file over, loads it and writes `done`; A's DELETE lands after that.
    It deleted B's rows (by `_source`), the ledger said done and re-runs skipped the file. The
    repair now takes only the rows of the loads the ledger named before A's claim was checked."""
    data = tmp_path / "data"
    _make_files(data, files=3, rows=ROWS)
    url = _fresh(clickhouse_server, "late")
    database = url.rsplit("/", 1)[1]
    subprocess.run(_load(data, url), check=True, capture_output=True)
    victim = str(data / "p001.json.gz")
    # A worker died loading the file again: some of its rows are in, the ledger says `started`.
    columns = "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 'ev'"
    names = _q(clickhouse_server, url, columns)
    select = ", ".join("'dead'" if n == "_load_id" else f"`{n}`" for n in names)  # (18.16 has no REPLACE)
    clickhouse_server.query(
        f"INSERT INTO ev SELECT {select} FROM ev WHERE _source = {quote_str(victim)} LIMIT 500", database=database
    )
    clickhouse_server.query(
        f"INSERT INTO {LEDGER_TABLE} SELECT `table`, unit, identity, size, mtime, 'started', 0, 0, 'dead', '', at, "
        f"seq + 1000000000000 FROM {LEDGER_TABLE} WHERE unit = {quote_str(victim)}",
        database=database,
    )
    target = _server_target(url)
    unit = Unit(victim, 0, 0, FileFormat("JSONEachRow", "gzip"))
    stale_loads = Ledger(target, TableName(None, "ev")).load_ids([unit])  # worker A, before its stall
    assert "dead" in stale_loads
    run = subprocess.run(_load(data, url), capture_output=True, text=True, check=True)  # worker B
    assert json.loads(run.stdout)["rows_loaded"] == ROWS
    target.delete_sources(TableName(None, "ev"), [victim], stale_loads)  # A's DELETE, landing late
    _assert_exactly_once(clickhouse_server, url, files=3, reloads=1)


def test_a_live_claim_is_respected_until_released(tmp_path: Path, clickhouse_server: ClickHouseServer) -> None:
    data = tmp_path / "data"
    _make_files(data, files=4, rows=ROWS)
    url = _fresh(clickhouse_server, "live")
    database = url.rsplit("/", 1)[1]
    held = str(data / "p001.json.gz")
    target = _server_target(url)
    other = Claims(target, TableName(None, "ev"), "other-host:1", 60)
    other.ensure()
    assert other.claim([held])[0] == [held]
    proc = subprocess.Popen(_load(data, url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    assert proc.poll() is None  # still waiting for the held file
    assert _q(clickhouse_server, url, f"SELECT count() FROM ev WHERE _source = {quote_str(held)}") == ["0"]
    status = subprocess.run(_chute("status", "-t", "ev", "--target", url), capture_output=True, text=True, check=True)
    assert "live claims" in status.stdout and "other-host:1" in status.stdout
    assert database  # the status above read this database's claims
    other.release([held])
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["rows_loaded"] == 4 * ROWS
    _assert_exactly_once(clickhouse_server, url, files=4)


def test_the_commit_guard_refuses_after_a_lapsed_lease(clickhouse_server: ClickHouseServer) -> None:
    url = _fresh(clickhouse_server, "guard")
    claims = Claims(_server_target(url), TableName(None, "ev"), "me", 3)
    claims.ensure()
    claims.claim(["a"])
    claims.guard()  # fresh: fine
    time.sleep(2.2)  # past two thirds of the lease, never renewed
    with pytest.raises(ClaimLost):
        claims.guard()
    # In the server's clock too: a claim released behind this worker's back is not live.
    claims2 = Claims(_server_target(url), TableName(None, "ev"), "me2", 30)
    claims2.claim(["b"])
    token = next(iter(claims2._tokens()))
    database = url.rsplit("/", 1)[1]
    clickhouse_server.query(
        f"INSERT INTO {CLAIMS_TABLE} VALUES ('ev', 'b', {quote_str(token)}, 'x', 'x', 'x', 'released', "
        "toDateTime(0), now())",
        database=database,
    )
    with pytest.raises(ClaimLost):
        claims2.guard()


def test_a_claim_released_by_another_lane_during_the_guard_is_not_lost(
    clickhouse_server: ClickHouseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two lanes of one worker: lane 1's commit guard reads which of the worker's claims are
    live while lane 2, done, releases its own. Its `released` row on the server was taken for
    a lost claim: lane 1 was told its rows went in late and took them out again (issue 46
    item 9, a file `loaded` in the report whose rows were gone). Released claims are given up,
    not lost."""
    url = _fresh(clickhouse_server, "lanes")
    claims = Claims(_server_target(url), TableName(None, "ev"), "me", 30)
    claims.ensure()
    claims.claim(["lane1.csv"])
    claims.claim(["lane2.csv"])
    real_rows = Claims._rows
    released = []

    def rows_after_release(self: Claims, sql: str, context: str):  # type: ignore[no-untyped-def]
        if context == "checking claims" and not released:
            released.append(1)
            self.release(["lane2.csv"])  # (between the guard's look at its claims and its query)
        return real_rows(self, sql, context)

    monkeypatch.setattr(Claims, "_rows", rows_after_release)
    claims.guard()  # lane 1's claim is live: no ClaimLost
    assert released


def test_rows_that_went_in_late_are_taken_out_alone(
    clickhouse_server: ClickHouseServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of two files whose commit fails is loaded a file at a time: the first file
    is done (in the ledger and the report), then the second one's rows go in "late" (the
    worker's claims may have ended meanwhile): they are taken out again and left to another
    worker (here this one, once its claims end). The first file's rows were taken out with
    them, while the ledger and the report said loaded (issue 46 item 9: a file `loaded`, its
    rows gone)."""
    url = _fresh(clickhouse_server, "late")
    engine = open_engine(":memory:")
    for i, name in enumerate(["a", "b", "c", "d"]):  # (two batches of two)
        path = quote_str(str(tmp_path / f"{name}.parquet"))
        engine.execute(f"INSERT INTO FUNCTION file({path}, 'Parquet') SELECT {i}::Int64 AS id")
    real_move_in = Stage._move_in
    attached: list[dict[str, int]] = []

    def first_fails_third_late(self: Stage, counts: dict[str, int]) -> dict[str, int]:
        if self.target.table != "t":
            return real_move_in(self, counts)
        attached.append(counts)
        if len(attached) == 1:
            raise TargetError("refused (test)")  # nothing moved: the batch is split
        moved = real_move_in(self, counts)
        if len(attached) == 3:
            raise AttachedLate("went in late (test)")
        return moved

    monkeypatch.setattr(Stage, "_move_in", first_fails_third_late)
    options = chute.LoadOptions(lease_seconds=3, connections=1)  # (one lane: the batches in turn)
    report = chute.load([str(tmp_path)], table="t", target=url, options=options)
    assert len(attached) > 3 and len(attached[0]) == 2 and len(attached[1]) == 1, attached
    database = url.rsplit("/", 1)[1]
    got = clickhouse_server.query("SELECT id, count() FROM t GROUP BY id ORDER BY id FORMAT TSV", database=database)
    assert got.split() == ["0", "1", "1", "1", "2", "1", "3", "1"], (got, report.files)
    assert [(Path(f.source).name, f.state, f.rows_loaded) for f in report.files] == [
        (f"{name}.parquet", "loaded", 1) for name in "abcd"
    ]


def test_stale_stages_of_live_workers_are_kept(clickhouse_server: ClickHouseServer) -> None:
    url = _fresh(clickhouse_server, "stages")
    target = _server_target(url)
    target.execute("CREATE TABLE ev (a UInt8) ENGINE = MergeTree ORDER BY a")
    target.execute("CREATE TABLE ev_x (a UInt8) ENGINE = MergeTree ORDER BY a")
    names = {
        "live": f"{STAGE_PREFIX}ev_aaaaaaaaaaaa_12345678",
        "dead": f"{STAGE_PREFIX}ev_bbbbbbbbbbbb_12345678",
        "old": f"{STAGE_PREFIX}ev_0123456789ab",
        "other_table": f"{STAGE_PREFIX}ev_x_cccccccccccc_12345678",
    }
    for name in names.values():
        target.execute(f"CREATE TABLE `{name}` AS ev")
    Stage.drop_stale(target, TableName(None, "ev"), lambda: {"aaaaaaaaaaaa"})
    left = set(
        _q(
            clickhouse_server,
            url,
            f"SELECT name FROM system.tables WHERE database = currentDatabase() AND startsWith(name, '{STAGE_PREFIX}')",
        )
    )
    assert left == {names["live"], names["other_table"]}
    for name in left:  # the server is shared with other tests, which count stage tables
        target.execute(f"DROP TABLE `{name}`")


def test_embedded_directory_in_use_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _make_files(data, files=40, rows=40_000)
    db = tmp_path / "db"
    load = subprocess.Popen(
        _chute("load", str(data), "-t", "ev", "--target", str(db), "--batch-mb", "1", "--quiet"),
        stderr=subprocess.PIPE,
        text=True,
    )
    lock = db / ".chute-lock"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (lock.exists() and b"loading" in lock.read_bytes()):
        time.sleep(0.02)
    assert load.poll() is None, "the load ended before the test could meet it"
    for args in (
        ("load", str(data), "-t", "ev", "--target", str(db)),
        ("query", "SELECT count() FROM ev", "--target", str(db)),
        ("status", "--target", str(db)),
    ):
        second = subprocess.run(_chute(*args), capture_output=True, text=True, timeout=60)
        if load.poll() is not None:
            break  # the first load ended meanwhile: nothing to meet
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert f"is in use by chute pid {load.pid} (loading ev since " in lines[0], lines[0]
        assert lines[0].endswith("try again when it ends")
    _, err = load.communicate(timeout=300)
    assert load.returncode == 0, err
    # After the load: the directory is free again.
    after = subprocess.run(
        _chute("query", "SELECT count() FROM ev", "--target", str(db)), capture_output=True, text=True
    )
    assert after.returncode == 0 and after.stdout.strip() == str(40 * 40_000), after.stderr


@pytest.mark.slow
def test_rows_that_went_in_after_the_lease_ended_are_taken_out_again(
    tmp_path: Path, clickhouse_server: ClickHouseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker A's ATTACH passes the claim check, then stalls on the wire past A's lease (A's
    heartbeat stalls too); worker B takes the file over, loads it and writes `done`; A's ATTACH
    lands after that. A then finds its claim gone: it takes its own rows out again and writes no
    `done`, so the table holds each row once and the ledger names B's load (found by a tester
    with a proxy that froze one worker's traffic at its first ATTACH)."""
    import chute
    from chute.load import LoadOptions

    data = tmp_path / "data"
    _make_files(data, files=3, rows=ROWS)
    url = _fresh(clickhouse_server, "attached_late")
    monkeypatch.setattr(Claims, "_renew", lambda self: None)  # A's heartbeat stalls with its traffic
    original = Stage._move_in
    stalled: list[subprocess.CompletedProcess[str]] = []
    first = threading.Lock()

    def late(self: Stage, counts: dict[str, int]) -> dict[str, int]:
        if self.target is not None and self.target.table == "ev" and first.acquire(blocking=False):
            # Worker B, while A's ATTACH is on its way: it waits out A's leases, then loads.
            stalled.append(subprocess.run(_load(data, url), capture_output=True, text=True, timeout=300))
        return original(self, counts)

    monkeypatch.setattr(Stage, "_move_in", late)
    report = chute.load([str(data)], "ev", target=url, options=LoadOptions(lease_seconds=3, batch_files=1))
    assert stalled and stalled[0].returncode == 0, stalled[0].stderr if stalled else "B never ran"
    assert json.loads(stalled[0].stdout)["rows_loaded"] >= ROWS  # (A's other lane may hold a file B waits out)
    _assert_exactly_once(clickhouse_server, url, files=3)
    assert any("went in late" in n and "taken out again" in n for n in report.notes), report.notes
    # Each file's rows are one load's, the one the ledger's `done` names.
    held = _q(clickhouse_server, url, "SELECT _source, any(_load_id), uniqExact(_load_id) FROM ev GROUP BY _source")
    said = _q(
        clickhouse_server,
        url,
        f"SELECT unit, argMax(load_id, seq), 1 FROM {LEDGER_TABLE} WHERE state = 'done' GROUP BY unit",
    )
    assert sorted(zip(*[iter(held)] * 3, strict=True)) == sorted(zip(*[iter(said)] * 3, strict=True))
