"""The exact conversions of a database column's text (chute.sources.database.exact), run by the engine
over the texts PostgreSQL and MySQL write: the value where it fits, NULL (a reject) where the
engine's own reading would change it. The servers themselves: tests/external/test_database_sources.py."""

from __future__ import annotations

from typing import Any

import pytest

from chute.sources.database.exact import decimal, temporal
from chute.sql import quote_str


def _convert(engine: Any, sql: str, texts: list[str | None]) -> list[str | None]:
    values = ", ".join("NULL" if t is None else quote_str(t) for t in texts)
    rows = engine.rows(f"SELECT toString({sql}) AS v FROM (SELECT arrayJoin([{values}]) AS t)")
    return [r["v"] for r in rows]


def test_mysql_dates_that_do_not_exist_are_null(engine: Any) -> None:
    stamp = temporal("t", "DateTime64(3, 'UTC')", "UTC", pg=False)
    assert stamp is not None
    texts: list[str | None] = ["2024-02-29 12:34:56.789", "0000-00-00 00:00:00.000", "2024-02-30 00:00:00.000"]
    texts += ["2024-00-10 00:00:00.000", "1000-01-01 00:00:00.000", "9999-12-31 23:59:59.999", None]
    got = _convert(engine, stamp, texts)
    assert got[:4] == ["2024-02-29 12:34:56.789", None, None, None]
    assert got[4:] == ["1000-01-01 00:00:00.000", "9999-12-31 23:59:59.999", None]
    date = temporal("t", "Date32", "UTC", pg=False)
    assert date is not None
    assert _convert(engine, date, ["2024-02-29", "0000-00-00", "2024-02-30", "1000-01-01"]) == [
        "2024-02-29",
        None,
        None,
        "1000-01-01",
    ]
    # DateTime holds 1970 to 2106 only.
    narrow = temporal("t", "DateTime('UTC')", "UTC", pg=False)
    assert narrow is not None
    assert _convert(engine, narrow, ["2024-01-01 00:00:00", "1969-12-31 23:59:59", "2106-02-08 00:00:00"]) == [
        "2024-01-01 00:00:00",
        None,
        None,
    ]


def test_mysql_timestamp_in_the_servers_zone(engine: Any) -> None:
    """MySQL writes TIMESTAMP in its time_zone: read there, stored as the instant (UTC)."""
    stamp = temporal("t", "DateTime64(0, 'UTC')", "Europe/Berlin", pg=False)
    assert stamp is not None
    assert _convert(engine, stamp, ["2024-07-01 12:00:00", "2024-01-01 00:00:00", "0000-00-00 00:00:00"]) == [
        "2024-07-01 10:00:00",
        "2023-12-31 23:00:00",
        None,
    ]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_postgres_timestamptz_with_offsets(engine: Any, zone: str) -> None:
    """PostgreSQL writes timestamptz in the session's zone (the engine's) with its offset; BC and
    infinity do not fit. In a zone with summer time the offset tells the two 02:30s apart."""
    stamp = temporal("t", "DateTime64(6, 'UTC')", zone, pg=True, offset=True)
    assert stamp is not None
    if zone == "UTC":
        texts = ["2024-01-01 00:00:01+00", "2024-01-01 00:00:01.5+00", "1000-01-01 00:00:00+00"]
        expected = ["2024-01-01 00:00:01.000000", "2024-01-01 00:00:01.500000", "1000-01-01 00:00:00.000000"]
    else:
        texts = ["2024-10-27 02:30:00+02", "2024-10-27 02:30:00+01", "2024-07-01 12:00:00.123456+02"]
        expected = ["2024-10-27 00:30:00.000000", "2024-10-27 01:30:00.000000", "2024-07-01 10:00:00.123456"]
    suffix = "+00" if zone == "UTC" else "+01"
    bad = ["infinity", "-infinity", f"0044-03-15 12:00:00{suffix} BC", f"12024-01-01 00:00:00{suffix}"]
    assert _convert(engine, stamp, texts + bad + [None]) == expected + [None] * len(bad) + [None]


def test_postgres_dates_and_wall_clocks(engine: Any) -> None:
    date = temporal("t", "Date32", "UTC", pg=True)
    wall = temporal("t", "DateTime64(6, 'UTC')", "UTC", pg=True)
    assert date is not None and wall is not None
    assert _convert(engine, date, ["2024-02-29", "0044-03-15 BC", "infinity", "1000-01-01"]) == [
        "2024-02-29",
        None,
        None,
        "1000-01-01",
    ]
    assert _convert(engine, wall, ["2024-02-29 12:34:56.78", "2024-02-29 12:34:56", "0044-03-15 12:00:00 BC"]) == [
        "2024-02-29 12:34:56.780000",
        "2024-02-29 12:34:56.000000",
        None,
    ]


def test_numerics(engine: Any) -> None:
    free = decimal("t", "Decimal(38, 19)", free=True)
    texts: list[str | None] = [
        "3.1415926535897932384",
        "3.14159265358979323846",
        "0.10000000000000000000000",
        "NaN",
        "Infinity",
    ]
    texts += ["123456789012345678901234567890", "-12.5"]
    assert _convert(engine, free, texts) == ["3.1415926535897932384", None, "0.1", None, None, None, "-12.5"]
    declared = decimal("t", "Decimal(12, 2)", free=False)
    got = _convert(engine, declared, ["12.50", "NaN", "-0.01", "9999999999.99"])
    assert got == ["12.5", None, "-0.01", "9999999999.99"]
