"""The layout advisor against the real embedded engine: types, honesty, valid DDL, cleanup."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.design import Proposal, design_sources, load_ddl_file, narrowest_int, propose, render_text
from chute.engine import Engine, open_engine
from chute.errors import ChuteError, UsageError
from chute.sql import quote_str

from ..harness.data import write_with_engine

ROWS = 3000

# Every value a pure function of the row number; written by the engine itself.
CRAFTED = f"""
SELECT
    toString(1000000000000 + number * 7919) AS id_str,
    toString(number % 200) AS small_str,
    leftPad(toString(number % 100), 3, '0') AS zero_padded,
    toString(toUInt128('18446744073709551616') + number) AS beyond_u64_str,
    formatDateTime(toDateTime('2026-03-01 00:00:00', 'UTC') + number * 3600, '%Y-%m-%dT%H:%i:%SZ', 'UTC') AS ts_z,
    formatDateTime(toDateTime('2026-03-01 00:00:00', 'UTC') + number * 3600, '%Y-%m-%dT%H:%i:%S+02:00', 'UTC')
        AS ts_plus2,
    concat(formatDateTime(toDateTime('2026-03-01 00:00:00', 'UTC') + number * 3600, '%Y-%m-%dT%H:%i:%S', 'UTC'),
           '.', leftPad(toString(number % 1000), 3, '0'), 'Z') AS ts_ms,
    if(number % 2 = 0,
       formatDateTime(toDateTime('2026-03-01 00:00:00', 'UTC') + number, '%Y-%m-%dT%H:%i:%SZ', 'UTC'),
       formatDateTime(toDateTime('2026-03-01 00:00:00', 'UTC') + number, '%Y-%m-%dT%H:%i:%S-05:30', 'UTC'))
        AS ts_mixed,
    toString(toDate('2026-01-01') + number % 400) AS day,
    if(number = 7, '2026-02-30', toString(toDate('2026-01-01') + number % 28)) AS bad_day,
    arrayElement(['red', 'green', 'blue'], 1 + number % 3) AS color,
    concat('text-', toString(cityHash64(number))) AS free_text,
    if(number % 10 = 0, NULL, number % 1000) AS sometimes_null,
    if(number % 10 = 0, NULL, arrayElement(['a', 'b'], 1 + number % 2)) AS sometimes_null_text,
    toUInt64(18446744073709551615 - number) AS big_u64,
    toInt64(2147483647) + number AS past_int32,
    toInt64(-2147483649) - number AS below_int32,
    number % 250 AS byte_range,
    number / 4 AS quarters,
    number / 10 + 0.1 AS tenths,
    arrayMap(i -> toString(i * 3), range(number % 4)) AS tags
FROM numbers({ROWS})
SETTINGS output_format_json_quote_64bit_integers = 0
"""


def write_crafted(engine: Engine, directory: Path, files: int = 2) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        select = CRAFTED.replace("FROM numbers(", f"FROM numbers({i * ROWS}, ")
        paths.append(write_with_engine(engine, directory / f"part_{i}.jsonl", "JSONEachRow", select))
    return paths


def scratch_tables(engine: Engine) -> list[str]:
    rows = engine.rows("SELECT name FROM system.tables WHERE startsWith(name, '_chute_design_')")
    return [str(r["name"]) for r in rows]


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Proposal]:
    """One full-sample proposal over the crafted files, shared by the type tests."""
    base = tmp_path_factory.mktemp("design")
    engine = open_engine(str(base / "db"))
    write_crafted(engine, base / "data")
    proposal = design_sources([str(base / "data")], "events", target=str(base / "db"), provenance=True)
    assert scratch_tables(engine) == []
    return base / "data", proposal


def types(proposal: Proposal) -> dict[str, str]:
    return {c.name: c.type for c in proposal.columns}


def test_types_of_crafted_columns(crafted: tuple[Path, Proposal]) -> None:
    _, proposal = crafted
    assert proposal.sample_complete and proposal.sample_rows == 2 * ROWS
    t = types(proposal)
    assert t["id_str"] == "UInt64"  # ids written as strings
    assert t["small_str"] == "UInt8"  # every row was sampled: exact, no headroom
    assert t["zero_padded"] == "LowCardinality(String)"  # '007' is not the integer 7
    assert t["beyond_u64_str"] == "String"  # no integer type holds it
    assert t["ts_z"] == "DateTime('UTC')"
    assert t["ts_plus2"] == "DateTime('Etc/GMT-2')"
    assert t["ts_ms"] == "DateTime64(3, 'UTC')"
    assert t["ts_mixed"] == "DateTime('UTC')"
    assert t["day"] == "Date"
    assert t["bad_day"] == "LowCardinality(String)"  # 2026-02-30 is no date
    assert t["color"] == "LowCardinality(String)"
    assert t["free_text"] == "String"
    assert t["sometimes_null"] == "Nullable(UInt16)"
    assert t["sometimes_null_text"] == "LowCardinality(Nullable(String))"
    assert t["big_u64"] == "UInt64"
    assert t["past_int32"] == "UInt32"
    assert t["below_int32"] == "Int64"
    assert t["byte_range"] == "UInt8"
    assert t["quarters"] == "Float32"
    assert t["tenths"] == "Float64"
    assert t["tags"] == "Array(UInt8)"
    assert t["_source_row"] == "UInt64"  # provenance=True adds what chute.load fills


def test_evidence_is_complete(crafted: tuple[Path, Proposal]) -> None:
    _, proposal = crafted
    assert len(proposal.layouts) >= 2
    assert any(t.order_by == "tuple()" for t in proposal.layouts)
    for trial in proposal.layouts:
        assert trial.bytes_on_disk > 0 and trial.bytes_per_row > 0
        assert set(trial.column_bytes) == {c.name for c in proposal.columns}
    assert proposal.winner in {t.name for t in proposal.layouts}
    assert all(c.reason and c.codec_reason for c in proposal.columns)
    # ORDER BY columns are never Nullable
    nullable = [c.name for c in proposal.columns if "Nullable" in c.type]
    assert not any(f"`{name}`" in proposal.order_by for name in nullable)
    # the time columns span 250 days: partition by month
    assert proposal.partition_by is not None and proposal.partition_by.startswith("toYYYYMM(")
    text = render_text(proposal)
    assert proposal.ddl in text and "bytes per row" in text and proposal.why in text


def test_proposal_loads_the_full_data(crafted: tuple[Path, Proposal], target: str, tmp_path: Path) -> None:
    data, proposal = crafted
    saved = tmp_path / "events.sql"
    saved.write_text(render_text(proposal))
    ddl = load_ddl_file(str(saved), table="loaded")
    assert ddl.startswith("CREATE TABLE IF NOT EXISTS `loaded`")
    engine = open_engine(target)
    engine.execute(ddl)
    report = chute.load([str(data)], table="loaded", target=target, options=chute.LoadOptions())
    assert report.ok and report.files_failed == 0 and report.rows_rejected == 0
    assert report.rows_loaded == report.table_rows == 2 * ROWS
    source = f"file({quote_str(str(data / '*.jsonl'))}, 'JSONEachRow')"
    checks = {
        "id_str": "sum(toUInt64(id_str))",
        "ts_plus2": "sum(toUnixTimestamp(parseDateTimeBestEffort(ts_plus2)))",
        "ts_ms": "sum(toUnixTimestamp64Milli(parseDateTime64BestEffort(ts_ms, 3)))",
        "zero_padded": "sum(cityHash64(zero_padded))",
    }
    loaded = {
        "id_str": "sum(id_str)",
        "ts_plus2": "sum(toUnixTimestamp(ts_plus2))",
        "ts_ms": "sum(toUnixTimestamp64Milli(ts_ms))",
        "zero_padded": "sum(cityHash64(zero_padded))",
    }
    for name, expr in checks.items():
        raw = "SETTINGS input_format_try_infer_datetimes = 0, input_format_try_infer_dates = 0"
        want = engine.rows(f"SELECT toString({expr}) AS v FROM {source} {raw}")[0]["v"]
        got = engine.rows(f"SELECT toString({loaded[name]}) AS v FROM loaded")[0]["v"]
        assert got == want, name
    assert int(engine.rows("SELECT count() AS n FROM loaded WHERE _source_row = 0")[0]["n"]) == 0


def test_partial_sample_keeps_headroom_and_enums_on_request(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    write_crafted(engine, tmp_path / "data", files=1)
    proposal = design_sources(
        [str(tmp_path / "data")], "t", target=target, sample_rows=500, enums=True, time_budget_s=0.5
    )
    t = types(proposal)
    assert not proposal.sample_complete and proposal.sample_rows == 500
    assert t["small_str"] == "UInt16"  # 0..199 seen; 4x headroom does not fit UInt8
    assert t["byte_range"] == "UInt16"
    assert t["color"] == "Enum8('blue' = 1, 'green' = 2, 'red' = 3)"
    assert any("time budget" in note for note in proposal.notes)
    assert any("headroom" in note for note in proposal.notes)
    assert scratch_tables(engine) == []
    engine.execute(proposal.ddl)  # valid even when cut short


def test_csv_text_is_tested_not_guessed(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    path = tmp_path / "x.csv"
    path.write_text("code,amount,label\n007,12,a\n008,13,b\n010,14,a\n")
    proposal = design_sources([str(path)], "t", target=target)
    t = types(proposal)
    assert t["code"] == "String"  # leading zeros: not an integer
    assert t["amount"] == "UInt8"
    engine.execute(proposal.ddl)
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and report.table_rows == 3
    assert engine.rows("SELECT code FROM t ORDER BY code LIMIT 1")[0]["code"] == "007"


def test_scratch_tables_are_dropped_even_on_failure(tmp_path: Path, target: str) -> None:
    engine = open_engine(target)
    engine.execute("CREATE TABLE _chute_design_killed_1_sample (x UInt8) ENGINE = MergeTree ORDER BY tuple()")
    bad = f"file({quote_str(str(tmp_path / 'missing.jsonl'))}, 'JSONEachRow')"
    with pytest.raises(ChuteError):
        propose(engine, [bad], "t")
    assert scratch_tables(engine) == []


def test_load_ddl_file_refuses_what_is_not_one_create_table(tmp_path: Path) -> None:
    path = tmp_path / "x.sql"
    path.write_text("-- comment\nDROP TABLE t;\n")
    with pytest.raises(UsageError, match="not a CREATE TABLE"):
        load_ddl_file(str(path))
    path.write_text("CREATE TABLE t (a UInt8) ENGINE = MergeTree ORDER BY a; DROP TABLE u;")
    with pytest.raises(UsageError, match="one CREATE TABLE"):
        load_ddl_file(str(path))
    path.write_text("create table `a;b` (a String DEFAULT ';') ENGINE = MergeTree ORDER BY a;\n")
    assert load_ddl_file(str(path)).startswith("CREATE TABLE IF NOT EXISTS `a;b` (a String")
    with pytest.raises(UsageError):
        load_ddl_file(str(tmp_path / "missing.sql"))


def test_narrowest_int() -> None:
    assert narrowest_int(0, 255, False) == "UInt8"
    assert narrowest_int(0, 255, True) == "UInt16"
    assert narrowest_int(-1, 127, False) == "Int8"
    assert narrowest_int(0, 2**64 - 1, True) == "UInt64"  # headroom never makes it refuse
    assert narrowest_int(-1, 2**63, False) is None  # no type holds both


def test_design_cli_and_load_design_auto_end_to_end(tmp_path: Path) -> None:
    """`chute design > FILE.sql`, `load --design FILE.sql`, and `load --design auto`."""
    import json as _json
    import subprocess
    import sys

    data = tmp_path / "data"
    data.mkdir()
    lines = [
        f'{{"user_id": "{1000 + i % 50}", "kind": "{["a", "b", "c"][i % 3]}", '
        f'"at": "2026-01-01T00:{i % 60:02d}:00Z", "n": {i}}}'
        for i in range(3000)
    ]
    (data / "part.jsonl").write_text("\n".join(lines) + "\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "chute.cli", *args], capture_output=True, text=True, timeout=300)

    design = cli("design", str(data), "--table", "t", "--target", str(tmp_path / "m"), "--sample-rows", "3000")
    assert design.returncode == 0, design.stderr
    assert "CREATE TABLE" in design.stdout
    saved = tmp_path / "t.sql"
    saved.write_text(design.stdout)
    from_file = cli(
        "load", str(data), "-t", "from_file", "--target", str(tmp_path / "db1"), "--design", str(saved), "--json"
    )
    assert from_file.returncode == 0, from_file.stderr
    report = _json.loads(from_file.stdout)
    assert report["rows_loaded"] == 3000 and report["rows_rejected"] == 0 and "from_file" in report["ddl"]
    auto = cli("load", str(data), "-t", "t", "--target", str(tmp_path / "db2"), "--design", "auto", "--json")
    assert auto.returncode == 0, auto.stderr
    report = _json.loads(auto.stdout)
    assert report["rows_loaded"] == 3000 and report["table_rows"] == 3000
    assert "UInt" in report["ddl"] and "DateTime" in report["ddl"]
    leftovers = cli(
        "query",
        "SELECT count() FROM system.tables WHERE name LIKE '\\\\_chute\\\\_design%'",
        "--target",
        str(tmp_path / "db2"),
    )
    assert leftovers.stdout.strip() == "0"
