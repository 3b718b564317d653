"""Many small files into the embedded engine: few batches, rows read into a temporary table
first (chute.load.squash), and every guarantee as with a few big files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.load import squash

from .test_memory_partitioned import PEAK

FILES = 120
FILES_NESTED = 6000


def _write(directory: Path, files: int = FILES, lines: int = 3) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        path = directory / f"f{i:04d}.json"
        rows = [f'{{"id": {i * lines + j}, "name": "n{j}", "at": "2026-01-02T03:04:{j:02d}Z"}}' for j in range(lines)]
        path.write_text("\n".join(rows) + "\n")
        os.utime(path, ns=(1_700_000_000_123_456_789 + i * 1_000_000, 1_700_000_000_123_456_789 + i * 1_000_000))
        paths.append(path)
    return paths


@pytest.fixture()
def squashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many tables the loads squashed their files into."""
    made: list[int] = []
    table = squash.Squash.table

    def counted(self: squash.Squash, table_expr: str, read_as: list) -> str:  # type: ignore[type-arg]
        made.append(1)
        return table(self, table_expr, read_as)

    monkeypatch.setattr(squash.Squash, "table", counted)
    return made


def test_many_small_files_load_in_one_batch_with_exact_provenance(
    tmp_path: Path, target: str, squashed: list[int]
) -> None:
    paths = _write(tmp_path / "d")
    report = chute.load([str(tmp_path / "d")], table="t", target=target)
    assert (report.files_loaded, report.rows_loaded) == (FILES, FILES * 3)
    assert squashed == [1]  # one batch, read through one temporary table
    engine = open_engine(target)
    got = engine.rows(
        "SELECT _source AS s, count() AS n, groupArray(_source_row) AS r, any(toUnixTimestamp64Milli(_source_mtime)) "
        "AS m, groupArray(id) AS ids FROM (SELECT * FROM t ORDER BY id) GROUP BY _source ORDER BY _source"
    )
    assert [g["s"] for g in got] == [str(p) for p in paths]
    for i, g in enumerate(got):
        assert (g["n"], g["r"], g["ids"]) == (3, [1, 2, 3], [i * 3, i * 3 + 1, i * 3 + 2])
        assert int(g["m"]) == (1_700_000_000_123_456_789 + i * 1_000_000) // 1_000_000
    # Nothing is left of the temporary tables, and a re-run loads nothing.
    assert not engine.rows("SELECT name FROM system.tables WHERE name LIKE '%squash%'")
    again = chute.load([str(tmp_path / "d")], table="t", target=target)
    assert (again.files_loaded, again.files_skipped) == (0, FILES)


def test_a_bad_value_and_a_missing_key_among_many_small_files(tmp_path: Path, target: str, squashed: list[int]) -> None:
    """A batch squashed into a temporary table fails on one file's value: the batch splits and
    reads again, the bad row goes to the rejects, every other row loads once; a missing key is
    counted as defaulted."""
    paths = _write(tmp_path / "d")
    # The table first (its types from clean files), then the dirty set.
    chute.load([str(paths[0])], table="t", target=target)
    paths[7].write_text(
        '{"id": 21, "name": "n0", "at": "2026-01-02T03:04:00Z"}\n{"id": 22, "name": "n1"}\n'
        '{"id": 23, "name": "n2", "at": "2026-01-02T03:04:02Z"}\n'
    )
    paths[50].write_text(
        '{"id": 150, "name": "n0", "at": "2026-01-02T03:04:00Z"}\n'
        '{"id": 151, "name": "n1", "at": "2026-02-30T10:00:00Z"}\n'
        '{"id": 152, "name": "n2", "at": "2026-01-02T03:04:02Z"}\n'
    )
    report = chute.load([str(tmp_path / "d")], table="t", target=target)
    assert report.rows_loaded + report.rows_rejected == (FILES - 1) * 3
    assert report.rows_rejected == 1 and report.files_failed == 0
    assert squashed  # the batch took the squashed way first
    engine = open_engine(target)
    assert engine.rows("SELECT count() AS n, uniqExact(id) AS u FROM t")[0] == {"n": FILES * 3 - 1, "u": FILES * 3 - 1}
    rejects = engine.rows("SELECT _source AS s, _source_row AS r FROM t_rejects")
    assert rejects == [{"s": str(paths[50]), "r": 2}]
    defaulted = {f.source: f.rows_defaulted for f in report.files if f.rows_defaulted}
    assert defaulted == {str(paths[7]): 1}


def test_a_file_name_with_tab_backslash_and_quote_is_known_on_a_re_run(tmp_path: Path, target: str) -> None:
    """The ledger is read back as TSV: names that the format escapes come back as they were."""
    directory = tmp_path / "d"
    _write(directory, files=2)
    odd = directory / "we\tird\\na'me.json"
    odd.write_text('{"id": 99, "name": "x", "at": "2026-01-02T03:04:00Z"}\n')
    first = chute.load([str(directory)], table="t", target=target)
    assert first.files_loaded == 3
    again = chute.load([str(directory)], table="t", target=target)
    assert (again.files_loaded, again.files_skipped) == (0, 3)


def test_the_engine_takes_statements_over_256_kib(target: str) -> None:
    engine = open_engine(target)
    names = ", ".join(f"'{i:0200d}'" for i in range(2000))  # about 400 KiB
    assert engine.rows(f"SELECT length([{names}]) AS n")[0]["n"] == 2000


def test_many_small_csv_files_with_a_header_number_their_rows(tmp_path: Path, target: str, squashed: list[int]) -> None:
    directory = tmp_path / "c"
    directory.mkdir()
    for i in range(40):
        (directory / f"f{i:03d}.csv").write_text("id,name\n" + "".join(f"{i * 3 + j},n{j}\n" for j in range(3)))
    report = chute.load([str(directory)], table="t", target=target)
    assert (report.files_loaded, report.rows_loaded) == (40, 120)
    assert squashed
    got = open_engine(target).rows(
        "SELECT count() AS n, countIf(_source_row = id % 3 + 1) AS right, min(_source_row) AS lo, "
        "max(_source_row) AS hi FROM t"
    )[0]
    assert got == {"n": 120, "right": 120, "lo": 1, "hi": 3}


def test_many_small_nested_files_load_in_bounded_memory(tmp_path: Path) -> None:
    """The engine holds each block it inserts into the temporary table until it has a big
    block's rows (65,409), and a block of 5 rows of nested JSON holds ~190 KiB whatever its
    rows (4 KiB a column array): 10,000 such files peaked at 2.4 GB. Joined every few hundred
    rows, 6,000 files peak at ~370 MiB (935 before)."""
    data = tmp_path / "data"
    data.mkdir()
    for i in range(FILES_NESTED):
        rows = [
            f'{{"id": "{i}-{j}", "user": {{"id": {j}, "login": "u{j}", "geo": {{"lat": 1.5, "lon": -2.5}}, '
            f'"verified": true}}, "game": {{"id": "g", "name": "\u00e9t\u00e9"}}, "tags": ["a", "b"], '
            f'"scores": [1, 2], "segments": [{{"start": 1, "label": "x", "duration": 0.5}}], '
            f'"at": "2024-01-02T03:04:05.123Z", "n": "{j}", "f": {j}.5, "ok": false, "r": null, '
            f'"u": 18446744073709551610, "d": -{j}}}'
            for j in range(5)
        ]
        (data / f"f{i:04d}.json").write_text("\n".join(rows) + "\n")
    # The child reports its own VmHWM: a forked child's ru_maxrss starts at its parent's RSS
    # (a test process that has run the engine: 1.6 GB).
    argv = ["load", str(data), "--table", "t", "--target", str(tmp_path / "db"), "--quiet"]
    done = subprocess.run([sys.executable, "-c", PEAK, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    found = re.search(r"peak-rss-kib (\d+)", done.stderr)
    assert found, done.stderr
    peak = int(found.group(1)) // 1024
    assert open_engine(str(tmp_path / "db")).rows("SELECT count() AS n FROM t")[0]["n"] == FILES_NESTED * 5
    assert peak < 600, f"peak RSS {peak} MiB"
