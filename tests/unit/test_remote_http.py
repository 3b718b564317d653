"""The one retry helper and the HTTP header parsing of chute.remote.http."""

from __future__ import annotations

import httpx
import pytest

from chute.remote import http
from chute.remote.http import TryAgain, etag, http_date_ns, retry, send_retrying


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(http.time, "sleep", waits.append)
    return waits


def test_retry_waits_with_backoff_then_gives_the_last_error(no_waiting: list[float]) -> None:
    calls: list[int] = []

    def failing(attempt: int) -> str:
        calls.append(attempt)
        raise ValueError(f"attempt {attempt}")

    with pytest.raises(ValueError, match="attempt 2"):
        retry(failing, 3, 0.5, lambda exc: isinstance(exc, ValueError))
    assert calls == [0, 1, 2] and no_waiting == [0.5, 1.0]


def test_retry_passes_errors_that_are_not_transient_at_once(no_waiting: list[float]) -> None:
    def failing(attempt: int) -> str:
        raise KeyError("terminal")

    with pytest.raises(KeyError):
        retry(failing, 5, 1.0, lambda exc: isinstance(exc, ValueError))
    assert no_waiting == []


def test_try_again_does_not_wait_and_reaches_the_caller_when_out_of_attempts(no_waiting: list[float]) -> None:
    answers = iter([TryAgain(), "done"])

    def call(attempt: int) -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retry(call, 2, 1.0, lambda exc: False) == "done" and no_waiting == []
    with pytest.raises(TryAgain):
        retry(lambda attempt: (_ for _ in ()).throw(TryAgain()), 2, 1.0, lambda exc: False)


def test_send_retrying_retries_5xx_and_network_errors_and_returns_the_last_answer(no_waiting: list[float]) -> None:
    request = httpx.Request("GET", "http://x/")
    answers: list[object] = [httpx.ConnectError("refused"), httpx.Response(503), httpx.Response(200)]

    def send() -> httpx.Response:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, httpx.Response)
        answer.request = request
        return answer

    assert send_retrying(send, 4).status_code == 200 and len(no_waiting) == 2
    busy = [httpx.Response(500), httpx.Response(502)]
    assert send_retrying(lambda: busy.pop(0), 2).status_code == 502  # the last attempt's answer, whatever it is


def test_etags_and_http_dates() -> None:
    assert etag('"abc"') == "abc" and etag('W/"abc"') == "W/abc" and etag(None) == "" and etag(" x ") == "x"
    assert http_date_ns("Wed, 21 Oct 2015 07:28:00 GMT") == 1445412480 * 10**9
    assert http_date_ns("not a date") == 0 and http_date_ns(None) == 0


def test_an_idle_connection_is_checked_past_descriptor_1023() -> None:
    """A long-lived process holds many descriptors: select() refuses one past 1023, poll does not."""
    import os
    import resource
    import socket

    from chute.transport import _readable

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip("the descriptor limit is below 1200")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    a, b = socket.socketpair()
    try:
        assert a.fileno() > 1023
        assert not _readable(a)  # idle and open: reusable
        b.close()
        assert _readable(a)  # closed by the other end: not reused
    finally:
        a.close()
        for fd in held:
            os.close(fd)
