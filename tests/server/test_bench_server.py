"""`chute bench` against a ClickHouse server."""

from __future__ import annotations

import json
from pathlib import Path

from chute.bench import scratch_tables

from ..embedded.test_bench import _data, _run


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
