"""The byte search for blank lines in JSON lines (the engine numbers rows by record)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chute.nullcheck import SEARCH_BUFFER, blank_line_in

CASES = [
    (b'{"a":1}\n{"a":2}\n', False),
    (b'{"a":1}\n\n{"a":2}\n', True),
    (b'\n{"a":1}\n', True),
    (b'{"a":1}\r\n\r\n{"a":2}\r\n', True),
    (b'{"a":1}\r\n{"a":2}\r\n', False),
    (b'{"a":1}\n   \n{"a":2}', True),
    (b'{"a":1}\n \t\r\n{"a":2}', True),
    (b'{"a":1}\n  {"a":2}\n', False),  # indented, not blank
    (b'{"a":1}\n{"a":2}', False),
    (b'{"a":1}\n{"a":2}\n   ', False),  # trailing spaces after the last line: no row after them
]


@pytest.mark.parametrize("body,blank", CASES)
def test_small_files(tmp_path: Path, body: bytes, blank: bool) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(body)
    assert blank_line_in(str(path), 0, len(body)) is blank


@pytest.mark.parametrize("shift", [-3, -2, -1, 0, 1, 2])
@pytest.mark.parametrize("gap", [b"\n", b"\n  \n", b"\r\n \r\n"])
def test_a_blank_line_across_two_reads(tmp_path: Path, shift: int, gap: bytes) -> None:
    line = b'{"a":"' + b"x" * 100 + b'"}\n'
    body = line * (2 * SEARCH_BUFFER // len(line))
    cut = body.rindex(b"\n", 0, SEARCH_BUFFER + shift)  # a line end near the first read's end
    path = tmp_path / "a.jsonl"
    path.write_bytes(body)
    assert not blank_line_in(str(path), 0, len(body))
    spaced = body[:cut] + gap + body[cut:]
    path.write_bytes(spaced)
    assert blank_line_in(str(path), 0, len(spaced))
    # a byte range that starts after the blank line does not see it
    start = spaced.index(b"\n", cut + len(gap) + 1) + 1
    assert not blank_line_in(str(path), start, len(spaced))
