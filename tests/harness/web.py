"""A static HTTP file server on loopback (HEAD, GET, Range, ETag, Last-Modified,
Basic auth under /private/, bodies cut half-way under /cut/), for the URL source and server-side reads."""

from __future__ import annotations

import base64
import contextlib
import email.utils
import gzip
import json
import re
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from chute.engine import open_engine

from .data import write_with_engine

FILES = 40
ROWS = 25_000
USER, PASSWORD = "reader", "url-Pa55-that-must-not-show"


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
        if body and self.path.startswith("/cut/"):
            # A body cut half-way on every GET (full Content-Length, then the connection closes).
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
        elif body:
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


def write_json_gz(path: Path, number: int, rows: int = ROWS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (
        json.dumps({"id": number * rows + j, "f": number, "r": j + 1, "name": f"u{number}-{j}"}) for j in range(rows)
    )
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), 1))


def write_many(directory: Path, count: int) -> None:
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


@contextlib.contextmanager
def serving(root: Path) -> Iterator[WebServer]:
    """A static file server over `root`, with FILES data files under `data/`, while in the block."""
    write_many(root / "data", FILES)
    server = WebServer(root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
