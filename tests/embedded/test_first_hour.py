"""A new user's first hour (issue 48): a target that looks like host:port, `chute forget`,
why a file is skipped, `chute status` at 80 columns, and what a refused load leaves behind."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import chute

from ..harness.cli import run_chute as run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_target_like_host_port_is_a_server_never_a_directory(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.jsonl").write_text('{"x": 1}\n')
    port = free_port()  # nothing listens there: the load must try a server, and fail
    for spec in (f"localhost:{port}", f"127.0.0.1:{port}/db", f"chute-test.invalid:{port}"):
        out = run("load", "logs", "--table", "logs", "--target", spec, cwd=tmp_path)
        assert out.returncode == 1, out.stderr
        assert f"chute: note: target {spec} taken as the server http://{spec}\n" in out.stderr
        assert "cannot reach" in out.stderr, out.stderr
    for command in (["status"], ["query", "SELECT 1"], ["export", "t", "out"], ["forget", "x", "-t", "t"]):
        out = run(*command, cwd=tmp_path, env={"CHUTE_TARGET": f"localhost:{port}"})
        assert out.returncode == 1 and "taken as the server" in out.stderr, (command, out.stderr)
    copy = run("copy", "t", "--from", f"localhost:{port}", "--to", "./copy.db", cwd=tmp_path)
    assert copy.returncode == 1 and f"target localhost:{port} taken as the server" in copy.stderr, copy.stderr
    assert sorted(os.listdir(tmp_path)) == ["logs"]  # no directory named like the server

    odd = run("load", "logs", "--table", "logs", "--target", "my:db", cwd=tmp_path)
    assert odd.returncode == 2
    assert "neither host:port nor a directory" in odd.stderr and "./my:db" in odd.stderr
    as_directory = run("load", "logs", "--table", "logs", "--target", "./my:db", "-q", cwd=tmp_path)
    assert as_directory.returncode == 0, as_directory.stderr
    assert (tmp_path / "my:db").is_dir() and "note" not in as_directory.stderr


def test_forget_loads_a_file_again_once_and_the_report_says_how(tmp_path: Path) -> None:
    # The case: an all-text CSV loads its header as a row; a re-run with --header
    # skips the file; `chute forget` (and a new table) loads it again, once.
    people = tmp_path / "people.csv"
    people.write_text("name,city\nann,paris\nbob,rome\n")
    db = str(tmp_path / "db")
    assert run("load", str(people), "-t", "people", "--target", db, "-q").returncode == 0
    again = run("load", str(people), "-t", "people", "--target", db, "--header")
    assert again.returncode == 0, again.stderr
    said = " ".join(again.stdout.split())
    assert "1 skipped" in said and f"chute forget {people} --table people --target {db}" in said, again.stdout

    status = json.loads(run("status", "-t", "people", "--target", db, "--json").stdout)
    st = people.stat()
    # size, mtime and a fingerprint of the content (docs/loading.md "Exactly once")
    assert status[0]["state"] == "done" and status[0]["identity"].startswith(f"{st.st_size}:{st.st_mtime_ns}:")
    assert status[0]["size"] == st.st_size and status[0]["mtime"].startswith("20")
    text = run("status", "-t", "people", "--target", db, env={"COLUMNS": "100"}).stdout
    assert "chute forget FILE --table people" in " ".join(text.split())
    one = run("status", str(people), "--target", db).stdout.splitlines()  # why this file is skipped
    assert one[0].startswith(f"{people} (table people): done at 20") and "3 rows loaded, 0 rejected" in one[0]
    identity = status[0]["identity"]
    assert one[1] == f"  recorded: {st.st_size:,} bytes, modified {status[0]['mtime']} UTC (identity {identity})"
    assert one[2:] == [
        "  now: the same size and mtime: a load skips it",
        f"  to load it again: chute forget {people} --table people",
    ]
    os.utime(people, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert "another size or mtime" in run("status", str(tmp_path), "-t", "people", "--target", db).stdout
    os.utime(people, ns=(st.st_atime_ns, st.st_mtime_ns))

    forgot = run("forget", str(people), "-t", "people", "--target", db)
    assert forgot.returncode == 0, forgot.stderr
    assert f"forgot {people}" in forgot.stdout and "3 rows deleted" in forgot.stdout
    assert "DROP TABLE `people`" in forgot.stdout  # (the columns c1, c2 stay unless it is dropped)
    assert run("query", "DROP TABLE people", "--target", db).returncode == 0
    loaded = json.loads(run("load", str(people), "-t", "people", "--target", db, "--header", "--json").stdout)
    assert loaded["files_loaded"] == 1 and loaded["rows_loaded"] == 2
    twice = json.loads(run("load", str(people), "-t", "people", "--target", db, "--header", "--json").stdout)
    assert twice["files_skipped"] == 1 and twice["rows_loaded"] == 0
    rows = run("query", "SELECT name, city FROM people ORDER BY name", "--target", db).stdout
    assert rows == "ann\tparis\nbob\trome\n"
    state = json.loads(run("status", "-t", "people", "--target", db, "--json").stdout)
    assert [s["state"] for s in state] == ["done"]


def test_forget_takes_globs_gone_files_and_rejects_and_refuses_a_pattern_that_names_none(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        (data / f"e{i}.jsonl").write_text(f'{{"x": {i}}}\n{{"x": {10 + i}}}\n')
    (data / "bad.jsonl").write_text('{"x": 5}\n{"x": 6\n')  # (its second line is cut short)
    db = str(tmp_path / "db")
    first = json.loads(run("load", str(data), "-t", "t", "--target", db, "--max-errors", "1", "--json").stdout)
    assert first["rows_loaded"] == 7 and first["rows_rejected"] == 1

    nothing = run("forget", str(data / "nope*.jsonl"), str(data / "e0.jsonl"), "-t", "t", "--target", db)
    assert nothing.returncode == 2 and "nothing was forgotten" in nothing.stderr
    assert run("query", "SELECT count() FROM t", "--target", db).stdout == "7\n"
    missing_table = run("forget", str(data), "-t", "other", "--target", db)
    assert missing_table.returncode == 2 and "table other" in missing_table.stderr

    (data / "e2.jsonl").unlink()  # gone from the folder: still forgotten (its rows go)
    out = run("forget", str(data / "e{1,2}.jsonl"), str(data / "b*"), "-t", "t", "--target", db, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["files"] == [str(data / n) for n in ("bad.jsonl", "e1.jsonl", "e2.jsonl")]
    assert report["rows_deleted"] == 5 and report["rejects_deleted"] == 1
    assert run("query", "SELECT count() FROM t_rejects", "--target", db).stdout == "0\n"
    again = json.loads(run("load", str(data), "-t", "t", "--target", db, "--max-errors", "1", "--json").stdout)
    assert (again["files_loaded"], again["files_skipped"], again["rows_loaded"]) == (2, 1, 3)
    counts = run("query", "SELECT x, count() FROM t GROUP BY x ORDER BY x", "--target", db).stdout
    assert counts == "0\t1\n1\t1\n5\t1\n10\t1\n11\t1\n"


def test_forget_in_python(tmp_path: Path) -> None:
    data = tmp_path / "a.jsonl"
    data.write_text('{"x": 1}\n')
    db = str(tmp_path / "db")
    assert chute.load([str(data)], table="t", target=db).rows_loaded == 1
    report = chute.forget(str(data), table="t", target=db)
    assert isinstance(report, chute.ForgetReport)
    assert report.files == [str(data)] and report.rows_deleted == 1
    assert chute.load([str(data)], table="t", target=db).rows_loaded == 1
    assert chute.load([str(data)], table="t", target=db).files_skipped == 1
    assert "forget" in chute.__all__ and "ForgetReport" in chute.__all__

    # A file loaded in byte ranges: every range is forgotten, and it loads again whole, once.
    big = tmp_path / "big.csv"
    big.write_text("id,v\n" + "".join(f"{i},x{i}\n" for i in range(250_000)))
    split = chute.LoadOptions(split_bytes=2**20)
    parts = chute.load([str(big)], table="b", target=db, options=split).files_loaded
    assert parts >= 3
    ranges = chute.forget([str(tmp_path / "*.csv")], table="b", target=db)
    assert len(ranges.units) == parts and ranges.files == [str(big)] and ranges.rows_deleted == 250_000
    again = chute.load([str(big)], table="b", target=db, options=split)
    assert again.rows_loaded == 250_000
    counted = chute.query("SELECT count(), uniqExact(id), max(_source_row) FROM b", db, "TSV")
    assert counted == "250000\t250000\t250000\n"


def test_status_of_a_table_that_is_not_there_is_an_error(tmp_path: Path) -> None:
    data = tmp_path / "a.jsonl"
    data.write_text('{"x": 1}\n')
    db = str(tmp_path / "db")
    assert run("load", str(data), "-t", "t", "--target", db, "-q").returncode == 0
    out = run("status", "--table", "nosuch", "--target", db)
    assert out.returncode == 2
    assert out.stderr == f"chute: error: no table nosuch in {db} (tables loaded there: t)\n"
    assert run("status", "--table", "t", "--target", db).returncode == 0


def test_status_at_80_columns_wraps_errors_between_words(tmp_path: Path) -> None:
    deep = tmp_path / "exports" / "2026" / "november"
    deep.mkdir(parents=True)
    (deep / "events-from-the-production-cluster.jsonl").write_text('{"x": 1}\n')
    (deep / "events-from-the-staging-cluster.jsonl").write_text("a,b\n1,2\n")
    db = str(tmp_path / "db")
    assert run("load", str(deep), "-t", "t", "--target", db, "-q").returncode == 1
    error = json.loads(run("status", "-t", "t", "--target", db, "--json").stdout)[1]["last_error"]
    for columns in ("80", "100", "160"):
        out = run("status", "-t", "t", "--target", db, env={"COLUMNS": columns})
        assert out.returncode == 0
        lines = out.stdout.splitlines()
        assert lines[0] == f"table t, sources under {deep}/"  # (a line of its own, however long)
        assert all(len(line) <= int(columns) for line in lines[1:])
        words = out.stdout.split()
        for word in error.split(": ", 1)[1].split():  # (the file's name is the row's)
            assert word in words, (columns, word, out.stdout)


def test_a_refused_load_in_an_empty_folder_leaves_no_database(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for sources in (["/nonexistent"], ["/nonexistent/*.csv"], ["empty"]):
        out = run("load", *sources, "--table", "t", cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert sorted(os.listdir(tmp_path)) == ["empty"], (sources, os.listdir(tmp_path))


def _parquet(path: Path, rows: int) -> None:
    from chute.engine import open_engine

    open_engine(":memory:").execute(
        f"INSERT INTO FUNCTION file('{path}', Parquet) "
        f"SELECT number AS id, toDateTime('2026-11-01 00:00:00') + number AS ts, number * 1.5 AS amount "
        f"FROM numbers({rows})"
    )


def test_the_quick_start_refuses_a_folder_of_mixed_exports_and_makes_nothing(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    _parquet(exports / "orders.parquet", 500)
    (exports / "people.csv").write_text("name,age\nann,31\nbob,42\n")
    (exports / "cities.csv").write_text("city,population\nparis,2100000\n")
    out = run("load", "exports/", "--table", "events", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.splitlines()
    assert lines[0].startswith("chute: error: these files cannot go into one table: 3 groups share no column")
    assert "nothing was created or loaded" in lines[0]
    groups = {line.rsplit("): ", 1)[1] for line in lines if line.startswith("  group ")}
    assert set(groups) == {"exports/orders.parquet", "exports/people.csv", "exports/cities.csv"}, lines
    assert "  group 1 (CSV: city, population): exports/cities.csv" in lines
    assert "    chute load exports/cities.csv --table events" in lines
    assert any(line.endswith(" (Parquet: id, ts, amount): exports/orders.parquet") for line in lines)
    assert "    chute load exports/orders.parquet --table events_parquet" in lines
    assert any(line.endswith(" (CSV: name, age): exports/people.csv") for line in lines)
    assert "    chute load exports/people.csv --table events_csv" in lines
    assert sorted(os.listdir(tmp_path)) == ["exports"]  # no database, no table, no rejects table
    as_json = json.loads(run("load", "exports/", "--table", "events", "--json", cwd=tmp_path).stdout)
    assert as_json["ok"] is False and "3 groups" in as_json["error"]

    # Each suggested command loads its group.
    for command in (line.split() for line in lines if line.startswith("    chute load ")):
        done = run(*command[1:], "-q", cwd=tmp_path)
        assert done.returncode == 0, (command, done.stderr)
    tables = "SELECT " + ", ".join(f"(SELECT count() FROM {t})" for t in ("events", "events_csv", "events_parquet"))
    assert run("query", tables, cwd=tmp_path).stdout == "1\t2\t500\n"
    # Into the table that exists: a file that shares no column with it is refused, naming it.
    (exports / "more.csv").write_text("sku,price\nA1,3.5\n")
    into = run("load", "exports/more.csv", "--table", "events_parquet", cwd=tmp_path)
    assert into.returncode == 2
    assert "exports/more.csv shares no column with table events_parquet (id, ts, amount)" in into.stderr
    assert "rejects" not in run("query", "SHOW TABLES", cwd=tmp_path).stdout


def test_files_of_one_table_still_load_together(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    logs = tmp_path / "logs"
    logs.mkdir()
    # Keys that differ from file to file (added fields), as in the quick start's folder of one shape.
    (logs / "a.jsonl").write_text('{"host": "a", "ms": 1}\n')
    (logs / "b.jsonl").write_text('{"host": "b", "ms": 2, "path": "/x"}\n')
    (logs / "c.json").write_text('{"host": "c", "status": 200}\n')
    loaded = json.loads(run("load", str(logs), "-t", "logs", "--target", db, "--json").stdout)
    assert loaded["ok"] and loaded["files_loaded"] == 3, loaded
    # A CSV without its header line beside one with it; all-text files without headers.
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "p1.csv").write_text("id,price\n1,3.5\n")
    (parts / "p2.csv").write_text("2,4.5\n3,5.5\n")
    assert json.loads(run("load", str(parts), "-t", "parts", "--target", db, "--json").stdout)["ok"]
    names = tmp_path / "names"
    names.mkdir()
    (names / "n1.csv").write_text("ann,paris\ncy,oslo\n")
    (names / "n2.csv").write_text("bob,rome\ndee,lima\n")
    assert json.loads(run("load", str(names), "-t", "names", "--target", db, "--json").stdout)["rows_loaded"] == 4
    # A table made by hand: files whose header names its columns, or none, by position.
    made = run("query", "CREATE TABLE u (id UInt32, name String) ENGINE = MergeTree ORDER BY id", "--target", db)
    assert made.returncode == 0, made.stderr
    (tmp_path / "u1.csv").write_text("1,ann\n2,bob\n")
    (tmp_path / "u2.csv").write_text("id,name\n3,cy\n")
    into = run("load", str(tmp_path / "u1.csv"), str(tmp_path / "u2.csv"), "-t", "u", "--target", db, "--json")
    assert json.loads(into.stdout)["rows_loaded"] == 3, into.stderr
    # --add-columns: the user asks for one table of all the fields.
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.jsonl").write_text('{"x": 1}\n')
    (other / "y.jsonl").write_text('{"y": 2}\n')
    assert run("load", str(other), "-t", "xy", "--target", db).returncode == 2
    both = json.loads(run("load", str(other), "-t", "xy", "--target", db, "--add-columns", "--json").stdout)
    assert both["ok"] and both["rows_loaded"] == 2, both
