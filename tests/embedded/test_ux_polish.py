"""A new user's first hour, part two: a mistyped command, a read-only database, error
classes, one unreadable file among many, rejects of an earlier failed attempt."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def test_a_mistyped_command_is_named_first_even_with_options(tmp_path: Path) -> None:
    typo = run("laod", "logs/", "--table", "logs", "--target", str(tmp_path / "db"))
    assert typo.returncode == 2
    assert typo.stderr == "chute: error: unknown command laod; did you mean load?\n"
    assert not (tmp_path / "db").exists()


def _read_only_mount_works(directory: Path) -> bool:
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && ! touch "$0/x" 2>/dev/null', str(directory)],
        capture_output=True,
    )
    return probe.returncode == 0


MOUNT_READ_ONLY = 'mount --bind -o ro "$0" "$0" && exec "$@"'


def on_read_only_mount(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`chute ARGS` with `directory` mounted read-only (in a mount namespace of its own: even root
    cannot write there, as chmod would not stop it)."""
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", MOUNT_READ_ONLY, str(directory), sys.executable, "-m", "chute.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_read_only_database_can_be_read(tmp_path: Path) -> None:
    db = tmp_path / "db"
    (tmp_path / "a.csv").write_text("id,name\n1,x\n2,y\n")
    assert run("load", str(tmp_path / "a.csv"), "--table", "t", "--target", str(db), "--quiet").returncode == 0
    if not _read_only_mount_works(db):
        pytest.skip("no read-only bind mount here (unshare -m and mount need CAP_SYS_ADMIN)")
    status = on_read_only_mount(db, "status", "--target", str(db))
    assert status.returncode == 0, status.stderr
    assert "a.csv" in status.stdout and "done" in status.stdout
    query = on_read_only_mount(db, "query", "SELECT count(), sum(id) FROM t", "--target", str(db))
    assert query.returncode == 0 and query.stdout == "2\t3\n", query.stderr
    write = on_read_only_mount(db, "query", "INSERT INTO t (id, name) VALUES (3, 'z')", "--target", str(db))
    assert write.returncode == 2 and write.stderr.count("\n") == 1 and "open for reading only" in write.stderr
    exported = on_read_only_mount(db, "export", "t", str(tmp_path / "out"), "--target", str(db), "--json")
    assert exported.returncode == 0 and json.loads(exported.stdout)["rows_written"] == 2, exported.stderr


def test_json_read_as_csv_into_a_new_table_is_the_source_s_fault_in_one_short_line(tmp_path: Path) -> None:
    import chute

    data = tmp_path / "events.json"
    data.write_text('{"a": 1, "b": "x"}\n{"a": 2, "b": "y"}\n')
    db = str(tmp_path / "db")
    told = run("load", str(data), "--format", "csv", "--table", "t", "--target", db)
    assert told.returncode == 2, told.stderr
    line = told.stderr.strip()
    assert told.stderr.count("\n") == 1 and len(line) <= 160 + len(str(data)), line
    assert "events.json: cannot be read as CSV" in line and "--format json" in line, line
    try:
        chute.load([str(data)], "t", target=db, options=chute.LoadOptions(format="csv"))
    except chute.ChuteError as exc:
        assert type(exc) is chute.SourceError, repr(exc)
    else:
        raise AssertionError("loaded JSON as CSV")


def test_export_of_an_unknown_table_is_a_usage_error(tmp_path: Path) -> None:
    import chute

    db = str(tmp_path / "db")
    (tmp_path / "a.csv").write_text("id\n1\n")
    assert run("load", str(tmp_path / "a.csv"), "--table", "t", "--target", db, "--quiet").returncode == 0
    told = run("export", "nosuch", str(tmp_path / "out"), "--target", db)
    assert (
        told.returncode == 2
        and told.stderr == f"chute: error: no table nosuch in {db} (chute status lists what is loaded)\n"
    )
    assert not (tmp_path / "out").exists()
    try:
        chute.export("nosuch", str(tmp_path / "out"), target=db)
    except chute.ChuteError as exc:
        assert type(exc) is chute.UsageError, repr(exc)
    else:
        raise AssertionError("exported a table that does not exist")


def test_python_api_names_and_defaults_are_the_cli_s(tmp_path: Path) -> None:
    import warnings

    import chute

    db = str(tmp_path / "db")
    (tmp_path / "a.csv").write_text("id,name\n1,x\n2,y\n")
    report = chute.load([str(tmp_path / "a.csv")], "t", target=db, options=chute.LoadOptions(memory_limit="1GB"))
    assert report.ok
    (result,) = report.files
    assert result.state is chute.FileState.LOADED and result.state == "loaded"
    assert report.to_dict()["files"][0]["state"] == "loaded"
    (unit,) = chute.status("t", target=db)
    assert unit["state"] is chute.UnitState.DONE and unit["state"] == "done"
    assert chute.query("SELECT id, name FROM t ORDER BY id", target=db, format="TSV") == "1\tx\n2\ty\n"
    plain = chute.query("SELECT id, name FROM t ORDER BY id", target=db)  # off a terminal: plain TSV
    assert plain == "1\tx\n2\ty\n", plain
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert chute.query("SELECT count() FROM t", target=db, fmt="CSV") == "2\n"
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    again = chute.load([str(tmp_path / "a.csv")], "t", target=db)
    assert again.files[0].state is chute.FileState.SKIPPED


NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search", "--"]
"""Root without the capabilities that read past file permissions: a mode-000 file is unreadable."""


def test_an_unreadable_file_fails_alone_and_the_others_load(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for i, name in enumerate(("a", "b", "secret")):
        (data / f"{name}.csv").write_text(f"id,name\n{i},{name}\n")
    (data / "secret.csv").chmod(0)
    os.mkfifo(data / "pipe.csv")  # a reader that opened it would wait forever
    (data / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    if shutil.which("setpriv") is None or subprocess.run([*NO_DAC, "cat", str(data / "secret.csv")]).returncode == 0:
        pytest.skip("cannot drop the capability to read a mode-000 file here (setpriv)")
    db = str(tmp_path / "db")
    done = subprocess.run(
        [*NO_DAC, sys.executable, "-m", "chute.cli", "load", str(data), "--table", "t", "--target", db, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    states = {Path(f["source"]).name: (f["state"], f["error"]) for f in report["files"]}
    assert states["a.csv"] == ("loaded", "") and states["b.csv"] == ("loaded", "")
    assert states["secret.csv"] == ("failed", f"{data / 'secret.csv'}: permission denied")
    assert states["pipe.csv"] == ("failed", f"{data / 'pipe.csv'}: not a regular file")
    gone = f"{data / 'gone.csv'}: a symlink to {tmp_path / 'nowhere.csv'}, which does not exist"
    assert states["nowhere.csv"] == ("failed", gone)
    assert report["rows_loaded"] == 2
    (data / "secret.csv").chmod(0o644)
    again = run("load", str(data), "--table", "t", "--target", db, "--json")
    assert json.loads(again.stdout)["rows_loaded"] == 1  # the file loads once it can be read


def test_rejects_of_a_failed_attempt_go_when_the_file_loads(tmp_path: Path) -> None:
    """Into a table without provenance columns too (whose earlier rows cannot be found)."""
    db = str(tmp_path / "db")
    (tmp_path / "good.csv").write_text("id,name\n1,a\n2,b\n")
    semi = tmp_path / "semi.csv"
    semi.write_text("id;name\n7;g\n8;h\n")
    for flags in ([], ["--no-provenance"]):
        table = "t" if not flags else "plain"
        assert run("load", str(tmp_path / "good.csv"), "--table", table, "--target", db, "-q", *flags).returncode == 0
        wrong = run("load", str(semi), "--table", table, "--target", db, "--delimiter", ",", "-q")
        assert wrong.returncode == 1 and "all 3 rows rejected" in wrong.stderr, wrong.stderr
        rejects = f"SELECT count() FROM {table}_rejects WHERE _source = '{semi}'"
        assert run("query", rejects, "--target", db).stdout == "3\n"
        right = run("load", str(semi), "--table", table, "--target", db, "--delimiter", ";", "-q")
        assert right.returncode == 0, right.stderr
        assert run("query", rejects, "--target", db).stdout == "0\n", table
        assert run("query", f"SELECT count() FROM {table}", "--target", db).stdout == "4\n"
