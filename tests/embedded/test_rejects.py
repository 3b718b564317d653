"""No row lost: every input record is loaded or kept in `<table>_rejects` with a reason."""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine

from ..harness.data import write_with_engine

TABLE = (
    "CREATE TABLE t (id UInt32, small UInt8, name String, at DateTime('UTC'), "
    "_source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, "
    "_load_id LowCardinality(String)) ENGINE = MergeTree ORDER BY id"
)

JSON_CORPUS = [
    ('{"id": 1, "small": 1, "name": "ok", "at": "2026-01-01 00:00:00"}', None),
    ('{"id": 2, "small": 2, "name": "unterminated", "at": "2026-01-01 00:00:00"', "invalid JSON"),
    ('{"id": 3, "small": 3, "name": "right after a broken line", "at": "2026-01-01T00:00:03Z"}', None),
    ('{"id": "text", "small": 4, "name": "x", "at": "2026-01-01 00:00:00"}', "column id"),
    ('{"id": 5, "small": 300, "name": "out of range", "at": "2026-01-01 00:00:00"}', "column small"),
    ('{"id": 6, "small": -1, "name": "negative", "at": "2026-01-01 00:00:00"}', "column small"),
    ('{"id": 7, "small": 7, "name": "bad date", "at": "2026-13-45 99:00:00"}', "column at"),
    ("not json at all", "invalid JSON"),
    ('{"id": 9, "small": 9, "name": "\\u00e9t\\u00e9", "at": "2026-01-01 00:00:00"}', None),
    ("[1, 2, 3]", "not a JSON object"),
    ('{"id": 11, "small": 11, "name": null, "at": "2026-01-01 00:00:00"}', None),
    ('{"id": 12, "small": 12, "name": "missing date"}', None),
]


def _table(target: str):  # type: ignore[no-untyped-def]
    engine = open_engine(target)
    engine.execute(TABLE)
    return engine


def _accounted(report: chute.LoadReport, records: int) -> None:
    assert report.rows_read == report.rows_loaded + report.rows_rejected == records
    for f in report.files:
        assert f.state in ("loaded", "failed", "skipped")


def test_json_corpus_every_line_accounted(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(line for line, _ in JSON_CORPUS) + "\n")
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok
    _accounted(report, len(JSON_CORPUS))
    bad = {i + 1: why for i, (_, why) in enumerate(JSON_CORPUS) if why}
    assert report.rows_rejected == len(bad)
    rejects = engine.rows("SELECT _source_row AS row, raw, error FROM t_rejects ORDER BY row")
    assert [r["row"] for r in rejects] == sorted(bad)
    for r in rejects:
        assert bad[r["row"]] in r["error"], r
        assert r["raw"] == JSON_CORPUS[r["row"] - 1][0]
    loaded = engine.rows("SELECT id, _source_row AS row, name FROM t ORDER BY id")
    assert [(r["id"], r["row"]) for r in loaded] == [(1, 1), (3, 3), (9, 9), (11, 11), (12, 12)]
    assert loaded[2]["name"] == "été" and loaded[3]["name"] == ""


def test_rerun_after_rejects_keeps_one_copy_of_each(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(line for line, _ in JSON_CORPUS) + "\n")
    chute.load([str(path)], table="t", target=target)
    os.utime(path, (1_900_000_000, 1_900_000_000))
    chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(on_change="reload"))
    assert engine.rows("SELECT count() AS n FROM t")[0]["n"] == 5
    assert engine.rows("SELECT count() AS n FROM t_rejects")[0]["n"] == 7


CSV_TEXT = (
    "id,small,name,at\r\n"
    "1,1,plain,2026-01-01 00:00:00\r\n"
    '2,2,"comma, and ""quotes""",2026-01-01 00:00:00\r\n'
    '3,3,"two\nlines",2026-01-01 00:00:00\r\n'
    "4,4\r\n"
    "5,5,too,many,fields,2026-01-01 00:00:00\r\n"
    "6,600,range,2026-01-01 00:00:00\r\n"
    "x7,7,text id,2026-01-01 00:00:00\r\n"
    "8,8,last,2026-01-01 00:00:00\r\n"
)


def test_csv_corpus_with_bom_crlf_quotes_and_bad_rows(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    path = tmp_path / "mixed.csv"
    path.write_bytes(b"\xef\xbb\xbf" + CSV_TEXT.encode())
    records = len(list(csv.reader(io.StringIO(CSV_TEXT)))) - 1
    report = chute.load([str(path)], table="t", target=target)
    _accounted(report, records)
    assert report.rows_rejected == 4
    loaded = engine.rows("SELECT id, _source_row AS row, name FROM t ORDER BY id")
    assert [(r["id"], r["row"]) for r in loaded] == [(1, 1), (2, 2), (3, 3), (8, 8)]
    assert loaded[1]["name"] == 'comma, and "quotes"' and loaded[2]["name"] == "two\nlines"
    rejects = engine.rows("SELECT _source_row AS row, error FROM t_rejects ORDER BY row")
    assert [r["row"] for r in rejects] == [4, 5, 6, 7]
    assert "malformed record" in rejects[0]["error"] and "malformed record" in rejects[1]["error"]
    assert "column small" in rejects[2]["error"] and "column id" in rejects[3]["error"]


def test_invalid_utf8(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    json_path = tmp_path / "bad.jsonl"
    json_path.write_bytes(b'{"id": 1, "small": 1, "name": "ok"}\n{"id": 2, "small": 2, "name": "\xff\xfe"}\n')
    json_report = chute.load([str(json_path)], table="t", target=target)
    _accounted(json_report, 2)
    csv_path = tmp_path / "bad.csv"
    csv_path.write_bytes(b"id,small,name,at\n3,3,caf\xe9,2026-01-01 00:00:00\n")
    csv_report = chute.load([str(csv_path)], table="t", target=target)
    _accounted(csv_report, 1)
    # ClickHouse strings are bytes: the engine keeps them as they are, nothing is lost.
    loaded = engine.rows("SELECT count() AS n FROM t")[0]["n"]
    assert loaded == json_report.rows_loaded + csv_report.rows_loaded == 3


def test_truncated_gzip_fails_whole(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    body = "".join(f'{{"id": {i}, "small": 1, "name": "n"}}\n' for i in range(50_000)).encode()
    whole = gzip.compress(body)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])
    good = tmp_path / "fine.jsonl"
    good.write_text('{"id": 1, "small": 1, "name": "n"}\n')
    report = chute.load([str(tmp_path)], table="t", target=target)
    assert not report.ok and report.files_failed == 1 and report.files_loaded == 1
    failed = next(f for f in report.files if f.state == "failed")
    assert failed.source == str(path) and failed.error
    assert engine.rows("SELECT count() AS n FROM t")[0]["n"] == 1


def test_corrupt_parquet_footer_fails_whole(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    path = write_with_engine(engine, tmp_path / "x.parquet", "Parquet", "SELECT number AS id FROM numbers(100)")
    data = path.read_bytes()
    path.write_bytes(data[:-12] + b"\x00" * 12)
    report = chute.load([str(path)], table="t", target=target)
    assert not report.ok and report.files[0].state == "failed" and str(path) in report.files[0].error


def test_max_errors_count_and_share(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    lines = [f'{{"id": {i}, "small": 1, "name": "n"}}' for i in range(1, 1001)]
    lines[10] = '{"id": "bad"}'
    lines[20] = '{"id": "bad"}'
    path = tmp_path / "two_bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    over = chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(max_errors="1"))
    assert not over.ok and "2 of 1000 rows rejected" in over.files[0].error
    assert engine.rows("SELECT count() AS n FROM t")[0]["n"] == 0
    share = chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(max_errors="0.1%"))
    assert not share.ok
    within = chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(max_errors="0.2%"))
    assert within.ok and within.rows_loaded == 998 and within.rows_rejected == 2
    assert engine.rows("SELECT count() AS n FROM t_rejects")[0]["n"] == 2
    with pytest.raises(chute.UsageError):
        chute.load([str(path)], table="t", target=target, options=chute.LoadOptions(max_errors="lots"))


def test_files_that_change_or_vanish_during_the_load(tmp_path: Path, target: str) -> None:
    _table(target)
    paths = []
    for i in range(3):
        p = tmp_path / f"f{i}.jsonl"
        p.write_text("".join(f'{{"id": {i * 10 + k}, "small": 1, "name": "n"}}\n' for k in range(10)))
        paths.append(p)

    meddled: list[int] = []

    def meddle(files_done: int, rows: int, bytes_done: int) -> None:
        if files_done == 1 and not meddled:  # (told within a batch too: once is enough)
            meddled.append(files_done)
            paths[1].write_text(paths[1].read_text() + '{"id": 99, "small": 1, "name": "late"}\n')
            paths[2].unlink()

    opts = chute.LoadOptions(batch_files=1)
    report = chute.load([str(tmp_path)], table="t", target=target, options=opts, progress=meddle)
    states = {Path(f.source).name: (f.state, f.error) for f in report.files}
    assert states["f0.jsonl"][0] == "loaded"
    assert states["f1.jsonl"][0] == "failed" and "changed" in states["f1.jsonl"][1]
    assert states["f2.jsonl"][0] == "failed" and "f2.jsonl" in states["f2.jsonl"][1]
    again = chute.load([str(tmp_path)], table="t", target=target)
    assert again.ok and again.rows_loaded == 11


def test_tsv_bad_rows(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    path = tmp_path / "x.tsv"
    path.write_text(
        "id\tsmall\tname\tat\n1\t1\ta\t2026-01-01 00:00:00\n2\t999\tb\t2026-01-01 00:00:00\n3\t3\n4\t4\td\t\n"
    )
    report = chute.load([str(path)], table="t", target=target)
    _accounted(report, 4)
    assert [r["id"] for r in engine.rows("SELECT id FROM t ORDER BY id")] == [1, 4]
    assert [r["_source_row"] for r in engine.rows("SELECT _source_row FROM t_rejects ORDER BY 1")] == [2, 3]


def test_no_rejects_table_without_bad_rows(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    (tmp_path / "a.jsonl").write_text('{"id": 1, "small": 1, "name": "n"}\n')
    assert chute.load([str(tmp_path)], table="t", target=target).rows_rejected == 0
    assert engine.rows("SELECT count() AS n FROM system.tables WHERE name = 't_rejects'")[0]["n"] == 0


def test_blank_lines_are_no_records_but_count_as_lines(tmp_path: Path, target: str) -> None:
    engine = _table(target)
    path = tmp_path / "gaps.jsonl"
    path.write_text('{"id": 1, "small": 1, "name": "a"}\n\n{"id": "x"}\n   \n{"id": 3, "small": 3, "name": "c"}\n')
    report = chute.load([str(path)], table="t", target=target)
    _accounted(report, 3)
    assert [(r["id"], r["_source_row"]) for r in engine.rows("SELECT id, _source_row FROM t ORDER BY id")] == [
        (1, 1),
        (3, 5),
    ]
    assert engine.rows("SELECT _source_row FROM t_rejects") == [{"_source_row": 3}]


SKIPPABLE = [  # bad records the engine's parser skips alone (an unterminated object takes the next line too)
    ('{"id": "text", "small": 4, "name": "x", "at": "2026-01-01 00:00:00"}', "column id"),
    ('{"id": 7, "small": 7, "name": "bad date", "at": "2026-13-45 99:00:00"}', "column at"),
    ("not json at all", "invalid JSON"),
    ("[1, 2, 3]", "not a JSON object"),
    # values the parser would change without a word: flagged by the SELECT, then kept as rejects
    ('{"id": 8, "small": 8, "name": "rolls over", "at": "2026-01-01 25:61:61"}', "column at"),
    ('{"id": 18446744073709551617, "small": 9, "name": "wraps", "at": "2026-01-01 00:00:00"}', "column id"),
    ('{"id": 10, "small": "", "name": "empty text", "at": "2026-01-01 00:00:00"}', "column small"),
]


def _dirty_files(directory: Path, files: int, lines: int) -> dict[tuple[str, int], str]:
    """JSON-lines files with bad records spread over them; (file, line) -> expected reason."""
    directory.mkdir()
    expected = {}
    for f in range(files):
        out = []
        for n in range(1, lines + 1):
            if (n + f) % 37 == 0:
                text, why = SKIPPABLE[(n + f) % len(SKIPPABLE)]
                expected[(str(directory / f"part{f}.jsonl.gz"), n)] = why
            else:
                text = f'{{"id": {f * lines + n}, "small": {n % 200}, "name": "r{n}", "at": "2026-01-01 00:00:00"}}'
            out.append(text)
        (directory / f"part{f}.jsonl.gz").write_bytes(gzip.compress(("\n".join(out) + "\n").encode()))
    return expected


def test_dirty_json_batch_in_one_pass(tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several dirty files in one batch: good rows keep their line numbers, each bad one is
    kept with its reason, and no file needs the per-file careful pass."""
    from chute.load import careful_pass as load_careful_pass

    def no_careful(*args: object) -> None:
        raise AssertionError("the careful pass was not needed")

    monkeypatch.setattr(load_careful_pass.CarefulPass, "run", no_careful)
    engine = _table(target)
    expected = _dirty_files(tmp_path / "in", files=6, lines=500)
    report = chute.load([str(tmp_path / "in")], table="t", target=target)
    assert report.ok and report.rows_rejected == len(expected)
    _accounted(report, 6 * 500)
    rejects = engine.rows("SELECT _source, _source_row, error, raw FROM t_rejects")
    assert {(r["_source"], int(r["_source_row"])) for r in rejects} == set(expected)
    for r in rejects:
        assert expected[(r["_source"], int(r["_source_row"]))] in r["error"], r
    rows = engine.rows("SELECT _source, _source_row, id FROM t")
    for r in rows:  # the id encodes file and line: the row number must match it
        f = int(r["_source"].rsplit("part", 1)[1].split(".")[0])
        assert int(r["id"]) == f * 500 + int(r["_source_row"]), r
    assert len(rows) == 6 * 500 - len(expected)


def test_dirty_json_batch_with_blank_lines_or_over_budget(tmp_path: Path, target: str) -> None:
    """A blank line makes lines and records disagree: the careful pass takes over, still exact.
    A file over --max-errors fails alone; the rest of its batch loads."""
    engine = _table(target)
    expected = _dirty_files(tmp_path / "in", files=4, lines=300)
    blank = tmp_path / "in" / "part1.jsonl.gz"
    text = gzip.decompress(blank.read_bytes()).decode().split("\n")
    text.insert(10, "")
    blank.write_bytes(gzip.compress("\n".join(text).encode()))
    expected = {(k, n + 1 if k == str(blank) and n > 10 else n): why for (k, n), why in expected.items()}
    report = chute.load([str(tmp_path / "in")], table="t", target=target)
    assert report.ok and report.rows_rejected == len(expected)
    rejects = engine.rows("SELECT _source, _source_row FROM t_rejects")
    found = {(r["_source"], int(r["_source_row"])) for r in rejects}
    # Rejects are numbered by their line, the blank line counted.
    assert found == set(expected)

    worse = tmp_path / "worse"
    worse.mkdir()
    for i in range(3):
        lines = [f'{{"id": {i * 100 + n}, "small": 1, "name": "x", "at": "2026-01-01 00:00:00"}}' for n in range(100)]
        if i == 2:
            lines[5:25] = ["not json"] * 20
        else:
            lines[50] = "not json"
        (worse / f"w{i}.jsonl").write_text("\n".join(lines) + "\n")
    second = chute.load([str(worse)], table="t", target=target, options=chute.LoadOptions(max_errors="5%"))
    assert not second.ok
    states = {Path(f.source).name: f.state for f in second.files}
    assert states == {"w0.jsonl": "loaded", "w1.jsonl": "loaded", "w2.jsonl": "failed"}
    assert engine.rows("SELECT count() AS n FROM t WHERE _source LIKE '%/w2.jsonl'")[0]["n"] == 0
    assert second.rows_rejected == 22
