"""The NULL check when the target is a ClickHouse server."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute import nullcheck
from chute.engine import open_engine
from chute.load import commit as load_commit
from chute.sql import quote_str

ROWS = 4_000


STRUCTURE = "id UInt64, ts DateTime('UTC'), who String, n UInt8"


def _events(path: Path, fmt: str, text_nulls: set[int], number_nulls: set[int]) -> Path:
    """Events out of day order; `who` holds backslashes (TSV escapes, or text in CSV), but
    `\\N` (the engine's NULL) only in the rows of `text_nulls`; `n` in those of `number_nulls`."""
    sep = "," if fmt == "CSV" else "\t"
    lines = [sep.join(["id", "ts", "who", "n"])]
    for i in range(1, ROWS + 1):
        text = f"a\\\\b\\tc{i}" if fmt == "TSV" else f'"C:\\new ""x"" {i}"'
        who = "\\N" if i in text_nulls else text
        n = "\\N" if i in number_nulls else str(i % 200)
        day = 1 + (i * 7919) % 28
        lines.append(sep.join([str(i), f"2025-02-{day:02d} 00:00:{i % 60:02d}", who, n]))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture()
def null_checks(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each INSERT read with the engine's NULL check off."""
    seen: list[bool] = []
    original = load_commit.Commit.null_check_off

    def spy(self, batch, settings):  # type: ignore[no-untyped-def]
        off = original(self, batch, settings)
        assert off == (settings.get("input_format_null_as_default") == 0)
        seen.append(off)
        return off

    monkeypatch.setattr(load_commit.Commit, "null_check_off", spy)
    return seen


EARLY = set(range(1, ROWS + 1, 7))


LATE = {ROWS - 1000, ROWS - 3}


NULLS = {
    "none": (set(), set()),
    "early": (EARLY, set(range(1, ROWS + 1, 11))),
    # Past the first bytes: read with the check off until the search finds them.
    "late, text": (LATE, set()),  # the INSERT succeeds (`\\N` kept as text): the check before the commit
    "late, number": (set(), LATE),  # the INSERT fails to parse `\\N` as a number
}


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
