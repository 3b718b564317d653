"""`chute export` from a ClickHouse server, and back."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.errors import ChuteError
from chute.export import ExportOptions, export

from ..harness.servers import TEST_PASSWORD


def test_round_trip_through_the_server(tmp_path: Path, target: str, server_url: str, clickhouse_server) -> None:  # type: ignore[no-untyped-def]
    database = server_url.rsplit("/", 1)[1]
    clickhouse_server.query(
        f"CREATE TABLE {database}.src (id UInt32, name String, note Nullable(String), price Decimal(18, 4), "
        "ts DateTime, tags Array(String)) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY id"
    )
    clickhouse_server.query(
        f"INSERT INTO {database}.src SELECT number, concat('n', toString(number)), "
        "if(number % 5 = 0, NULL, 'a \"quoted\",\\nnote'), toDecimal64(number / 3, 4), "
        "toDateTime('2025-01-01 00:00:00') + number * 977, [toString(number)] FROM numbers(20000)"
    )
    dest = tmp_path / "out"
    report = export("src", str(dest), server_url, ExportOptions(partition_by="toYYYYMM(ts)"))
    assert report.rows_written == 20000 and len(report.files) >= 7
    loaded = chute.load(str(dest), "back", target=server_url, options=chute.LoadOptions(provenance=False))
    assert loaded.ok and loaded.rows_loaded == 20000
    check = "SELECT count(), sum(cityHash64(id, name, note, toString(price), ts, tags)) FROM {db}.{t} FORMAT TSV"
    assert clickhouse_server.query(check.format(db=database, t="back")) == clickhouse_server.query(
        check.format(db=database, t="src")
    )
    types = "SELECT name, type FROM system.columns WHERE database = '{db}' AND table = '{t}' FORMAT TSV"
    assert clickhouse_server.query(types.format(db=database, t="back")) == clickhouse_server.query(
        types.format(db=database, t="src")
    )
    # The same files into the embedded engine: same rows.
    local = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert local.rows_loaded == 20000

    # The password travels inside the engine's url() call: an error must not show it.
    with pytest.raises(ChuteError) as info:
        export("SELECT throwIf(id = 3, 'bad row') AS x FROM src", str(tmp_path / "bad"), server_url)
    assert TEST_PASSWORD not in str(info.value)
