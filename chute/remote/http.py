"""HTTP for every remote chute talks to: the one httpx client factory, the one
retry helper (with backoff), and the parsing of HTTP headers chute keeps.

httpx errors are not translated here: each caller maps them at its boundary
(to a SourceError, a TargetError) with its own wording.
"""

from __future__ import annotations

import email.utils
import os
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from chute.errors import UsageError

if TYPE_CHECKING:  # httpx costs ~0.1 s to import: only the loads that speak HTTP import it
    import httpx

T = TypeVar("T")

BACKOFF_SECONDS = 0.2
"""The first wait between two attempts of a request; it doubles each time."""


def http_client(**options: Any) -> httpx.Client:
    """An httpx client; a TLS setup that fails (SSL_CERT_FILE naming no file) is one line."""
    import httpx

    try:
        return httpx.Client(**options)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        # httpx reads SSL_CERT_FILE if set, else SSL_CERT_DIR.
        name = next((n for n in ("SSL_CERT_FILE", "SSL_CERT_DIR") if n in os.environ), None)
        if name is not None:
            raise UsageError(
                f"cannot set up TLS: {name}={os.environ[name]}: {reason} (point it at CA certificates, or unset it)"
            ) from None
        raise UsageError(f"cannot set up TLS: {reason}") from None


def tls_context(verify: bool = True) -> ssl.SSLContext:
    """The TLS setup httpx makes (SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's CAs), for
    clients built on the standard library; a setup that fails is one line, as in `http_client`."""
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    try:
        if os.environ.get("SSL_CERT_FILE"):
            return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
        if os.environ.get("SSL_CERT_DIR"):
            return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        name = next((n for n in ("SSL_CERT_FILE", "SSL_CERT_DIR") if os.environ.get(n)), None)
        if name is not None:
            raise UsageError(
                f"cannot set up TLS: {name}={os.environ[name]}: {reason} (point it at CA certificates, or unset it)"
            ) from None
        raise UsageError(f"cannot set up TLS: {reason}") from None


class TryAgain(Exception):
    """Raised inside a call that `retry` runs: try again at once, without waiting (S3
    named another region). Out of attempts, it reaches the caller."""


class _ServerBusy(Exception):
    """A 5xx answer that is not the last attempt's."""


def retry(
    call: Callable[[int], T],
    attempts: int,
    backoff: float,
    transient: Callable[[Exception], bool],
) -> T:
    """`call(attempt)`, again after an exception `transient` accepts (or `TryAgain`),
    `attempts` times in all, waiting `backoff * 2**attempt` before the next try; the
    last attempt's exception, or any other, reaches the caller."""
    for attempt in range(attempts):
        try:
            return call(attempt)
        except TryAgain:
            if attempt == attempts - 1:
                raise
        except Exception as exc:
            if attempt == attempts - 1 or not transient(exc):
                raise
            time.sleep(backoff * 2**attempt)
    raise AssertionError("unreachable")


def send_retrying(
    send: Callable[[], httpx.Response], attempts: int, backoff: float = BACKOFF_SECONDS
) -> httpx.Response:
    """`send()` again after network errors and 5xx answers; the last attempt's answer is
    returned whatever its status, and its httpx error reaches the caller (to map)."""

    def once(attempt: int) -> httpx.Response:
        response = send()
        if response.status_code >= 500 and attempt < attempts - 1:
            raise _ServerBusy
        return response

    import httpx

    return retry(once, attempts, backoff, lambda exc: isinstance(exc, (httpx.HTTPError, _ServerBusy)))


def etag(value: str | None) -> str:
    """An ETag without its quotes; a weak one keeps its W/ mark."""
    if not value:
        return ""
    value = value.strip()
    if value.startswith("W/"):
        return "W/" + value[2:].strip('"')
    return value.strip('"')


def http_date_ns(text: str | None) -> int:
    """Nanoseconds since the epoch from an HTTP date (Last-Modified), 0 when absent."""
    if not text:
        return 0
    try:
        return int(email.utils.parsedate_to_datetime(text).timestamp()) * 10**9
    except (TypeError, ValueError):
        return 0
