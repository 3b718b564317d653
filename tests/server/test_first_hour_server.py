"""A new user's first hour against the 18.16 server (issue 48): a target given as host:port,
`chute forget`, and files that cannot go into one table, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import chute

from ..harness.cli import run_chute
from ..harness.servers import server_query


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_chute(*args, cwd=cwd, timeout=180)


def count(url: str, sql: str) -> str:
    return server_query(url, sql).strip()


def test_host_port_without_a_scheme_loads_into_the_server(tmp_path: Path, server_url: str) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    bare = server_url.removeprefix("http://")  # 127.0.0.1:PORT/database
    out = run("load", "logs", "--table", "logs", "--target", bare, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"chute: note: target {bare} taken as the server http://{bare}" in out.stderr
    assert json.loads(out.stdout)["rows_loaded"] == 2
    assert count(server_url, "SELECT count() FROM logs") == "2"
    assert sorted(os.listdir(tmp_path)) == ["logs"]  # no directory named like the server
    status = run("status", "--table", "logs", "--target", bare, "--json", cwd=tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)[0]["state"] == "done"


def test_forget_on_a_server_deletes_rows_and_rejects_and_the_next_load_takes_them_once(
    tmp_path: Path, server_url: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    (data / "b.jsonl").write_text('{"x": 3}\n{"x": 4\n')  # (its second line is cut short: rejected)
    first = json.loads(run("load", str(data), "-t", "t", "--target", server_url, "--max-errors", "1", "--json").stdout)
    assert (first["rows_loaded"], first["rows_rejected"]) == (3, 1)
    assert count(server_url, "SELECT count() FROM t_rejects") == "1"

    # Another worker loading the file now (a live claim, from another host): refused, nothing changed.
    b = str(data / "b.jsonl")
    claim = f"INSERT INTO _chute_claims VALUES ('t', '{b}', 'tok', 'w2', 'elsewhere', '1', {{}}, now())"
    server_query(server_url, claim.format("'held', now() + 60"))
    held = run("forget", b, "-t", "t", "--target", server_url)
    assert held.returncode == 2 and "being loaded now by w2" in held.stderr, held.stderr
    assert count(server_url, "SELECT count() FROM t") == "3"
    server_query(server_url, claim.format("'released', toDateTime(0)"))  # that load ended

    out = run("forget", b, "-t", "t", "--target", server_url)
    assert out.returncode == 0, out.stderr
    assert "1 rows deleted, 1 rejected rows deleted" in out.stdout
    assert count(server_url, "SELECT count() FROM t") == "2"
    assert count(server_url, "SELECT count() FROM t_rejects") == "0"
    status = json.loads(run("status", "-t", "t", "--target", server_url, "--json").stdout)
    states = {s["source"]: s["state"] for s in status}
    assert states == {str(data / "a.jsonl"): "done", str(data / "b.jsonl"): "forgotten"}

    (data / "b.jsonl").write_text('{"x": 3}\n{"x": 4}\n')  # fixed
    again = json.loads(run("load", str(data), "-t", "t", "--target", server_url, "--json").stdout)
    assert (again["files_loaded"], again["files_skipped"], again["rows_loaded"]) == (1, 1, 2)
    twice = json.loads(run("load", str(data), "-t", "t", "--target", server_url, "--json").stdout)
    assert twice["files_skipped"] == 2 and twice["rows_loaded"] == 0
    assert count(server_url, "SELECT groupArray(x) FROM (SELECT x FROM t ORDER BY x)") == "[1,2,3,4]"

    report = chute.forget(str(data), table="t", target=server_url)  # a directory: all of it
    assert report.rows_deleted == 4 and len(report.files) == 2
    assert count(server_url, "SELECT count() FROM t") == "0"
    assert any("DROP TABLE" in n for n in report.notes)
    assert chute.load([str(data)], table="t", target=server_url).rows_loaded == 4


def test_mixed_files_into_a_server_are_refused_and_nothing_is_made(tmp_path: Path, server_url: str) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    (exports / "events.jsonl").write_text('{"id": 1, "ts": "2026-11-01 10:00:00"}\n')
    (exports / "people.csv").write_text("name,age\nann,31\nbob,42\n")
    out = run("load", str(exports), "--table", "events", "--target", server_url)
    assert out.returncode == 2, out.stderr
    assert "2 groups share no column" in out.stderr and "--table events_csv" in out.stderr
    assert count(server_url, "SELECT count() FROM system.tables WHERE database = currentDatabase()") == "0"


def test_the_native_port_or_https_on_the_http_port_is_a_usage_error_that_says_which_port(
    tmp_path: Path,
    clickhouse_server,
    server_url: str,  # type: ignore[no-untyped-def]
) -> None:
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n')
    database = server_url.rsplit("/", 1)[1]
    native = f"http://127.0.0.1:{clickhouse_server.tcp_port}/{database}"  # the port clickhouse-client uses
    out = run("load", "a.jsonl", "-t", "t", "--target", native, cwd=tmp_path)
    assert out.returncode == 2, out.stderr  # (was 1: as if the server were down)
    assert f"Port {clickhouse_server.tcp_port} is for clickhouse-client program" in out.stderr
    assert out.stderr.endswith("(chute speaks HTTP: give the server's HTTP port, 8123 by default)\n")
    with_tls = server_url.replace("http://", "https://")
    status = run("status", "--target", with_tls, cwd=tmp_path)
    assert status.returncode == 2, status.stderr  # (was 1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    assert status.stderr == (
        f"chute: error: {with_tls.replace('https://', 'https://default@')}: the server does not speak TLS on this "
        "port; give http://, or the port where it serves https (8443 by default)\n"
    )


def test_a_table_named_with_and_without_the_url_s_database_is_loaded_once(tmp_path: Path, server_url: str) -> None:
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    database = server_url.rsplit("/", 1)[1]
    first = chute.load([str(tmp_path / "a.jsonl")], table="t", target=server_url)
    assert first.files_loaded == 1
    again = chute.load([str(tmp_path / "a.jsonl")], table=f"{database}.t", target=server_url)
    assert (again.files_loaded, again.files_skipped) == (0, 1)  # (was 1, 0: every row twice)
    assert f"table {database}.t is the table loaded before as t" in again.notes[0]
    assert count(server_url, "SELECT count() FROM t") == "2"


def test_a_missing_or_wrong_password_says_where_chute_takes_it_from(tmp_path: Path, server_url: str) -> None:
    # "[194] Password required for user chute_test" said what was wrong, not where to put it.
    from ..harness.servers import TEST_USER

    where = (
        "(the password: in the URL as user:password@, in a file (--password-file; chute copy: --from-password-file, "
        "--to-password-file), or CLICKHOUSE_PASSWORD)"
    )
    bare = server_url.replace("http://", f"http://{TEST_USER}@")
    for target, told in ((bare, "Password required"), (bare.replace("@", ":wrong@"), "Wrong password")):
        out = run("status", "--target", target, cwd=tmp_path)
        assert out.returncode == 2
        assert told in out.stderr and out.stderr.endswith(f"{where}\n"), out.stderr
        assert ":wrong@" not in out.stderr
