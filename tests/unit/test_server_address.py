"""A server target's URL: each part read as users write it, every mistake one line."""

from __future__ import annotations

import pytest

from chute.errors import UsageError
from chute.transport import ServerAddress


def test_a_percent_encoded_database_and_password_are_decoded() -> None:
    address = ServerAddress.parse("http://u:p%40ss%3Aw@127.0.0.1:8123/%D0%B4%D0%B1")
    assert (address.user, address.password, address.database, address.port) == ("u", "p@ss:w", "дб", 8123)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://u:TOPSECRET@[::1:8123/default", "invalid target URL"),
        ("http://h:99999/x", "invalid port"),
        ("ftp://h/x", "a server target looks like"),
        ("http://h:1/a%2Fb", "invalid database name"),
    ],
)
def test_a_malformed_url_is_one_usage_error_without_its_secret(url: str, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        ServerAddress.parse(url)
    assert said in str(refused.value) and "TOPSECRET" not in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://u:123/TOPSECRET@127.0.0.1:8123/db",
        "http://u:ab/TOPSECRET@127.0.0.1:8123/db",
        "http://u:123?TOPSECRET@127.0.0.1:8123/db",
        "http://u:123#TOPSECRET@127.0.0.1:8123/db",
    ],
)
def test_a_password_with_an_unencoded_slash_query_or_hash_is_refused_without_its_secret(url: str) -> None:
    """The URL parser ends the host part at the password's `/`, `?` or `#`: the rest of the
    password was shown as the database name ('invalid database name ...: TOPSECRET@...'), or
    the user name taken for a host to look up."""
    with pytest.raises(UsageError) as refused:
        ServerAddress.parse(url)
    assert "percent-encoded" in str(refused.value) and "TOPSECRET" not in str(refused.value), refused.value


@pytest.mark.parametrize("port", ["abc", "99999", "-1"])
def test_a_clickhouse_port_that_is_no_port_is_one_usage_error(monkeypatch: pytest.MonkeyPatch, port: str) -> None:
    """`CLICKHOUSE_PORT=abc` ended in a ValueError traceback."""
    monkeypatch.setenv("CLICKHOUSE_HOST", "127.0.0.1")
    monkeypatch.setenv("CLICKHOUSE_PORT", port)
    with pytest.raises(UsageError) as refused:
        ServerAddress.parse(None)
    assert "CLICKHOUSE_PORT must be a port number" in str(refused.value)
