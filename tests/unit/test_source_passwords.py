"""A source URL whose password holds a bare `/`, `?` or `#` is refused without echoing it."""

from __future__ import annotations

import pytest

from chute.errors import UsageError
from chute.sources import SourceOptions, open_source, refuse_bare_password


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:ab/TOPSECRET@127.0.0.1:1/shop/public.orders",
        "mysql://app:12/TOPSECRET@127.0.0.1:1/shop/orders",
        "postgresql://app:12?TOPSECRET@127.0.0.1:1/shop/public.orders",
        "kafka://u:ab/TOPSECRET@127.0.0.1:1/topic",
        "http://u:ab/TOPSECRET@127.0.0.1:1/data.json",
        "https://u:12#TOPSECRET@127.0.0.1:1/data.json",
    ],
)
def test_a_bare_slash_in_a_source_password_is_refused_without_the_secret(url: str) -> None:
    """The rest of the password read as the URL's path: the errors showed it (a database or topic
    name, `postgresql://app/TOPSECRET@...`), and an http(s) source ended in a traceback."""
    with pytest.raises(UsageError) as refused:
        open_source([url], SourceOptions())
    assert "percent-encoded" in str(refused.value) and "TOPSECRET" not in str(refused.value), refused.value


@pytest.mark.parametrize(
    "url",
    [
        "https://host:8443/users/@me/data.json",
        "https://host/@scope/data.json",
        "postgresql://app:p%2Fw@127.0.0.1:5432/shop/public.orders",
        "kafka://u@127.0.0.1:9092/topic",
    ],
)
def test_an_at_sign_where_urls_hold_one_is_no_password(url: str) -> None:
    refuse_bare_password([url], "http" if url.startswith("https") else url.split("://")[0])


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:abc/x.json", "http://127.0.0.1:abc/x.json: not a valid URL"),
        ("http://u:TOPSECRET@[::1/x.json", "source URL is not valid (Invalid IPv6 URL)"),
        ("https://127.0.0.1:99999/x.json", "not a valid URL (Port out of range"),
    ],
)
def test_a_malformed_http_source_url_is_one_line_not_a_traceback(url: str, said: str) -> None:
    """A port that is no number, or a bracket not closed, ended in an httpx or urllib traceback."""
    with pytest.raises(UsageError) as refused:
        open_source([url], SourceOptions())
    assert said in str(refused.value) and "TOPSECRET" not in str(refused.value), refused.value


@pytest.mark.parametrize(
    "url",
    ["kafka://u:TOPSECRET@[::1/topic", "postgresql://app:TOPSECRET@[::1/shop/public.t", "hdfs://[::1/x.parquet"],
)
def test_a_bracket_not_closed_in_a_source_url_is_one_line_not_a_traceback(url: str) -> None:
    with pytest.raises(UsageError) as refused:
        open_source([url], SourceOptions())
    assert "source URL is not valid (Invalid IPv6 URL)" in str(refused.value), refused.value
    assert "TOPSECRET" not in str(refused.value)


def test_an_s3_endpoint_with_a_port_that_is_no_number_is_one_line() -> None:
    """`--s3-endpoint http://127.0.0.1:abc` ended in an httpx traceback."""
    with pytest.raises(UsageError) as refused:
        open_source(["s3://b/x.json"], SourceOptions(s3_endpoint="http://127.0.0.1:abc"))
    assert "give http(s)://host[:port]" in str(refused.value)
