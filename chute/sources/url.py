"""HTTP(S) URLs: each URL is one unit, read by the engine's url() function.

A HEAD request (or, where a server refuses HEAD, a one-byte ranged GET) gives
each URL its identity for the ledger:

- `ETag` and `Content-Length` when the server sends an ETag;
- else `Last-Modified` and `Content-Length`;
- else the size alone: such a URL counts as unchanged as long as its length is
  the same, so an edit that keeps the length is not seen.

`{a,b}` alternatives are expanded (one unit each); other glob characters are
not, since a web server has no listing. Credentials go in the URL
(`https://user:password@host/...`): chute strips them from the URL it names
the unit by (the ledger, `_source`, messages) and hands them to the engine as
an Authorization header, never inside the URL, so engine errors, which echo
URLs, cannot carry them. A token in the query string is part of the URL's name.
"""

from __future__ import annotations

import base64
import threading
import urllib.parse
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chute.capabilities import Capabilities
from chute.errors import SourceError, UsageError
from chute.formats import detect
from chute.remote.http import etag, http_client, http_date_ns, send_retrying
from chute.schema import Column
from chute.sources.base import (
    EngineRowNumbers,
    ServerReadable,
    SourceBase,
    common_directory,
    expand_braces,
    provenance_by_path,
    table_function,
)
from chute.sql import quote_str
from chute.units import Unit

if TYPE_CHECKING:  # httpx costs ~0.1 s to import: only the loads that speak HTTP import it
    import httpx

PROBES = 16
"""HEAD requests in flight while planning."""
RETRIES = 3
# Kept as they are in URLs given to the engine: what URLs may hold, minus url()'s
# pattern characters `{ } |` (and space, quotes), which are percent-encoded.
URL_SAFE = ":/?#[]@!$&'()*+,;=%~-._"
COMBINE_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/-._~%")


@dataclass(frozen=True)
class _Target:
    """One URL as chute reads it: the name without credentials, and how to reach it."""

    name: str  # the unit key: the URL without user:password@
    url: str  # the URL given to the engine and to HEAD requests (encoded, no credentials)
    authorization: str  # an Authorization header value, or ""


@dataclass(frozen=True)
class _Info:
    size: int
    etag: str
    mtime_ns: int
    final_url: str


def _strip_credentials(url: str) -> tuple[str, str, str]:
    """(url without user:password@, user, password)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, "", ""
    host = parts.netloc.rpartition("@")[2]
    clean = urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return clean, urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or "")


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


class UrlSource(SourceBase, EngineRowNumbers, ServerReadable):
    """Files on web servers, one unit per URL, read by the engine's url() function."""

    def __init__(
        self,
        patterns: list[str],
        format_override: str | None = None,
        compression_override: str | None = None,
    ) -> None:
        if not patterns:
            raise UsageError("no source given")
        self.patterns = patterns
        self.format_override = format_override
        self.compression_override = compression_override
        self._secrets: list[str] = []
        self.targets: dict[str, _Target] = {}
        for pattern in patterns:
            for url in expand_braces(pattern):
                target = self._target(url)
                self.targets.setdefault(target.name, target)
        self._read_url: dict[str, str] = {}
        """Where a redirect led (the engine follows none by default): name -> final URL."""
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None

    def _target(self, url: str) -> _Target:
        try:
            name, user, password = _strip_credentials(url)
        except ValueError as exc:  # ("Invalid IPv6 URL": a bracket not closed; the URL may hold a password)
            raise UsageError(f"an http(s) source URL is not valid ({exc})") from None
        parts = urllib.parse.urlsplit(name)
        try:
            parts.port  # noqa: B018 (read for its ValueError: a port that is no number, or out of range)
        except ValueError as exc:
            raise UsageError(f"{name}: not a valid URL ({exc})") from None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise UsageError(f"{name}: give an http(s)://host/path URL")
        authorization = ""
        if user or password:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            authorization = f"Basic {token}"
            self._secrets += [s for s in (password, urllib.parse.quote(password), token) if s]
        return _Target(name, urllib.parse.quote(name, safe=URL_SAFE), authorization)

    def scrub(self, text: str) -> str:
        """`text` without any password (for messages that may carry server or engine text)."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    # -- HTTP ---------------------------------------------------------------

    def _client(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._http is None:
                self._http = http_client(
                    timeout=httpx.Timeout(60.0, connect=10.0),
                    follow_redirects=True,
                    limits=httpx.Limits(max_connections=PROBES, max_keepalive_connections=PROBES),
                )
            return self._http

    def _request(self, method: str, target: _Target, extra: Mapping[str, str] | None = None) -> httpx.Response:
        import httpx

        headers = dict(extra or {})
        if target.authorization:
            headers["Authorization"] = target.authorization

        def once() -> httpx.Response:
            if method == "GET":  # a ranged probe: headers only, the body is not read
                with self._client().stream("GET", target.url, headers=headers) as response:
                    return response
            return self._client().request(method, target.url, headers=headers)

        try:
            return send_retrying(once, RETRIES)
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise SourceError(self.scrub(f"{target.name}: cannot reach the server: {reason}")) from None

    def _probe(self, target: _Target) -> _Info:
        """Size, ETag and time of a URL, without reading its body."""
        response = self._request("HEAD", target)
        length = response.headers.get("content-length")
        if response.status_code in (405, 501) or (response.status_code == 200 and length is None):
            response = self._request("GET", target, {"Range": "bytes=0-0"})
            total = response.headers.get("content-range", "").rpartition("/")[2]
            length = total if response.status_code == 206 else response.headers.get("content-length")
        status = response.status_code
        if status in (401, 403, 407):
            hint = "wrong user or password in the URL" if target.authorization else "give user:password@ in the URL"
            raise SourceError(self.scrub(f"{target.name}: access denied (HTTP {status}); {hint}"))
        if status == 404 or status == 410:
            raise SourceError(f"{target.name}: not found (HTTP {status})")
        if status not in (200, 206):
            reason = " ".join(response.reason_phrase.split())
            raise SourceError(self.scrub(f"{target.name}: the server answered HTTP {status} {reason}".rstrip()))
        if length is None or not length.strip().isdigit():
            raise SourceError(f"{target.name}: the server states no size (Content-Length); chute cannot track it")
        return _Info(
            int(length),
            etag(response.headers.get("etag")),
            http_date_ns(response.headers.get("last-modified")),
            str(response.url) if response.history else target.url,
        )

    # -- Source -------------------------------------------------------------

    def units(self) -> list[Unit]:
        targets = list(self.targets.values())
        with ThreadPoolExecutor(min(PROBES, len(targets))) as pool:
            infos = list(pool.map(self._probe, targets))
        units = []
        for target, info in zip(targets, infos, strict=True):
            if info.final_url != target.url:
                self._read_url[target.name] = info.final_url
            path = urllib.parse.urlsplit(target.name).path
            fmt = detect(urllib.parse.unquote(path) or target.name, self.format_override, self.compression_override)
            units.append(Unit(key=target.name, size=info.size, mtime_ns=info.mtime_ns, fmt=fmt, etag=info.etag))
        return units

    def _read(self, name: str) -> tuple[str, str]:
        """(URL, Authorization) the engine reads `name` with; credentials never leave
        the origin they were given for."""
        target = self.targets[name]
        url = self._read_url.get(name, target.url)
        authorization = target.authorization if _origin(url) == _origin(target.url) else ""
        return url, authorization

    @staticmethod
    def _call(url: str, authorization: str, fmt_name: str, structure: str | None, compression: str) -> str:
        headers = [f"headers('Authorization' = {quote_str(authorization)})"] if authorization else []
        return table_function("url", [quote_str(url)], fmt_name, structure, compression, headers)

    def server_blocker(self, unit: Unit, capabilities: Capabilities, cluster: str | None = None) -> str | None:
        """Why a server cannot be handed this URL to read itself; None when it can."""
        if cluster is not None:
            return "--cluster reads s3:// sources only, not URLs"
        if self._read(unit.key)[1]:
            return "credentials would travel in SQL and stay in the server's query log"
        if unit.fmt.compression != "none" and not capabilities.url_compression:
            return f"server {capabilities.version_text}'s url() takes no compression (21.1+)"
        return None

    def server_expression(
        self, unit: Unit, structure: str, fmt_name: str, capabilities: Capabilities, cluster: str | None = None
    ) -> str | None:
        """The url() call a ClickHouse server runs to read `unit` itself; None when
        `server_blocker` names a reason."""
        if self.server_blocker(unit, capabilities, cluster) is not None:
            return None
        url = self._read(unit.key)[0]
        args = [quote_str(url), quote_str(fmt_name), quote_str(structure)]
        if unit.fmt.compression != "none":
            args.append(quote_str(unit.fmt.compression))
        return f"url({', '.join(args)})"

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        url, authorization = self._read(unit.key)
        return self._call(url, authorization, fmt_name or unit.fmt.format, structure, unit.fmt.compression)

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """`url('http://host/{a,b,c}')` for plain URLs of one server, format and login."""
        reads = [self._read(u.key) for u in units]
        split = [urllib.parse.urlsplit(url) for url, _ in reads]
        first = split[0]
        paths = [p.path for p in split]
        if (
            any((p.scheme, p.netloc) != (first.scheme, first.netloc) or p.query or p.fragment for p in split)
            or any(auth != reads[0][1] for _, auth in reads)
            or any(u.fmt != units[0].fmt for u in units)
            or any(c not in COMBINE_SAFE for path in paths for c in path)
            or len(set(paths)) != len(paths)
            or not all(p.startswith("/") for p in paths)
        ):
            return None
        common = common_directory(paths)  # (every path starts with '/')
        names = ",".join(p[len(common) :] for p in paths)
        fmt = units[0].fmt
        url = f"{first.scheme}://{first.netloc}{common}{{{names}}}"
        call = self._call(url, reads[0][1], fmt_name or fmt.format, structure, fmt.compression)
        # The engine's _path is the URL's path, as sent.
        listed = "[" + ", ".join(quote_str(p) for p in paths) + "]"
        keys = "[" + ", ".join(quote_str(u.key) for u in units) + "]"
        return call, provenance_by_path(f"transform(_path, {listed}, {keys}, '')", paths, units)

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        return None

    def unchanged(self, unit: Unit) -> bool:
        """HEAD again: the same size, and the same ETag (or Last-Modified) where there was one."""
        try:
            info = self._probe(self.targets[unit.key])
        except SourceError:
            return False
        if info.size != unit.size:
            return False
        if unit.etag:
            return info.etag == unit.etag
        return info.mtime_ns == unit.mtime_ns
