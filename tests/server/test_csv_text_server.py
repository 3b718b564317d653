"""CSV/TSV text into the real clickhouse-server (18.16): spaces around unquoted CSV text kept
(its parser trims them, so auto reads such files here), TSV lines ending in CRLF, blank lines."""

from __future__ import annotations

from pathlib import Path

import chute

from ..harness.servers import server_query


def _rows(url: str, sql: str) -> list[list[str]]:
    return [line.split("\t") for line in server_query(url, sql + " FORMAT TSV").splitlines() if line]


def test_auto_keeps_spaces_around_csv_text(tmp_path: Path, server_url: str) -> None:
    path = tmp_path / "ws.csv"
    path.write_bytes(b"id,s\n1,  padded  \n2,\ttab\t\n")
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.ok and report.rows_loaded == 2, report.files
    assert "server-parse" not in report.methods, report.methods
    got = _rows(server_url, "SELECT id, s, _source_row FROM t ORDER BY id")
    assert got == [["1", "  padded  ", "1"], ["2", "\\ttab\\t", "2"]]


def test_tsv_with_crlf_and_blank_lines(tmp_path: Path, server_url: str) -> None:
    crlf = tmp_path / "w.tsv"
    crlf.write_bytes(b"a\tb\r\n1\tx\r\n2\ty\r\n")
    blank = tmp_path / "b.tsv"
    blank.write_bytes(b"a\tb\n3\tz\n\n4\tw\n\n")
    report = chute.load([str(crlf), str(blank)], table="t", target=server_url)
    assert report.ok, report.files
    assert (report.rows_loaded, report.rows_rejected) == (4, 0)
    got = _rows(server_url, "SELECT a, b, _source_row FROM t ORDER BY a")
    assert got == [["1", "x", "1"], ["2", "y", "2"], ["3", "z", "1"], ["4", "w", "3"]]
