"""`chute export`: partitioned files, a manifest, resumable runs, and a round trip back in."""

from __future__ import annotations

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
from chute.cli import main, parse_size
from chute.engine import open_engine
from chute.errors import ChuteError, UsageError
from chute.export import MANIFEST, TMP_SUFFIX, ExportOptions, export, partition_id

# Types that a careless round trip changes: LowCardinality, Nullable, Decimal,
# DateTime64 with a zone, arrays, small ints, a string with newlines and quotes.
TABLE_DDL = """
CREATE TABLE src (
    id UInt32, small Int8, name LowCardinality(String), note Nullable(String), price Decimal(18, 4),
    ts DateTime64(3, 'UTC'), day Date, tags Array(String), ok Bool, text String
) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY id
"""
ROWS = 30_000
FILL = f"""
INSERT INTO src SELECT number, toInt8(number % 200 - 100), concat('n', toString(number % 7)),
    if(number % 5 = 0, NULL, concat('note "', toString(number), '",\\nline two')),
    toDecimal64(number / 3, 4),
    toDateTime64('2025-01-01 00:00:00', 3, 'UTC') + toIntervalSecond((number * 977) % 31536000),
    toDate('2025-01-01') + number % 400, [toString(number), 'x'], number % 2 = 1,
    concat('tab\\there, comma, "quote"\\r\\n', toString(number))
FROM numbers({ROWS})
"""
CHECK = "SELECT count() AS n, sum(cityHash64(*)) AS h FROM {table}"
TYPES = (
    "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = '{table}' ORDER BY position"
)


def _make_source(target: str) -> None:
    engine = open_engine(target)
    engine.execute(TABLE_DDL)
    engine.execute(FILL)


def _same(target: str, table: str) -> None:
    engine = open_engine(target)
    assert engine.rows(CHECK.format(table=table)) == engine.rows(CHECK.format(table="src"))
    assert engine.rows(TYPES.format(table=table)) == engine.rows(TYPES.format(table="src"))


def _months(target: str) -> int:
    return int(open_engine(target).rows("SELECT uniqExact(toYYYYMM(ts)) AS n FROM src")[0]["n"])


@pytest.mark.parametrize(
    "fmt,compression",
    [("native", "zstd"), ("parquet", "zstd"), ("csv", "gzip"), ("jsonl", "lz4"), ("tsv", "none")],
)
def test_round_trip_keeps_rows_and_types(tmp_path: Path, target: str, fmt: str, compression: str) -> None:
    _make_source(target)
    dest = tmp_path / "out"
    report = export(
        "src", str(dest), target, ExportOptions(format=fmt, compression=compression, partition_by="toYYYYMM(ts)")
    )
    months = _months(target)
    assert report.rows_written == ROWS and report.partitions_total == months == len(report.files)
    manifest = json.loads((dest / MANIFEST).read_text())
    assert manifest["complete"] and manifest["rows"] == ROWS
    assert sum(f["rows"] for f in manifest["files"]) == ROWS
    for f in manifest["files"]:
        assert (dest / f["path"]).stat().st_size == f["bytes"]
    assert {c["name"]: c["type"] for c in manifest["columns"]}["name"] == "LowCardinality(String)"
    assert not [n for n in os.listdir(dest) if n.endswith(TMP_SUFFIX)]

    loaded = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.ok and loaded.rows_loaded == ROWS
    _same(target, "back")


def test_max_file_size_cuts_at_block_boundaries(tmp_path: Path, target: str) -> None:
    _make_source(target)
    dest = tmp_path / "out"
    opts = ExportOptions(format="csv", compression="zstd", max_file_bytes=20_000)
    report = export("src", str(dest), target, opts)
    assert len(report.files) > 3 and report.rows_written == ROWS
    names = {f.path for f in report.files}
    assert {"all.csv.zst", "all.001.csv.zst"} <= names
    # Each file is readable alone (a header line and whole rows), counts add up.
    engine = open_engine(target)
    for f in report.files:
        got = engine.rows(f"SELECT count() AS n FROM file('{dest / f.path}', 'CSVWithNames')")
        assert int(got[0]["n"]) == f.rows
    loaded = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.ok
    _same(target, "back")


def test_parquet_with_a_size_cap(tmp_path: Path, target: str) -> None:
    _make_source(target)
    report = export("src", str(tmp_path / "out"), target, ExportOptions(format="parquet", max_file_bytes=300_000))
    assert len(report.files) > 2 and sum(f.rows for f in report.files) == ROWS
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith(".")]
    loaded = chute.load(str(tmp_path / "out"), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.ok
    _same(target, "back")


def test_query_source_and_rerun_skips_finished_partitions(tmp_path: Path, target: str) -> None:
    _make_source(target)
    dest = tmp_path / "out"
    query = "SELECT id, name, ts FROM src WHERE id % 2 = 0"
    first = export(query, str(dest), target, ExportOptions(partition_by="toYYYYMM(ts)"))
    assert first.rows_written == ROWS // 2
    again = export(query, str(dest), target, ExportOptions(partition_by="toYYYYMM(ts)"))
    assert again.partitions_written == 0 and again.partitions_skipped == first.partitions_total

    # New rows in one month, a lost file in another: only those two are written again.
    engine = open_engine(target)
    engine.execute(
        "INSERT INTO src SELECT 1000000 + number * 2, 0, 'n', NULL, 0, '2025-02-03 00:00:00', "
        "'2025-02-03', [], true, '' FROM numbers(10)"
    )
    lost = next(f for f in first.files if not f.path.startswith("202502"))
    os.remove(dest / lost.path)
    (dest / f".{lost.path}.abcd{TMP_SUFFIX}").write_bytes(b"half a file")
    third = export(query, str(dest), target, ExportOptions(partition_by="toYYYYMM(ts)"))
    assert (
        third.partitions_written == 2
        and third.rows_written == next(f.rows for f in first.files if f.path.startswith("202502")) + 10 + lost.rows
    )
    assert not [n for n in os.listdir(dest) if n.endswith(TMP_SUFFIX)]
    loaded = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.rows_loaded == ROWS // 2 + 10


def test_failed_partition_leaves_no_file_under_its_name_and_rerun_finishes(tmp_path: Path, target: str) -> None:
    _make_source(target)
    engine = open_engine(target)
    engine.execute("CREATE TABLE fail_flag (x UInt8) ENGINE = Memory")
    engine.execute("INSERT INTO fail_flag VALUES (1)")
    # Planning reads only ts (the counts per month); the error strikes while March is written.
    query = (
        "SELECT *, throwIf(toYYYYMM(ts) = 202503 AND (SELECT count() FROM fail_flag) > 0, "
        "'boom in March') AS boom FROM src"
    )
    dest = tmp_path / "out"
    with pytest.raises(ChuteError, match="boom in March"):
        export(query, str(dest), target, ExportOptions(partition_by="toYYYYMM(ts)", workers=1))
    assert not (dest / "202503.native.zst").exists()
    manifest = json.loads((dest / MANIFEST).read_text())
    assert not manifest["complete"] and "202503" not in manifest["partitions"]
    engine.execute("TRUNCATE TABLE fail_flag")
    report = export(query, str(dest), target, ExportOptions(partition_by="toYYYYMM(ts)", workers=1))
    assert report.partitions_written >= 1 and (dest / "202503.native.zst").exists()
    assert json.loads((dest / MANIFEST).read_text())["complete"]
    loaded = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.rows_loaded == ROWS
    engine.execute("ALTER TABLE back DROP COLUMN boom")
    _same(target, "back")


@pytest.mark.slow
def test_sigkill_mid_export_then_rerun(tmp_path: Path) -> None:
    db = tmp_path / "db"
    engine = open_engine(str(db))
    engine.execute(TABLE_DDL)
    engine.execute(FILL.replace(str(ROWS), "600000"))
    engine.close()
    dest = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "chute.cli",
        "export",
        "src",
        str(dest),
        "--target",
        str(db),
        "--partition-by",
        "toYYYYMM(ts)",
        "--max-file-size",
        "2MB",
        "--workers",
        "1",
        "--quiet",
    ]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    clean_seconds = time.monotonic() - t0
    clean = json.loads((dest / MANIFEST).read_text())
    for name in os.listdir(dest):
        os.remove(dest / name)
    rng = random.Random(7)
    for _ in range(2):
        proc = subprocess.Popen(cmd)
        time.sleep(rng.uniform(0.25, 0.9) * clean_seconds)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    subprocess.run(cmd, check=True)
    after = json.loads((dest / MANIFEST).read_text())
    assert after["complete"] and after["rows"] == clean["rows"] == 600_000
    listed = {f["path"] for f in after["files"]}
    assert listed == {n for n in os.listdir(dest) if n != MANIFEST}
    assert listed == {f["path"] for f in clean["files"]}
    check = (
        "import sys, chute; from chute.engine import open_engine; "
        "r = chute.load(sys.argv[2], 'back', target=sys.argv[1], options=chute.LoadOptions(provenance=False)); "
        "e = open_engine(sys.argv[1]); "
        f"print(e.rows({CHECK.format(table='back')!r}) == e.rows({CHECK.format(table='src')!r}), r.rows_loaded)"
    )
    out = subprocess.run([sys.executable, "-c", check, str(db), str(dest)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "600000"]


def test_cli_export_and_errors(tmp_path: Path, target: str, capsys: pytest.CaptureFixture[str]) -> None:
    _make_source(target)
    open_engine(target)
    dest = tmp_path / "out"
    code = main(["export", "src", str(dest), "--target", target, "--partition-by", "toYYYYMM(ts)", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rows_written"] == ROWS and out["files_written"] == _months(target)
    # Another format into the same directory would mix two exports: refused.
    assert main(["export", "src", str(dest), "--target", target, "--format", "csv"]) == 2
    assert "another format" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    assert main(["export", "src", str(other), "--target", target]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["export", "src", str(tmp_path / "x"), "--target", target, "--format", "xml"]) == 2


def test_sizes_and_partition_ids() -> None:
    assert parse_size("256MB") == 256 * 2**20 and parse_size("1g") == 2**30 and parse_size("1000") == 1000
    with pytest.raises(UsageError):
        parse_size("lots")
    assert partition_id("202501") == "202501"
    assert partition_id(None) == "null"
    assert partition_id("../etc") != "../etc" and "/" not in partition_id("a/b")
    assert partition_id("_hidden").startswith("h")


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv"])
def test_nan_and_infinities_come_back(tmp_path: Path, target: str, fmt: str) -> None:
    """JSON has no NaN: the engine wrote NaN and the infinities as null, and a reload made them
    NULL, or 0 in a column that cannot be NULL."""
    engine = open_engine(target)
    engine.execute(
        "CREATE TABLE src (id UInt32, f Float64, g Float32, h Nullable(Float64)) ENGINE = MergeTree ORDER BY id"
    )
    engine.execute(
        "INSERT INTO src VALUES (1, nan, -inf, inf), (2, inf, nan, -inf), (3, -0., 1.5, NULL), (4, 2.5, 0, nan)"
    )
    dest = tmp_path / "out"
    assert export("src", str(dest), target, ExportOptions(format=fmt)).rows_written == 4
    loaded = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.ok and loaded.rows_loaded == 4, [f.error for f in loaded.files]
    shown = "SELECT id, toString(f), toString(g), toString(h) FROM {} ORDER BY id"
    assert engine.rows(shown.format("back")) == engine.rows(shown.format("src"))


def test_a_parquet_export_reloads_with_the_manifest_types(tmp_path: Path, target: str) -> None:
    """A Nullable column without a NULL came back not Nullable: the files' statistics won over
    the manifest."""
    engine = open_engine(target)
    engine.execute("CREATE TABLE src (id UInt32, g Nullable(Float32)) ENGINE = MergeTree ORDER BY id")
    engine.execute("INSERT INTO src VALUES (1, 1.5), (2, 2.5)")
    dest = tmp_path / "out"
    assert export("src", str(dest), target, ExportOptions(format="parquet")).rows_written == 2
    loaded = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.ok and loaded.rows_loaded == 2
    assert engine.rows(TYPES.format(table="back")) == engine.rows(TYPES.format(table="src"))


def test_a_csv_export_with_nul_bytes_loads_back(tmp_path: Path, target: str) -> None:
    """A CSV field may hold a NUL byte; the load took such a file for binary even with its
    manifest (and --format csv), so the export could never come back."""
    engine = open_engine(target)
    engine.execute("CREATE TABLE src (id UInt32, s String) ENGINE = MergeTree ORDER BY id")
    engine.execute("INSERT INTO src VALUES (1, 'a'), (2, concat('x', char(0), 'y'))")
    dest = tmp_path / "out"
    assert export("src", str(dest), target, ExportOptions(format="csv")).rows_written == 2
    loaded = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.ok and loaded.rows_loaded == 2, [f.error for f in loaded.files]
    assert engine.rows(CHECK.format(table="back")) == engine.rows(CHECK.format(table="src"))


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv"])
def test_dates_past_1900_to_2299_come_back(tmp_path: Path, target: str, fmt: str) -> None:
    """A database source keeps `1000-01-01` in Date32 (the engine holds it); its text export
    was refused on the way back as a date Date32 cannot hold."""
    engine = open_engine(target)
    engine.execute("CREATE TABLE src (id UInt32, d Date32, t DateTime64(6, 'UTC')) ENGINE = MergeTree ORDER BY id")
    engine.execute(
        "INSERT INTO src VALUES (1, '1000-01-01', '9999-12-31 23:59:59.999999'), "
        "(2, '2024-02-29', '1900-01-01 00:00:00')"
    )
    dest = tmp_path / "out"
    assert export("src", str(dest), target, ExportOptions(format=fmt)).rows_written == 2
    loaded = chute.load(str(dest), "back", target=target, options=chute.LoadOptions(provenance=False))
    assert loaded.ok and (loaded.rows_loaded, loaded.rows_rejected) == (2, 0), [f.error for f in loaded.files]
    assert engine.rows(CHECK.format(table="back")) == engine.rows(CHECK.format(table="src"))
