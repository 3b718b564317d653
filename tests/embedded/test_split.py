"""One big text file cut into byte ranges: same table as one stream, resumable mid-file."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chute
import chute.sources.ranges as ranges
from chute.engine import open_engine
from chute.sources.ranges import split_points

from ..harness.data import write_with_engine

# Values with the characters that make cutting hard: quotes, delimiters and
# newlines inside quoted CSV fields, escaped newlines in JSON and TSV.
ROWS_SQL = (
    "SELECT number + 1 AS id, concat('line one \"q\", x\\nline two ', toString(number)) AS text, "
    "if(number % 3 = 0, '', repeat('y', number % 50)) AS pad, number * 7 AS n FROM numbers({rows})"
)
CHECK = "SELECT count() AS c, sum(cityHash64(id, text, pad, n, _source, _source_row)) AS h FROM {table}"


@pytest.mark.parametrize(
    "name,fmt", [("data.csv", "CSVWithNames"), ("data.jsonl", "JSONEachRow"), ("data.tsv", "TSVWithNames")]
)
def test_ranges_load_the_same_table_as_one_stream(tmp_path: Path, target: str, name: str, fmt: str) -> None:
    engine = open_engine(target)
    rows = 30_000
    path = write_with_engine(engine, tmp_path / name, fmt, ROWS_SQL.format(rows=rows))
    size = path.stat().st_size
    split = chute.load([str(path)], "split", target=target, options=chute.LoadOptions(split_bytes=size // 7))
    assert split.ok and split.rows_loaded == rows
    assert len(split.files) >= 6, [f.source for f in split.files]
    whole = chute.load([str(path)], "whole", target=target, options=chute.LoadOptions(split_bytes=0))
    assert whole.ok and len(whole.files) == 1
    assert engine.rows(CHECK.format(table="split")) == engine.rows(CHECK.format(table="whole"))
    # Provenance names the file and numbers rows across the whole file.
    got = engine.rows("SELECT uniqExact(_source) AS s, countIf(_source_row != id) AS bad FROM split")[0]
    assert (int(got["s"]), int(got["bad"])) == (1, 0)
    again = chute.load([str(path)], "split", target=target, options=chute.LoadOptions(split_bytes=size // 7))
    assert again.rows_loaded == 0 and again.files_skipped == len(split.files)


def test_cut_points_are_row_starts(tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cut starts a record, also when quoted fields straddle the scan blocks."""
    monkeypatch.setattr(ranges, "SCAN_CHUNK", 4096)
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / "q.csv", "CSV", ROWS_SQL.format(rows=5000))
    data = path.read_bytes()
    cuts = split_points(str(path), "CSV", len(data), 10_000)
    assert len(cuts) > 20 and cuts[0][0] == 0 and cuts[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cuts))
    structure = "'id UInt64, text String, pad String, n UInt64'"
    for start, _ in cuts[1:]:
        # Before the cut: whole records only; after it: the next record, whole.
        head, tail = tmp_path / "head.csv", tmp_path / "tail.csv"
        head.write_bytes(data[:start])
        tail.write_bytes(data[start : start + 3000])
        before = engine.rows(f"SELECT count() AS c, max(id) AS m FROM file('{head}', 'CSV', {structure})")[0]
        first = engine.rows(
            f"SELECT id FROM file('{tail}', 'CSV', {structure}) LIMIT 1", settings={"input_format_allow_errors_num": 5}
        )
        assert int(before["c"]) == int(before["m"])
        assert int(first[0]["id"]) == int(before["c"]) + 1


def test_bad_rows_in_a_range_keep_file_row_numbers(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    lines = [json.dumps({"id": i, "n": i * 2}) for i in range(1, 20_001)]
    for bad in (3, 12_345, 19_999):
        lines[bad - 1] = '{"id": ' + str(bad) + ', "n": "not a number"}'
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    engine.execute(
        "CREATE TABLE t (id UInt64, n Int64, _source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), "
        "_source_row UInt64, _load_id LowCardinality(String)) ENGINE = MergeTree ORDER BY tuple()"
    )
    report = chute.load([str(path)], "t", target=target, options=chute.LoadOptions(split_bytes=60_000))
    assert len(report.files) > 3
    assert report.rows_loaded == 19_997 and report.rows_rejected == 3
    rejected = engine.rows("SELECT _source, _source_row FROM t_rejects ORDER BY _source_row")
    assert [int(r["_source_row"]) for r in rejected] == [3, 12_345, 19_999]
    assert {r["_source"] for r in rejected} == {str(path)}
    assert engine.rows("SELECT countIf(_source_row != id) AS bad FROM t")[0]["bad"] in (0, "0")


def _command(path: Path, db: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "chute.cli",
        "load",
        str(path),
        "--table",
        "t",
        "--target",
        str(db),
        "--split-size",
        "2MB",
        "--quiet",
    ]


def _checksum(db: Path) -> list[dict[str, object]]:
    code = (
        "import json, sys; from chute.engine import open_engine; e = open_engine(sys.argv[1]); "
        f"print(json.dumps(e.rows({CHECK.format(table='t')!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


@pytest.mark.slow
def test_sigkill_mid_file_then_rerun(tmp_path: Path) -> None:
    engine = open_engine(str(tmp_path / "gen"))
    path = write_with_engine(engine, tmp_path / "big.csv", "CSVWithNames", ROWS_SQL.format(rows=300_000))
    engine.close()
    clean = tmp_path / "clean"
    t0 = time.monotonic()
    subprocess.run(_command(path, clean), check=True)
    seconds = time.monotonic() - t0
    expected = _checksum(clean)
    assert int(str(expected[0]["c"])) == 300_000
    rng = random.Random(11)
    for trial in range(3):
        db = tmp_path / f"trial{trial}"
        for _ in range(2):
            proc = subprocess.Popen(_command(path, db))
            time.sleep(rng.uniform(0.3, 0.9) * seconds)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        subprocess.run(_command(path, db), check=True)
        assert _checksum(db) == expected, trial


@pytest.mark.parametrize("to_end", [False, True], ids=["pipe", "file at an offset"])
def test_range_fd_gives_the_engine_exactly_the_range(tmp_path: Path, target: str, to_end: bool) -> None:
    """A range read through `file(fd)`: a middle range comes through a pipe (several
    pipe-fulls), one that runs to the end is the file opened at its start."""
    path = tmp_path / "lines.txt"
    lines = [f"row {i} " + "x" * (i % 300) for i in range(40_000)]
    path.write_text("\n".join(lines) + "\n")
    data = path.read_bytes()
    start = data.index(b"\n", len(data) // 4) + 1
    end = len(data) if to_end else data.index(b"\n", 3 * len(data) // 4) + 1
    assert end - start > 2 * ranges.PIPE_BYTES or to_end
    expected = data[start:end].decode().splitlines()
    engine = open_engine(target)
    with ranges.range_fd(str(path), start, end) as fd:
        got = engine.rows(
            f"SELECT line FROM file({fd}, 'LineAsString', 'line String')", {"storage_file_read_method": "read"}
        )
    assert [r["line"] for r in got] == expected


def test_range_fd_left_unread_stops_its_feeder(tmp_path: Path) -> None:
    """Leaving the block before the engine read the pipe (a failed INSERT) ends the
    thread that fills it, instead of leaving it blocked on a full pipe."""
    import threading

    path = tmp_path / "big.bin"
    path.write_bytes(b"z" * (8 * ranges.PIPE_BYTES))
    before = threading.active_count()
    with ranges.range_fd(str(path), 10, 7 * ranges.PIPE_BYTES) as fd:
        assert os.read(fd, 5) == b"zzzzz"
    assert threading.active_count() == before


@pytest.mark.parametrize("split", [False, True])
def test_byte_counts_match_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split: bool) -> None:
    """Quote and newline counts of any byte range, by buffers and (past the bar) two threads."""
    monkeypatch.setattr(ranges, "COUNT_BUFFER", 4096)
    monkeypatch.setattr(ranges, "COUNT_SPLIT_BYTES", 10_000 if split else 2**40)
    rng = random.Random(7)
    data = bytes(rng.choice(b'ab"\n,') for _ in range(100_003))
    path = tmp_path / "bytes.csv"
    path.write_bytes(data)
    for start, end in [(0, len(data)), (1, 4096), (4095, 4097), (777, 90_001), (50, 50)]:
        expected = [data[start:end].count(b'"'), data[start:end].count(b"\n")]
        assert ranges.count_bytes(str(path), b'"\n', start, end) == expected
    # A range past the end of a file that got shorter counts what is there.
    assert ranges.count_bytes(str(path), b"\n", 0, len(data) + 10) == [data.count(b"\n")]


def test_csv_cuts_match_a_byte_by_byte_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cut after each wanted offset is the first newline outside quotes, also where quoted
    fields span several scan blocks and count buffers."""
    monkeypatch.setattr(ranges, "SCAN_CHUNK", 512)
    monkeypatch.setattr(ranges, "COUNT_BUFFER", 300)
    rng = random.Random(5)

    def walk(data: bytes, wanted: list[int]) -> list[int]:
        cuts: list[int] = []
        for goal in wanted:
            if cuts and goal < cuts[-1]:
                continue
            odd = data.count(b'"', 0, goal) % 2
            for i in range(goal, len(data)):
                if data[i] == ord('"'):
                    odd ^= 1
                elif data[i] == ord("\n") and not odd:
                    cuts.append(i + 1)
                    break
        return cuts

    path = tmp_path / "q.csv"
    for _ in range(30):
        fields = [
            rng.choice([b"a", b'"x,y"', b'"q""q"', b'"line\nline"', b'"' + b"\n" * rng.randrange(1, 900) + b'"'])
            for _ in range(rng.randrange(50, 400))
        ]
        data = b"".join(f + rng.choice([b",", b"\n"]) for f in fields)
        path.write_bytes(data)
        wanted = sorted(rng.sample(range(len(data)), min(len(data), 12)))
        assert ranges._csv_cuts(str(path), wanted, len(data)) == walk(data, wanted)
