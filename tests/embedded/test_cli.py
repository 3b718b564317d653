"""The `chute` command as a user runs it: exit codes, one-line errors, JSON."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chute.cli", *args], capture_output=True, text=True, timeout=120)


def test_load_json_status_query(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    for i in range(3):
        (data / f"f{i}.jsonl").write_text("".join(f'{{"k": {i * 10 + j}}}\n' for j in range(10)))
    db = str(tmp_path / "db")
    first = run("load", str(data), "--table", "t", "--target", db, "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["rows_loaded"] == 30 and report["files_loaded"] == 3 and report["table_rows"] == 30
    again = json.loads(run("load", str(data), "--table", "t", "--target", db, "--json").stdout)
    assert again["rows_loaded"] == 0 and again["files_skipped"] == 3

    status = run("status", "--table", "t", "--target", db, "--json")
    rows = json.loads(status.stdout)
    assert len(rows) == 3 and {r["state"] for r in rows} == {"done"}
    assert sum(int(r["rows_loaded"]) for r in rows) == 30

    out = run("query", "SELECT sum(k) FROM t", "--target", db)
    assert out.returncode == 0 and out.stdout.strip() == str(sum(range(30)))

    text = run("load", str(data), "--table", "t", "--target", db)
    assert text.returncode == 0 and "0 loaded" in text.stdout and "3 skipped" in text.stdout


def test_target_from_environment(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n')
    db = tmp_path / "envdb"
    env = {"CHUTE_TARGET": str(db), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "chute.cli", "load", str(tmp_path / "a.jsonl"), "-t", "t", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert db.is_dir() and not (tmp_path / "chute.db").exists()


def test_errors_are_one_line_with_nonzero_exit(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    missing = run("load", str(tmp_path / "nope.jsonl"), "--table", "t", "--target", db)
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0 and "nope.jsonl" in missing.stderr
    assert "Traceback" not in missing.stderr

    bad_name = run("load", str(tmp_path), "--table", "no-good", "--target", db)
    assert bad_name.returncode == 2 and "invalid table name" in bad_name.stderr

    (tmp_path / "good.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "bad.jsonl").write_text('{"a": "text"}\n')
    run("load", str(tmp_path / "good.jsonl"), "--table", "t", "--target", db)
    partial = run("load", str(tmp_path / "bad.jsonl"), "--table", "t", "--target", db, "--quiet", "--strict")
    assert partial.returncode == 1
    lines = partial.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.jsonl" in lines[0]
    # A file with no good row fails (nothing to load is no success); one with some loads them.
    alone = run("load", str(tmp_path / "bad.jsonl"), "--table", "t", "--target", db, "--quiet")
    assert alone.returncode == 1 and "its one row rejected" in alone.stderr
    (tmp_path / "bad.jsonl").write_text('{"a": 2}\n{"a": "text"}\n')
    kept = run("load", str(tmp_path / "bad.jsonl"), "--table", "t", "--target", db, "--quiet")
    assert kept.returncode == 0
    assert kept.stderr.strip() == "chute: warning: 1 row rejected; see table t_rejects"

    query = run("query", "SELECT * FROM nowhere", "--target", db)
    assert query.returncode == 1 and "UNKNOWN_TABLE" in query.stderr and "Traceback" not in query.stderr
    debug = run("--debug", "query", "SELECT * FROM nowhere", "--target", db)
    assert "Traceback" in debug.stderr
    # After the command too (the README lists it with the load options), with the same exit code.
    late = run("load", str(tmp_path / "missing.csv"), "--table", "t", "--target", db, "--debug")
    assert late.returncode == 2 and "Traceback" in late.stderr and "no such file" in late.stderr


def test_command_sets_the_engine_allocator_unless_the_user_did(tmp_path: Path) -> None:
    """The engine's jemalloc reads JE_MALLOC_CONF when it loads: the command sets it first."""
    import os

    from chute.cli import ALLOCATOR_CONF

    probe = (
        "import os, sys\n"
        "from chute import cli\n"
        "cli.main(['query', 'SELECT 1', '--target', sys.argv[1]])\n"
        "print(os.environ.get('JE_MALLOC_CONF'), 'chdb' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JE_MALLOC_CONF"}
    (tmp_path / "db").mkdir()  # (empty: query makes the database there)
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "db")], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == f"{ALLOCATOR_CONF} True"
    env["JE_MALLOC_CONF"] = "narenas:2"
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "db")], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "narenas:2 True"


def test_a_load_that_stops_midway_reports_what_it_committed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load stopped by an error after some batches were committed (a target that went away,
    the books' replicas): `--json` was only {ok: false, error}, though rows were in. Now it is the
    report so far: the files committed and their rows, the others failed with the reason; the
    error line says what was committed."""
    from chute.cli import main
    from chute.errors import TransientTargetError

    loader_module = importlib.import_module("chute.load.loader")
    original = loader_module.done
    calls = []

    def done_twice(*args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) > 2:
            raise TransientTargetError("target went away")
        original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loader_module, "done", done_twice)
    data = tmp_path / "data"
    data.mkdir()
    for f in range(5):
        (data / f"f{f}.jsonl").write_text("".join(json.dumps({"id": f * 10 + i}) + "\n" for i in range(10)))
    target = str(tmp_path / "db")
    code = main(["load", str(data), "-t", "t", "--target", target, "--json", "--batch-files", "1", "--workers", "1"])
    out, err = capsys.readouterr()
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and "target went away" in report["error"]
    loaded = [f for f in report["files"] if f["state"] == "loaded"]
    assert len(loaded) == 2 and report["rows_loaded"] == 20 == sum(f["rows_loaded"] for f in loaded)
    assert {f["state"] for f in report["files"]} == {"loaded", "failed"} and report["files_total"] == 5
    assert all("the load stopped" in f["error"] for f in report["files"] if f["state"] == "failed")
    assert "2 file(s) and 20 rows were committed" in err, err
