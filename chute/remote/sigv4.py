"""AWS Signature Version 4 for the few S3 requests chute makes itself (list, HEAD).

A small stdlib implementation instead of an AWS SDK: chute signs ListObjectsV2
and HEAD requests only, and the engine reads the objects with its own client.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Credentials:
    """An access key and its secret (and session token); repr never shows the secrets."""

    access_key: str
    secret_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Credentials | None:
        """The standard AWS variables, or None when no key is set (anonymous access)."""
        env = os.environ if env is None else env
        key = env.get("AWS_ACCESS_KEY_ID", "")
        secret = env.get("AWS_SECRET_ACCESS_KEY", "")
        if not key and not secret:
            return None
        return cls(key, secret, env.get("AWS_SESSION_TOKEN", ""))

    @property
    def secrets(self) -> list[str]:
        """Texts that must never appear in a message."""
        return [s for s in (self.secret_key, self.session_token) if s]


def quote_path(path: str) -> str:
    """Percent-encode an object path the way S3 canonicalises it (each byte once, '/' kept)."""
    return urllib.parse.quote(path, safe="/-_.~")


def _quote_param(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


def canonical_query(params: Mapping[str, str]) -> str:
    """Query parameters sorted and encoded as SigV4 wants them (also usable as the URL's query)."""
    return "&".join(f"{_quote_param(k)}={_quote_param(v)}" for k, v in sorted(params.items()))


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def signing_key(secret_key: str, day: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret_key).encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def host_header(url: str) -> str:
    """The Host header an HTTP client sends for `url` (the port only when not the default)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return f"{host}:{parts.port}" if parts.port and parts.port != default else host


def sign(
    method: str,
    url: str,
    credentials: Credentials,
    region: str,
    headers: Mapping[str, str] | None = None,
    payload_hash: str = EMPTY_SHA256,
    service: str = "s3",
    now: datetime.datetime | None = None,
) -> dict[str, str]:
    """The headers for a signed request to `url` (its path and query already encoded
    with `quote_path` / `canonical_query`): the given ones plus x-amz-date,
    x-amz-content-sha256, x-amz-security-token and Authorization."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    canonical_params = "&".join(f"{_quote_param(k)}={_quote_param(v)}" for k, v in sorted(query))
    out = {k: v for k, v in (headers or {}).items()}
    out["x-amz-date"] = amz_date
    out["x-amz-content-sha256"] = payload_hash
    if credentials.session_token:
        out["x-amz-security-token"] = credentials.session_token
    signed = {k.lower(): " ".join(str(v).split()) for k, v in out.items()}
    signed["host"] = host_header(url)
    names = sorted(signed)
    canonical_request = "\n".join(
        [
            method.upper(),
            parts.path or "/",
            canonical_params,
            "".join(f"{n}:{signed[n]}\n" for n in names),
            ";".join(names),
            payload_hash,
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
    signature = hmac.new(signing_key(credentials.secret_key, day, region, service), to_sign.encode(), hashlib.sha256)
    out["Authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature.hexdigest()}"
    )
    return out
