"""The NULL check when the target is a ClickHouse server."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute import nullcheck
from chute.engine import open_engine
from chute.sql import quote_str

from ..embedded import test_null_marker as embedded_nulls
from ..embedded.test_null_marker import (
    NULLS,
    ROWS,
    STRUCTURE,
    _events,
)

null_checks = embedded_nulls.null_checks  # the fixture, for the tests below


@pytest.mark.parametrize("nulls", ["none", "late, text", "late, number"])
def test_into_a_server_the_rows_are_the_engines_own_reading(
    tmp_path: Path, target: str, server_url: str, monkeypatch: pytest.MonkeyPatch, null_checks: list[bool], nulls: str
) -> None:
    """The local engine converts with the check off; a late `\\N` reads the file again, on the server too."""
    from ..harness.servers import server_query

    monkeypatch.setattr(nullcheck, "HEAD_BYTES", 4096)
    text_nulls, number_nulls = NULLS[nulls]
    path = _events(tmp_path / "events.csv", "CSV", text_nulls, number_nulls)
    server_query(
        server_url,
        f"CREATE TABLE events ({STRUCTURE}, _source String, _source_mtime DateTime, _source_row UInt64, "
        "_load_id String) ENGINE = MergeTree ORDER BY id",
    )
    report = chute.load([str(path)], "events", target=server_url)
    assert report.ok and report.rows_loaded == ROWS and report.rows_rejected == 0
    assert null_checks == ([True] if nulls == "none" else [True, False])
    summary = "SELECT count(), sum(id), sum(length(who)), countIf(who = ''), countIf(n = 0), sum(n), sum(toUInt32(ts))"
    own = open_engine(target).text(
        f"{summary} FROM file({quote_str(str(path))}, 'CSVWithNames', {quote_str(STRUCTURE)})", fmt="TSV"
    )
    assert server_query(server_url, f"{summary} FROM events FORMAT TSV") == own
