"""s3:// sources against a real S3 server (versitygw on loopback, tests/harness/extservers.py).

Objects are gzip JSON lines whose rows carry their object number `f` and line
number `r`, so provenance (`_source`, `_source_row`) is checked row by row.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import chute
from chute.capabilities import Capabilities
from chute.cli import main
from chute.engine import open_engine
from chute.errors import SourceError
from chute.load.methods import server_side_select
from chute.schema import PROVENANCE_NAMES, table_columns
from chute.sources import SourceOptions, open_source
from chute.sources.s3 import S3Source
from chute.sql import TableName, quote_ident, quote_str
from chute.units import Unit

from ..harness.data import kill_trials, table_checksum
from ..harness.extservers import S3Server, running
from ..harness.servers import server_query

OBJECTS = 300
ROWS = 500
CHECKSUM = (
    "SELECT count() AS n, sum(cityHash64(id, f, r, name, score, _source, _source_row, _source_mtime)) AS h FROM t"
)
SECRET_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
)


def _rows(number: int, rows: int = ROWS) -> bytes:
    lines = (
        json.dumps({"id": number * rows + j, "f": number, "r": j + 1, "name": f"obj {number} row {j}", "score": j / 8})
        for j in range(rows)
    )
    return gzip.compress(("\n".join(lines) + "\n").encode(), 1)


def _put(s3: S3Server, prefix: str, numbers: range) -> None:
    for i in numbers:
        s3.put_object(f"{prefix}/part-{i:04d}.json.gz", _rows(i))


def _expected(numbers: range) -> tuple[int, int]:
    """(rows, sum of ids) of objects `numbers`."""
    ids = [i * ROWS + j for i in numbers for j in range(ROWS)]
    return len(ids), sum(ids)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running(S3Server) as server:
        _put(server, "data", range(OBJECTS))
        server.put_object("data/_SUCCESS", b"")
        server.put_object("data/notes.txt", b"not data")
        yield server


@pytest.fixture()
def aws_env(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The S3 server's credentials in the environment, as a user would set them."""
    for name in SECRET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key)
    return {**os.environ}


def _options(s3: S3Server, **kwargs: object) -> chute.LoadOptions:
    return chute.LoadOptions(s3_endpoint=s3.endpoint, **kwargs)  # type: ignore[arg-type]


def test_endpoints_and_engine_calls(s3: S3Server, target: str) -> None:
    aws = S3Source(["s3://logs/x/"], env={"AWS_REGION": "eu-west-1"})
    assert aws.object_url("logs", "a b/c.csv") == "https://logs.s3.eu-west-1.amazonaws.com/a%20b/c.csv"
    assert aws.object_url("my.logs", "c.csv") == "https://s3.eu-west-1.amazonaws.com/my.logs/c.csv"
    custom = S3Source(["s3://logs/x/"], env={"AWS_ENDPOINT_URL": "http://minio:9000/"})
    assert custom.object_url("logs", "c.csv") == "http://minio:9000/logs/c.csv"
    with pytest.raises(chute.ChuteError, match="--s3-endpoint"):
        S3Source(["s3://logs/x/"], endpoint="minio:9000")

    # Without credentials the engine reads anonymously (NOSIGN); it parses the call
    # and asks the server, which refuses.
    anonymous = S3Source(["s3://chute-test/data/part-0001.json.gz"], endpoint=s3.endpoint, env={})
    keys = {"AWS_ACCESS_KEY_ID": s3.access_key, "AWS_SECRET_ACCESS_KEY": s3.secret_key}
    unit = S3Source(["s3://chute-test/data/part-0001.json.gz"], endpoint=s3.endpoint, env=keys).units()[0]
    call = anonymous.table_expression(unit, "id Int64")
    assert call == f"s3('{s3.url('data/part-0001.json.gz')}', NOSIGN, 'JSONEachRow', 'id Int64', 'gzip')"
    with pytest.raises(chute.ChuteError, match="403"):
        open_engine(target).rows(f"SELECT count() FROM {call}")


def test_listing_pages_patterns_and_errors(s3: S3Server, aws_env: dict[str, str]) -> None:
    source = S3Source(["s3://chute-test/data/"], endpoint=s3.endpoint)
    source.page_size = 70  # five pages with continuation tokens
    units = source.units()
    assert len(units) == OBJECTS  # _SUCCESS and notes.txt are not data
    first = units[0]
    assert first.key == "s3://chute-test/data/part-0000.json.gz"
    assert first.etag and '"' not in first.etag and first.size > 0 and first.mtime_ns > 0
    assert first.identity == f"{first.size}:{first.etag}"

    def count(*patterns: str) -> int:
        return len(open_source(list(patterns), SourceOptions(s3_endpoint=s3.endpoint)).units())

    assert count("s3://chute-test/data/part-00{1,2}?.json.gz") == 20
    assert count("s3://chute-test/d*/**/part-02[0-4]*.json.gz") == 50
    assert count("s3://chute-test/data") == OBJECTS  # a "directory"
    assert count("s3://chute-test/data/part-0007.json.gz", "s3://chute-test/data/part-000*") == 10
    for pattern, message in [
        ("s3://no-such-bucket/x/", "s3://no-such-bucket: no such bucket"),
        ("s3://chute-test/nothing/", "s3://chute-test/nothing/: no object under this prefix"),
        ("s3://chute-test/data/*.csv", "s3://chute-test/data/*.csv: no object matches"),
        ("s3://chute-test/data/part-9999.json.gz", "s3://chute-test/data/part-9999.json.gz: no such object"),
    ]:
        with pytest.raises(SourceError, match="^" + message.replace("*", r"\*").replace(".", r"\.")):
            open_source([pattern], SourceOptions(s3_endpoint=s3.endpoint)).units()


def test_listing_tens_of_thousands(s3: S3Server, aws_env: dict[str, str]) -> None:
    """20,000 objects: 20 pages, each continued by its token, every key once and in order."""
    data = s3.root / "data" / s3.bucket / "many"
    data.mkdir()
    for i in range(20_000):  # made behind the server's back (fast); only the listing is measured
        (data / f"o-{i:05d}.csv").write_bytes(b"1\n")
    source = S3Source(["s3://chute-test/many/"], endpoint=s3.endpoint)
    t0 = time.monotonic()
    units = source.units()
    seconds = time.monotonic() - t0
    assert [u.key for u in units] == [f"s3://chute-test/many/o-{i:05d}.csv" for i in range(20_000)]
    assert all(u.size == 2 for u in units)
    print(f"listed 20,000 objects in {seconds:.2f} s")
    assert seconds < 30, seconds


def test_full_load_rerun_and_delta(s3: S3Server, aws_env: dict[str, str], target: str) -> None:
    _put(s3, "grow", range(40))
    report = chute.load("s3://chute-test/grow/", "t", target, _options(s3))
    assert (report.files_loaded, report.rows_loaded, report.ok) == (40, 40 * ROWS, True)
    engine = open_engine(target)
    n, ids = _expected(range(40))
    assert engine.rows("SELECT count() AS n, sum(id) AS s FROM t") == [{"n": n, "s": ids}]
    # Provenance per row: the object and line each row came from.
    assert engine.rows(
        "SELECT countIf(_source != concat('s3://chute-test/grow/part-', leftPad(toString(f), 4, '0'), '.json.gz')) "
        "AS bad_source, countIf(_source_row != r) AS bad_row, countIf(_source_mtime < now() - 3600) AS old FROM t"
    ) == [{"bad_source": 0, "bad_row": 0, "old": 0}]

    again = chute.load("s3://chute-test/grow/", "t", target, _options(s3))
    assert (again.files_loaded, again.files_skipped, again.rows_loaded) == (0, 40, 0)

    _put(s3, "grow", range(40, 55))
    delta = chute.load("s3://chute-test/grow/", "t", target, _options(s3))
    assert (delta.files_loaded, delta.files_skipped, delta.rows_loaded) == (15, 40, 15 * ROWS)
    n, ids = _expected(range(55))
    assert engine.rows("SELECT count() AS n, sum(id) AS s, uniqExact(_source) AS u FROM t") == [
        {"n": n, "s": ids, "u": 55}
    ]

    # A rewritten object has a new ETag: skipped with a note, or reloaded as one copy.
    s3.put_object("grow/part-0003.json.gz", _rows(3, rows=ROWS + 1))
    skipped = chute.load("s3://chute-test/grow/", "t", target, _options(s3))
    assert skipped.rows_loaded == 0
    assert any("part-0003.json.gz: changed since it was loaded" in note for note in skipped.notes)
    reloaded = chute.load("s3://chute-test/grow/", "t", target, _options(s3, on_change="reload"))
    assert (reloaded.files_loaded, reloaded.rows_loaded) == (1, ROWS + 1)
    assert engine.rows("SELECT count() AS n FROM t")[0]["n"] == n + 1


def test_parquet_objects_in_nested_prefixes(s3: S3Server, aws_env: dict[str, str], target: str) -> None:
    engine = open_engine(target)
    for day in range(3):
        url = s3.url(f"pq/day={day}/part.parquet")
        engine.execute(
            f"INSERT INTO FUNCTION s3('{url}', 'Parquet') "
            f"SELECT number AS id, toDate('2024-01-01') + {day} AS d, repeat('x', number % 50) AS s "
            f"FROM numbers({day * 100_000}, 100_000)"
        )
    report = chute.load("s3://chute-test/pq/**/*.parquet", "events", target, _options(s3))
    assert (report.files_loaded, report.rows_loaded) == (3, 300_000)
    assert engine.rows(
        "SELECT count() AS n, sum(id) AS s, uniqExact(_source) AS u, max(_source_row) AS m FROM events"
    ) == [{"n": 300_000, "s": sum(range(300_000)), "u": 3, "m": 100_000}]


def test_secrets_stay_out_of_sql_and_engine_errors(s3: S3Server, aws_env: dict[str, str], target: str) -> None:
    s3.put_object("broken/good.json.gz", _rows(0, rows=10))
    s3.put_object("broken/bad.json.gz", b"\x1f\x8b not really gzip")
    source = S3Source(["s3://chute-test/broken/"], endpoint=s3.endpoint)
    units = source.units()
    sql = [source.table_expression(u, "id Int64", "JSONEachRow") for u in units]
    combined = source.combined_expression(units, "id Int64")
    assert combined is not None
    sql.append(combined[0])
    assert not any(s3.secret_key in text or s3.access_key in text for text in sql)

    report = chute.load("s3://chute-test/broken/", "b", target, _options(s3))
    failed = [f for f in report.files if f.state == "failed"]
    assert [f.source for f in failed] == ["s3://chute-test/broken/bad.json.gz"]
    assert s3.secret_key not in failed[0].error
    assert "\n" not in failed[0].error
    assert report.rows_loaded == 10


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AWS_SECRET_ACCESS_KEY": "wrong-Secret-that-must-not-show"}, "SignatureDoesNotMatch"),
        ({"AWS_ACCESS_KEY_ID": "nobody"}, "access denied"),
        ({"AWS_SESSION_TOKEN": "session-Token-that-must-not-show"}, "AWS_SESSION_TOKEN"),
        ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "no credentials given"),
    ],
)
def test_bad_credentials_give_one_line_without_the_secret(
    s3: S3Server,
    aws_env: dict[str, str],
    target: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    expected: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = main(["load", "s3://chute-test/data/", "--table", "t", "--target", target, "--s3-endpoint", s3.endpoint])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("chute: error: s3://chute-test/data/: access denied"), err
    assert expected in err
    for secret in [*env.values(), s3.secret_key]:
        assert not secret or secret not in err


def _command(endpoint: str, db: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "chute.cli",
        "load",
        "s3://chute-test/data/",
        "--table",
        "t",
        "--target",
        str(db),
        "--s3-endpoint",
        endpoint,
        "--batch-mb",
        "1",
        "--batch-files",  # several batches, so that a kill can land between two of them
        "2",
        "--quiet",
    ]


def _checksum(db: Path) -> tuple[int, int]:
    return table_checksum(db, CHECKSUM)


@pytest.mark.slow
def test_sigkill_during_a_load_then_rerun(s3: S3Server, aws_env: dict[str, str], tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    t0 = time.monotonic()
    subprocess.run(_command(s3.endpoint, clean), check=True, env=aws_env)
    full = time.monotonic() - t0
    expected = _checksum(clean)
    assert expected[0] == OBJECTS * ROWS
    # A run with nothing to load: start-up and listing; kills aim past it, into the load.
    t0 = time.monotonic()
    subprocess.run(_command(s3.endpoint, clean), check=True, env=aws_env)
    idle = time.monotonic() - t0
    assert _checksum(clean) == expected

    kills, partial = kill_trials(
        lambda db: _command(s3.endpoint, db), tmp_path, _checksum, expected, full, idle, env=aws_env
    )
    print(f"clean load {full:.2f} s, idle run {idle:.2f} s; {kills} kills, {partial} left a partial table")
    assert kills >= 3
    assert partial >= 2, "kills did not land inside loads"


def test_load_into_a_server_target(s3: S3Server, aws_env: dict[str, str], server_url: str) -> None:
    """The embedded engine reads the objects and sends Native to the server (18.16 here)."""
    _put(s3, "to-server", range(12))
    report = chute.load("s3://chute-test/to-server/*.json.gz", "t", server_url, _options(s3))
    assert (report.files_loaded, report.rows_loaded, report.table_rows) == (12, 12 * ROWS, 12 * ROWS)
    again = chute.load("s3://chute-test/to-server/*.json.gz", "t", server_url, _options(s3))
    assert again.rows_loaded == 0


# --- the server-side path: the server reads objects itself with s3() / s3Cluster() --------------

SERVER_CHECKSUM = (
    "SELECT count() AS n, sum(cityHash64(id, f, r, name, score, _source, _source_row, _source_mtime)) AS h, "
    "countIf(_source_row != r) AS bad_row, any(_load_id) AS load_id FROM {}"
)


def _csv_rows(number: int, rows: int = ROWS) -> bytes:
    lines = [
        "id,f,r,name,score",
        *(f"{number * rows + j},{number},{j + 1},obj {number} row {j},{j / 8}" for j in range(rows)),
    ]
    return ("\n".join(lines) + "\n").encode()


def test_server_side_sql_runs_in_the_engine(s3: S3Server, aws_env: dict[str, str], target: str) -> None:
    """The SELECT a server would run (s3() with keys, provenance filled by it) gives, run in
    the embedded engine, the same table as a normal load of the same objects."""
    _put(s3, "ss", range(3))  # gzip JSON lines: s3() with its compression argument
    s3.put_object("ss/part-0003.csv", _csv_rows(3))  # a header line: CSVWithNames, no compression
    report = chute.load("s3://chute-test/ss/", "t", target, _options(s3))
    assert (report.files_loaded, report.rows_loaded) == (4, 4 * ROWS)

    engine = open_engine(target)
    engine.execute("CREATE TABLE u AS t")
    columns = table_columns(engine.rows, TableName.parse("t"))
    assert columns is not None
    inputs = [c for c in columns if c.name not in PROVENANCE_NAMES]
    types = {c.name: c.type for c in columns if c.name in PROVENANCE_NAMES}
    source = S3Source(["s3://chute-test/ss/"], endpoint=s3.endpoint)
    caps = Capabilities.for_version("24.8.4.13")
    for unit in source.units():
        fmt_name = "CSVWithNames" if unit.fmt.format == "CSV" else unit.fmt.format
        read = server_side_select(source, unit, fmt_name, inputs, caps, types, "server-side")
        assert read is not None and read.select.endswith(f"FROM {read.expression}")
        assert read.expression.startswith(f"s3({quote_str(s3.url(unit.key.split('/', 3)[3]))}, ")
        names = ", ".join(quote_ident(c.name) for c in columns)
        engine.execute(f"INSERT INTO u ({names}) {read.select}", {"max_threads": 1}, context=unit.key)

    got = engine.rows(SERVER_CHECKSUM.format("u"))[0]
    want = engine.rows(SERVER_CHECKSUM.format("t"))[0]
    assert (got["n"], got["h"], got["bad_row"]) == (want["n"], want["h"], 0)
    assert got["load_id"] == "server-side" != want["load_id"]

    # No server-side read where the server cannot take it: chute converts (and says why).
    unit = source.units()[0]
    for version, reason in [
        ("18.16.1", "server 18.16.1 has no s3() table function with keys (20.1+)"),
        ("22.10.2", "server 22.10.2 would keep the secret key in its query log (hidden from 22.11)"),
    ]:
        old = Capabilities.for_version(version)
        assert server_side_select(source, unit, "JSONEachRow", inputs, old, types) is None
        assert source.server_blocker(unit, old) == reason
    anonymous = S3Source(["s3://chute-test/ss/"], endpoint=s3.endpoint, env={})
    assert server_side_select(anonymous, unit, "JSONEachRow", inputs, caps, types) is None
    assert "no credentials" in str(anonymous.server_blocker(unit, caps))
    temporary = S3Source(["s3://chute-test/ss/"], endpoint=s3.endpoint, env={**aws_env, "AWS_SESSION_TOKEN": "tok"})
    assert "AWS_SESSION_TOKEN" in str(temporary.server_blocker(unit, caps))


def test_s3_into_an_old_server_converts_with_a_note(
    s3: S3Server, aws_env: dict[str, str], server_url: str, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """18.16 has no s3(): auto converts here (one note says why), rows right, no secret anywhere."""
    _put(s3, "old", range(5))
    report = chute.load("s3://chute-test/old/", "t", server_url, _options(s3))
    assert (report.files_loaded, report.rows_loaded, report.table_rows) == (5, 5 * ROWS, 5 * ROWS)
    assert report.bytes_sent > 0  # converted here and sent as Native
    assert [note for note in report.notes if "server cannot read" in note] == [
        "s3://chute-test: the server cannot read it itself (server 18.16.1 has no s3() table function "
        "with keys (20.1+)); converted here"
    ]
    n, ids = _expected(range(5))
    got = server_query(server_url, "SELECT count(), sum(id), countIf(_source_row != r) FROM t FORMAT TSV").split()
    assert got == [str(n), str(ids), "0"]
    assert s3.secret_key not in report.to_json()

    # Asked for explicitly, the server-side path fails each object, saying why, without the secret.
    asked = chute.load("s3://chute-test/old/part-0000.json.gz", "t2", server_url, _options(s3, method="server-side"))
    assert not asked.ok and "has no s3() table function" in asked.files[0].error
    assert s3.secret_key not in asked.to_json()

    # --cluster: one line, before anything is written.
    for args, message in [
        (["--target", server_url], "chute: error: --cluster: server 18.16"),
        (["--target", target], "chute: error: --cluster needs a server target"),
        (["--target", server_url, "--method", "convert"], "chute: error: --cluster reads on the server's nodes"),
    ]:
        code = main(
            ["load", "s3://chute-test/old/", "--table", "c", "--s3-endpoint", s3.endpoint, "--cluster", "x", *args]
        )
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and err.startswith(message), err
        assert s3.secret_key not in err
    assert "c" not in server_query(server_url, "SHOW TABLES FORMAT TSV").split()


def test_a_key_the_engine_takes_for_a_pattern_fails_alone(s3: S3Server, aws_env: dict[str, str], target: str) -> None:
    """One key holding `[1]` refused the whole prefix; now that object fails and the rest load."""
    _put(s3, "globkey", range(3))
    s3.put_object("globkey/br[1].json.gz", _rows(7))
    report = chute.load("s3://chute-test/globkey/", "t", target, _options(s3))
    assert (report.files_loaded, report.files_failed, report.rows_loaded) == (3, 1, 3 * ROWS)
    failed = [f for f in report.files if f.state == "failed"]
    assert "br[1].json.gz: keys with * ? [ ] { } cannot be read by the engine" in failed[0].error


def test_an_object_deleted_after_listing_fails_alone_in_one_line(
    s3: S3Server, aws_env: dict[str, str], target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's 404 text was the message; now the object fails alone, saying it went away."""
    _put(s3, "gone", range(3))
    listed = S3Source.units

    def units_then_delete(self: S3Source) -> list[Unit]:
        found = listed(self)
        status = s3.request("DELETE", f"/{s3.bucket}/gone/part-0001.json.gz")[0]
        assert status in (200, 204)
        return found

    monkeypatch.setattr(S3Source, "units", units_then_delete)
    report = chute.load("s3://chute-test/gone/", "t", target, _options(s3))
    assert (report.files_loaded, report.files_failed, report.rows_loaded) == (2, 1, 2 * ROWS)
    failed = next(f for f in report.files if f.state == "failed")
    assert (
        failed.error
        == "s3://chute-test/gone/part-0001.json.gz: changed or removed during the load; run again to load it"
    )
