"""The loopback HTTP server through which the engine reads bytes this process holds or points at
(chute.sources.ranges): byte ranges of local files, sent with `sendfile`, and blobs a callback gives.
Loaded on first use, with the standard library's HTTP server."""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import socketserver
import threading

from chute.sources.ranges import Blob, ByteRange, FileSlice


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._reply(body=False)

    def do_GET(self) -> None:
        self._reply(body=True)

    def _reply(self, body: bool) -> None:
        found = self.server.ranges.get(self.path.lstrip("/"))
        if found is None:
            self.send_error(404)
            return
        data: bytes | memoryview | None = None
        if isinstance(found, Blob):
            try:
                payload = found.provide()
            except Exception as exc:  # the engine sees a failed read and reports it
                self.send_error(503, explain=str(exc)[:500])
                return
            if isinstance(payload, FileSlice):
                found = ByteRange(payload.path, payload.start, payload.end)
            else:
                data = memoryview(payload)
                found = ByteRange("", 0, data.nbytes)
        item = found
        start, end = item.start, item.end
        status = 200
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if match:
            first = int(match.group(1))
            last = int(match.group(2)) if match.group(2) else end - start - 1
            start, end, status = item.start + first, min(item.end, item.start + last + 1), 206
        self.send_response(status)
        self.send_header("Content-Length", str(max(0, end - start)))
        self.send_header("Content-Type", "application/octet-stream")
        if status == 206:
            self.send_header(
                "Content-Range", f"bytes {start - item.start}-{end - item.start - 1}/{item.end - item.start}"
            )
        self.end_headers()
        if not body:
            return
        if data is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.connection.sendall(data[start:end])
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError), open(item.path, "rb") as fh:
            offset = start
            while offset < end:
                sent = os.sendfile(self.connection.fileno(), fh.fileno(), offset, min(end - offset, 1 << 24))
                if sent <= 0:
                    break
                offset += sent

    def handle(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    ranges: dict[str, ByteRange | Blob]


def start() -> ThreadingServer:
    """A server on 127.0.0.1 (a port of the system's choosing), serving from a thread of its own."""
    server = ThreadingServer(("127.0.0.1", 0), Handler)
    server.ranges = {}
    threading.Thread(target=server.serve_forever, name="chute-ranges", daemon=True).start()
    return server
