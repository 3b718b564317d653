"""http(s):// sources against a real web server on loopback (http.server, threaded).

The server sends what real ones do: Content-Length, ETag and Last-Modified (or,
under /bare/, neither of the two), answers HEAD and byte ranges, and asks for a
password under /private/.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chute
from chute.cli import main
from chute.engine import open_engine
from chute.errors import SourceError
from chute.sources import SourceOptions, open_source
from chute.sources.url import UrlSource

from ..harness.data import kill_trials, table_checksum
from ..harness.web import FILES, PASSWORD, ROWS, USER, WebServer, write_json_gz

CHECKSUM = "SELECT count() AS n, sum(cityHash64(id, f, r, name, _source, _source_row, _source_mtime)) AS h FROM t"


def _urls(web: WebServer, directory: str, numbers: range) -> list[str]:
    return [f"{web.base}/{directory}/part-{i:03d}.json.gz" for i in numbers]


def test_units_from_head_requests(web: WebServer) -> None:
    write_json_gz(web.root / "bare" / "part-000.json.gz", 0, rows=10)
    source = open_source(
        [f"{web.base}/data/part-00{{1,2}}.json.gz", f"{web.base}/bare/part-000.json.gz"], SourceOptions()
    )
    first, second, bare = source.units()
    assert first.key == f"{web.base}/data/part-001.json.gz" and second.key.endswith("part-002.json.gz")
    size = (web.root / "data" / "part-001.json.gz").stat().st_size
    assert first.size == size and first.etag and first.mtime_ns > 0
    assert first.identity == f"{size}:{first.etag}"
    # Neither ETag nor Last-Modified: the size alone is the identity.
    assert (bare.etag, bare.mtime_ns) == ("", 0)
    assert source.unchanged(bare)

    for urls, message in [
        ([f"{web.base}/data/missing.json.gz"], r"/data/missing\.json\.gz: not found \(HTTP 404\)$"),
        ([f"{web.base}/data/part-000.json.gz", "/tmp/x.json"], "one kind of source per load"),
    ]:
        with pytest.raises(chute.ChuteError, match=message):
            open_source(urls, SourceOptions()).units()


def test_full_load_rerun_and_delta(web: WebServer, target: str) -> None:
    urls = _urls(web, "data", range(30))
    report = chute.load(urls, "t", target)
    assert (report.files_loaded, report.rows_loaded, report.ok) == (30, 30 * ROWS, True)
    engine = open_engine(target)
    ids = sum(range(30 * ROWS))
    assert engine.rows("SELECT count() AS n, sum(id) AS s FROM t") == [{"n": 30 * ROWS, "s": ids}]
    # Each row names its URL and line.
    assert engine.rows(
        f"SELECT countIf(_source != concat('{web.base}/data/part-', leftPad(toString(f), 3, '0'), '.json.gz')) AS s, "
        "countIf(_source_row != r) AS r, countIf(toYear(_source_mtime) < 2020) AS m FROM t"
    ) == [{"s": 0, "r": 0, "m": 0}]

    again = chute.load(urls, "t", target)
    assert (again.files_loaded, again.files_skipped, again.rows_loaded) == (0, 30, 0)

    delta = chute.load(_urls(web, "data", range(FILES)), "t", target)
    assert (delta.files_loaded, delta.files_skipped, delta.rows_loaded) == (FILES - 30, 30, (FILES - 30) * ROWS)
    assert engine.rows("SELECT count() AS n, uniqExact(_source) AS u FROM t") == [{"n": FILES * ROWS, "u": FILES}]


def test_changed_url_is_seen_by_etag(web: WebServer, target: str) -> None:
    path = web.root / "changing" / "part-000.json.gz"
    write_json_gz(path, 0, rows=100)
    url = f"{web.base}/changing/part-000.json.gz"
    assert chute.load(url, "c", target).rows_loaded == 100
    write_json_gz(path, 0, rows=101)
    skipped = chute.load(url, "c", target)
    assert skipped.rows_loaded == 0 and "changed since it was loaded" in skipped.notes[0]
    reloaded = chute.load(url, "c", target, chute.LoadOptions(on_change="reload"))
    assert reloaded.rows_loaded == 101
    assert open_engine(target).rows("SELECT count() AS n FROM c") == [{"n": 101}]


def test_password_in_the_url(web: WebServer, target: str, capsys: pytest.CaptureFixture[str]) -> None:
    write_json_gz(web.root / "private" / "part-000.json.gz", 0, rows=50)
    write_json_gz(web.root / "private" / "part-001.json.gz", 1, rows=50)
    good = [f"http://{USER}:{PASSWORD}@127.0.0.1:{web.server_address[1]}/private/part-00{i}.json.gz" for i in (0, 1)]
    source = UrlSource(good)
    units = source.units()
    assert [u.key for u in units] == [f"{web.base}/private/part-00{i}.json.gz" for i in (0, 1)]
    sql = [source.table_expression(units[0], "id Int64"), *source.combined_expression(units, "id Int64")[0:1]]  # type: ignore[index]
    assert all(PASSWORD not in s and "headers('Authorization'" in s for s in sql)

    (web.root / "private" / "broken.json.gz").write_bytes(b"\x1f\x8b not gzip at all")
    broken = good[0].replace("part-000", "broken")
    report = chute.load([*good, broken], "p", target)
    assert (report.files_loaded, report.rows_loaded, report.files_failed) == (2, 100, 1)
    # The engine's error for the broken file, the ledger and _source hold no password.
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    failed = next(f for f in report.files if f.state == "failed")
    assert failed.source == f"{web.base}/private/broken.json.gz"
    assert failed.error and PASSWORD not in failed.error and token not in failed.error
    engine = open_engine(target)
    assert engine.rows("SELECT arraySort(groupUniqArray(toString(_source))) AS s FROM p") == [
        {"s": [u.key for u in units]}
    ]
    ledger = repr(engine.rows("SELECT * FROM _chute_ledger"))
    assert "broken.json.gz" in ledger and PASSWORD not in ledger and token not in ledger

    bad = [u.replace(PASSWORD, "wrong-Password-not-to-show") for u in good]
    code = main(["load", *bad, "--table", "p", "--target", target])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert "/private/part-00" in err and "access denied (HTTP 401)" in err
    assert "wrong-Password" not in err and PASSWORD not in err
    with pytest.raises(SourceError, match="access denied"):
        UrlSource([f"{web.base}/private/part-000.json.gz"]).units()


def _command(urls: list[str], db: Path) -> list[str]:
    return [sys.executable, "-m", "chute.cli", "load", *urls, "--table", "t", "--target", str(db), "--batch-mb", "1"]


def _checksum(db: Path) -> tuple[int, int]:
    return table_checksum(db, CHECKSUM)


@pytest.mark.slow
def test_sigkill_during_a_load_then_rerun(web: WebServer, tmp_path: Path) -> None:
    urls = _urls(web, "data", range(FILES))
    clean = tmp_path / "clean"
    t0 = time.monotonic()
    subprocess.run([*_command(urls, clean), "--quiet"], check=True)
    full = time.monotonic() - t0
    expected = _checksum(clean)
    assert expected[0] == FILES * ROWS
    t0 = time.monotonic()
    subprocess.run([*_command(urls, clean), "--quiet"], check=True)
    idle = time.monotonic() - t0  # start-up and HEAD requests: kills aim past it
    assert _checksum(clean) == expected

    kills, partial = kill_trials(lambda db: [*_command(urls, db), "--quiet"], tmp_path, _checksum, expected, full, idle)
    print(f"clean load {full:.2f} s, idle run {idle:.2f} s; {kills} kills, {partial} left a partial table")
    assert kills >= 3
    assert partial >= 2, "kills did not land inside loads"


def test_a_url_whose_body_is_cut_each_time_fails_alone(web: WebServer, target: str) -> None:
    """JSON lines from two URLs, one of which closes its body half-way on every GET: the engine's
    network error (POCO "Unexpected EOF") counted as transient and ended the whole run, so the
    good URL never loaded and both stayed `started`. The cut one now fails alone, in seconds:
    every read tries 4 times (inference's took the engine's 10, 33 s each: 100 s in all)."""
    lines = "".join(f'{{"id": {i}, "v": "row {i}"}}\n' for i in range(20_000))
    for directory in ("cut", "plain"):
        (web.root / directory).mkdir(exist_ok=True)
        (web.root / directory / "d.jsonl").write_text(lines)
    cut, plain = f"{web.base}/cut/d.jsonl", f"{web.base}/plain/d.jsonl"
    started = time.monotonic()
    report = chute.load([cut, plain], "t", target)
    assert time.monotonic() - started < 60  # (6 s on two loaded cores; the engine's own tries: 100 s)
    states = {f.source: (f.state, f.rows_loaded) for f in report.files}
    assert states == {cut: ("failed", 0), plain: ("loaded", 20_000)}, [f.error for f in report.files]
    assert open_engine(target).rows("SELECT count() AS n FROM t") == [{"n": 20_000}]
