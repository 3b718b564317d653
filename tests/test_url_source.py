"""http(s):// sources against a real web server on loopback (http.server, threaded).

The server sends what real ones do: Content-Length, ETag and Last-Modified (or,
under /bare/, neither of the two), answers HEAD and byte ranges, and asks for a
password under /private/.
"""

from __future__ import annotations

import base64
import email.utils
import gzip
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import chute
from chute.cli import main
from chute.engine import open_engine
from chute.errors import SourceError
from chute.sources import SourceOptions, open_source
from chute.sources.url import UrlSource

from .conftest import kill_trials, table_checksum, write_with_engine

FILES = 40
ROWS = 25_000
USER, PASSWORD = "reader", "url-Pa55-that-must-not-show"
CHECKSUM = "SELECT count() AS n, sum(cityHash64(id, f, r, name, _source, _source_row, _source_mtime)) AS h FROM t"


class FileHandler(BaseHTTPRequestHandler):
    """Serves `server.root` like a static file server: HEAD, GET, Range, ETag, Last-Modified."""

    protocol_version = "HTTP/1.1"
    server: WebServer

    def setup(self) -> None:
        super().setup()
        # As real servers do: headers and body are separate writes, which Nagle's
        # algorithm and delayed ACKs would otherwise hold back 40 ms each.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _answer(self, status: int, headers: dict[str, str], data: bytes = b"", body: bool = True) -> None:
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(data))}.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _serve(self, body: bool) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        self.server.requests.append((self.command, path))
        if path.startswith("/private/"):
            expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                self._answer(401, {"WWW-Authenticate": 'Basic realm="test"'}, b"who are you?", body)
                return
        file = self.server.root / path.lstrip("/")
        if ".." in path or not file.is_file():
            self._answer(404, {}, b"not found", body)
            return
        data = file.read_bytes()
        st = file.stat()
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        if not path.startswith("/bare/"):
            headers["ETag"] = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
            headers["Last-Modified"] = email.utils.formatdate(st.st_mtime, usegmt=True)
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if wanted and data:
            start = int(wanted.group(1))
            end = min(int(wanted.group(2) or len(data) - 1), len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            self._answer(206, headers, data[start : end + 1], body)
            return
        self._answer(200, headers, data, body)


class WebServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 drops parallel connects (a 1 s SYN retry)

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), FileHandler)
        self.root = root
        self.requests: list[tuple[str, str]] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def _write(path: Path, number: int, rows: int = ROWS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (
        json.dumps({"id": number * rows + j, "f": number, "r": j + 1, "name": f"u{number}-{j}"}) for j in range(rows)
    )
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), 1))


def _write_many(directory: Path, count: int) -> None:
    """`count` gzip JSON-lines files of ROWS rows, written by the engine (fast)."""
    directory.mkdir(parents=True, exist_ok=True)
    engine = open_engine(":memory:")
    for i in range(count):
        select = (
            f"SELECT {i * ROWS} + number AS id, {i} AS f, number + 1 AS r, concat('u{i}-', toString(number)) AS name "
            f"FROM numbers({ROWS})"
        )
        write_with_engine(engine, directory / f"part-{i:03d}.json.gz", "JSONEachRow", select, "gzip")
    engine.close()


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    root = tmp_path_factory.mktemp("www")
    _write_many(root / "data", FILES)
    server = WebServer(root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _urls(web: WebServer, directory: str, numbers: range) -> list[str]:
    return [f"{web.base}/{directory}/part-{i:03d}.json.gz" for i in numbers]


def test_units_from_head_requests(web: WebServer) -> None:
    _write(web.root / "bare" / "part-000.json.gz", 0, rows=10)
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
    _write(path, 0, rows=100)
    url = f"{web.base}/changing/part-000.json.gz"
    assert chute.load(url, "c", target).rows_loaded == 100
    _write(path, 0, rows=101)
    skipped = chute.load(url, "c", target)
    assert skipped.rows_loaded == 0 and "changed since it was loaded" in skipped.notes[0]
    reloaded = chute.load(url, "c", target, chute.LoadOptions(on_change="reload"))
    assert reloaded.rows_loaded == 101
    assert open_engine(target).rows("SELECT count() AS n FROM c") == [{"n": 101}]


def test_password_in_the_url(web: WebServer, target: str, capsys: pytest.CaptureFixture[str]) -> None:
    _write(web.root / "private" / "part-000.json.gz", 0, rows=50)
    _write(web.root / "private" / "part-001.json.gz", 1, rows=50)
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
