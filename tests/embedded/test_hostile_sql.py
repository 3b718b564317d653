"""SQL a user gives (keys, filters, queries) stays one piece of chute's statements: another
statement in it is refused before anything runs, and a key the engine refuses is a usage error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import chute
from chute.engine import open_engine
from chute.load import LoadOptions
from chute.sql import quote_ident


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", *args], capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )


def tables(target: str) -> list[str]:
    sql = "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name"
    out = run("query", sql, "--target", target)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_another_statement_in_an_option_or_a_query_is_refused_and_runs_nowhere(tmp_path: Path) -> None:
    target = str(tmp_path / "db")
    data = tmp_path / "a.csv"
    data.write_text("id,v\n1,a\n")
    assert run("load", str(data), "-t", "victim", "--target", target, "-q").returncode == 0
    attempts = [
        ("load", str(data), "-t", "t1", "--target", target, "--order-by", "id; DROP TABLE victim"),
        ("load", str(data), "-t", "t1", "--target", target, "--partition-by", "id -- ) ENGINE = Log"),
        ("load", str(data), "-t", "t1", "--target", target, "--where", "$$'$$; DROP TABLE victim; SELECT '"),
        ("query", "SELECT 1; DROP TABLE victim", "--target", target),
        ("export", "SELECT 1) ; DROP TABLE victim; SELECT (1", str(tmp_path / "out"), "--target", target),
        ("export", "victim", str(tmp_path / "out2"), "--target", target, "--partition-by", "v; DROP TABLE victim"),
    ]
    for args in attempts:
        refused = run(*args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("chute: error: "), refused.stderr
    assert tables(target) == ["_chute_ledger", "victim"]
    assert run("query", "SELECT count() FROM victim;", "--target", target).stdout.strip() == "1"


def test_a_key_the_engine_refuses_is_one_line_naming_the_option(tmp_path: Path) -> None:
    target = str(tmp_path / "db")
    data = tmp_path / "a.csv"
    data.write_text("id,v\n1,a\n")
    refused = run("load", str(data), "-t", "t", "--target", target, "--order-by", "(nope)")
    assert refused.returncode == 2
    assert "Missing columns: 'nope'" in refused.stderr and "--order-by '(nope)'" in refused.stderr
    assert "available columns" not in refused.stderr and "_part_offset" not in refused.stderr
    assert "t" not in tables(target)


def test_a_changed_file_is_not_loaded_twice_into_a_table_without_provenance(tmp_path: Path) -> None:
    target = str(tmp_path / "db")
    data = tmp_path / "a.csv"
    data.write_text("id,v\n1,a\n2,b\n")
    first = chute.load([str(data)], "t", target=target, options=LoadOptions(provenance=False))
    assert first.ok and first.rows_loaded == 2
    data.write_text("id,v\n1,a\n2,b\n3,c\n")
    os.utime(data, (1_700_000_000, 1_700_000_000))
    again = chute.load([str(data)], "t", target=target, options=LoadOptions(on_change="reload"))
    assert not again.ok
    (failed,) = again.files
    assert failed.state == "failed" and "no provenance columns" in (failed.error or "")
    rows = open_engine(target).rows("SELECT id, v FROM t ORDER BY id")
    assert [(r["id"], r["v"]) for r in rows] == [(1, "a"), (2, "b")]


def test_bad_rows_are_rejected_alone_whatever_the_table_s_column_names(tmp_path: Path) -> None:
    target = str(tmp_path / "db")
    names = ["s'q", 'd"q', "b\\s", "t`k", "sp ace,comma"]
    engine = open_engine(target)
    columns = ", ".join(f"{quote_ident(n)} Nullable(Int32)" for n in names)
    engine.execute(f"CREATE TABLE t (v Int64, {columns}) ENGINE = MergeTree ORDER BY v")
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text('{"v":1}\n{"v":"x"}\n{"v":3}\n')
    csv = tmp_path / "r.csv"
    csv.write_text("v\n4\ny\n6\n")
    for path in (jsonl, csv):
        report = chute.load([str(path)], "t", target=target)
        assert report.ok, report.files[0].error
        assert (report.rows_loaded, report.rows_rejected) == (2, 1), path
    reasons = [r["error"] for r in engine.rows("SELECT error FROM t_rejects ORDER BY error")]
    assert reasons == ["column v: x does not fit Int64", "column v: y does not fit Int64"]
    assert [r["v"] for r in engine.rows("SELECT v FROM t ORDER BY v")] == [1, 3, 4, 6]


def test_each_file_s_rows_read_are_in_the_json_report(tmp_path: Path) -> None:
    target = str(tmp_path / "db")
    open_engine(target).execute("CREATE TABLE t (v Int64) ENGINE = MergeTree ORDER BY v")
    data = tmp_path / "a.jsonl"
    data.write_text('{"v":1}\n{"v":"x"}\n')
    report = chute.load([str(data)], "t", target=target)
    (entry,) = report.to_dict()["files"]
    assert (entry["rows_read"], entry["rows_loaded"], entry["rows_rejected"]) == (2, 1, 1)


def test_a_database_that_is_not_there_is_made_with_a_note(tmp_path: Path) -> None:
    data = tmp_path / "a.jsonl"
    data.write_text('{"v":1}\n')
    target = str(tmp_path / "db")
    first = chute.load([str(data)], "typo_db.t", target=target)
    assert first.ok and any(n.startswith("database typo_db did not exist: created") for n in first.notes)
    data.write_text('{"v":1}\n{"v":2}\n')
    again = chute.load([str(data)], "typo_db.u", target=target)
    assert again.ok and not any("did not exist" in n for n in again.notes), again.notes
