"""S3 and S3-compatible object stores: `s3://bucket/prefix/**/*.parquet`.

chute lists the objects itself (ListObjectsV2, signed with SigV4) so that every
object is a ledger unit with a key, size and ETag; the engine reads them with
its s3() table function.

Credentials come from the standard environment variables only, and the embedded
engine takes them from the same environment (its AWS credential chain): no key,
secret or token is written into the SQL it runs. Only the server-side path
(`server_expression`) hands the key and secret to a server's s3(), and only to
servers that hide them in their logs; every message chute makes, from engine or
server text too, is scrubbed of them.
"""

from __future__ import annotations

import datetime
import os
import re
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from chute.capabilities import Capabilities
from chute.errors import SourceError, UsageError
from chute.formats import detect
from chute.schema import Column
from chute.sources.base import (
    EngineRowNumbers,
    ServerReadable,
    SourceBase,
    common_directory,
    expand_braces,
    known_extension,
    provenance_by_path,
    table_function,
)
from chute.sources.sigv4 import Credentials, canonical_query, quote_path, sign
from chute.sources.url import http_date_ns
from chute.sql import quote_str
from chute.transport import http_client
from chute.units import Unit

GLOB_CHARS = frozenset("*?[")
ENGINE_GLOB_CHARS = frozenset("*?[]{}")
"""Characters the engine's s3() would read as a pattern in a key, encoded or not."""
COMBINE_UNSAFE = ENGINE_GLOB_CHARS | {",", "\\"}
AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "InvalidSecurity",
        "AuthorizationHeaderMalformed",
        "XAdminUserNotFound",  # versitygw's answer to an unknown access key
    }
)
AUTH_HINTS = ("AccessKey", "Signature", "Token", "Credential", "UserNotFound")
RETRIES = 4
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class S3Object:
    bucket: str
    key: str
    size: int
    mtime_ns: int
    etag: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def split_url(url: str) -> tuple[str, str]:
    """('bucket', 'key or pattern') from s3://bucket/key; the key may be empty."""
    if not url.lower().startswith("s3://"):
        raise UsageError(f"{url}: not an s3:// URL")
    bucket, _, key = url[5:].partition("/")
    if not bucket or any(c in bucket for c in ENGINE_GLOB_CHARS | {",", "/"}):
        raise UsageError(f"{url}: give a bucket name (no pattern) as s3://bucket/prefix/...")
    return bucket, key


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a key pattern: `*` and `?` stay within a '/' segment, `**` crosses them
    (`a/**/b` matches `a/b` too), `[...]` is a character class."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        c = pattern[i]
        end = pattern.find("]", i + 2) if c == "[" else -1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif end > 0:
            body = pattern[i + 1 : end]
            negate = body.startswith(("!", "^"))
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.S)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _parse_iso(text: str) -> int:
    """Nanoseconds since the epoch from S3's `2024-05-01T10:00:00.123Z`."""
    text = text.strip()
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?", text)
    if not match:
        return 0
    base = datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    fraction = (match.group(2) or "0")[:9].ljust(9, "0")
    return int(base.timestamp()) * 10**9 + int(fraction)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text[:limit] + "..." if len(text) > limit else text


class S3Source(SourceBase, EngineRowNumbers, ServerReadable):
    """Objects in S3 or an S3-compatible store, read by the engine's s3() function."""

    page_size = 1000
    """Keys per ListObjectsV2 page (S3's maximum)."""

    def __init__(
        self,
        patterns: list[str],
        format_override: str | None = None,
        compression_override: str | None = None,
        endpoint: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not patterns:
            raise UsageError("no source given")
        env = os.environ if env is None else env
        self.patterns = patterns
        self.format_override = format_override
        self.compression_override = compression_override
        self.credentials = Credentials.from_env(env)
        self.region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        self._bucket_region: dict[str, str] = {}
        endpoint = endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
        if endpoint is not None:
            parts = urllib.parse.urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.query:
                raise UsageError(f"--s3-endpoint {endpoint!r}: give http(s)://host[:port]")
            endpoint = endpoint.rstrip("/")
        self.endpoint = endpoint
        """A custom endpoint (path-style URLs); None: AWS (virtual-hosted URLs)."""
        self._listings: dict[tuple[str, str], list[S3Object]] = {}
        self._manifests: dict[tuple[str, str], tuple[list[Column], bool] | None] = {}
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None

    # -- messages -----------------------------------------------------------

    def scrub(self, text: str) -> str:
        """`text` without any secret (for messages that may carry server or engine text),
        also as quoted into SQL."""
        for secret in self.credentials.secrets if self.credentials else []:
            text = text.replace(secret, "***").replace(quote_str(secret)[1:-1], "***")
        return text

    def _error(self, text: str) -> SourceError:
        return SourceError(self.scrub(_one_line(text, 600)))

    # -- HTTP ---------------------------------------------------------------

    def _client(self) -> httpx.Client:
        """One client (thread-safe, keeps connections alive) for every request of this source."""
        with self._lock:
            if self._http is None:
                self._http = http_client(timeout=httpx.Timeout(60.0, connect=10.0), follow_redirects=False)
            return self._http

    def _region(self, bucket: str) -> str:
        return self._bucket_region.get(bucket, self.region)

    def _bucket_url(self, bucket: str) -> str:
        if self.endpoint is not None:
            return f"{self.endpoint}/{bucket}"
        region = self._region(bucket)
        if "." in bucket:  # dots break the TLS name of virtual-hosted URLs
            return f"https://s3.{region}.amazonaws.com/{bucket}"
        return f"https://{bucket}.s3.{region}.amazonaws.com"

    def object_url(self, bucket: str, key: str) -> str:
        """The http(s) URL of an object (with key '': of its bucket, for listing)."""
        return f"{self._bucket_url(bucket)}/{quote_path(key)}"

    def _display(self) -> str:
        return self.endpoint or "S3"

    def _send(self, method: str, bucket: str, key: str, params: Mapping[str, str], what: str) -> httpx.Response:
        """One signed request, retried on network errors and 5xx; follows S3's region hint once."""
        for attempt in range(RETRIES):
            url = self.object_url(bucket, key)
            if params:
                url += "?" + canonical_query(params)
            headers = sign(method, url, self.credentials, self._region(bucket)) if self.credentials else {}
            try:
                response = self._client().request(method, url, headers=headers)
            except httpx.HTTPError as exc:
                if attempt == RETRIES - 1:
                    reason = str(exc) or type(exc).__name__
                    raise self._error(f"{what}: cannot reach {self._display()}: {reason}") from None
                time.sleep(0.2 * 2**attempt)
                continue
            hinted = response.headers.get("x-amz-bucket-region")
            if response.status_code in (301, 307, 400) and hinted and hinted != self._region(bucket):
                self._bucket_region[bucket] = hinted
                continue
            if response.status_code >= 500 and attempt < RETRIES - 1:
                time.sleep(0.2 * 2**attempt)
                continue
            return response
        raise self._error(f"{what}: {self._display()} keeps failing")

    def _failure(self, response: httpx.Response, bucket: str, what: str) -> SourceError:
        """A one-line error for an S3 answer that is not a success."""
        code = message = ""
        if response.content:
            try:
                doc = ET.fromstring(response.content)
                code = doc.findtext("Code") or ""
                message = doc.findtext("Message") or ""
            except ET.ParseError:
                message = response.text
        status = response.status_code
        if code == "NoSuchBucket":
            return self._error(f"s3://{bucket}: no such bucket")
        if status in (401, 403) or code in AUTH_CODES or any(h in code for h in AUTH_HINTS):
            reason = f"{code or f'HTTP {status}'}" + (f": {message}" if message else "")
            if self.credentials is None:
                hint = "no credentials given: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            else:
                hint = "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY" + (
                    " and AWS_SESSION_TOKEN" if self.credentials.session_token else ""
                )
            return self._error(f"{what}: access denied ({reason}); {hint}")
        detail = " ".join(x for x in (code, message) if x) or response.reason_phrase
        return self._error(f"{what}: {self._display()} answered HTTP {status}" + (f": {detail}" if detail else ""))

    # -- listing ------------------------------------------------------------

    def _list(self, bucket: str, prefix: str) -> list[S3Object]:
        """Every object under `prefix` (ListObjectsV2, page by page), in key order."""
        cached = self._listings.get((bucket, prefix))
        if cached is not None:
            return cached
        what = f"s3://{bucket}/{prefix}"
        objects: list[S3Object] = []
        token = ""
        while True:
            params = {"list-type": "2", "prefix": prefix, "max-keys": str(self.page_size)}
            if token:
                params["continuation-token"] = token
            response = self._send("GET", bucket, "", params, what)
            if response.status_code != 200:
                raise self._failure(response, bucket, what)
            try:
                doc = ET.fromstring(response.content)
            except ET.ParseError as exc:
                raise self._error(f"{what}: unreadable listing from {self._display()} ({exc})") from None
            truncated = False
            token = ""
            for child in doc:
                name = _local(child.tag)
                if name == "Contents":
                    fields = {_local(f.tag): f.text or "" for f in child}
                    key = fields.get("Key", "")
                    if not key or key.endswith("/"):
                        continue  # a "directory" marker, not data
                    objects.append(
                        S3Object(
                            bucket,
                            key,
                            int(fields.get("Size") or 0),
                            _parse_iso(fields.get("LastModified", "")),
                            fields.get("ETag", "").strip('"'),
                        )
                    )
                elif name == "IsTruncated":
                    truncated = (child.text or "").strip().lower() == "true"
                elif name == "NextContinuationToken":
                    token = child.text or ""
            if not truncated:
                break
            if not token:
                raise self._error(f"{what}: {self._display()} sent a truncated listing without a continuation token")
        self._listings[(bucket, prefix)] = objects
        return objects

    def _head(self, bucket: str, key: str, what: str) -> S3Object | None:
        """The object's size, ETag and time by a HEAD request; None when there is none."""
        response = self._send("HEAD", bucket, key, {}, what)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._failure(response, bucket, what)
        return S3Object(
            bucket,
            key,
            int(response.headers.get("content-length") or 0),
            http_date_ns(response.headers.get("last-modified")),
            response.headers.get("etag", "").strip('"'),
        )

    def _under(self, bucket: str, prefix: str) -> list[S3Object]:
        """Everything under a prefix, as a directory walk would find it: hidden names
        ('.x', '_SUCCESS') skipped, and without --format only known extensions."""
        found = []
        for obj in self._list(bucket, prefix):
            rest = obj.key[len(prefix) :]
            *dirs, name = rest.split("/")
            if any(d.startswith(".") for d in dirs) or name.startswith((".", "_")):
                continue
            if self.format_override or known_extension(name):
                found.append(obj)
        return found

    def _resolve(self, pattern: str) -> list[S3Object]:
        bucket, key_pattern = split_url(pattern)
        found: list[S3Object] = []
        for alternative in expand_braces(key_pattern):
            first_glob = min((alternative.index(c) for c in GLOB_CHARS if c in alternative), default=-1)
            if alternative == "" or alternative.endswith("/"):
                found += self._under(bucket, alternative)
            elif first_glob >= 0:
                regex = glob_regex(alternative)
                found += [o for o in self._list(bucket, alternative[:first_glob]) if regex.match(o.key)]
            else:
                obj = self._head(bucket, alternative, f"s3://{bucket}/{alternative}")
                # Not an object: a "directory" if anything is under it (this also names a missing bucket).
                found += [obj] if obj is not None else self._under(bucket, alternative + "/")
        if not found:
            if key_pattern == "" or key_pattern.endswith("/"):
                known = "" if self.format_override else " with a known extension (or pass --format)"
                raise SourceError(f"{pattern}: no object under this prefix{known}")
            if key_pattern == expand_braces(key_pattern)[0] and not set(key_pattern) & GLOB_CHARS:
                raise SourceError(f"{pattern}: no such object")
            raise SourceError(f"{pattern}: no object matches")
        return found

    def units(self) -> list[Unit]:
        objects: dict[str, S3Object] = {}
        for pattern in self.patterns:
            for obj in self._resolve(pattern):
                objects.setdefault(obj.url, obj)
        units = []
        for obj in objects.values():
            if any(c in obj.key for c in ENGINE_GLOB_CHARS):
                raise SourceError(f"{obj.url}: keys with * ? [ ] {{ }} cannot be read by the engine; rename the object")
            fmt = detect(obj.key, self.format_override, self.compression_override)
            units.append(Unit(key=obj.url, size=obj.size, mtime_ns=obj.mtime_ns, fmt=fmt, etag=obj.etag))
        return units

    # -- reading ------------------------------------------------------------

    def _auth_args(self) -> list[str]:
        """NOSIGN without credentials; else nothing: the engine takes them from the environment."""
        return ["NOSIGN"] if self.credentials is None else []

    def _call(self, url: str, fmt_name: str, structure: str | None, compression: str) -> str:
        return table_function("s3", [quote_str(url), *self._auth_args()], fmt_name, structure, compression)

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        bucket, key = split_url(unit.key)
        return self._call(self.object_url(bucket, key), fmt_name or unit.fmt.format, structure, unit.fmt.compression)

    def server_blocker(self, unit: Unit, capabilities: Capabilities, cluster: str | None = None) -> str | None:
        """Why a server cannot be handed this object to read itself; None when it can."""
        version = capabilities.version_text
        if not capabilities.s3_function:
            return f"server {version} has no s3() table function with keys (20.1+)"
        if cluster is not None and not capabilities.s3_cluster:
            return f"server {version} has no s3Cluster() (21.5+)"
        if self.credentials is None:
            return "no credentials: the server would sign with its own instead of reading anonymously"
        if self.credentials.session_token:
            return "temporary credentials (AWS_SESSION_TOKEN) are not handed to the server"
        if not capabilities.hides_secrets:
            return f"server {version} would keep the secret key in its query log (hidden from 22.11)"
        return None

    def server_expression(
        self, unit: Unit, structure: str, fmt_name: str, capabilities: Capabilities, cluster: str | None = None
    ) -> str | None:
        """The s3() call (s3Cluster() with a cluster) with which a server reads this object
        itself; None when `server_blocker` names a reason. The key and secret are in it:
        the server needs them, and hides them in its logs (see `hides_secrets`)."""
        if self.server_blocker(unit, capabilities, cluster) is not None:
            return None
        assert self.credentials is not None
        bucket, key = split_url(unit.key)
        args = [quote_str(cluster)] if cluster is not None else []
        args += [
            quote_str(self.object_url(bucket, key)),
            quote_str(self.credentials.access_key),
            quote_str(self.credentials.secret_key),
            quote_str(fmt_name),
            quote_str(structure),
        ]
        if unit.fmt.compression != "none":
            args.append(quote_str(unit.fmt.compression))
        return f"{'s3Cluster' if cluster is not None else 's3'}({', '.join(args)})"

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """One s3() call over `prefix/{k1,k2,...}` (the engine then reads exactly
        those keys, without a listing) for objects of one bucket and format."""
        parsed = [split_url(u.key) for u in units]
        bucket = parsed[0][0]
        keys = [key for _, key in parsed]
        if any(b != bucket for b, _ in parsed) or any(u.fmt != units[0].fmt for u in units):
            return None
        if any(c in COMBINE_UNSAFE for key in keys for c in key):
            return None
        common = common_directory(keys)
        names = ",".join(quote_path(key[len(common) :]) for key in keys)
        url = f"{self.object_url(bucket, common)}{{{names}}}"
        fmt = units[0].fmt
        # The engine's _path is 'bucket/key'.
        per_unit = provenance_by_path("concat('s3://', _path)", [f"{bucket}/{key}" for key in keys], units)
        return self._call(url, fmt_name or fmt.format, structure, fmt.compression), per_unit

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        """The exact types of a `chute export` written to this prefix (its manifest object)."""
        from chute.export import MANIFEST, declared, parse_manifest

        bucket, key = split_url(unit.key)
        prefix = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
        if (bucket, prefix) not in self._manifests:
            what = f"s3://{bucket}/{prefix}{MANIFEST}"
            response = self._send("GET", bucket, prefix + MANIFEST, {}, what)
            found = parse_manifest(response.content, what) if response.status_code == 200 else None
            self._manifests[(bucket, prefix)] = declared(found)
        columns = self._manifests[(bucket, prefix)]
        return columns[0] if columns else None

    def unchanged(self, unit: Unit) -> bool:
        """HEAD the object: same size and ETag (or, without an ETag, the same second)."""
        bucket, key = split_url(unit.key)
        try:
            now = self._head(bucket, key, unit.key)
        except SourceError:
            return False
        if now is None or now.size != unit.size:
            return False
        if unit.etag:
            return now.etag == unit.etag
        return now.mtime_ns // 10**9 == unit.mtime_ns // 10**9
