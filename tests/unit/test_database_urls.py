"""Database source URLs: parsed, and never shown with their password."""

from __future__ import annotations

import pytest

from chute.errors import UsageError
from chute.sources.database import parse_url


def test_urls_never_show_the_password() -> None:
    url = parse_url("postgresql://me:p%40ss%3Aword@Example.org/db/sales.orders?rows_per_range=10")
    assert (url.password, url.port, url.schema, url.table, url.rows_per_range) == (
        "p@ss:word",
        5432,
        "sales",
        "orders",
        10,
    )
    assert url.display == "postgresql://me@example.org:5432/db/sales.orders"
    assert parse_url("mysql://me@[::1]/db/t").display == "mysql://me@[::1]:3306/db/t"
    for bad in ("mysql://me:TopSecret@host/db", "postgresql://me:TopSecret@host/db/t?x=1", "mysql://:TopSecret@h/d/t"):
        with pytest.raises(UsageError) as caught:
            parse_url(bad)
        assert "TopSecret" not in str(caught.value)
