"""What a new user runs into first: wrong places, wrong types, options that do not apply.

Each test runs what a user would (the CLI in a subprocess, or the library) and checks the one
line and the exit code they get. Permission tests drop the capabilities that let root read and
write anything (setpriv), and skip where that is not possible.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search", "--"]


def run(*args: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    prefix = NO_DAC if unprivileged else []
    return subprocess.run(
        [*prefix, sys.executable, "-m", "chute.cli", *args], capture_output=True, text=True, timeout=120
    )


def python(code: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    prefix = NO_DAC if unprivileged else []
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def _unwritable(path: Path) -> None:
    """`path` read-only, for this test's unprivileged subprocesses; skip when they can still write."""
    path.chmod(0o555)
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    probe = subprocess.run([*NO_DAC, "touch", str(path / "probe")], capture_output=True)
    if probe.returncode == 0:
        os.remove(path / "probe")
        pytest.skip("this user writes into read-only directories")


def _loaded(tmp_path: Path) -> str:
    """A database with table t (3 rows), made by the CLI (the test's process holds no engine)."""
    data = tmp_path / "t.jsonl"
    data.write_text('{"n": 1}\n{"n": 2}\n{"n": 3}\n')
    db = str(tmp_path / "db")
    done = run("load", str(data), "-t", "t", "--target", db, "-q")
    assert done.returncode == 0, done.stderr
    return db


def test_export_into_a_read_only_directory_is_one_line_and_a_chute_error(tmp_path: Path) -> None:
    db = _loaded(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    _unwritable(out)
    os.chmod(tmp_path, 0o777)  # (the engine's own directory stays writable)
    done = run("export", "t", str(out), "--target", db, unprivileged=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("chute: error: cannot write into ") and "Permission denied" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    code = f"import chute\ntry:\n    chute.export('t', {str(out)!r}, target={db!r})\nexcept chute.ChuteError as e:\n"
    code += "    print(type(e).__name__, isinstance(e, chute.UsageError))"
    library = python(code, unprivileged=True)
    assert library.stdout.strip() == "UsageError True", library.stderr


def test_a_server_that_refuses_connections_is_transient(tmp_path: Path) -> None:
    import chute

    from ..harness.servers import free_port

    data = tmp_path / "a.jsonl"
    data.write_text('{"a": 1}\n')
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(chute.TransientTargetError) as caught:
        chute.load([str(data)], "t", target=url)
    assert not caught.value.terminal and "cannot reach" in str(caught.value)
    cli = run("load", str(data), "-t", "t", "--target", url)
    assert cli.returncode == 1 and cli.stderr.count("\n") == 1 and "cannot reach" in cli.stderr


def test_load_failed_is_not_in_the_public_api() -> None:
    import chute

    assert not hasattr(chute, "LoadFailed")
    for name in chute.__all__:
        assert getattr(chute, name) is not None


def test_reading_commands_make_no_database_where_there_is_none(tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"
    mine = tmp_path / "mydata"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    out = tmp_path / "out"
    for where in (typo, mine):
        for words in (["status"], ["query", "SELECT 1"], ["export", "t", str(out)]):
            done = run(*words, "--target", str(where))
            assert done.returncode == 2, (words, done.stdout, done.stderr)
            assert done.stderr == f"chute: error: no database at {where}: " + (
                "the directory does not exist (chute load makes one)\n"
                if where == typo
                else "the directory holds no ClickHouse database\n"
            )
    assert not typo.exists() and not out.exists()
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    # A load makes the database; then every reading command opens it.
    db = _loaded(tmp_path)
    assert run("status", "--target", db).returncode == 0
    assert run("query", "SELECT count() FROM t", "--target", db).stdout == "3\n"
    assert run("export", "t", str(out), "--target", db, "-q").returncode == 0
    # An empty directory made on purpose takes tables from `query` (made before a load).
    empty = tmp_path / "empty.db"
    empty.mkdir()
    made = run("query", "CREATE TABLE e (a UInt8) ENGINE = MergeTree ORDER BY a", "--target", str(empty))
    assert made.returncode == 0, made.stderr
    assert run("status", "--target", str(empty)).stdout == "nothing loaded yet\n"


def test_a_directory_with_nothing_to_load_is_an_error_naming_it(tmp_path: Path) -> None:
    import chute

    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("not data\n")
    (other / "_SUCCESS").write_text("")
    db = str(tmp_path / "db")
    done = run("load", str(empty), "-t", "t", "--target", db, "--json")
    assert done.returncode == 2 and done.stderr == f"chute: error: {empty}: no file to load\n"
    assert '"ok": false' in done.stdout
    done = run("load", str(other), "-t", "t", "--target", db)
    assert done.returncode == 2 and done.stderr.startswith(f"chute: error: {other}: no file to load; skipped 1 hidden")
    assert "1 file of no known format, such as notes.txt (--format reads them)" in done.stderr
    with pytest.raises(chute.SourceError, match="no file to load"):
        chute.load([str(other)], "t", target=db)


def test_an_unreadable_subdirectory_fails_the_load_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.jsonl").write_text('{"n": 1}\n')
    (data / "sub" / "b.jsonl").write_text('{"n": 2}\n')
    (data / "sub").chmod(0)
    try:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv is not installed")
        if subprocess.run([*NO_DAC, "ls", str(data / "sub")], capture_output=True).returncode == 0:
            pytest.skip("this user lists unreadable directories")
        os.chmod(tmp_path, 0o777)
        done = run("load", str(data), "-t", "t", "--target", str(tmp_path / "db"), unprivileged=True)
        assert done.returncode == 2, done.stderr
        assert done.stderr == f"chute: error: {data / 'sub'}: cannot list the directory (Permission denied)\n"
    finally:
        (data / "sub").chmod(0o755)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--where", "a > 1"], "--where is for database sources (postgresql://, mysql://), not file sources"),
        (["--cursor", "a", "--split-by", "a"], "--cursor and --split-by are for database sources"),
        (["--s3-endpoint", "http://127.0.0.1:9"], "--s3-endpoint is for s3:// sources, not file sources"),
        (["--node", "http://127.0.0.1:9"], "--node needs a server target"),
        (["--shard-by", "a"], "--shard-by is the key of the table --cluster makes; it goes with --cluster"),
        (["--password-file", "pw"], "--password-file is for server targets, database and kafka sources"),
        (["--strict", "--max-errors", "5"], "--strict allows no bad row; it does not go with --max-errors"),
    ],
)
def test_options_for_another_source_or_target_are_refused(tmp_path: Path, extra: list[str], message: str) -> None:
    import chute
    from chute.cli import build_parser
    from chute.cli.load import _load_options

    data = tmp_path / "w.jsonl"
    data.write_text('{"a": 1}\n{"a": 2}\n')
    db = tmp_path / "o.db"
    args = build_parser().parse_args(["load", str(data), "-t", "w", "--target", str(db), *extra])
    with pytest.raises(chute.UsageError) as caught:
        chute.load([str(data)], "w", target=str(db), options=_load_options(args))
    assert message in str(caught.value)
    assert not db.exists()  # refused before the target is opened


def test_refused_options_are_one_line_and_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "w.jsonl"
    data.write_text('{"a": 1}\n{"a": 2}\n')
    done = run("load", str(data), "-t", "w", "--target", str(tmp_path / "o.db"), "--where", "a > 1")
    assert done.returncode == 2 and done.stderr.startswith("chute: error: --where is for database sources")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "o.db").exists()


def test_every_json_report_says_ok(tmp_path: Path) -> None:
    import json

    db = _loaded(tmp_path)
    exported = run("export", "t", str(tmp_path / "out"), "--target", db, "--json")
    assert exported.returncode == 0 and json.loads(exported.stdout)["ok"] is True
    loaded = run("load", str(tmp_path / "t.jsonl"), "-t", "t", "--target", db, "--json")
    assert json.loads(loaded.stdout)["ok"] is True
    docs = (Path(__file__).parents[2] / "docs" / "commands.md").read_text()
    assert "`--json` prints one object" not in docs and '"ok"' in docs


def test_quiet_prints_only_errors_as_readme_and_help_say(tmp_path: Path) -> None:
    data = tmp_path / "a.jsonl"
    data.write_text('{"n": 1}\n{"n": 2}\n{"n": 3}\n{broken\n')
    done = run("load", str(data), "-t", "t", "--target", str(tmp_path / "db"), "-q")
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr == "chute: warning: 1 row rejected; see table t_rejects\n"
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `--json`, `--quiet`"))
    assert "only errors and warnings" in row and "no progress bar;" not in row
    assert "no report" in " ".join(run("load", "--help").stdout.split())


def test_a_lone_bz2_file_for_a_new_table_says_bzip2_has_no_reader(tmp_path: Path) -> None:
    import bz2

    import chute

    data = tmp_path / "a.json.bz2"
    data.write_bytes(bz2.compress(b'{"a": 1}\n'))
    expected = f"{data}: bzip2 files cannot be read: the embedded engine has no bzip2 reader; "
    with pytest.raises(chute.SourceError) as caught:
        chute.load([str(data)], "t", target=str(tmp_path / "db"))
    assert str(caught.value).startswith(expected) and "NOT_IMPLEMENTED" not in str(caught.value)


def test_worker_id_has_no_alias_that_reads_like_workers(tmp_path: Path) -> None:
    done = run("load", str(tmp_path), "-t", "t", "--workers-id", "w1")
    assert done.returncode == 2
    assert done.stderr == "chute: error: unknown option --workers-id (did you mean --worker-id?)\n"


def test_a_target_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    data = tmp_path / "a.csv"
    data.write_text("id\n1\n")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    refused = run("load", str(data), "-t", "t", "--target", str(afile))
    assert refused.returncode == 2, refused.stderr
    assert (
        refused.stderr
        == f"chute: error: the embedded database {afile} is a file, not a directory: give a directory (--target)\n"
    )
    assert afile.read_text() == "mine"


def test_server_options_into_a_directory_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "a.csv"
    data.write_text("id\n1\n")
    target = tmp_path / "db"
    for option in (["--insecure"], ["--connections", "4"], ["--worker-id", "w1"], ["--insert-via-distributed"]):
        refused = run("load", str(data), "-t", "t", "--target", str(target), *option)
        assert refused.returncode == 2 and f"{option[0]} needs a server target" in refused.stderr, refused.stderr
    assert not target.exists()
