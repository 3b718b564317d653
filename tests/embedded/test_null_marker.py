"""CSV/TSV without `\\N` read with the engine's NULL check off; with one, as before.

`input_format_null_as_default = 0` saves a quarter of the parse, and gives the
same rows only where no field is `\\N` (a String column would keep the two
characters instead of becoming empty; a number column would fail). The bytes
are searched (the head first, the rest while the engine reads), and the tests
compare every way a file loads (whole, in byte ranges, as two halves) with the
engine's own reading at its defaults, for a `\\N` early, late, or nowhere.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import chute
from chute import nullcheck
from chute.engine import open_engine
from chute.load import commit as load_commit
from chute.sql import quote_str

from ..harness.data import halves_for_every_file

ROWS = 4_000
STRUCTURE = "id UInt64, ts DateTime('UTC'), who String, n UInt8"
PROVENANCE = "_source String, _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, _load_id String"
SAME = "SELECT count() AS c, sum(cityHash64(id, ts, who, n)) AS h FROM {source}"


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


@pytest.mark.parametrize("nulls", list(NULLS))
@pytest.mark.parametrize("how", ["whole", "ranges", "halves"])
@pytest.mark.parametrize("fmt", ["CSV", pytest.param("TSV", marks=pytest.mark.slow)])
def test_rows_are_the_engines_own_reading(
    tmp_path: Path,
    target: str,
    monkeypatch: pytest.MonkeyPatch,
    null_checks: list[bool],
    fmt: str,
    how: str,
    nulls: str,
) -> None:
    monkeypatch.setattr(nullcheck, "HEAD_BYTES", 4096)
    text_nulls, number_nulls = NULLS[nulls]
    path = _events(tmp_path / f"events.{fmt.lower()}", fmt, text_nulls, number_nulls)
    engine = open_engine(target)
    # Columns that cannot hold NULL (a table chute made from these files would have Nullable ones).
    partition = "PARTITION BY toYYYYMMDD(ts)" if how == "halves" else ""
    engine.execute(f"CREATE TABLE events ({STRUCTURE}, {PROVENANCE}) ENGINE = MergeTree {partition} ORDER BY tuple()")
    options = chute.LoadOptions(workers=2)
    if how == "ranges":
        options = chute.LoadOptions(workers=2, split_bytes=path.stat().st_size // 5)
    halves = halves_for_every_file(monkeypatch) if how == "halves" else []
    report = chute.load([str(path)], "events", target=target, options=options)
    assert report.ok and report.rows_loaded == ROWS and report.rows_rejected == 0
    assert halves == ([str(path)] if how == "halves" else [])
    if how == "ranges":
        assert len(report.files) >= 4
    # The check is off exactly until a `\N` is seen; then that INSERT is made again with it on.
    if nulls == "none":
        assert null_checks and all(null_checks)
    elif nulls == "early" and how != "ranges":
        assert null_checks == [False]
    elif how != "ranges":
        assert null_checks == [True, False]
    else:  # ranges without a `\N` read with the check off, each range that holds one ends with it on
        assert False in null_checks and len(null_checks) >= len(report.files)

    own = f"file({quote_str(str(path))}, {quote_str(fmt + 'WithNames')}, {quote_str(STRUCTURE)})"
    assert engine.rows(SAME.format(source="events")) == engine.rows(SAME.format(source=own))
    # The engine's NULL became the column's default, as the engine itself reads it.
    counts = engine.rows("SELECT countIf(who = '') AS empty, countIf(n = 0) AS zero FROM events")[0]
    zeros = number_nulls | set(range(200, ROWS + 1, 200))
    assert (int(counts["empty"]), int(counts["zero"])) == (len(text_nulls), len(zeros))


def test_search_finds_the_marker_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Across buffer boundaries, in files full of backslashes, in any byte range."""
    monkeypatch.setattr(nullcheck, "SEARCH_BUFFER", 4096)
    rng = random.Random(11)
    path = tmp_path / "bytes"
    for _ in range(60):
        # Backslashes everywhere, never before an N but for the one planted (most of the time).
        data = bytearray(rng.choice(b"\\\\ab,\n") for _ in range(rng.randrange(1, 30_000)))
        if rng.random() < 0.7:
            at = rng.randrange(len(data))
            data[at : at + 2] = b"\\N"
        path.write_bytes(bytes(data))
        for start, end in [(0, len(data)), (1, 4097), (4095, 4097), (len(data) // 3, len(data))]:
            assert nullcheck.free_of_null_marker(str(path), start, end) == (b"\\N" not in data[start:end])


@pytest.mark.parametrize("where", ["first file", "a later file", "nowhere"])
def test_a_batch_of_files_is_searched_from_its_first_mib(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch, null_checks: list[bool], where: str
) -> None:
    """Only the batch's first bytes are read before its INSERT (files on disk are not read twice in a
    row); a `\\N` in a later file is found while the engine reads, and the batch reads again."""
    monkeypatch.setattr(nullcheck, "HEAD_BYTES", 4096)
    paths = []
    for i in range(6):
        nulls = {5, 300} if (where, i) in (("first file", 0), ("a later file", 4)) else set()
        paths.append(_events(tmp_path / f"part{i}.csv", "CSV", set(), nulls))
    engine = open_engine(target)
    engine.execute(f"CREATE TABLE events ({STRUCTURE}, {PROVENANCE}) ENGINE = MergeTree ORDER BY tuple()")
    report = chute.load([str(tmp_path)], "events", target=target, options=chute.LoadOptions(workers=2))
    assert report.ok and report.rows_loaded == 6 * ROWS and report.rows_rejected == 0
    assert null_checks == {"first file": [False], "a later file": [True, False], "nowhere": [True]}[where]
    own = f"file({quote_str(str(tmp_path / 'part*.csv'))}, 'CSVWithNames', {quote_str(STRUCTURE)})"
    assert engine.rows(SAME.format(source="events")) == engine.rows(SAME.format(source=own))


@pytest.mark.parametrize("fmt", ["CSV", "TSV"])
def test_nested_columns_keep_the_check(tmp_path: Path, target: str, null_checks: list[bool], fmt: str) -> None:
    """In an Array, Tuple or Map, `NULL` is a NULL too (no `\\N` needed): such tables keep the check."""
    sep = "," if fmt == "CSV" else "\t"
    quote = '"' if fmt == "CSV" else ""
    path = tmp_path / f"nested.{fmt.lower()}"
    rows = [sep.join(["id", "xs", "m"])]
    rows += [sep.join([str(i), f"{quote}[{i},NULL]{quote}", f"{quote}{{'k':NULL}}{quote}"]) for i in range(1, 101)]
    path.write_text("\n".join(rows) + "\n")
    engine = open_engine(target)
    engine.execute(
        f"CREATE TABLE nested (id UInt64, xs Array(Int64), m Map(String, Int64), {PROVENANCE}) "
        "ENGINE = MergeTree ORDER BY id"
    )
    report = chute.load([str(path)], "nested", target=target)
    assert report.ok and report.rows_loaded == 100 and report.rows_rejected == 0
    assert null_checks == [False]
    got = engine.rows("SELECT countIf(xs[2] = 0 AND m['k'] = 0) AS defaults, sum(xs[1]) AS s FROM nested")[0]
    assert (int(got["defaults"]), int(got["s"])) == (100, 5050)
