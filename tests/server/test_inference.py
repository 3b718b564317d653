"""Schema inference honest to the files (issue #25): NULL markers such as R's `NA`, and fields
that appear only in later files; checked on the embedded engine and the 18.16 server.

Ground truth is the rows the test wrote, never chute's reading of them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import chute
from chute.bench import bench
from chute.design import design_sources
from chute.errors import ChuteError

from .test_fidelity import columns, dest, rows

__all__ = ["dest"]  # the fixture: embedded and the 18.16 server


def _r_export(path: Path, n: int, marker: str, bad: dict[int, str] | None = None) -> list[list[str]]:
    """A file as R's write.csv writes it: quoted text, `marker` for a missing value in every
    column (a country code `NA`, Namibia, is a value). Returns each row's expected fields as
    the table shows them (`-` for NULL); rows of `bad` get that age, neither a number nor the marker."""
    rng = random.Random(25)
    lines = ["id,age,income,visited,country"]
    expected = []
    for i in range(1, n + 1):
        age = marker if i % 7 == 0 else str(rng.randrange(18, 90))
        income = marker if i % 5 == 0 else str(rng.randrange(1, 10**4) + rng.randrange(1, 10) / 10)
        visited = marker if i % 11 == 0 else f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}"
        country = rng.choice(["DE", "NA", "FR", "US"])  # NA: Namibia
        if bad and i in bad:
            age = bad[i]
        lines.append(f'{i},{age},{income},{visited},"{country}"')
        if bad and i in bad:
            continue
        null = "-"
        expected.append(
            [
                str(i),
                null if age == marker else age,
                null if income == marker else income,
                null if visited == marker else visited,
                country,
            ]
        )
    path.write_text("\n".join(lines) + "\n")
    return expected


SELECT = (
    "SELECT id, ifNull(toString(age), '-'), ifNull(toString(income), '-'), ifNull(toString(visited), '-'), country "
    "FROM t {where} ORDER BY id"
)


def _same(got: list[list[str]], expected: list[list[str]]) -> bool:
    """Rows equal, incomes as numbers (the table prints 3761.00 as 3761)."""

    def norm(r: list[str]) -> tuple[object, ...]:
        return (r[0], r[1], None if r[2] == "-" else float(r[2]), r[3], r[4])

    return [norm(r) for r in got] == [norm(r) for r in expected]


@pytest.mark.parametrize("marker", ["NA", "NULL", "None", "N/A"])
def test_a_null_marker_makes_the_column_nullable(tmp_path: Path, dest: str, marker: str) -> None:
    expected = _r_export(tmp_path / "survey.csv", 3_000, marker)
    report = chute.load([str(tmp_path / "survey.csv")], table="t", target=dest)
    assert report.ok and report.rows_loaded == 3_000 and report.rows_rejected == 0, report.files
    types = dict(columns(dest))
    assert types["id"] in ("Int64", "UInt64")
    assert types["age"] in ("Nullable(Int64)", "Nullable(UInt64)")
    assert types["income"] == "Nullable(Float64)"
    assert types["visited"] == "Nullable(Date)"
    assert types["country"] == "String"  # every value is text: `NA` stays a value
    assert _same(rows(dest, SELECT.format(where="")), expected)
    assert rows(dest, "SELECT countIf(country = 'NA') FROM t") == [[str(sum(r[4] == "NA" for r in expected))]]


def test_a_null_marker_in_tsv(tmp_path: Path, dest: str) -> None:
    """R's write.table(sep = "\\t"): the same file, tab-separated."""
    expected = _r_export(tmp_path / "survey.csv", 500, "NA")
    text = (tmp_path / "survey.csv").read_text().replace(",", "\t").replace('"', "")
    (tmp_path / "survey.tsv").write_text(text)
    report = chute.load([str(tmp_path / "survey.tsv")], table="t", target=dest)
    assert report.ok and report.rows_loaded == 500 and report.rows_rejected == 0, report.files
    assert dict(columns(dest))["visited"] == "Nullable(Date)"
    assert _same(rows(dest, SELECT.format(where="")), expected)


def test_a_value_neither_marker_nor_number_is_rejected(tmp_path: Path, dest: str) -> None:
    """A later file of the same table: its marker is NULL, `unknown` and a second marker
    (`NULL` where the column's is `NA`) are rows rejected with their reason."""
    _r_export(tmp_path / "first.csv", 200, "NA")
    assert chute.load([str(tmp_path / "first.csv")], table="t", target=dest).ok
    bad = {13: "unknown", 40: "NULL"}
    expected = _r_export(tmp_path / "later.csv", 500, "NA", bad)
    report = chute.load([str(tmp_path / "later.csv")], table="t", target=dest)
    assert report.rows_loaded == 498 and report.rows_rejected == 2
    assert _same(rows(dest, SELECT.format(where="WHERE _source LIKE '%later.csv'")), expected)
    rejected = rows(dest, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row")
    assert [int(r[0]) for r in rejected] == sorted(bad)
    assert "unknown" in rejected[0][1] and "age" in rejected[0][1]
    assert "NULL" in rejected[1][1]
    # row numbers are the file's own
    assert rows(dest, "SELECT count() FROM t WHERE _source LIKE '%later.csv' AND _source_row != id") == [["0"]]


def test_float_nan_is_a_value_not_a_null(tmp_path: Path, dest: str) -> None:
    lines = ["id,x"] + [f"{i},{'nan' if i % 3 == 0 else i / 4}" for i in range(1, 31)]
    (tmp_path / "f.csv").write_text("\n".join(lines) + "\n")
    report = chute.load([str(tmp_path / "f.csv")], table="t", target=dest)
    assert report.ok and report.rows_loaded == 30
    assert dict(columns(dest))["x"] == "Float64"
    assert rows(dest, "SELECT countIf(isNaN(x)), countIf(NOT isNaN(x)) FROM t") == [["10", "20"]]


# -- fields that appear only in later files ---------------------------------------------------


def _events(directory: Path, files: int, per_file: int, later_from: int) -> list[dict[str, object]]:
    """JSON lines of an app's events; from file `later_from` on each event also has `session`
    (a high-cardinality string) and `latency_ms`. Returns every event written."""
    directory.mkdir()
    rng = random.Random(7)
    written: list[dict[str, object]] = []
    for f in range(files):
        with open(directory / f"events-{f:03d}.jsonl", "w") as out:
            for i in range(per_file):
                event: dict[str, object] = {
                    "id": f * per_file + i,
                    "kind": rng.choice(["view", "click", "buy"]),
                    "user": rng.randrange(500),
                }
                if f >= later_from:
                    event["session"] = f"s-{rng.getrandbits(40):010x}"
                    event["latency_ms"] = rng.randrange(1, 5000)
                out.write(json.dumps(event) + "\n")
                written.append(event)
    return written


def test_a_new_table_holds_the_fields_of_later_files(tmp_path: Path, dest: str) -> None:
    events = _events(tmp_path / "ev", files=6, per_file=400, later_from=3)
    report = chute.load([str(tmp_path / "ev")], table="t", target=dest)
    assert report.ok and report.rows_loaded == len(events), report.files
    types = dict(columns(dest))
    assert types["session"] == "Nullable(String)" and types["latency_ms"] == "Nullable(Int64)"
    got = rows(
        dest, "SELECT id, kind, user, ifNull(session, '-'), ifNull(toString(latency_ms), '-') FROM t ORDER BY id"
    )
    want = [
        [str(e["id"]), str(e["kind"]), str(e["user"]), str(e.get("session", "-")), str(e.get("latency_ms", "-"))]
        for e in events
    ]
    assert got == want
    assert any("session" in n and "later files" in n for n in report.notes)


def test_an_existing_table_names_add_columns(tmp_path: Path, dest: str) -> None:
    events = _events(tmp_path / "ev", files=2, per_file=50, later_from=1)
    first = chute.load([str(tmp_path / "ev" / "events-000.jsonl")], table="t", target=dest)
    assert first.ok and "session" not in dict(columns(dest))
    later = chute.load([str(tmp_path / "ev" / "events-001.jsonl")], table="t", target=dest)
    [result] = later.files
    assert result.state == "failed" and "session" in result.error and "--add-columns" in result.error
    added = chute.load(
        [str(tmp_path / "ev" / "events-001.jsonl")],
        table="t",
        target=dest,
        options=chute.LoadOptions(add_columns=True),
    )
    assert added.ok and added.rows_loaded == 50
    assert rows(dest, "SELECT count(), countIf(session != '') FROM t") == [[str(len(events)), "50"]]


# -- design and bench ----------------------------------------------------------------------------


def test_design_types_a_marked_column_and_the_load_follows(tmp_path: Path, target: str) -> None:
    expected = _r_export(tmp_path / "survey.csv", 3_000, "NA")
    proposal = design_sources([str(tmp_path / "survey.csv")], "t", target=target, time_budget_s=20)
    chosen = {c.name: c for c in proposal.columns}
    assert chosen["age"].type.startswith("Nullable(UInt") and chosen["age"].null_marker == "NA"
    assert chosen["income"].type.startswith("Nullable(Float") and chosen["visited"].type == "Nullable(Date)"
    assert "Nullable" not in chosen["country"].type and not chosen["country"].null_marker  # `NA`: Namibia
    assert "written NA" in chosen["age"].reason
    assert "COMMENT 'chute: NULL written as NA'" in proposal.ddl
    report = chute.load(
        [str(tmp_path / "survey.csv")], table="t", target=target, options=chute.LoadOptions(design="auto")
    )
    assert report.ok and report.rows_loaded == 3_000 and report.rows_rejected == 0, report.files
    assert _same(rows(target, SELECT.format(where="")), expected)


def test_design_proposes_the_fields_of_later_files(tmp_path: Path, target: str) -> None:
    events = _events(tmp_path / "ev", files=6, per_file=1_500, later_from=3)
    proposal = design_sources([str(tmp_path / "ev")], "t", target=target, time_budget_s=30)
    chosen = {c.name: c.type for c in proposal.columns}
    assert list(chosen) == ["id", "kind", "user", "session", "latency_ms"]
    assert chosen["session"] == "Nullable(String)" and chosen["latency_ms"].startswith("Nullable(UInt")
    # The column that can sort the table (not Nullable) with the most distinct values, from the data.
    sortable = ["id", "kind", "user"]
    distinct = {name: len({e[name] for e in events}) for name in sortable}
    highest = max(sortable, key=lambda n: distinct[n])
    [label] = [t.name for t in proposal.layouts if t.name.startswith("highest-cardinality column")]
    assert next(t.order_by for t in proposal.layouts if t.name == label) == f"`{highest}`"
    assert f"{distinct[highest]:,} distinct" in label


def test_bench_loads_the_fields_of_later_files(tmp_path: Path, target: str) -> None:
    events = _events(tmp_path / "ev", files=4, per_file=1_000, later_from=2)
    report = bench([str(tmp_path / "ev")], target=target)
    assert report.rows == len(events)
    assert {r.method: r.rows for r in report.results} == {
        "engine INSERT SELECT file()": len(events),
        "chute -> embedded": len(events),
    }


def test_bench_says_why_rows_differ(tmp_path: Path, target: str) -> None:
    """Dates past the type's range, after the rows inference reads: the engine's own INSERT
    clamps them (its count matches), the load rejects them, and the bench says so."""
    events = tmp_path / "ev"
    events.mkdir()
    day = {"id": 1, "d": "2024-01-01"}
    (events / "a.jsonl").write_text((json.dumps(day) + "\n") * 100)
    far = {"id": 2, "d": "2200-01-01"}
    (events / "b.jsonl").write_text((json.dumps(day) + "\n") * 2_500 + (json.dumps(far) + "\n") * 10)
    with pytest.raises(ChuteError, match=r"2600 rows in the table, 2610 in the input: 10 rows rejected; result"):
        bench([str(events)], target=target)
