"""Wide files into the 18.16 server (issue 46, item 3). A CSV whose INSERT column list ran past
16 KiB failed with a bare HTTP 400 after minutes: the statement went in the URL, which 18.16
refuses past 16 KiB, and the refusal then sent the file through the careful pass. The statement
now goes in the body, before the data, with the per-query limits raised for a long one."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import chute
from chute.transport import HttpClient, ServerAddress

from ..harness.servers import ClickHouseServer
from .test_fidelity import rows

ROWS = 20


def test_a_csv_whose_column_list_is_longer_than_a_url_loads(tmp_path: Path, server_url: str) -> None:
    names = [f"a_column_whose_name_is_long_enough_to_matter_{'x' * 60}_{j:04d}" for j in range(300)]
    assert len(", ".join(f"`{n}`" for n in names)) > 32 * 1024
    path = tmp_path / "wide.csv"
    with open(path, "w") as out:
        out.write(",".join(names) + "\n")
        for r in range(1, ROWS + 1):
            out.write(",".join(str(r * 10 + j % 7) for j in range(len(names))) + "\n")
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.ok and report.rows_loaded == ROWS, [f.error for f in report.files]
    found = rows(server_url, f"SELECT count(), sum(`{names[0]}`), sum(`{names[-1]}`), max(_source_row) FROM t")
    expected = sum(r * 10 for r in range(1, ROWS + 1))
    assert found == [[str(ROWS), str(expected), str(expected + 299 % 7 * ROWS), str(ROWS)]]


def test_a_statement_past_the_servers_default_limits_runs(server_url: str) -> None:
    """A wide table's CREATE TABLE passes 18.16's 256 KiB `max_query_size` and 50,000
    `max_ast_elements`: chute raises them for its own long statements."""
    client = HttpClient(ServerAddress.parse(server_url))
    columns = ", ".join(f"`c{j:05d}` Nullable(UInt8)" for j in range(15_000))
    assert len(columns) > 256 * 1024
    client.query(f"CREATE TABLE wide ({columns}) ENGINE = Memory")
    found = rows(server_url, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = 'wide'")
    assert found == [["15000"]]


def _wide_csv(path: Path, columns: int) -> None:
    with open(path, "w") as out:
        out.write(",".join(f"c_{j}" for j in range(columns)) + "\n")
        for r in range(1, ROWS + 1):
            out.write(",".join(str(r * 10 + j % 7) for j in range(columns)) + "\n")


def test_a_table_whose_part_writer_outgrows_the_memory_limit_loads(tmp_path: Path, server_url: str) -> None:
    """18.16 reserves about 2 MiB a column file while it writes a part, whatever the rows: 2,500
    columns failed `[241] Memory limit (for query) exceeded` under the test server's 4 GB limit,
    five times over (retried), then the file failed. chute raises its INSERTs' limit by that
    reservation and says so."""
    path = tmp_path / "wide.csv"
    _wide_csv(path, 2_500)
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.ok and report.rows_loaded == ROWS, [f.error for f in report.files]
    assert any("part writer reserves" in n and "max_memory_usage" in n for n in report.notes), report.notes
    expected = sum(r * 10 for r in range(1, ROWS + 1))
    found = rows(server_url, "SELECT count(), sum(c_0), sum(c_2499) FROM t")
    assert found == [[str(ROWS), str(expected), str(expected + 2499 % 7 * ROWS)]]


def test_a_server_out_of_open_files_stops_the_load_at_once(tmp_path: Path) -> None:
    """A part keeps two files a column open while it is written: a server whose open-files limit
    is below that fails `errno 24, Too many open files`. Every file into the table would fail the
    same way, and no row is at fault: the load stops at the first, with the limit named, and
    neither retries it nor reads the file again row by row (a 10,000-column JSON file went to the
    careful pass for more than ten minutes)."""
    server = ClickHouseServer.create(tmp_path / "server")
    server.open_files = 1_200
    server.start()
    try:
        path, other = tmp_path / "wide.csv", tmp_path / "other.csv"
        _wide_csv(path, 800)
        _wide_csv(other, 800)
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "chute",
                "load",
                str(path),
                str(other),
                "--table",
                "t",
                "--target",
                server.url,
                "--quiet",
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 1, done.stderr
        error = done.stderr.strip().splitlines()[-1]
        assert "Too many open files" in error and "open-files limit" in error, error
        assert time.monotonic() - started < 60
        log = (server.root / "log" / "server.log").read_text(errors="replace")
        tries = [line for line in log.splitlines() if "executeQuery" in line and "Too many open files" in line]
        assert 1 <= len(tries) <= 2, tries  # (one batch: its two files' streams at once)
        assert server.query("SELECT count() FROM t").strip() == "0"
    finally:
        server.remove()


DIRTY_COLUMNS = 1_500
"""Wide enough for the careful pass's old SQL (about 5 KB a column) to cost minutes."""
TYPES = ["Int32", "Float64", "UInt64", "String", "Int64", "UInt8", "Int32", "Date"]


def _value(j: int, r: int) -> str:
    t = TYPES[j % len(TYPES)]
    if t == "Float64":
        return f"{r}.5"
    if t == "Date":
        return f"2024-01-{r % 28 + 1:02d}"
    if t == "String":
        return f"s{r}_{j}"
    return str((r + j) % 100)


def test_a_wide_csv_with_bad_rows_loads_its_good_rows(tmp_path: Path, server_url: str) -> None:
    """A 1,500-column CSV with bad integers, floats and dates far into their rows, and a ragged
    row: the good rows loaded, the bad ones in the rejects with their reasons. The careful pass
    checks its values a type at a time (chute.load.checks.wide); a column at a time it took the
    engine minutes of CPU to plan."""
    columns, count = DIRTY_COLUMNS, 200
    last = {t: max(j for j in range(columns) if TYPES[j % len(TYPES)] == t) for t in TYPES}
    bad = {7: (last["Int32"], "abc"), 40: (last["Float64"], "x1.5"), 90: (last["Date"], "2024-02-30")}
    bad[120] = (last["UInt64"], "-5")
    ragged = 60
    path = tmp_path / "wide.csv"
    with open(path, "w") as out:
        out.write(",".join(f"c_{j}" for j in range(columns)) + "\n")
        for r in range(1, count + 1):
            row = [_value(j, r) for j in range(columns)]
            if r in bad:
                row[bad[r][0]] = bad[r][1]
            out.write(",".join(row[:-2] if r == ragged else row) + "\n")
    client = HttpClient(ServerAddress.parse(server_url))
    database = server_url.rsplit("/", 1)[1]
    typed = ", ".join(f"c_{j} {TYPES[j % len(TYPES)]}" for j in range(columns))
    client.query(f"CREATE TABLE {database}.t ({typed}) ENGINE = MergeTree ORDER BY tuple()")
    before = resource.getrusage(resource.RUSAGE_SELF)
    report = chute.load([str(path)], table="t", target=server_url)
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert report.ok, [f.error for f in report.files]
    assert (report.rows_loaded, report.rows_rejected) == (count - 5, 5)
    # (the engine checks the rows in this process: 8 CPU seconds; a column at a time, 65)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert cpu < 30, f"{cpu:.0f} CPU seconds"
    good = [r for r in range(1, count + 1) if r not in bad and r != ragged]
    assert rows(server_url, "SELECT count(), sum(c_0) FROM t") == [[str(len(good)), str(sum(r % 100 for r in good))]]
    found = rows(server_url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row")
    expected = {r: f"column c_{j}: {text} does not fit {TYPES[j % len(TYPES)]}" for r, (j, text) in bad.items()}
    assert {int(r): e for r, e in found if int(r) != ragged} == expected
    assert next(e for r, e in found if int(r) == ragged).startswith("malformed record")
