"""Loading into the embedded engine: tables, casts, provenance, ledger, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.errors import SourceError, UsageError
from chute.sql import quote_str

from ..harness.data import set_mtime


def write_jsonl(path: Path, start: int, count: int, extra: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f'{{"id": {i}, "name": "n{i}", "line": {k + 1}{extra}}}' for k, i in enumerate(range(start, start + count))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def count(target: str, where: str = "1") -> int:
    return int(open_engine(target).rows(f"SELECT count() AS n FROM t WHERE {where}")[0]["n"])


def test_directories_and_globs(tmp_path: Path, target: str) -> None:
    write_jsonl(tmp_path / "d" / "a.jsonl", 0, 10)
    write_jsonl(tmp_path / "d" / "sub" / "deeper" / "b.jsonl", 10, 10)
    (tmp_path / "d" / "README").write_text("not data")
    write_jsonl(tmp_path / "g" / "x1.jsonl", 20, 5)
    write_jsonl(tmp_path / "g" / "x2.jsonl", 25, 5)
    write_jsonl(tmp_path / "g" / "x3.jsonl", 30, 5)
    write_jsonl(tmp_path / "g" / "n" / "y.jsonl", 35, 5)
    report = chute.load([str(tmp_path / "d")], table="t", target=target)
    assert (report.files_loaded, report.rows_loaded) == (2, 20)
    report = chute.load([str(tmp_path / "g" / "x{1,3}.jsonl")], table="t", target=target)
    assert (report.files_loaded, report.rows_loaded) == (2, 10)
    report = chute.load([str(tmp_path / "g" / "**" / "*.jsonl")], table="t", target=target)
    assert report.files_loaded == 2  # x2 and n/y; x1 and x3 were loaded already
    assert report.files_skipped == 2
    assert count(target) == 40


def test_existing_table_gets_exact_types_and_defaults(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    engine.execute(
        "CREATE TABLE t (id UInt16, name LowCardinality(String), amount Decimal(10, 2), "
        "at DateTime('UTC'), missing String DEFAULT 'fallback', "
        "_source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, "
        "_load_id LowCardinality(String)) ENGINE = MergeTree ORDER BY id"
    )
    path = tmp_path / "x.jsonl"
    path.write_text(
        '{"id": "7", "name": "a", "amount": "12.34", "at": "2026-03-01T10:00:00Z"}\n'
        '{"id": 8, "name": "b", "amount": 1, "at": "2026-03-01 11:00:00"}\n'
    )
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and report.rows_loaded == 2
    rows = engine.rows("SELECT id, name, toString(amount) AS amount, toString(at) AS at, missing FROM t ORDER BY id")
    assert rows[0] == {"id": 7, "name": "a", "amount": "12.34", "at": "2026-03-01 10:00:00", "missing": "fallback"}
    assert rows[1]["amount"] == "1" and rows[1]["at"] == "2026-03-01 11:00:00"
    assert report.ddl is None


def test_created_table_ddl_order_and_partition(tmp_path: Path, target: str) -> None:
    write_jsonl(tmp_path / "a.jsonl", 0, 30)
    opts = chute.LoadOptions(order_by="(name, id)", partition_by="id % 3")
    report = chute.load([str(tmp_path / "a.jsonl")], table="db1.t", target=target, options=opts)
    assert report.ddl is not None and "PARTITION BY id % 3" in report.ddl and "ORDER BY (name, id)" in report.ddl
    engine = open_engine(target)
    assert engine.rows("SELECT count() AS n FROM db1.t")[0]["n"] == 30
    parts = engine.rows("SELECT uniqExact(partition_id) AS p FROM system.parts WHERE table = 't' AND active")
    assert parts[0]["p"] == 3


def test_provenance_values_match_the_files(tmp_path: Path, target: str) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", 0, 100)
    b = write_jsonl(tmp_path / "b.jsonl", 100, 50)
    set_mtime(a, 1_700_000_000)
    set_mtime(b, 1_700_000_123)
    report = chute.load([str(a), str(b)], table="t", target=target)
    engine = open_engine(target)
    rows = engine.rows(
        "SELECT _source, toUnixTimestamp(any(_source_mtime)) AS m, countIf(_source_row = line) AS ok, count() AS n, "
        "uniqExact(_load_id) AS ids, any(_load_id) AS lid FROM t GROUP BY _source ORDER BY _source"
    )
    assert rows[0] == {"_source": str(a), "m": 1_700_000_000, "ok": 100, "n": 100, "ids": 1, "lid": report.load_id}
    assert rows[1]["_source"] == str(b) and rows[1]["m"] == 1_700_000_123 and rows[1]["ok"] == 50


def test_no_provenance(tmp_path: Path, target: str) -> None:
    write_jsonl(tmp_path / "a.jsonl", 0, 10)
    write_jsonl(tmp_path / "b.jsonl", 10, 10)
    opts = chute.LoadOptions(provenance=False)
    report = chute.load([str(tmp_path)], table="t", target=target, options=opts)
    assert report.rows_loaded == 20 and [f.rows_loaded for f in report.files] == [10, 10]
    cols = [r["name"] for r in open_engine(target).rows("SELECT name FROM system.columns WHERE table = 't'")]
    assert not any(c.startswith("_") for c in cols)
    assert chute.load([str(tmp_path)], table="t", target=target, options=opts).rows_loaded == 0


def test_rerun_loads_nothing_and_new_files_only_load_themselves(tmp_path: Path, target: str) -> None:
    for i in range(3):
        write_jsonl(tmp_path / f"f{i}.jsonl", i * 10, 10)
    first = chute.load([str(tmp_path)], table="t", target=target)
    assert first.rows_loaded == 30
    again = chute.load([str(tmp_path)], table="t", target=target)
    assert (again.rows_loaded, again.files_skipped, again.files_loaded) == (0, 3, 0)
    write_jsonl(tmp_path / "f3.jsonl", 30, 10)
    write_jsonl(tmp_path / "f4.jsonl", 40, 10)
    delta = chute.load([str(tmp_path)], table="t", target=target)
    assert (delta.files_loaded, delta.rows_loaded) == (2, 20)
    assert {f.source for f in delta.files if f.state == "loaded"} == {
        str(tmp_path / "f3.jsonl"),
        str(tmp_path / "f4.jsonl"),
    }
    assert count(target) == 50
    assert open_engine(target).rows("SELECT uniqExact(id) AS u FROM t")[0]["u"] == 50


def test_changed_file_policies(tmp_path: Path, target: str) -> None:
    path = write_jsonl(tmp_path / "f.jsonl", 0, 10)
    other = write_jsonl(tmp_path / "g.jsonl", 100, 5)
    chute.load([str(tmp_path)], table="t", target=target)
    write_jsonl(path, 0, 12)
    set_mtime(path, 1_800_000_000)
    skipped = chute.load([str(tmp_path)], table="t", target=target)
    assert skipped.rows_loaded == 0 and any("changed" in n for n in skipped.notes)
    failed = chute.load([str(tmp_path)], table="t", target=target, options=chute.LoadOptions(on_change="error"))
    assert not failed.ok and "changed" in failed.files[0].error
    reloaded = chute.load([str(tmp_path)], table="t", target=target, options=chute.LoadOptions(on_change="reload"))
    assert reloaded.rows_loaded == 12
    assert count(target, f"_source = {quote_str(str(path))}") == 12
    assert count(target, f"_source = {quote_str(str(other))}") == 5
    assert count(target) == 17


def test_add_columns(tmp_path: Path, target: str) -> None:
    write_jsonl(tmp_path / "a.jsonl", 0, 5)
    chute.load([str(tmp_path / "a.jsonl")], table="t", target=target)
    newer = write_jsonl(tmp_path / "b.jsonl", 5, 5, extra=', "color": "red"')
    refused = chute.load([str(newer)], table="t", target=target)
    assert not refused.ok and "color" in refused.files[0].error
    assert count(target) == 5
    added = chute.load([str(newer)], table="t", target=target, options=chute.LoadOptions(add_columns=True))
    assert added.ok and added.rows_loaded == 5
    assert count(target, "color = 'red'") == 5


def test_bad_row_is_rejected_and_strict_fails_only_that_file(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    engine.execute(
        "CREATE TABLE t (id UInt32, name String, line UInt32, _source LowCardinality(String), "
        "_source_mtime DateTime64(3, 'UTC'), _source_row UInt64, _load_id LowCardinality(String)) "
        "ENGINE = MergeTree ORDER BY id"
    )
    for i in range(4):
        write_jsonl(tmp_path / f"good{i}.jsonl", i * 10, 10)
    bad = tmp_path / "zbad.jsonl"
    bad.write_text('{"id": 1, "name": "x", "line": 1}\n{"id": "not a number", "name": "y", "line": 2}\n')
    strict = chute.load([str(tmp_path)], table="t", target=target, options=chute.LoadOptions(strict=True))
    assert not strict.ok
    assert strict.files_loaded == 4 and strict.files_failed == 1
    failed = next(f for f in strict.files if f.state == "failed")
    assert failed.source == str(bad) and str(bad) in failed.error
    assert count(target) == 40 and count(target, f"_source = {quote_str(str(bad))}") == 0
    states = {r["source"]: r["state"] for r in chute.status("t", target)}
    assert states[str(bad)] == "failed" and states[str(tmp_path / "good0.jsonl")] == "done"

    kept = chute.load([str(tmp_path)], table="t", target=target)
    assert kept.ok and kept.files_loaded == 1 and kept.rows_loaded == 1 and kept.rows_rejected == 1
    assert count(target) == 41
    rejects = engine.rows("SELECT _source, _source_row, raw, error FROM t_rejects")
    assert rejects == [
        {
            "_source": str(bad),
            "_source_row": 2,
            "raw": '{"id": "not a number", "name": "y", "line": 2}',
            "error": "column id: not a number does not fit UInt32",
        }
    ]


def test_empty_file_fails_alone(tmp_path: Path, target: str) -> None:
    write_jsonl(tmp_path / "a.jsonl", 0, 5)
    (tmp_path / "empty.jsonl").write_text("")
    report = chute.load([str(tmp_path)], table="t", target=target)
    assert report.files_loaded == 1 and report.files_failed == 1
    assert "empty file" in next(f.error for f in report.files if f.state == "failed")


def test_header_only_csv_loads_zero_rows(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    engine.execute("CREATE TABLE t (a UInt32, b String) ENGINE = MergeTree ORDER BY a")
    (tmp_path / "h.csv").write_text("a,b\n")
    report = chute.load([str(tmp_path / "h.csv")], table="t", target=target)
    assert report.ok and report.files_loaded == 1 and report.rows_loaded == 0


@pytest.mark.parametrize(
    "name,error",
    [
        ("missing.jsonl", "no such file"),
        ("data.xyz", "cannot tell the format"),
        ("data.zip", "archives are not supported"),
    ],
)
def test_bad_sources_raise_before_loading(tmp_path: Path, target: str, name: str, error: str) -> None:
    if not name.startswith("missing"):
        (tmp_path / name).write_bytes(b"x")
    with pytest.raises(SourceError, match=error):
        chute.load([str(tmp_path / name)], table="t", target=target)


def test_broken_symlink_is_an_error(tmp_path: Path, target: str) -> None:
    os.symlink(tmp_path / "nowhere.jsonl", tmp_path / "link.jsonl")
    with pytest.raises(SourceError, match=r"link\.jsonl"):
        chute.load([str(tmp_path / "link.jsonl")], table="t", target=target)


@pytest.mark.parametrize("table", ["bad-name", "a.b.c", "x; DROP TABLE y", "_chute_ledger", ""])
def test_invalid_table_names(tmp_path: Path, target: str, table: str) -> None:
    write_jsonl(tmp_path / "a.jsonl", 0, 1)
    with pytest.raises(UsageError):
        chute.load([str(tmp_path / "a.jsonl")], table=table, target=target)


def test_report_json_has_the_promised_keys(tmp_path: Path, target: str) -> None:
    write_jsonl(tmp_path / "a.jsonl", 0, 5)
    data = json.loads(chute.load([str(tmp_path)], table="t", target=target).to_json())
    for key in (
        "load_id",
        "files_total",
        "files_loaded",
        "files_skipped",
        "rows_read",
        "rows_loaded",
        "rows_rejected",
        "bytes_in",
        "seconds",
        "rows_per_s",
        "table_rows",
        "table_bytes_on_disk",
    ):
        assert key in data
    assert data["rows_read"] == data["rows_loaded"] + data["rows_rejected"] == 5
    assert data["table_bytes_on_disk"] > 0


def test_nullable_key_detection_matches_whole_names() -> None:
    from chute.schema import Column, create_table_sql
    from chute.sql import TableName

    columns = [Column("e", "Nullable(String)"), Column("user_id", "UInt64")]
    assert "allow_nullable_key" not in create_table_sql(TableName(None, "t"), columns, "(user_id)", None)
    assert "allow_nullable_key" in create_table_sql(TableName(None, "t"), columns, "(user_id, e)", None)
    assert "allow_nullable_key" in create_table_sql(TableName(None, "t"), columns, "(`e`)", None)
