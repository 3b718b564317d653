"""Wide files (issue 46, item 3): a CSV header over 4,096 bytes was cut by the sniffer ("the
header line names col_52 more than once", "input fields not in table"), 2,000 columns failed with
[167 TOO_DEEP_AST] on the embedded target. (The 18.16 server: tests/server/test_wide_files_server.py;
its part writer's memory bounds the width it takes, see docs/loading.md.)"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine
from chute.schema import Column, with_faithful_numbers
from chute.sql import quote_str

ROWS = 30


def rows(dest: str, sql: str) -> list[list[str]]:
    return [line.split("\t") for line in open_engine(dest).text(sql, "TSVRaw").splitlines() if line]


def _csv(path: Path, columns: int) -> None:
    with open(path, "w") as out:
        out.write(",".join(f"column_number_{j}" for j in range(columns)) + "\n")
        for r in range(1, ROWS + 1):
            out.write(",".join(str(r * 10 + j % 7) for j in range(columns)) + "\n")


@pytest.mark.parametrize("columns", [2_000, 5_000])
def test_a_wide_csv_makes_its_table_and_loads(tmp_path: Path, target: str, columns: int) -> None:
    path = tmp_path / "wide.csv"
    _csv(path, columns)
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok, [f.error for f in report.files]
    assert report.rows_loaded == ROWS
    last = f"column_number_{columns - 1}"
    found = rows(target, f"SELECT count(), sum(column_number_0), sum({last}), max(_source_row) FROM t")
    expected = sum(r * 10 for r in range(1, ROWS + 1))
    assert found == [[str(ROWS), str(expected), str(expected + (columns - 1) % 7 * ROWS), str(ROWS)]]
    named = rows(target, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = 't'")
    assert int(named[0][0]) == columns + 4  # (and the provenance columns)
    again = chute.load([str(path)], table="t", target=target)
    assert again.ok and again.rows_loaded == 0


def test_a_wide_json_lines_file_loads(tmp_path: Path, target: str) -> None:
    columns = 2_000
    path = tmp_path / "wide.jsonl"
    path.write_text(
        "".join(json.dumps({f"k{j}": r * 10 + j % 7 for j in range(columns)}) + "\n" for r in range(1, ROWS + 1))
    )
    report = chute.load([str(path)], table="t", target=target)
    assert report.ok and report.rows_loaded == ROWS, [f.error for f in report.files]
    found = rows(target, f"SELECT count(), sum(k0), sum(k{columns - 1}) FROM t")
    expected = sum(r * 10 for r in range(1, ROWS + 1))
    assert found == [[str(ROWS), str(expected), str(expected + (columns - 1) % 7 * ROWS)]]


def test_inference_of_a_10_000_column_file_tells_kept_zeros_in_seconds(tmp_path: Path) -> None:
    """Numbers written with a zero or sign the number would drop make a column text; the test
    was one regex a column, which the engine took 3 ms of CPU each to plan at 2,000 columns, more past (10,000: 135
    CPU seconds, most of a wide load's inference). Now one test over an array of the columns."""
    columns, path = 10_000, tmp_path / "wide.csv"
    with open(path, "w") as out:
        out.write(",".join(f"c_{j}" for j in range(columns)) + "\n")
        for r in range(20):
            out.write(",".join("0012" if (r, j) == (5, 9_998) else str(r * 10 + j % 7) for j in range(columns)) + "\n")
    engine = open_engine(str(tmp_path / "db"))
    numbers = [Column(f"c_{j}", "Nullable(Int64)") for j in range(columns)]
    before = resource.getrusage(resource.RUSAGE_SELF)
    found = with_faithful_numbers(engine, f"file({quote_str(str(path))}, 'CSVWithNames')", numbers, "inference")
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert [c for c in found if c.type != "Nullable(Int64)"] == [Column("c_9998", "Nullable(String)")]
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert cpu < 15, f"{cpu:.1f} CPU seconds"


def test_a_wide_part_within_the_open_files_limit(tmp_path: Path) -> None:
    """A part of a wide table keeps two files a column open while it is written: 10,000 columns
    failed `errno 24, Too many open files` under a limit of 20,000. Here 600 columns and 8,000 rows
    (a part past the engine's 10 MB line to wide parts) under a limit of 1,000 open files."""
    columns, count, path = 600, 8_000, tmp_path / "wide.csv"
    with open(path, "w") as out:
        out.write(",".join(f"c_{j}" for j in range(columns)) + "\n")
        line = ",".join(str(1_000_000_000 + j) for j in range(columns)) + "\n"
        out.write(line * count)
    limit = "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (1000, 1000))"
    target = str(tmp_path / "db")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"{limit}; import sys; from chute.cli import main; sys.exit(main(sys.argv[1:]))",
            "load",
            str(path),
            "--table",
            "t",
            "--target",
            target,
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert rows(target, "SELECT count(), sum(c_599) FROM t") == [[str(count), str(count * 1_000_000_599)]]
