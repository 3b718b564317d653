"""What users see around a load: help, one-line errors, JSON on failure, status at 80 columns."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import chute
from chute.cli import build_parser, subparsers
from chute.engine import open_engine

COMMANDS = ("load", "export", "copy", "design", "bench", "status", "forget", "query", "time-queries")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_every_option_of_every_command_has_help_a_summary_and_an_example() -> None:
    commands = subparsers(build_parser())
    assert set(commands) == set(COMMANDS)
    summaries = {
        a.dest: a.help
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
        for a in action._choices_actions
    }
    for name, parser in commands.items():
        assert summaries.get(name), f"{name}: no one-line summary"
        assert parser.description, f"{name}: no description"
        assert parser.epilog and f"chute {name} " in parser.epilog, f"{name}: no example"
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            what = "/".join(action.option_strings) or action.metavar or action.dest
            assert action.help and action.help.strip(), f"chute {name} {what}: no help text"
    load_help = run("load", "--help").stdout
    assert "hdfs://" in load_help and "kafka://" in load_help and "examples:" in load_help


def test_a_mistyped_option_is_one_line_with_a_guess(tmp_path: Path) -> None:
    typo = run("load", str(tmp_path), "--tabel", "t", "--target", str(tmp_path / "db"))
    assert typo.returncode == 2
    assert typo.stderr == "chute: error: unknown option --tabel (did you mean --table?)\n"
    command = run("lod", "x")
    assert command.returncode == 2 and command.stderr == "chute: error: unknown command lod; did you mean load?\n"
    status = run("status", "--jsn")
    assert status.returncode == 2 and status.stderr == "chute: error: unknown option --jsn (did you mean --json?)\n"
    abbreviated = run("status", "--tab", "t", "--target", str(tmp_path / "db"))  # parsed: on to the target
    assert abbreviated.returncode == 2 and "no database at" in abbreviated.stderr, abbreviated.stderr


def test_json_on_failure_is_one_object_with_ok_false(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    usage = run("load", str(tmp_path), "--tabel", "t", "--json")
    assert usage.returncode == 2
    assert json.loads(usage.stdout) == {"ok": False, "error": "unknown option --tabel (did you mean --table?)"}

    garbage = tmp_path / "garbage.csv"
    garbage.write_bytes(b"\x00\x01\x02 not \xff a csv \x00\n")
    inference = run("load", str(garbage), "--table", "g", "--target", db, "--json", "--format", "parquet")
    assert inference.returncode != 0
    parsed = json.loads(inference.stdout)
    assert parsed["ok"] is False and "garbage.csv" in parsed["error"]

    data = tmp_path / "a.jsonl"
    data.write_text('{"x": 1}\n')
    first = json.loads(run("load", str(data), "-t", "t", "--target", db, "--json").stdout)
    assert first["ok"] is True
    data.write_text('{"x": 1}\n{"x": 2}\n')
    changed = run("load", str(data), "-t", "t", "--target", db, "--json", "--on-change", "error")
    assert changed.returncode == 1
    report = json.loads(changed.stdout)
    assert report["ok"] is False and report["files_failed"] == 1 and "a.jsonl" in report["error"]
    assert "changed since it was loaded" in report["error"] and report["table"] == "t"


def test_status_at_80_columns_shows_what_tells_long_paths_apart(tmp_path: Path) -> None:
    deep = tmp_path / "incoming-data-from-the-partner-sftp" / "exports-of-november-2026-full-resolution"
    deep.mkdir(parents=True)
    for i in range(3):
        (deep / f"events-2026-11-24-partner-export-part-{i:04d}.jsonl").write_text(f'{{"x": {i}}}\n')
    db = str(tmp_path / "db")
    assert run("load", str(deep), "-t", "t", "--target", db, "-q").returncode == 0
    (deep / "events-2026-11-24-partner-export-part-0009.jsonl").write_text('{"x": "not a number"}\n')
    assert run("load", str(deep), "-t", "t", "--target", db, "-q", "--strict").returncode == 1

    out = run("status", "--target", db, env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"table t, sources under {deep}/"
    assert all(len(line) <= 80 for line in lines[1:])
    rows = lines[: lines.index("last errors:")]  # (then each error, below the table at 80 columns)
    for part in ("part-0000.jsonl", "part-0001.jsonl", "part-0002.jsonl", "part-0009.jsonl"):
        assert sum(part in line for line in rows) == 1, out.stdout
    assert any("failed" in line for line in rows)


def test_a_png_chart_without_matplotlib_fails_before_the_benchmark(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n')
    db = tmp_path / "db"
    args = ["bench", str(tmp_path / "a.jsonl"), "--target", str(db), "--chart", str(tmp_path / "out.png")]
    # matplotlib made unimportable (None in sys.modules), as where it is not installed.
    code = f"import sys; sys.modules['matplotlib'] = None; from chute.cli import main; raise SystemExit(main({args!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "matplotlib" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not db.exists() and not (tmp_path / "out.png").exists()


def test_progress_bar_speaks_the_report_s_units_and_shows_the_rate_after_the_first_batch(
    tmp_path: Path, target: str
) -> None:
    import io

    from rich.console import Console

    from chute import LoadOptions, load
    from chute.progress import Progress

    for i in range(3):
        (tmp_path / f"f{i}.jsonl").write_text("".join(f'{{"k": {j}, "s": "{"x" * 500}"}}\n' for j in range(1000)))
    shown: list[str] = []
    screen = Console(file=io.StringIO(), width=200)
    with Progress(enabled=True, console=Console(file=io.StringIO(), width=200)) as bar:

        def update(files: int, rows: int, done: int) -> None:
            bar.update(files, rows, done)
            with screen.capture() as captured:
                screen.print(bar.render())
            if files and f"{files}/3 files" not in "".join(shown[-1:]):  # (told within a batch too)
                shown.append(captured.get())

        opts = LoadOptions(batch_files=1)
        load([str(tmp_path / f"f{i}.jsonl") for i in range(3)], "t", target, opts, update, bar.start)
    assert len(shown) == 3
    assert "0.5/1.5 MiB" in shown[0] and "MiB/s" in shown[0] and "left" in shown[0] and "1/3 files" in shown[0]
    assert "1.5/1.5 MiB" in shown[-1] and "3,000 rows" in shown[-1] and "0:00:00 left" in shown[-1]


def test_directory_loads_say_what_they_skipped(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / ".git").mkdir(parents=True)
    (data / "sub").mkdir()
    (data / ".git" / "a.jsonl").write_text('{"x": 9}\n')
    (data / "a.jsonl").write_text('{"x": 1}\n')
    (data / "sub" / "b.jsonl").write_text('{"x": 2}\n')
    (data / ".hidden.jsonl").write_text('{"x": 3}\n')
    (data / "_SUCCESS").write_text("")
    (data / "README.txt").write_text("about the data\n")
    (data / "sub" / "notes.md").write_text("more\n")
    out = run("load", str(data), "-t", "t", "--target", str(tmp_path / "db"), "--json")
    report = json.loads(out.stdout)
    assert report["ok"] and report["rows_loaded"] == 2
    assert report["notes"] == [
        "in directories, skipped 3 hidden (names starting with . or _; files and directories) "
        "and 2 files of no known format, such as README.txt (--format reads them)"
    ]
    text = run("load", str(data / "sub"), "-t", "t", "--target", str(tmp_path / "db"))
    assert "note: in directories, skipped 1 file of no known format, such as notes.md" in text.stdout
    quiet = json.loads(run("load", str(data / "a.jsonl"), "-t", "t", "--target", str(tmp_path / "db"), "--json").stdout)
    assert quiet["notes"] == []


def test_odd_table_names_are_refused_with_one_line(tmp_path: Path) -> None:
    data = tmp_path / "a.jsonl"
    data.write_text('{"x": 1}\n{"x": "bad"}\n')
    db = str(tmp_path / "db")
    for name in ("system.query_log", "INFORMATION_SCHEMA.tables", "information_schema.t"):
        out = run("load", str(data), "-t", name, "--target", db)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "belongs to ClickHouse" in out.stderr, out.stderr
    assert not Path(db).exists()

    assert run("load", str(data), "-t", "t", "--target", db, "-q").returncode == 0  # one bad row: t_rejects
    clash = run("load", str(data), "-t", "t_rejects", "--target", db)
    assert clash.returncode == 2 and clash.stderr == (
        "chute: error: table t_rejects is where chute keeps the bad rows of t; choose another table name\n"
    )
    assert run("load", str(data), "-t", "t", "--target", db, "-q").returncode == 0  # t_rejects is chute's

    run("query", "CREATE TABLE u_rejects (id UInt64) ENGINE = MergeTree ORDER BY id", "--target", db)
    theirs = run("load", str(data), "-t", "u", "--target", db)
    assert theirs.returncode == 2 and "u_rejects exists and is not chute's rejects table" in theirs.stderr
    assert theirs.stderr.count("\n") == 1
    other = run("load", str(data), "-t", "v_rejects", "--target", db, "-q")  # no table v: an ordinary name
    assert other.returncode == 0, other.stderr
    long = run("load", str(data), "-t", "t" * 300, "--target", db)  # (the file system's C++ error, exit 1)
    assert long.returncode == 2 and long.stderr == "chute: error: table name too long (300 characters; at most 180)\n"


def test_scratch_copies_are_private_and_a_dead_run_s_are_removed(tmp_path: Path) -> None:
    import stat

    from chute.scratch import scratch_dir, scratch_file

    path = scratch_file("sample", ".jsonl")
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert os.path.dirname(path) == scratch_dir() and stat.S_IMODE(os.stat(scratch_dir()).st_mode) == 0o700
        assert f"-{os.getpid()}-" in os.path.basename(path)
    finally:
        os.remove(path)

    dead_pid = subprocess.Popen(["true"])  # a process that no longer exists
    dead_pid.wait()
    stale = Path(scratch_dir()) / f"chute-sample-{dead_pid.pid}-0123abcd.jsonl"
    stale.write_text('{"secret": 1}\n')
    ours = Path(scratch_file("lines", ".jsonl"))  # this process is alive: kept
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n')
    out = run("load", str(tmp_path / "a.jsonl"), "-t", "t", "--target", str(tmp_path / "db"), "-q")
    assert out.returncode == 0, out.stderr
    assert not stale.exists() and ours.exists()
    ours.unlink()


def test_messages_name_the_user_s_file_not_a_batch_or_a_scratch_copy(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{broken\nnot json\n")
    out = run("load", str(broken), "-t", "b", "--target", db)
    assert out.returncode == 2
    assert out.stderr == f"chute: error: {broken}: cannot infer the schema: no line is a JSON object\n"

    data = tmp_path / "d"
    data.mkdir()
    for name, value in (("a", "1"), ("b", '"abc"'), ("c", "3")):
        (data / f"{name}.jsonl").write_text(f'{{"x": {value}}}\n')
    assert run("load", str(data / "a.jsonl"), "-t", "t", "--target", db, "-q").returncode == 0
    out = run("load", str(data), "-t", "t", "--target", db, "-q", "--strict")
    assert out.returncode == 1
    assert out.stderr.startswith(f"chute: error: {data / 'b.jsonl'}: ") and out.stderr.count("\n") == 1
    assert "batch of" not in out.stderr and "chute-sample" not in out.stderr


def test_a_missing_ca_file_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n')
    env = {"SSL_CERT_FILE": str(tmp_path / "nonexistent.pem")}
    for target in ("https://127.0.0.1:9", str(tmp_path / "db")):
        source = str(tmp_path / "a.jsonl") if target.startswith("https") else "https://127.0.0.1:9/a.jsonl"
        out = run("load", source, "-t", "t", "--target", target, env=env)
        assert out.returncode == 2 and out.stderr == (
            f"chute: error: cannot set up TLS: SSL_CERT_FILE={tmp_path / 'nonexistent.pem'}: No such file or "
            "directory (point it at CA certificates, or unset it)\n"
        ), out.stderr


def test_scratch_copies_of_a_sigkilled_process_are_gone_after_the_next_run(tmp_path: Path) -> None:
    """A process killed with SIGKILL while it holds a copy of user data: the next load removes it."""
    import signal
    import stat
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from chute.scratch import scratch_file; "
            "p = scratch_file('sample', '.jsonl'); open(p, 'w').write('{\"secret\": 1}'); "
            "print(p, flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    copy = Path(holder.stdout.readline().strip())
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert copy.exists()  # nobody removed it: the process had no chance to
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n')
    out = run("load", str(tmp_path / "a.jsonl"), "-t", "t", "--target", str(tmp_path / "db"), "-q")
    assert out.returncode == 0, out.stderr
    assert not copy.exists()


def test_a_table_with_some_provenance_columns_is_told_they_stay_empty(tmp_path: Path) -> None:
    """Provenance is written into all four columns or none: a table with only some of them
    loads, and the report says which stay at their defaults."""
    source = tmp_path / "a.jsonl"
    source.write_text('{"id": 1}\n{"id": 2}\n')
    dest = str(tmp_path / "db")
    engine = open_engine(dest)
    engine.execute("CREATE TABLE t (id Int64, _source String, _source_row UInt64) ENGINE = MergeTree ORDER BY id")
    engine.close()
    report = chute.load([str(source)], table="t", target=dest)
    assert report.ok and report.rows_loaded == 2
    assert any("has _source, _source_row but not _load_id, _source_mtime" in n for n in report.notes), report.notes


def test_a_working_directory_named_with_glob_characters(tmp_path: Path) -> None:
    """The engine keeps the directory it starts in, and its schema inference found no file while
    that name held `*` or `{a,b}`: relative names from there load like any others."""
    for name in ("st*ar", "cu{a,b}"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "f.jsonl").write_text('{"id": 1}\n{"id": 2}\n')
        done = subprocess.run(
            [sys.executable, "-m", "chute.cli", "load", "f.jsonl", "--table", "t", "--target", "db", "--json"],
            cwd=folder,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["rows_loaded"] == 2
        assert (folder / "db").is_dir()


def test_numbers_that_cannot_work_are_one_line_and_exit_2(tmp_path: Path) -> None:
    """`--workers -3` ended in three tracebacks (max_workers must be greater than 0); `--split-size 1`
    planned one-byte ranges for minutes; `--batch-mb 0`, `--memory-limit 1` and `--lease-seconds -1`
    were taken without a word. Each is refused at once, naming the option."""
    (tmp_path / "a.csv").write_text("a\n1\n")
    target = str(tmp_path / "db")
    for flag, value in [
        ("--workers", "-3"),
        ("--workers", "0"),
        ("--connections", "0"),
        ("--batch-mb", "0"),
        ("--memory-limit", "1"),
        ("--lease-seconds", "-1"),
        ("--split-size", "1"),
    ]:
        done = run("load", str(tmp_path / "a.csv"), "--table", "t", "--target", target, flag, value)
        assert done.returncode == 2, (flag, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and flag in lines[0] and "Traceback" not in done.stderr, (flag, done.stderr)
        as_json = run("load", str(tmp_path / "a.csv"), "--table", "t", "--target", target, flag, value, "--json")
        assert as_json.returncode == 2 and json.loads(as_json.stdout)["ok"] is False


def test_sigterm_is_one_line_and_a_json_object(tmp_path: Path) -> None:
    """SIGTERM (a scheduler stopping the job) ended the load without a word, and `--json` printed
    nothing; it now ends as Ctrl-C does: one line, exit 130, and the JSON object."""
    import signal
    import time

    data = tmp_path / "in"
    data.mkdir()
    for i in range(40):
        (data / f"f{i:02d}.csv").write_text("id,v\n" + "".join(f"{j},{'x' * 40}\n" for j in range(40_000)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "chute", "load", str(data), "-t", "t", "--target", str(tmp_path / "db"), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        return  # (finished before the signal on a fast machine: nothing to see)
    assert proc.returncode == 130, err
    assert json.loads(out)["ok"] is False and "interrupted" in err and "Traceback" not in err


def test_an_input_field_named_like_a_provenance_column_is_a_usage_error(tmp_path: Path) -> None:
    """A request wrong before anything loads exits 2 (it exited 1)."""
    data = tmp_path / "clash.jsonl"
    data.write_text('{"a": 1, "_source": "x"}\n')
    got = run("load", str(data), "-t", "t", "--target", str(tmp_path / "db"))
    assert got.returncode == 2 and "clash with provenance columns; use --no-provenance" in got.stderr
