"""Wide files (issue 46, item 3): a CSV header over 4,096 bytes was cut by the sniffer ("the
header line names col_52 more than once", "input fields not in table"), 2,000 columns failed with
[167 TOO_DEEP_AST] on the embedded target. (The 18.16 server: tests/server/test_wide_files_server.py;
its part writer's memory bounds the width it takes, see docs/loading.md.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chute
from chute.engine import open_engine

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
