"""A thin HTTP layer to ClickHouse servers of any version (18.16 to current).

httpx does the protocol; this module adds ClickHouse's conventions: settings
as URL parameters, errors parsed into TargetError with the server's code, and
credentials that never appear in a message.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from chute.errors import TargetError, TransientTargetError, UsageError, make_target_error, parse_server_error
from chute.remote.http import http_client, retry

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
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
                raise UsageError("a server target looks like http(s)://[user[:password]@]host:port[/database]")
            scheme, host = parts.scheme, parts.hostname
            try:
                port = parts.port or DEFAULT_PORTS[scheme]
            except ValueError:
                raise UsageError("invalid port in the target URL") from None
            user = urllib.parse.unquote(parts.username) if parts.username else env.get("CLICKHOUSE_USER", "default")
            password = urllib.parse.unquote(parts.password) if parts.password is not None else None
            database = parts.path.strip("/") or env.get("CLICKHOUSE_DATABASE", "default")
        else:
            host = env.get("CLICKHOUSE_HOST", "")
            if not host:
                raise UsageError("no server given: pass --target http(s)://host:port or set CLICKHOUSE_HOST")
            secure = env.get("CLICKHOUSE_SECURE", "").lower() in ("1", "true", "yes")
            scheme = "https" if secure else "http"
            port = int(env.get("CLICKHOUSE_PORT") or DEFAULT_PORTS[scheme])
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


class HttpClient:
    """Statements and inserts over ClickHouse's HTTP interface."""

    def __init__(self, address: ServerAddress, verify_tls: bool = True, timeout: float = 300.0) -> None:
        self.address = address
        self._client = http_client(
            base_url=address.base_url,
            auth=httpx.BasicAuth(address.user, address.password),
            verify=verify_tls,
            timeout=httpx.Timeout(timeout, connect=10.0),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
        )
        self.requests = 0
        """Requests sent so far (each a round trip to the server), tries included."""
        self._requests_lock = threading.Lock()

    def close(self) -> None:
        self._client.close()

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

    def _send(
        self,
        content: bytes | Iterable[bytes],
        params: dict[str, str],
        context: str,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        with self._requests_lock:
            self.requests += 1
        try:
            response = self._client.post("", params=params, content=content, headers=headers)
        except httpx.TimeoutException as exc:
            raise TransientTargetError(self._scrub(f"{context}: {self.address.display}: timed out ({exc})")) from None
        except (httpx.TransportError, OSError) as exc:
            reason = str(exc) or type(exc).__name__
            raise TransientTargetError(
                self._scrub(f"{context}: cannot reach {self.address.display}: {reason}")
            ) from None
        if response.status_code != 200:
            code, name, message = parse_server_error(response.text)
            if code is None:
                message = f"HTTP {response.status_code}: {message[:300]}"
            error = make_target_error(code, name, self._scrub(message), context)
            if code is None and response.status_code >= 500:
                raise TransientTargetError(str(error)) from None
            raise error
        return response

    def query(self, sql: str, settings: Mapping[str, str | int | float] | None = None, context: str = "") -> str:
        response = self._send(sql.encode(), self._params(settings), context or "server query")
        return response.text

    def rows(
        self, sql: str, settings: Mapping[str, str | int | float] | None = None, context: str = ""
    ) -> list[dict[str, Any]]:
        text = self.query(sql + " FORMAT JSONEachRow", settings, context)
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def insert(
        self,
        statement: str,
        body: Iterable[bytes],
        settings: Mapping[str, str | int | float] | None = None,
        context: str = "",
        native_compressed: bool = False,
        content_encoding: str | None = None,
    ) -> None:
        """Stream `body` into `statement` (an INSERT ... FORMAT X)."""
        params = self._params(settings, query=statement)
        if native_compressed:
            params["decompress"] = "1"
        headers = {"Content-Encoding": content_encoding} if content_encoding else None
        self._send(body, params, context or "insert", headers=headers)


def check_connection(client: HttpClient, attempts: int = 3, backoff: float = 0.25) -> str:
    """The server's version, or a one-line error saying why not.

    Tried `attempts` times (a dropped connection passes), quickly: a wrong port
    should not keep the user waiting long.
    """
    context = f"connecting to {client.address.display}"
    try:
        return retry(
            lambda _: client.query("SELECT version()", context=context).strip(),
            attempts,
            backoff,
            lambda exc: isinstance(exc, TransientTargetError),
        )
    except TransientTargetError as exc:
        raise TargetError(str(exc)) from None
