"""Wide files into the 18.16 server (issue 46, item 3). A CSV whose INSERT column list ran past
16 KiB failed with a bare HTTP 400 after minutes: the statement went in the URL, which 18.16
refuses past 16 KiB, and the refusal then sent the file through the careful pass. The statement
now goes in the body, before the data, with the per-query limits raised for a long one."""

from __future__ import annotations

from pathlib import Path

import chute
from chute.transport import HttpClient, ServerAddress

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
