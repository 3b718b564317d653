"""Cutting text files into byte ranges at row boundaries (no engine involved)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from chute.sources import ranges
from chute.sources.ranges import count_bytes, halve, split_points


def _rows(data: bytes, cuts: list[tuple[int, int]]) -> list[bytes]:
    return [data[s:e] for s, e in cuts]


def test_a_small_file_is_one_range(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'{"a":1}\n')
    assert split_points(str(path), "JSONEachRow", 8, 100) == [(0, 8)]


def test_json_lines_are_cut_after_newlines_and_cover_the_file(tmp_path: Path) -> None:
    data = b"".join(b'{"n":%d}\n' % i for i in range(1000))
    path = tmp_path / "a.json"
    path.write_bytes(data)
    cuts = split_points(str(path), "JSONEachRow", len(data), 1000)
    assert cuts[0][0] == 0 and cuts[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cuts))  # no gap, no overlap
    assert all(piece.endswith(b"\n") for piece in _rows(data, cuts))
    assert 5 <= len(cuts) <= 12


def test_csv_is_not_cut_inside_a_quoted_newline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranges, "SCAN_CHUNK", 64)
    row = b'1,"a value\nover two lines",x\n'
    data = row * 200
    path = tmp_path / "a.csv"
    path.write_bytes(data)
    cuts = split_points(str(path), "CSV", len(data), 500)
    assert len(cuts) > 3
    for start, _ in cuts:
        assert data[start:].startswith(b"1,") and data[:start].count(b'"') % 2 == 0


def test_count_bytes_matches_python(tmp_path: Path) -> None:
    data = bytes(range(256)) * 50 + b'""\n\n'
    path = tmp_path / "b.bin"
    path.write_bytes(data)
    assert count_bytes(str(path), b'"\n', 0, len(data)) == [data.count(b'"'), data.count(b"\n")]
    assert count_bytes(str(path), b"\n", 100, 3000) == [data[100:3000].count(b"\n")]


def test_halve_cuts_near_the_middle_at_a_row_start(tmp_path: Path) -> None:
    data = b"".join(b"%d,row\n" % i for i in range(10_000))
    path = tmp_path / "h.csv"
    path.write_bytes(data)
    found = halve(str(path), "CSV", len(data))
    assert found is not None
    cut, newlines = found
    assert abs(cut - len(data) // 2) < 20 and data[cut - 1 : cut] == b"\n"
    assert newlines == data[:cut].count(b"\n")
    path.write_bytes(b"no newline at all")
    assert halve(str(path), "TSV", 17) is None
