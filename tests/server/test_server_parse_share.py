"""auto on a server with cores of its own (issue 45, P3): the server parses a share of the
JSON-lines files, checked, while chute converts the rest (chute.load.balance); the files it
parses are proved cheaply where their values are plain (chute.load.checks.textproof) and checked in
full otherwise. Every value stays what client-convert stores; bad values are rejected rows."""

from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

import chute
from chute.load import balance, methods
from chute.load.verify import Verifier

from ..harness.servers import ClickHouseServer, server_query

PROVENANCE = "_source String, _source_mtime DateTime, _source_row UInt64, _load_id String"
COLUMNS = "id String, n UInt32, b UInt8, big Int64, t DateTime, d Date"


def _fresh(server: ClickHouseServer) -> str:
    database = f"share_{random.randrange(10**9)}"
    server.query(f"CREATE DATABASE {database}")
    for table in ("t", "c"):
        server.query(f"CREATE TABLE {database}.{table} ({PROVENANCE}, {COLUMNS}) ENGINE = MergeTree ORDER BY id")
    return f"{server.url}/{database}"


def _rows(url: str, sql: str) -> list[list[str]]:
    return [line.split("\t") for line in server_query(url, sql + " FORMAT TSV").splitlines() if line]


def _write(path: Path, rows: list[dict[str, Any]], separators: tuple[str, str] = (",", ":")) -> None:
    text = "".join(json.dumps(r, separators=separators) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(text))


def _data(directory: Path) -> None:
    """Six files of 200 rows: four plain, one with three values that do not fit (the server's
    parser wraps or rolls them over), one with spaces after each colon (valid, not plain)."""
    directory.mkdir()

    def rows(name: str) -> list[dict[str, Any]]:
        return [
            {
                "id": f"{name}{j:04d}",
                "n": 4_000_000_000 + j,
                "b": j % 2 == 0,
                "big": -(10**18) - j,
                "t": f"2024-02-{1 + j % 28:02d}T{j % 24:02d}:{j % 60:02d}:00Z",
                "d": f"2024-03-{1 + j % 31:02d}",
            }
            for j in range(200)
        ]

    for i in range(1, 5):
        _write(directory / f"{i}_plain.json.gz", rows(f"p{i}-"))
    bad = rows("bad-")
    bad[9]["n"] = 18446744073709551617
    bad[19]["t"] = "2024-02-30T10:00:00Z"
    bad[29]["d"] = "2024-13-45"
    _write(directory / "5_bad.json.gz", bad)
    _write(directory / "6_spaced.json.gz", rows("sp-"), separators=(", ", ": "))


@pytest.fixture()
def apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """chute held to one of two cores (as under `taskset -c 1`): the server has the other; costs
    that give the server half the bytes (the measured ones move with each measurement, and
    today's give it none)."""
    monkeypatch.setattr(methods, "usable_cores", lambda: 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    for name, cost in (("CONVERT_CLIENT", 5.0), ("CONVERT_SERVER", 2.0), ("PARSE_CLIENT", 3.0), ("PARSE_SERVER", 6.0)):
        monkeypatch.setattr(balance, name, cost)


def test_auto_shares_the_files_and_every_value_is_what_client_convert_stores(
    tmp_path: Path, clickhouse_server: ClickHouseServer, apart: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    _data(data)
    url = _fresh(clickhouse_server)
    full: list[str] = []
    real_full = Verifier._full

    def counted_full(self: Verifier, units: list[Any], columns: list[Any]) -> Any:
        full.extend(Path(u.key).name for u in units)
        return real_full(self, units, columns)

    monkeypatch.setattr(Verifier, "_full", counted_full)
    report = chute.load([str(data)], table="t", target=url)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (1197, 3), report.notes
    assert report.methods == {"client-convert": 4, "server-parse": 2}, report.method_why
    why = "auto: the server (1 core of its own) parses 50% of the bytes, checked, while this machine (1) converts"
    for method in ("server-parse", "client-convert"):
        assert any(w.startswith(f"{method}: {why}") for w in report.method_why), report.method_why
    assert "client-convert: bad rows: read here and checked record by record" in report.method_why
    # 4_plain was proved cheaply; 5_bad and 6_spaced got the full check (5_bad: read here).
    assert sorted(full) == ["5_bad.json.gz", "6_spaced.json.gz"], full
    assert any("5_bad" in n and "3 value(s) do not fit their columns; read here instead" in n for n in report.notes)
    assert _rows(url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row") == [
        ["10", "column n: 18446744073709551617 does not fit UInt32"],
        ["20", "column t: 2024-02-30T10:00:00Z does not fit DateTime"],
        ["30", "column d: 2024-13-45 does not fit Date"],
    ]
    converted = chute.load([str(data)], table="c", target=url, options=chute.LoadOptions(method="client-convert"))
    assert converted.ok and converted.rows_loaded == 1197
    values = "id, n, b, big, toUInt32(t), d, _source_row, _source"
    assert _rows(url, f"SELECT {values} FROM t ORDER BY id") == _rows(url, f"SELECT {values} FROM c ORDER BY id")
    assert _rows(url, "SELECT count(), uniqExact(_source, _source_row) FROM t") == [["1197", "1197"]]
    # Exactly once: nothing new to load.
    again = chute.load([str(data)], table="t", target=url)
    assert again.ok and again.rows_loaded == 0
    assert _rows(url, "SELECT count() FROM t") == [["1197"]]


def test_values_the_server_stored_otherwise_are_read_here(
    tmp_path: Path, clickhouse_server: ClickHouseServer, apart: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parser that changes plain text (here the stage's sums shifted by one) is caught by the
    cheap proof's sums too: the file is read here."""
    data = tmp_path / "data"
    _data(data)
    for name in ("5_bad.json.gz", "6_spaced.json.gz"):
        (data / name).unlink()
    url = _fresh(clickhouse_server)
    real = Verifier.server_sums

    def shifted(columns: list[Any]) -> list[str]:
        return [
            s.replace("intHash64(toUInt64(_source_row)", "intHash64(toUInt64(_source_row + 1)") for s in real(columns)
        ]

    monkeypatch.setattr(Verifier, "server_sums", staticmethod(shifted))
    report = chute.load([str(data)], table="t", target=url)
    assert report.ok and report.rows_loaded == 800 and report.methods == {"client-convert": 4}, report.method_why
    assert any("differ from chute's read of the file; read here instead" in n for n in report.notes), report.notes


def test_a_server_sharing_the_cores_gets_client_convert(
    tmp_path: Path, clickhouse_server: ClickHouseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(methods, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    data = tmp_path / "data"
    _data(data)
    url = _fresh(clickhouse_server)
    report = chute.load([str(data)], table="t", target=url)
    assert report.ok and report.methods == {"client-convert": 6}
    shared = "the server shares this machine's cores: client-convert costs the least CPU (7.4 s/GB in all)"
    assert report.method_why[0] == f"client-convert: auto: {shared}", report.method_why
    assert any("--spare-client lets it parse integers and dates" in n for n in report.notes), report.notes
