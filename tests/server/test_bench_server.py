"""`chute bench` against a ClickHouse server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from chute.bench import scratch_tables
from chute.engine import open_engine

from ..harness.data import write_with_engine


def _data(tmp_path: Path) -> Path:
    engine = open_engine(str(tmp_path / "gen"))
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        write_with_engine(
            engine,
            data / f"d{i}.json.gz",
            "JSONEachRow",
            f"SELECT number AS id, toString(number) AS s FROM numbers({i * 5000}, 5000)",
            "gzip",
        )
    engine.close()
    return data


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", "bench", *args], capture_output=True, text=True, timeout=600
    )


def test_bench_server_compares_chute_and_pass_through(tmp_path: Path, server_url: str) -> None:
    data = _data(tmp_path)
    chart = tmp_path / "chart.html"
    proc = _run(str(data), "--target", server_url, "--chart", str(chart), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    methods = {r["method"] for r in report["results"]}
    assert "chute -> server" in methods and "raw POST, 4 parallel (server parses)" in methods
    assert all(r["rows"] == 15000 for r in report["results"])
    assert "<table>" in chart.read_text()
    assert scratch_tables(server_url) == []
