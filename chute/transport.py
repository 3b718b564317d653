"""A thin HTTP layer to ClickHouse servers of any version (18.16 to current).

The standard library's http.client does the protocol; this module adds
ClickHouse's conventions: settings as URL parameters, errors parsed into
TargetError with the server's code, and credentials that never appear in a message.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import itertools
import json
import os
import re
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from chute.errors import TargetError, TransientTargetError, UsageError, make_target_error, parse_server_error
from chute.nativecompress import NativeCompressor
from chute.remote.http import retry, tls_context

DEFAULT_PORTS = {"http": 8123, "https": 8443}


@dataclass(frozen=True)
class ServerAddress:
    """Where a server is and how to log in; `display` never holds the password."""

    scheme: str
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}/"

    @property
    def display(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{self.user}@{host}:{self.port}/{self.database}"

    @classmethod
    def parse(cls, url: str | None, password_file: str | None = None) -> ServerAddress:
        """From a URL, else the CLICKHOUSE_* environment variables.

        The password comes from the URL, else --password-file, else
        CLICKHOUSE_PASSWORD.
        """
        env = os.environ
        if url:
            try:
                parts = urllib.parse.urlsplit(url)
            except ValueError as exc:  # ("Invalid IPv6 URL": a bracket not closed)
                raise UsageError(f"invalid target URL: {exc}") from None
            if "@" in parts.path + parts.query + parts.fragment:
                # (a password's `/`, `?` or `#` ended the host part: the rest of it would be shown as a database)
                raise UsageError(
                    "the target URL has an '@' after its host part: a password holding '/', '?' or '#' must be "
                    "percent-encoded (%2F, %3F, %23), or given by --password-file or CLICKHOUSE_PASSWORD"
                )
            if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
                raise UsageError("a server target looks like http(s)://[user[:password]@]host:port[/database]")
            scheme, host = parts.scheme, parts.hostname
            try:
                port = parts.port or DEFAULT_PORTS[scheme]
            except ValueError:
                raise UsageError("invalid port in the target URL") from None
            user = urllib.parse.unquote(parts.username) if parts.username else env.get("CLICKHOUSE_USER", "default")
            password = urllib.parse.unquote(parts.password) if parts.password is not None else None
            database = urllib.parse.unquote(parts.path.strip("/")) or env.get("CLICKHOUSE_DATABASE", "default")
        else:
            host = env.get("CLICKHOUSE_HOST", "")
            if not host:
                raise UsageError("no server given: pass --target http(s)://host:port or set CLICKHOUSE_HOST")
            secure = env.get("CLICKHOUSE_SECURE", "").lower() in ("1", "true", "yes")
            scheme = "https" if secure else "http"
            given = env.get("CLICKHOUSE_PORT") or str(DEFAULT_PORTS[scheme])
            if not given.isdigit() or not 0 < int(given) < 65536:
                raise UsageError(f"CLICKHOUSE_PORT must be a port number (1-65535), not {given!r}")
            port = int(given)
            user = env.get("CLICKHOUSE_USER", "default")
            password = None
            database = env.get("CLICKHOUSE_DATABASE", "default")
        if password is None and password_file:
            try:
                with open(password_file, encoding="utf-8") as fh:
                    password = fh.read().rstrip("\r\n")
            except OSError as exc:
                raise UsageError(f"cannot read the password file {password_file}: {exc.strerror}") from None
        if password is None:
            password = env.get("CLICKHOUSE_PASSWORD", "")
        if "/" in database:
            raise UsageError(f"invalid database name in the target URL: {database!r}")
        return cls(scheme, host, port, user, password, database)


IDLE_SECONDS = 2.0
"""A kept-alive connection idle longer than this is closed, not used again: servers close
theirs after `keep_alive_timeout` (3 s by default on 18.16), and a request sent on a
connection the server is closing would fail."""
CONNECT_SECONDS = 10.0
STREAM_PIECE = 1 << 18
"""What `stream` hands on at a time (http.client's read1 gave nothing of an 18.16 chunked answer)."""


URL_STATEMENT_BYTES = 8192
"""An INSERT statement longer than this goes in the request body, before the data, not in the
URL: 18.16 answers a URL over 16 KiB with a bare HTTP 400 (a 2,000-column file's column list
is 50 KB), and proxies cut URLs shorter still."""
BIG_STATEMENT_BYTES = 64 * 1024
DEFAULT_MAX_QUERY_SIZE = 256 * 1024


def statement_limits(size: int) -> dict[str, int]:
    """Per-query limits raised for one of chute's statements of `size` bytes (a wide file's
    CREATE TABLE or column list runs past 18.16's 256 KiB and 50,000 AST elements); nothing
    for a small one. Every version knows these three settings; an AST element takes more
    than a byte of text, so the statement's size bounds them."""
    if size <= BIG_STATEMENT_BYTES:
        return {}
    return {
        "max_query_size": max(DEFAULT_MAX_QUERY_SIZE, 2 * size),
        "max_ast_elements": max(50_000, size),
        "max_expanded_ast_elements": max(500_000, size),
    }


def _readable(sock: socket.socket) -> bool:
    """Whether a socket has something to read (or was closed) right now. poll, not select:
    select() refuses descriptors past 1023, which a long-lived process (a scheduler's
    worker, a test run) reaches."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(0))


class HttpClient:
    """Statements and inserts over ClickHouse's HTTP interface.

    Built on the standard library's http.client with a small pool of kept-alive
    connections: a round trip costs ~0.3 ms of this process's CPU, where httpx took
    ~1.5 ms (measured on loopback), and a load makes hundreds of them.
    """

    def __init__(self, address: ServerAddress, verify_tls: bool = True, timeout: float = 300.0) -> None:
        self.address = address
        self._tls = tls_context(verify_tls) if address.scheme == "https" else None
        self._timeout = timeout
        token = base64.b64encode(f"{address.user}:{address.password}".encode()).decode()
        self._auth = f"Basic {token}"
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._pool_lock = threading.Lock()
        self.requests = 0
        """Requests sent so far (each a round trip to the server), tries included."""
        self._requests_lock = threading.Lock()

    def close(self) -> None:
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def _params(self, settings: Mapping[str, str | int | float] | None, query: str | None = None) -> dict[str, str]:
        params = {"database": self.address.database}
        if query is not None:
            params["query"] = query
        for key, value in (settings or {}).items():
            params[key] = str(value)
        return params

    def _scrub(self, text: str) -> str:
        pw = self.address.password
        return text.replace(pw, "***") if pw else text

    def _connection(self) -> http.client.HTTPConnection:
        """An idle connection that is still open, else a new one."""
        now = time.monotonic()
        while True:
            with self._pool_lock:
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            sock = conn.sock
            # Readable while idle means the server closed it (or sent something unasked).
            if now - since < IDLE_SECONDS and sock is not None and not _readable(sock):
                return conn
            conn.close()
        if self._tls is not None:
            return http.client.HTTPSConnection(
                self.address.host, self.address.port, timeout=CONNECT_SECONDS, context=self._tls, blocksize=1 << 20
            )
        return http.client.HTTPConnection(
            self.address.host, self.address.port, timeout=CONNECT_SECONDS, blocksize=1 << 20
        )

    def _send(
        self,
        content: bytes | Iterable[bytes],
        params: dict[str, str],
        context: str,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        with self._requests_lock:
            self.requests += 1
        url = "/?" + urllib.parse.urlencode(params)
        all_headers = {"Authorization": self._auth, **(headers or {})}
        conn = self._connection()
        try:
            if conn.sock is None:
                conn.connect()
                assert conn.sock is not None
                conn.sock.settimeout(self._timeout)
            # The server may have answered (a parse error early in a long body) and stopped
            # reading: its answer says more than the broken pipe.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.request("POST", url, body=content, headers=all_headers)
            response = conn.getresponse()
            text = response.read().decode("utf-8", errors="replace")
        except TimeoutError as exc:
            conn.close()
            raise TransientTargetError(self._scrub(f"{context}: {self.address.display}: timed out ({exc})")) from None
        except (http.client.HTTPException, OSError) as exc:
            conn.close()
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise TargetError(self._scrub(f"{context}: {self.address.display}: {exc.verify_message}")) from None
            reason = str(exc) or type(exc).__name__
            # ("connecting to URL" names the server already: not twice)
            said = "" if self.address.display in context else f"{context}: "
            if isinstance(exc, ssl.SSLError) and exc.reason == "WRONG_VERSION_NUMBER":
                # (https:// to a port that answers in plain HTTP: no retry changes that)
                raise UsageError(
                    self._scrub(
                        f"{said}{self.address.display}: the server does not speak TLS on this port; "
                        "give http://, or the port where it serves https (8443 by default)"
                    )
                ) from None
            raise TransientTargetError(self._scrub(f"{said}cannot reach {self.address.display}: {reason}")) from None
        except BaseException:
            conn.close()  # an error of the body's producer: the request is cut off
            raise
        if response.will_close:
            conn.close()
        else:
            with self._pool_lock:
                self._idle.append((conn, time.monotonic()))
        if response.status != 200:
            code, name, message = parse_server_error(text)
            if code is None:
                message = f"HTTP {response.status}: {message[:300]}"
            error = make_target_error(code, name, self._scrub(message), context)
            if code is None and response.status >= 500:
                raise TransientTargetError(str(error)) from None
            raise error
        return text

    def query(self, sql: str, settings: Mapping[str, str | int | float] | None = None, context: str = "") -> str:
        raised = {**statement_limits(len(sql)), **(settings or {})}
        return self._send(sql.encode(), self._params(raised), context or "server query")

    def rows(
        self, sql: str, settings: Mapping[str, str | int | float] | None = None, context: str = ""
    ) -> list[dict[str, Any]]:
        text = self.query(sql + " FORMAT JSONEachRow", settings, context)
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def stream(
        self, sql: str, settings: Mapping[str, str | int | float] | None = None, context: str = ""
    ) -> Iterator[bytes]:
        """A query's output as it comes, in pieces of STREAM_PIECE, not decoded (`compress=1`
        in `settings`: the server's compressed blocks, as an INSERT with `decompress=1` takes
        them). The connection is used for this one answer, then closed."""
        with self._requests_lock:
            self.requests += 1
        url = "/?" + urllib.parse.urlencode(self._params({**statement_limits(len(sql)), **(settings or {})}))
        conn = self._connection()
        context = context or "server query"
        try:
            if conn.sock is None:
                conn.connect()
                assert conn.sock is not None
                conn.sock.settimeout(self._timeout)
            conn.request("POST", url, body=sql.encode(), headers={"Authorization": self._auth})
            response = conn.getresponse()
            if response.status != 200:
                text = response.read().decode("utf-8", errors="replace")
                code, name, message = parse_server_error(text)
                if code is None:
                    message = f"HTTP {response.status}: {message[:300]}"
                raise make_target_error(code, name, self._scrub(message), context)
            while chunk := response.read(STREAM_PIECE):
                yield chunk
        except (http.client.HTTPException, OSError) as exc:
            reason = str(exc) or type(exc).__name__
            raise TransientTargetError(
                self._scrub(f"{context}: reading from {self.address.display}: {reason}")
            ) from None
        finally:
            conn.close()

    def insert(
        self,
        statement: str,
        body: Iterable[bytes],
        settings: Mapping[str, str | int | float] | None = None,
        context: str = "",
        native_compressed: bool = False,
        content_encoding: str | None = None,
        length: int | None = None,
    ) -> None:
        """Stream `body` into `statement` (an INSERT ... FORMAT X); `length`, where known, is
        sent as Content-Length (else the body goes chunked). A long statement goes first in the
        body (URL_STATEMENT_BYTES); a gzip body cannot hold it (18.16 reads one gzip member)."""
        if len(statement) > URL_STATEMENT_BYTES and content_encoding is None:
            head = statement.encode() + b"\n"
            if native_compressed:
                head = NativeCompressor().compress(head)  # (the server decompresses the whole body)
            body = itertools.chain([head], body)
            length = None if length is None else length + len(head)
            params = self._params({**statement_limits(len(statement) + URL_STATEMENT_BYTES), **(settings or {})})
        else:
            params = self._params(settings, query=statement)
        if native_compressed:
            params["decompress"] = "1"
        headers = {"Content-Encoding": content_encoding} if content_encoding else {}
        if length is not None:
            headers["Content-Length"] = str(length)
        self._send(body, params, context or "insert", headers=headers)


def check_connection(client: HttpClient, attempts: int = 3, backoff: float = 0.25) -> str:
    """The server's version, or a one-line error saying why not.

    Tried `attempts` times (a dropped connection passes), quickly: a wrong port
    should not keep the user waiting long. A server that still refuses stays a
    TransientTargetError: it may be restarting, and an orchestrator should try
    the load again later (so may a host whose name does not resolve yet, as a
    container's while it starts; a bad certificate or password is terminal).
    """
    context = f"connecting to {client.address.display}"
    try:
        return retry(
            lambda _: client.query("SELECT version()", context=context).strip(),
            attempts,
            backoff,
            lambda exc: isinstance(exc, TransientTargetError),
        )
    except TargetError as exc:
        # A 4xx answer that is no ClickHouse error: another program's port (the server's native
        # port, 9000, answers "Port 9000 is for clickhouse-client program"), not the HTTP one.
        if exc.code is None and re.search(r": HTTP 4\d\d\b", str(exc)):
            raise UsageError(f"{exc} (chute speaks HTTP: give the server's HTTP port, 8123 by default)") from None
        hint = AUTH_HINTS.get(exc.code or 0)
        if hint:
            raise type(exc)(f"{exc} ({hint})", code=exc.code, name=exc.name) from None
        raise


PASSWORD_HINT = (
    "the password: in the URL as user:password@, in a file (--password-file; chute copy: --from-password-file, "
    "--to-password-file), or CLICKHOUSE_PASSWORD"
)
AUTH_HINTS = {
    192: "the user: in the URL as http://user@host:port, or CLICKHOUSE_USER",
    193: PASSWORD_HINT,
    194: PASSWORD_HINT,
    516: "the user and " + PASSWORD_HINT.removeprefix("the "),
}
"""What a server's no to the user or password asks of the user: where chute takes them from."""
