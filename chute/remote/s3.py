"""The S3 client chute uses itself: ListObjectsV2, HEAD, GET/PUT/DELETE of single
objects, signed with SigV4 (`chute.remote.sigv4`), for the S3 source and the S3
export destination.

Credentials come from the standard environment variables only; every message
made here is scrubbed of them.
"""

from __future__ import annotations

import datetime
import os
import re
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chute.errors import SourceError, TargetError, UsageError
from chute.remote.http import TryAgain, http_client, http_date_ns, send_retrying
from chute.remote.sigv4 import Credentials, canonical_query, quote_path, sign

if TYPE_CHECKING:  # httpx costs ~0.1 s to import: only the loads that speak HTTP import it
    import httpx
from chute.sql import quote_str

ENGINE_GLOB_CHARS = frozenset("*?[]{}")
"""Characters the engine's s3() would read as a pattern in a key, encoded or not."""
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
EMPTY_PAYLOAD = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
"""SHA-256 of an empty body, as SigV4 signs it."""


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


def local(tag: str) -> str:
    """An XML tag without its namespace."""
    return tag.rsplit("}", 1)[-1]


def parse_iso(text: str) -> int:
    """Nanoseconds since the epoch from S3's `2024-05-01T10:00:00.123Z`."""
    text = text.strip()
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?", text)
    if not match:
        return 0
    base = datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    fraction = (match.group(2) or "0")[:9].ljust(9, "0")
    return int(base.timestamp()) * 10**9 + int(fraction)


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line, cut at `limit` characters."""
    text = " ".join(text.split())
    return text[:limit] + "..." if len(text) > limit else text


class S3Client:
    """Signed requests to S3 or an S3-compatible store, with listings cached per prefix."""

    page_size = 1000
    """Keys per ListObjectsV2 page (S3's maximum)."""

    def __init__(self, endpoint: str | None = None, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.credentials = Credentials.from_env(env)
        self.region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        self._bucket_region: dict[str, str] = {}
        endpoint = endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
        if endpoint is not None:
            try:
                parts = urllib.parse.urlsplit(endpoint)
                parts.port  # noqa: B018 (read for its ValueError: a port that is no number, or out of range)
            except ValueError:  # (and "Invalid IPv6 URL": a bracket not closed)
                parts = urllib.parse.SplitResult("", "", "", "", "")
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.query:
                raise UsageError(f"--s3-endpoint {endpoint!r}: give http(s)://host[:port]")
            endpoint = endpoint.rstrip("/")
        self.endpoint = endpoint
        """A custom endpoint (path-style URLs); None: AWS (virtual-hosted URLs)."""
        self._listings: dict[tuple[str, str], list[S3Object]] = {}
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None

    # -- messages -----------------------------------------------------------

    def scrub(self, text: str) -> str:
        """`text` without any secret (for messages that may carry server or engine text),
        also as quoted into SQL."""
        for secret in self.credentials.secrets if self.credentials else []:
            text = text.replace(secret, "***").replace(quote_str(secret)[1:-1], "***")
        return text

    def error(self, text: str) -> SourceError:
        return SourceError(self.scrub(one_line(text, 600)))

    @property
    def display(self) -> str:
        """How the store is named in messages."""
        return self.endpoint or "S3"

    # -- addresses ----------------------------------------------------------

    def client(self) -> httpx.Client:
        """One client (thread-safe, keeps connections alive) for every request."""
        import httpx

        with self._lock:
            if self._http is None:
                self._http = http_client(timeout=httpx.Timeout(60.0, connect=10.0), follow_redirects=False)
            return self._http

    def region_of(self, bucket: str) -> str:
        return self._bucket_region.get(bucket, self.region)

    def bucket_url(self, bucket: str) -> str:
        if self.endpoint is not None:
            return f"{self.endpoint}/{bucket}"
        region = self.region_of(bucket)
        if "." in bucket:  # dots break the TLS name of virtual-hosted URLs
            return f"https://s3.{region}.amazonaws.com/{bucket}"
        return f"https://{bucket}.s3.{region}.amazonaws.com"

    def object_url(self, bucket: str, key: str) -> str:
        """The http(s) URL of an object (with key '': of its bucket, for listing)."""
        return f"{self.bucket_url(bucket)}/{quote_path(key)}"

    # -- requests -----------------------------------------------------------

    def send(self, method: str, bucket: str, key: str, params: Mapping[str, str], what: str) -> httpx.Response:
        """One signed request, retried on network errors and 5xx; follows S3's region hint once."""
        import httpx

        def once() -> httpx.Response:
            url = self.object_url(bucket, key)
            if params:
                url += "?" + canonical_query(params)
            headers = sign(method, url, self.credentials, self.region_of(bucket)) if self.credentials else {}
            response = self.client().request(method, url, headers=headers)
            hinted = response.headers.get("x-amz-bucket-region")
            if response.status_code in (301, 307, 400) and hinted and hinted != self.region_of(bucket):
                self._bucket_region[bucket] = hinted
                raise TryAgain
            return response

        try:
            return send_retrying(once, RETRIES)
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise self.error(f"{what}: cannot reach {self.display}: {reason}") from None
        except TryAgain:
            raise self.error(f"{what}: {self.display} keeps failing") from None

    def send_object(self, method: str, bucket: str, key: str, what: str, body: Any = None) -> httpx.Response:
        """One signed request on an object with a body (PUT) or without (GET, DELETE), sent once;
        errors are TargetErrors of `what` (the caller's destination)."""
        url = self.object_url(bucket, key)
        headers: dict[str, str] = {}
        if self.credentials is not None:
            payload = "UNSIGNED-PAYLOAD" if body is not None else EMPTY_PAYLOAD
            headers = sign(method, url, self.credentials, self.region_of(bucket), payload_hash=payload)
        try:
            return self.client().request(method, url, headers=headers, content=body)
        except Exception as exc:  # httpx errors: one line, no secret
            raise TargetError(self.scrub(f"{what}: cannot reach {self.display}: {exc}")) from None

    def failure(self, response: httpx.Response, bucket: str, what: str) -> SourceError:
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
            return self.error(f"s3://{bucket}: no such bucket")
        if status in (401, 403) or code in AUTH_CODES or any(h in code for h in AUTH_HINTS):
            reason = f"{code or f'HTTP {status}'}" + (f": {message}" if message else "")
            if self.credentials is None:
                hint = "no credentials given: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            else:
                hint = "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY" + (
                    " and AWS_SESSION_TOKEN" if self.credentials.session_token else ""
                )
            return self.error(f"{what}: access denied ({reason}); {hint}")
        detail = " ".join(x for x in (code, message) if x) or response.reason_phrase
        return self.error(f"{what}: {self.display} answered HTTP {status}" + (f": {detail}" if detail else ""))

    # -- listing ------------------------------------------------------------

    def list_objects(self, bucket: str, prefix: str) -> list[S3Object]:
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
            response = self.send("GET", bucket, "", params, what)
            if response.status_code != 200:
                raise self.failure(response, bucket, what)
            try:
                doc = ET.fromstring(response.content)
            except ET.ParseError as exc:
                raise self.error(f"{what}: unreadable listing from {self.display} ({exc})") from None
            truncated, token = self._page(doc, bucket, objects)
            if not truncated:
                break
            if not token:
                raise self.error(f"{what}: {self.display} sent a truncated listing without a continuation token")
        self._listings[(bucket, prefix)] = objects
        return objects

    @staticmethod
    def _page(doc: ET.Element, bucket: str, objects: list[S3Object]) -> tuple[bool, str]:
        """Add a listing page's objects to `objects`: (truncated, continuation token)."""
        truncated = False
        token = ""
        for child in doc:
            name = local(child.tag)
            if name == "Contents":
                fields = {local(f.tag): f.text or "" for f in child}
                key = fields.get("Key", "")
                if not key or key.endswith("/"):
                    continue  # a "directory" marker, not data
                objects.append(
                    S3Object(
                        bucket,
                        key,
                        int(fields.get("Size") or 0),
                        parse_iso(fields.get("LastModified", "")),
                        fields.get("ETag", "").strip('"'),
                    )
                )
            elif name == "IsTruncated":
                truncated = (child.text or "").strip().lower() == "true"
            elif name == "NextContinuationToken":
                token = child.text or ""
        return truncated, token

    def head(self, bucket: str, key: str, what: str) -> S3Object | None:
        """The object's size, ETag and time by a HEAD request; None when there is none."""
        response = self.send("HEAD", bucket, key, {}, what)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self.failure(response, bucket, what)
        return S3Object(
            bucket,
            key,
            int(response.headers.get("content-length") or 0),
            http_date_ns(response.headers.get("last-modified")),
            response.headers.get("etag", "").strip('"'),
        )
