"""Files shaped like API dumps (keys absent in some records) load in one read: a sample of the
first lines tells the load to count missing values from the start, instead of a first read
that fails on the first absent key and a second one (issue #45). The counts stay exact, and
values no cheap reading can prove still get the full check."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import chute
from chute.engine import Engine, open_engine


@pytest.fixture()
def stage_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The INSERTs into stage tables that the load sends to the engine (observed, not changed)."""
    seen: list[str] = []
    real = Engine.execute

    def observed(self: Engine, sql: str, *args: Any, **kwargs: Any) -> Any:
        if sql.startswith("INSERT INTO `_chute_stage_"):
            seen.append(sql)
        return real(self, sql, *args, **kwargs)

    monkeypatch.setattr(Engine, "execute", observed)
    yield seen


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


COLUMNS = (
    "id UInt32, name String, views UInt64, at DateTime64(3, 'UTC'), "
    "user Tuple(id UInt64, geo Tuple(lat Float64, lon Float64)), tags Array(String)"
)


def _record(i: int) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": i,
        "name": f"nüme {i} 日本 🎮",
        "views": str(i * 3) if i % 5 == 0 else i * 3,  # a number sometimes sent as text
        "at": f"2021-06-01T10:{i % 60:02d}:{(i * 7) % 60:02d}" + (".125Z" if i % 3 == 0 else "Z"),
        "user": {"id": i * 11, "geo": {"lat": 1.5, "lon": -2.25}},
        "tags": ["a", "b"][: i % 3],
    }
    return record


def test_absent_keys_in_the_first_lines_are_counted_in_one_read(
    tmp_path: Path, target: str, stage_writes: list[str]
) -> None:
    data = tmp_path / "dumps"
    data.mkdir()
    expected_defaulted = 0
    for f in range(3):
        records = [_record(f * 1000 + i) for i in range(1000)]
        for i, record in enumerate(records):
            if i % 7 == 1:
                del record["views"]  # absent
                expected_defaulted += 1
            elif i % 11 == 2:
                record["at"] = None  # null into a column that is not Nullable
                expected_defaulted += 1
        _write(data / f"part-{f}.json.gz", records)
    engine = open_engine(target)
    engine.execute(f"CREATE TABLE t ({COLUMNS}) ENGINE = MergeTree ORDER BY id")
    engine.close()

    report = chute.load([str(data)], table="t", target=target)

    assert report.rows_loaded == 3000 and report.rows_rejected == 0
    assert report.rows_defaulted == expected_defaulted
    assert set(report.defaulted_columns) == {"views", "at"}
    assert len(stage_writes) == 1, "one read of the batch, no first try that fails on an absent key"
    engine = open_engine(target)
    got = engine.rows("SELECT id, views, toString(at) AS at FROM t WHERE id IN (1, 2, 3) ORDER BY id")
    assert got == [
        {"id": 1, "views": 0, "at": "2021-06-01 10:01:07.000"},  # views absent: its default
        {"id": 2, "views": 6, "at": "1970-01-01 00:00:00.000"},  # at null: its default
        {"id": 3, "views": 9, "at": "2021-06-01 10:03:21.125"},
    ]
    full = engine.rows("SELECT toUInt64(sum(views)) AS s, count() AS n FROM t")
    kept = sum((f * 1000 + i) * 3 for f in range(3) for i in range(1000) if i % 7 != 1)  # text or number
    assert full == [{"s": kept, "n": 3000}]


def test_a_key_absent_only_past_the_sample_is_still_counted(tmp_path: Path, target: str) -> None:
    data = tmp_path / "late"
    data.mkdir()
    records = [_record(i) for i in range(5000)]
    del records[4500]["views"]  # past the sampled first lines: the first read fails, then counts
    _write(data / "late.json.gz", records)
    engine = open_engine(target)
    engine.execute(f"CREATE TABLE t ({COLUMNS}) ENGINE = MergeTree ORDER BY id")
    engine.close()

    report = chute.load([str(data)], table="t", target=target)

    assert report.rows_loaded == 5000 and report.rows_defaulted == 1
    engine = open_engine(target)
    assert engine.rows("SELECT views FROM t WHERE id = 4500") == [{"views": 0}]


@pytest.mark.parametrize(
    ("column_type", "good", "bad"),
    [
        ("DateTime('UTC')", "2024-02-28T10:00:00Z", "2024-02-30T10:00:00Z"),  # rolls over to March 1st
        ("DateTime('UTC')", "2024-01-01 23:59:59", "2024-01-01 25:61:61"),  # rolls over to the next day
        ("DateTime64(3, 'UTC')", "2024-01-01T10:00:00.125Z", "2024-01-01T10:00:00.1259Z"),  # a digit dropped
        ("UInt32", 7, 18446744073709551617),  # wraps to 1
    ],
)
def test_values_no_quick_reading_proves_get_the_full_check(
    tmp_path: Path, target: str, column_type: str, good: object, bad: object
) -> None:
    data = tmp_path / "mixed.jsonl"
    lines = [{"id": i, "v": good} for i in range(3000)]
    lines[1700]["v"] = bad
    del lines[5]["v"]  # an absent key in the sample: the load counts from the start
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    engine = open_engine(target)
    engine.execute(f"CREATE TABLE t (id UInt32, v {column_type}) ENGINE = MergeTree ORDER BY id")
    engine.close()

    report = chute.load([str(data)], table="t", target=target)

    assert (report.rows_loaded, report.rows_rejected, report.rows_defaulted) == (2999, 1, 1)
    engine = open_engine(target)
    assert engine.rows("SELECT count() AS n FROM t WHERE id = 1700") == [{"n": 0}]
    rejects = engine.rows("SELECT _source_row AS r FROM t_rejects")
    assert rejects == [{"r": 1701}]
