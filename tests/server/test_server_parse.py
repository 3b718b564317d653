"""The two remote methods against the real clickhouse-server (18.16): server-parse (files
sent as they are, provenance from the stage's DEFAULT expressions) and client-convert
(Native + ZSTD from the engine here), and auto's choice between them."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import chute
from chute.load import methods
from chute.load.serverparse import ServerParse
from chute.load.verify import Verifier, hash_sums
from chute.sql import quote_ident

from ..harness.servers import ClickHouseServer, server_query
from .test_concurrency import _assert_exactly_once, _fresh, _load, _wait_all
from .test_server import _checksum, _load_command, _make_files, _wait_for_done_units

METHODS = ["server-parse", "client-convert"]


def _write_lines(path: Path, lines: list[str], gz: bool = True) -> None:
    text = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(text) if gz else text)


def _strings(directory: Path, files: int, rows: int) -> list[Path]:
    """JSON-lines files of strings only (values no parser changes), each line naming its file and line."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        path = directory / f"f{i:02d}.json.gz"
        _write_lines(path, [json.dumps({"k": f"f{i}-{j}", "v": "x" * (j % 7)}) for j in range(1, rows + 1)])
        os.utime(path, (1_760_000_000 + i, 1_760_000_000 + i))
        paths.append(path)
    return paths


PROVENANCE = "_source String, _source_mtime DateTime, _source_row UInt64, _load_id String"


def _rows(url: str, sql: str) -> list[list[str]]:
    return [line.split("\t") for line in server_query(url, sql + " FORMAT TSV").splitlines() if line]


def _check_provenance(url: str, paths: list[Path], load_id: str) -> None:
    """Every row's provenance against the files themselves: `_source_row` is the line the row
    is on (read here, line by line), `_source` the file, `_source_mtime` its mtime."""
    got = {
        k: (source, int(row), int(mtime), lid)
        for k, source, row, mtime, lid in _rows(
            url, "SELECT k, _source, _source_row, toUnixTimestamp(_source_mtime), _load_id FROM t"
        )
    }
    expected = 0
    for path in paths:
        for line_no, line in enumerate(gzip.decompress(path.read_bytes()).decode().splitlines(), start=1):
            key = json.loads(line)["k"]
            assert got[key] == (str(path), line_no, int(path.stat().st_mtime), load_id), (key, got[key])
            expected += 1
    assert len(got) == expected


@pytest.mark.parametrize("method", [*METHODS, "server-parse, stage copied"])
def test_exact_provenance_and_exactly_once(
    tmp_path: Path, server_url: str, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if method.endswith("copied"):  # as from 19.1 on: CREATE TABLE ... AS, then the defaults by ALTER
        monkeypatch.setattr(ServerParse, "create_stage", ServerParse.copy_stage)
        method = "server-parse"
    paths = _strings(tmp_path / "data", files=9, rows=3000)
    opts = chute.LoadOptions(method=method)
    report = chute.load([str(tmp_path / "data")], table="t", target=server_url, options=opts)
    assert report.ok and report.rows_loaded == 27_000, report.files
    assert report.methods == {method: 9}, report.methods
    assert report.server_round_trips > 0
    _check_provenance(server_url, paths, report.load_id)
    again = chute.load([str(tmp_path / "data")], table="t", target=server_url, options=opts)
    assert again.rows_loaded == 0 and again.files_skipped == 9
    assert _rows(server_url, "SELECT count() FROM t") == [["27000"]]
    stages = _rows(
        server_url,
        "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name LIKE '_chute_stage_%'",
    )
    assert stages == [["0"]]


def test_csv_with_a_header_and_plain_files(tmp_path: Path, server_url: str) -> None:
    """CSV with a header line (gzip) and uncompressed JSON lines: rows numbered from the first data row."""
    data = tmp_path / "data"
    data.mkdir()
    _write_lines(data / "a.csv.gz", ["k,v", *[f"a-{j},{j}" for j in range(1, 501)]])
    _write_lines(data / "b.csv", ["k,v", *[f"b-{j},{j * 2}" for j in range(1, 301)]], gz=False)
    opts = chute.LoadOptions(method="server-parse")
    report = chute.load([str(data)], table="t", target=server_url, options=opts)
    assert report.ok and report.rows_loaded == 800, report.files
    assert report.methods == {"server-parse": 2}
    wrong = _rows(server_url, "SELECT count() FROM t WHERE toUInt64(splitByChar('-', k)[2]) != _source_row")
    assert wrong == [["0"]]


def test_a_file_the_server_cannot_parse_has_its_bad_rows_in_the_rejects(tmp_path: Path, server_url: str) -> None:
    data = tmp_path / "data"
    _strings(data, files=4, rows=200)
    _write_lines(data / "f99.json.gz", ['{"k": "bad-1", "v": "a"}', '{"k": "bad-2", "v": ', '{"k": "bad-3", "v": "c"}'])
    report = chute.load([str(data)], table="t", target=server_url, options=chute.LoadOptions(method="server-parse"))
    assert report.ok, report.files
    assert report.rows_loaded == 802 and report.rows_rejected == 1
    assert report.methods.get("server-parse") == 4
    assert any(n.startswith("server-parse: ") and "read here instead" in n for n in report.notes), report.notes
    rejects = _rows(server_url, "SELECT _source, _source_row, error FROM t_rejects")
    assert len(rejects) == 1 and rejects[0][0].endswith("f99.json.gz") and rejects[0][1] == "2", rejects
    good = _rows(server_url, "SELECT k, _source_row FROM t WHERE k LIKE 'bad-%' ORDER BY k")
    assert good == [["bad-1", "1"], ["bad-3", "3"]]
    again = chute.load([str(data)], table="t", target=server_url, options=chute.LoadOptions(method="server-parse"))
    assert again.rows_loaded == 0 and again.rows_rejected == 0


def test_row_numbers_the_server_got_wrong_are_read_here(
    tmp_path: Path, server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body cut into several insert blocks numbers its rows again from 1 in each (measured on
    18.16): the check before the commit sees it, and the file is read here instead."""
    paths = _strings(tmp_path / "data", files=3, rows=2000)
    real = ServerParse.settings

    def small_blocks(self: ServerParse, unit: Any) -> dict[str, str | int | float]:
        return {**real(self, unit), "max_insert_block_size": 500}

    monkeypatch.setattr(ServerParse, "settings", small_blocks)
    report = chute.load(
        [str(tmp_path / "data")], table="t", target=server_url, options=chute.LoadOptions(method="server-parse")
    )
    assert report.ok and report.rows_loaded == 6000
    assert report.methods == {"client-convert": 3}, report.methods
    assert any("row numbers from the server are not 1..2000" in n for n in report.notes), report.notes
    _check_provenance(server_url, paths, report.load_id)


def test_auto_chooses_and_says_why(
    tmp_path: Path, clickhouse_server: ClickHouseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chute free to use every core of the machine the server runs on (else auto shares the
    # files between the ways: test_server_parse_share.py)
    monkeypatch.setattr(methods, "usable_cores", lambda: os.cpu_count() or 1)
    data = tmp_path / "data"
    _strings(data, files=2, rows=100)
    url = _fresh(clickhouse_server, "auto")
    report = chute.load([str(data)], table="t", target=url)
    assert report.methods == {"server-parse": 2}
    assert report.method_why and report.method_why[0].startswith("server-parse: the server parses JSONEachRow (gzip)")
    spared = chute.load([str(data)], table="t2", target=url, options=chute.LoadOptions(spare="server"))
    assert spared.methods == {"client-convert": 2} and "--spare-server" in spared.method_why[0]
    # Integers: the server's parser would wrap values that do not fit. auto reads them here;
    # with --spare-client the server parses them and chute checks what it stored.
    numbers = tmp_path / "numbers"
    numbers.mkdir()
    _write_lines(numbers / "n.json.gz", [json.dumps({"n": j}) for j in range(50)])
    read_here = chute.load([str(numbers)], table="t3", target=url)
    assert read_here.methods == {"client-convert": 1}
    assert "auto: the server shares this machine's cores: client-convert costs the least CPU" in read_here.method_why[0]
    assert any("--spare-client lets it parse integers and dates" in n for n in read_here.notes), read_here.notes
    checked = chute.load([str(numbers)], table="t6", target=url, options=chute.LoadOptions(spare="client"))
    assert checked.methods == {"server-parse": 1}
    assert checked.method_why[0].endswith("chute checks n against its own read"), checked.method_why
    # Decimals have no form that both sides compute alike here: read and checked here.
    database = url.rsplit("/", 1)[1]
    clickhouse_server.query(f"CREATE TABLE {database}.t5 ({PROVENANCE}, n Decimal(9, 2)) ENGINE = MergeTree ORDER BY n")
    decimals = chute.load([str(numbers)], table="t5", target=url)
    assert decimals.methods == {"client-convert": 1}
    assert "change values unchecked" in decimals.method_why[0]
    out = subprocess.run(
        [*_load(data, url)[:6], "t4", *_load(data, url)[7:], "--spare-client"],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)
    assert doc["methods"] == {"server-parse": 2} and doc["server_round_trips"] > 0
    assert doc["method_why"] == ["server-parse: --spare-client: the server parses what it can"]
    with pytest.raises(chute.UsageError, match="--spare-server chooses a method for --method auto"):
        chute.load([str(data)], table="t", target=url, options=chute.LoadOptions(method="server-parse", spare="server"))


@pytest.mark.parametrize("compressed", [True, False])
def test_auto_lets_the_server_parse_and_checks_what_it_stored(
    tmp_path: Path, clickhouse_server: ClickHouseServer, compressed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """18.16's parser stores 18446744073709551617 into UInt32 as 1 and 2024-02-30 as March 1st
    without a word. With --spare-client, auto lets it parse integer and date columns, and chute
    reads each file too: a file whose values do not fit, or whose stored values differ from chute's read, is not
    moved in but read here, where its bad values are rejected rows; the rest stays server-parsed."""
    data = tmp_path / "data"
    data.mkdir()
    good = [{"id": f"g{j}", "n": j, "d": "2024-01-01 00:00:00", "dd": "2024-03-01"} for j in range(300)]
    bad = [{**r, "id": f"b{j}"} for j, r in enumerate(good)]
    bad[9]["n"] = 18446744073709551617
    bad[19]["d"] = "2024-02-30 10:00:00"
    bad[29]["dd"] = "2024-13-45"
    suffix = ".json.gz" if compressed else ".json"
    _write_lines(data / f"good{suffix}", [json.dumps(r) for r in good], gz=compressed)
    _write_lines(data / f"bad{suffix}", [json.dumps(r) for r in bad], gz=compressed)
    url = _fresh(clickhouse_server, "checked")
    database = url.rsplit("/", 1)[1]
    clickhouse_server.query(
        f"CREATE TABLE {database}.t ({PROVENANCE}, id String, n UInt32, d DateTime, dd Date) "
        "ENGINE = MergeTree ORDER BY id"
    )
    spare = chute.LoadOptions(spare="client")
    report = chute.load([str(data)], table="t", target=url, options=spare)
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (597, 3)
    assert report.methods == {"server-parse": 1, "client-convert": 1}, report.method_why
    assert any("bad" in n and "3 value(s) do not fit their columns; read here instead" in n for n in report.notes)
    assert _rows(url, "SELECT count(), countIf(id IN ('b9', 'b19', 'b29')), countIf(n = 1) FROM t") == [
        ["597", "0", "2"]
    ]
    assert _rows(url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row") == [
        ["10", "column n: 18446744073709551617 does not fit UInt32"],
        ["20", "column d: 2024-02-30 10:00:00 does not fit DateTime"],
        ["30", "column dd: 2024-13-45 does not fit Date"],
    ]
    assert _rows(url, "SELECT count(), sum(_source_row) FROM t WHERE id LIKE 'g%'") == [["300", str(300 * 301 // 2)]]

    # Values the server stored otherwise than chute reads them (here: its sums over each value
    # plus one, a stand-in for a parser that changes valid text): the file is read here.
    def shifted(columns: list[Any]) -> list[str]:
        return hash_sums([(f"{quote_ident(c.name)} + 1", c.type) for c in columns], "_source_row")

    monkeypatch.setattr(Verifier, "server_sums", staticmethod(shifted))
    clickhouse_server.query(f"CREATE TABLE {database}.t2 AS {database}.t")
    again = chute.load([str(data / f"good{suffix}")], table="t2", target=url, options=spare)
    assert again.ok and again.rows_loaded == 300 and again.methods == {"client-convert": 1}
    assert any("differ from chute's read of the file; read here instead" in n for n in again.notes), again.notes


@pytest.mark.parametrize(
    ("type_sql", "good", "shown", "bad"),
    [
        ("DateTime('UTC')", "2024-02-28T10:00:00Z", "2024-02-28 10:00:00", "2024-02-30T10:00:00Z"),  # March 1st
        ("DateTime('UTC')", "2024-01-01 23:59:59", "2024-01-01 23:59:59", "2024-01-01 25:61:61"),  # the next day
        ("UInt32", 7, "7", 18446744073709551617),  # wraps to 1
    ],
    ids=["february-30th", "25:61:61", "2^64+1"],
)
def test_server_parse_verification_gives_values_no_cheap_reading_proves_the_full_check(
    tmp_path: Path, clickhouse_server: ClickHouseServer, type_sql: str, good: object, shown: str, bad: object
) -> None:
    """A value whose layout passes every cheap test (an ISO time with its clock in range, a
    20-digit integer) yet that 18.16's parser changes: chute's own read of the file, which the
    stored values must match, checks it in full; the file is read here and that row rejected."""
    data = tmp_path / "data"
    data.mkdir()
    records = [{"id": f"r{j}", "v": good} for j in range(300)]
    _write_lines(data / "good.json.gz", [json.dumps(r) for r in records])
    records[149]["v"] = bad
    _write_lines(data / "bad.json.gz", [json.dumps(r) for r in records])
    url = _fresh(clickhouse_server, "unprovable")
    database = url.rsplit("/", 1)[1]
    clickhouse_server.query(
        f"CREATE TABLE {database}.t ({PROVENANCE}, id String, v {type_sql}) ENGINE = MergeTree ORDER BY id"
    )
    report = chute.load([str(data)], table="t", target=url, options=chute.LoadOptions(spare="client"))
    assert report.ok and (report.rows_loaded, report.rows_rejected) == (599, 1), [f.error for f in report.files]
    assert report.methods == {"server-parse": 1, "client-convert": 1}, report.method_why
    assert any("bad" in n and "1 value(s) do not fit their columns; read here instead" in n for n in report.notes)
    assert _rows(url, "SELECT DISTINCT toString(v) FROM t") == [[shown]]
    escaped = type_sql.replace("'", "\\'")  # (as TSV writes it)
    reason = f"column v: {bad} does not fit {escaped}"
    assert _rows(url, "SELECT _source_row, error FROM t_rejects") == [["150", reason]]


def test_missing_values_are_counted_in_files_whose_values_chute_checks(
    tmp_path: Path, clickhouse_server: ClickHouseServer
) -> None:
    """The server gives an absent key or a null its column's default with no trace; chute's own
    read of a file it checks counts them, so the report says what client-convert would."""
    data = tmp_path / "data"
    data.mkdir()
    lines = [
        {"id": "a", "n": 1, "d": "2024-01-01 00:00:00"},
        {"id": "b", "d": "2024-01-01 00:00:00"},
        {"id": "c", "n": None, "d": "2024-01-01 00:00:00"},
        {"id": "d", "n": 4},
    ]
    _write_lines(data / "m.json.gz", [json.dumps(r) for r in lines])
    url = _fresh(clickhouse_server, "counted")
    database = url.rsplit("/", 1)[1]
    for table in ("t", "t2"):
        clickhouse_server.query(
            f"CREATE TABLE {database}.{table} ({PROVENANCE}, id String, n UInt32, d DateTime) "
            "ENGINE = MergeTree ORDER BY id"
        )
    parsed = chute.load([str(data)], table="t", target=url, options=chute.LoadOptions(spare="client"))
    converted = chute.load([str(data)], table="t2", target=url, options=chute.LoadOptions(method="client-convert"))
    assert parsed.methods == {"server-parse": 1} and converted.methods == {"client-convert": 1}
    for report in (parsed, converted):
        assert (report.rows_loaded, report.rows_defaulted, report.defaulted_columns) == (4, 3, ["n", "d"])
    assert not any("parsed by the server" in n for n in parsed.notes), parsed.notes
    assert _rows(url, "SELECT id, n, toUInt32(d) FROM t ORDER BY id") == _rows(
        url, "SELECT id, n, toUInt32(d) FROM t2 ORDER BY id"
    )


def test_checked_columns_with_hostile_names(tmp_path: Path, clickhouse_server: ClickHouseServer) -> None:
    """Names with quotes, backticks, spaces and non-ASCII letters, and one like the checks' own
    aliases (`_chute_n`, which once failed the check's query), in a file with a hostile name."""
    data = tmp_path / "data"
    data.mkdir()
    rows = [
        {'we`ird n"ame': j, "sp ace": "2024-01-01 00:00:00", "_chute_n": 2 * j, "ünï": "2024-02-01"} for j in range(100)
    ]
    _write_lines(data / "h'o`s\"t ile.json.gz", [json.dumps(r) for r in rows])
    url = _fresh(clickhouse_server, "hostile")
    report = chute.load([str(data)], table="t", target=url, options=chute.LoadOptions(spare="client"))
    assert report.ok and report.rows_loaded == 100 and report.methods == {"server-parse": 1}, report.method_why
    assert _rows(url, "SELECT sum(`_chute_n`), count() FROM t") == [["9900", "100"]]


def test_an_unclosed_quote_the_server_parsed_is_read_here(tmp_path: Path, clickhouse_server: ClickHouseServer) -> None:
    """18.16 parses a quote never closed in a CSV file's last field as a field that runs to the end
    of the file: the lines after it were gone, with no reject and exit 0 (text columns only, so
    the server parsed the file when asked to). The stage's last record is looked at; such a file
    is read here. (auto reads CSV text here on 18.16: the next test.)"""
    method = "server-parse"
    data = tmp_path / "data"
    data.mkdir()
    (data / "q.csv").write_text('a,s\nx,a\ny,"unterm\nz,ok\nw,ok\n')
    url = _fresh(clickhouse_server, "quote")
    database = url.rsplit("/", 1)[1]
    clickhouse_server.query(
        f"CREATE TABLE {database}.t ({PROVENANCE}, a String, s String) ENGINE = MergeTree ORDER BY a"
    )
    report = chute.load([str(data)], table="t", target=url, options=chute.LoadOptions(method=method))
    assert report.ok and (report.rows_read, report.rows_loaded, report.rows_rejected) == (4, 3, 1), report.notes
    assert any("a quote in the last record is never closed; read here instead" in n for n in report.notes)
    assert _rows(url, "SELECT a, _source_row FROM t ORDER BY _source_row") == [["x", "1"], ["z", "3"], ["w", "4"]]
    assert _rows(url, "SELECT _source_row, raw FROM t_rejects") == [["2", 'y,"unterm']]


def test_auto_reads_csv_text_here_where_the_server_keeps_null_markers(
    tmp_path: Path, clickhouse_server: ClickHouseServer
) -> None:
    """18.16's CSV parser keeps an unquoted `\\N` in a String column as the two characters, and
    reads an unquoted empty field of a Nullable(String) column as ''; the embedded engine and
    client-convert give '' and NULL (docs/loading.md). auto let 18.16 parse CSV with text columns
    only: the value depended on the path, with no note. Now auto reads such files here."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "n.csv").write_text('a,s,n\nx,\\N,\\N\ny,,\nz,"\\N",""\nw,a\\Nb,"a\\N"\n')
    url = _fresh(clickhouse_server, "markers")
    database = url.rsplit("/", 1)[1]
    got = {}
    for method in ("auto", "client-convert"):
        table = "t_" + method.replace("-", "_")
        clickhouse_server.query(
            f"CREATE TABLE {database}.{table} ({PROVENANCE}, a String, s String, n Nullable(String)) "
            "ENGINE = MergeTree ORDER BY a"
        )
        report = chute.load([str(data)], table=table, target=url, options=chute.LoadOptions(method=method))
        assert report.ok and report.rows_loaded == 4 and report.methods == {"client-convert": 1}, report.method_why
        got[method] = _rows(url, f"SELECT a, s, isNull(n), n FROM {table} ORDER BY _source_row")
        if method == "auto":
            assert any(n.startswith("server-parse not used") and "of a, s, n " in n for n in report.notes)
    assert (
        got["auto"]
        == got["client-convert"]
        == [
            ["x", "", "1", "\\N"],
            ["y", "", "1", "\\N"],
            ["z", "\\\\N", "0", ""],
            ["w", "a\\\\Nb", "0", "a\\\\N"],
        ]
    )


def test_auto_reads_floats_here_where_the_server_parses_them_off_by_an_ulp(
    tmp_path: Path, clickhouse_server: ClickHouseServer
) -> None:
    """18.16 parses `1.68` as 1.6800000000000002 and `6.56` as 6.5600000000000005 (its fast float
    parser; exact in input formats from 26.7). auto let it parse Float64 columns: values changed
    without a word. Now auto reads them here, exactly; --method server-parse still may, with a note."""
    data = tmp_path / "floats"
    data.mkdir()
    _write_lines(data / "f.json.gz", [json.dumps({"k": f"r{j}", "x": [1.68, 6.56][j % 2]}) for j in range(100)])
    url = _fresh(clickhouse_server, "floats")
    report = chute.load([str(data)], table="t", target=url)
    assert report.ok and report.methods == {"client-convert": 1}, report.method_why
    assert "x" in " ".join(report.notes)
    assert _rows(url, "SELECT countIf(x IN (1.68, 6.56)), count() FROM t") == [["100", "100"]]
    asked = chute.load([str(data)], table="t2", target=url, options=chute.LoadOptions(method="server-parse"))
    assert asked.methods == {"server-parse": 1} and any("--method server-parse" in n for n in asked.notes)


def test_workers_share_a_server_parse_job(tmp_path: Path, clickhouse_server: ClickHouseServer) -> None:
    data = tmp_path / "data"
    _make_files(data, files=40, rows=2000)
    url = _fresh(clickhouse_server, "shared_parse")
    procs = [
        subprocess.Popen(
            _load(data, url, "--method", "server-parse"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    reports = _wait_all(procs)
    assert sum(int(r["rows_loaded"]) for r in reports) == 40 * 2000  # type: ignore[call-overload]
    assert all(set(r["methods"]) <= {"server-parse"} for r in reports)  # type: ignore[call-overload]
    _assert_exactly_once(clickhouse_server, url, files=40)


def _parse_command(data: Path, url: str) -> list[str]:
    return [*_load_command(data, url), "--method", "server-parse"]


@pytest.mark.slow
def test_sigkill_during_server_parse_then_rerun(tmp_path: Path, clickhouse_server: ClickHouseServer) -> None:
    data = tmp_path / "data"
    _make_files(data, files=60, rows=40_000)
    suffix = str(int(time.time() * 1000))[-8:]
    clickhouse_server.query(f"CREATE DATABASE pclean_{suffix}")
    clean = f"{clickhouse_server.url}/pclean_{suffix}"
    t0 = time.monotonic()
    subprocess.run(_parse_command(data, clean), check=True)
    full = time.monotonic() - t0
    expected = _checksum(clean)
    assert expected[0] == str(60 * 40_000)
    rng = random.Random(29)
    partial = 0
    # Five trials at least; more (up to ten) until three kills came mid-load: a server-parse
    # batch's files are posted at once, so on a busy box the batches can end together and a
    # kill after the first batch's `done` may find the load finished.
    for trial in range(10):
        if trial >= 5 and partial >= 3:
            break
        clickhouse_server.query(f"CREATE DATABASE ptrial{trial}_{suffix}")
        url = f"{clickhouse_server.url}/ptrial{trial}_{suffix}"
        proc = subprocess.Popen(_parse_command(data, url))
        if trial % 2:
            _wait_for_done_units(url, rng.randint(1, 30), proc, full * 3)
            time.sleep(rng.uniform(0, 0.2))
        else:
            time.sleep(rng.uniform(0.2, 0.9) * full)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        partial += 0 < int(_checksum(url)[0]) < 60 * 40_000
        subprocess.run(_parse_command(data, url), check=True)
        assert _checksum(url) == expected, f"trial {trial}"
        stages = server_query(url, "SELECT count() FROM system.tables WHERE name LIKE '_chute_stage_%' FORMAT TSV")
        assert stages.strip() == "0"
    assert partial >= 3, partial


@pytest.mark.slow
def test_server_restarted_during_server_parse(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _make_files(data, files=60, rows=40_000)
    server = ClickHouseServer.create(tmp_path / "server").start()
    try:
        server.query("CREATE DATABASE r")
        url = f"{server.url}/r"
        cmd = _parse_command(data, url)
        t0 = time.monotonic()
        subprocess.run(cmd, check=True)
        full = time.monotonic() - t0
        expected = _checksum(url)
        rng = random.Random(31)
        for trial in range(4):
            server.query("DROP TABLE IF EXISTS r.t")
            server.query("DROP TABLE IF EXISTS r._chute_ledger")
            proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
            time.sleep(rng.uniform(0.1, full * 0.9))
            server.kill()
            time.sleep(rng.uniform(0.0, 1.0))
            server.start()
            _, err = proc.communicate(timeout=300)
            if proc.returncode != 0:  # rode out the restart, or stopped with one line
                assert err.strip().count("\n") == 0, err
            subprocess.run(cmd, check=True)
            assert _checksum(url) == expected, f"trial {trial}"
    finally:
        server.remove()


def test_into_a_partitioned_table(tmp_path: Path, server_url: str) -> None:
    """Stages of a partitioned table move in partition by partition (listed from system.parts)."""
    paths = _strings(tmp_path / "data", files=3, rows=400)
    server_query(
        server_url,
        "CREATE TABLE t (k String, v String, _source String, _source_mtime DateTime('UTC'), _source_row UInt64, "
        "_load_id String) ENGINE = MergeTree PARTITION BY length(v) ORDER BY k",
    )
    report = chute.load(
        [str(tmp_path / "data")], table="t", target=server_url, options=chute.LoadOptions(method="server-parse")
    )
    assert report.ok and report.rows_loaded == 1200 and report.methods == {"server-parse": 3}
    _check_provenance(server_url, paths, report.load_id)
    partitions = _rows(
        server_url,
        "SELECT uniqExact(partition_id) FROM system.parts "
        "WHERE active AND database = currentDatabase() AND table = 't'",
    )
    assert partitions == [["7"]]
