"""A new user's first hour, off the happy path: targets that are folders of other files, held by
another process or spelled another way, the Python API as an orchestrator calls it (paths, option
dicts, threads, reports), what design and bench leave behind, and the message each slip gets."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import chute
from chute.cli import main

from ..harness.cli import run_chute as run


def _exports(tmp_path: Path) -> Path:
    exports = tmp_path / "exports"
    exports.mkdir()
    (exports / "people.csv").write_text("name,age\nann,31\nbob,42\n")
    (exports / "more.csv").write_text("name,age\ncid,23\n")
    return exports


def test_a_target_that_is_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    # `--target exports` (meant as the source, or a data folder, or ~): the engine's metadata/,
    # store/, data/ and status used to land among the user's files; loading a folder into
    # itself then found no file and said ok.
    exports = _exports(tmp_path)
    for source in ("exports", "other"):
        if source == "other":
            (tmp_path / "other").mkdir()
            (tmp_path / "other" / "x.csv").write_text("name,age\ndan,50\n")
        out = run("load", source, "--table", "t", "--target", "exports", cwd=tmp_path)
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr == (
            "chute: error: the embedded database exports is a directory of other files (more.csv, people.csv), "
            "not a database: give a new or empty directory (--target), such as exports/chute.db\n"
        )
        assert sorted(os.listdir(exports)) == ["more.csv", "people.csv"]
    copy = run("copy", "t", "--from", "nowhere.db", "--to", "exports", cwd=tmp_path)
    assert copy.returncode == 2 and sorted(os.listdir(exports)) == ["more.csv", "people.csv"], copy.stderr
    with pytest.raises(chute.UsageError, match="directory of other files"):
        chute.load([str(exports)], table="t", target=str(exports))
    assert sorted(os.listdir(exports)) == ["more.csv", "people.csv"]

    # A new, an empty, or a database directory is the target's own.
    (tmp_path / "empty.db").mkdir()
    for target in ("new.db", "empty.db", "new.db"):
        out = run("load", "exports", "--table", "t", "--target", target, "-q", cwd=tmp_path)
        assert out.returncode == 0, out.stderr


def test_two_threads_loading_at_once_load_each_file_once(tmp_path: Path) -> None:
    # A thread pool of tasks in one process (Dagster, Prefect, a script): the two loads of one
    # table both found its files new and loaded them twice; one into another directory failed on
    # the engine's "already initialized with path" error. They take turns now.
    exports = _exports(tmp_path)
    db, other = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    barrier = threading.Barrier(4)
    reports: list[chute.LoadReport] = []
    errors: list[BaseException] = []

    def task(table: str, target: str) -> None:
        barrier.wait()
        try:
            reports.append(chute.load([str(exports)], table=table, target=target))
        except BaseException as exc:
            errors.append(exc)

    jobs = [("t", db), ("t", db), ("u", db), ("t", other)]
    threads = [threading.Thread(target=task, args=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(r.files_loaded for r in reports) == [0, 2, 2, 2]
    for table, target in (("t", db), ("u", db), ("t", other)):
        assert chute.query(f"SELECT count() FROM {table}", target=target) == "3\n"


def test_paths_and_options_as_an_orchestrator_gives_them(tmp_path: Path) -> None:
    exports = _exports(tmp_path)
    db = tmp_path / "paths.db"
    # pathlib.Path for sources (alone or in a list) and targets: used to be a TypeError.
    report = chute.load(exports, table="t", target=db)
    assert report.files_loaded == 2
    assert chute.load([exports / "people.csv"], table="t", target=db).files_skipped == 1
    assert chute.query("SELECT count() FROM t", target=db) == "3\n"
    assert [row["state"] for row in chute.status(target=db, table="t")] == ["done", "done"]
    assert chute.forget([exports / "more.csv"], table="t", target=db).files == [str(exports / "more.csv")]

    # options= as a dict (task parameters, JSON): its fields; a wrong one is a UsageError,
    # not an AttributeError from deep in the load.
    report = chute.load([str(exports)], table="o", target=str(db), options={"order_by": "name", "strict": True})
    assert report.ok and "ORDER BY name" in report.ddl
    with pytest.raises(chute.UsageError, match=re.escape("unknown load option(s) order: LoadOptions takes")):
        chute.load([str(exports)], table="o", target=str(db), options={"order": "name"})
    wrong_type = re.escape("options= takes a chute.LoadOptions (or a dict of its fields), not str")
    with pytest.raises(chute.UsageError, match=wrong_type):
        chute.load([str(exports)], table="o", target=str(db), options="order_by=name")  # type: ignore[arg-type]

    # The report crosses processes (XCom): pickled, or as JSON.
    again = pickle.loads(pickle.dumps(report))
    assert again.to_dict() == report.to_dict()
    assert json.loads(report.to_json())["rows_loaded"] == 3


def test_an_unknown_option_is_guessed_from_the_command_s_own(capsys: pytest.CaptureFixture[str]) -> None:
    # `chute query ... --json` was told "did you mean --version?" (an option that goes before
    # a command); query prints JSON through --format.
    assert main(["query", "SELECT 1", "--json"]) == 2
    out, err = capsys.readouterr()
    told = "unknown option --json: chute query prints JSON with --format JSON (or JSONEachRow)"
    assert err == f"chute: error: {told}\n"
    assert json.loads(out) == {"ok": False, "error": told}
    assert main(["design", "logs/", "--json"]) == 2
    assert capsys.readouterr().err == "chute: error: unknown option --json (see --help)\n"
    assert main(["--verison"]) == 2
    assert capsys.readouterr().err == "chute: error: unknown option --verison (did you mean --version?)\n"
    assert main(["status", "--tabel", "t"]) == 2
    assert capsys.readouterr().err == "chute: error: unknown option --tabel (did you mean --table?)\n"


def test_export_into_a_file_says_that_it_takes_a_directory(tmp_path: Path) -> None:
    _exports(tmp_path)
    assert run("load", "exports", "--table", "t", "-q", cwd=tmp_path).returncode == 0
    out = run("export", "t", "exports/people.csv", cwd=tmp_path)  # was "cannot write into ...: File exists"
    assert out.returncode == 2
    assert out.stderr == (
        f"chute: error: cannot export into {tmp_path}/exports/people.csv: it is a file; give a directory "
        "(one file per partition goes into it, with a manifest)\n"
    )
    assert (tmp_path / "exports" / "people.csv").read_text() == "name,age\nann,31\nbob,42\n"


@pytest.mark.parametrize(
    ("command", "told"),
    [
        (["export", "t", "out/"], "interrupted; re-run the same command to finish the export"),
        (
            ["copy", "t", "--from", "a.db", "--to", "http://localhost:8123"],
            "interrupted; re-run the same command to finish the copy",
        ),
        (["status"], "interrupted"),
    ],
)
def test_an_interrupt_names_the_command_that_a_re_run_finishes(
    command: list[str], told: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `chute export` stopped by Ctrl-C said "re-run the same command to finish the load".
    import chute.cli as cli

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    for name in ("export_command", "copy_command", "status_command"):
        monkeypatch.setattr(cli, name, interrupted)
    assert main([*command, "--json"]) == 130
    out, err = capsys.readouterr()
    assert err == f"chute: error: {told}\n"
    assert json.loads(out) == {"ok": False, "error": told}


def test_a_bench_chart_that_cannot_be_written_is_refused_before_the_bench_runs(tmp_path: Path) -> None:
    # Both were tracebacks after the whole benchmark had run (FileNotFoundError, matplotlib's ValueError).
    _exports(tmp_path)
    for chart, told in (
        (
            "no/such/dir/b.html",
            f"cannot be written in {tmp_path}/no/such/dir; give a file in a directory you may write",
        ),
        ("b.txt", "give a file named .html (no dependency), .png, .svg or .pdf"),
    ):
        out = run("bench", "exports", "--chart", chart, cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stderr == f"chute: error: --chart {chart}: {told}\n"
    assert sorted(os.listdir(tmp_path)) == ["exports"]  # no bench ran: no chute.db made


def test_design_in_a_project_folder_leaves_no_database_behind(tmp_path: Path) -> None:
    # `chute design data/ > layout.sql` made an empty ./chute.db where the user stood.
    _exports(tmp_path)
    out = run("design", "exports", "--table", "people", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "CREATE TABLE IF NOT EXISTS `people`" in out.stdout and "`age` UInt8" in out.stdout
    assert sorted(os.listdir(tmp_path)) == ["exports"]


def test_bench_in_a_project_folder_leaves_no_database_behind(tmp_path: Path) -> None:
    # `chute bench data/` left an empty ./chute.db (its scratch tables dropped) where the user ran it.
    _exports(tmp_path)
    out = run("bench", "exports", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert {r["method"] for r in json.loads(out.stdout)["results"]} >= {"chute -> embedded"}
    assert sorted(os.listdir(tmp_path)) == ["exports"]
    (tmp_path / "chute.db").mkdir()  # one that was there stays
    assert run("bench", "exports", "--json", cwd=tmp_path).returncode == 0
    assert sorted(os.listdir(tmp_path)) == ["chute.db", "exports"]


def test_chute_alone_or_chute_help_shows_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    # `chute` alone said only "the following arguments are required: COMMAND".
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: chute") and "load        load files into a table" in err
    assert main(["help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: chute") and "time-queries" in out and err == ""
    assert main(["help", "query"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: chute query") and "--format FORMAT" in out
    assert main(["help", "lod"]) == 2
    assert capsys.readouterr().err == "chute: error: unknown command lod; did you mean load?\n"


def test_every_report_says_ok_as_its_json_does(tmp_path: Path) -> None:
    # A task checks `report.ok` whatever it ran: ExportReport and ForgetReport had no `ok`
    # (their --json had "ok": true), an AttributeError in the task.
    exports = _exports(tmp_path)
    db = str(tmp_path / "ok.db")
    assert chute.load([str(exports)], table="t", target=db).ok
    exported = chute.export("t", str(tmp_path / "out"), target=db)
    forgotten = chute.forget([str(exports / "more.csv")], table="t", target=db)
    for report in (exported, forgotten):
        assert report.ok is True
        assert report.to_dict()["ok"] is True
        assert json.loads(json.dumps(report.to_dict()))["ok"] is True


def test_a_database_in_use_by_another_process_is_worth_a_retry(tmp_path: Path) -> None:
    # "... is in use by chute pid N; try again when it ends" had terminal True: an orchestrator
    # failed the task for good instead of retrying it.
    from chute.enginedir import DirectoryLock

    exports = _exports(tmp_path)
    db = tmp_path / "busy.db"
    db.mkdir()
    held = DirectoryLock.take(str(db))  # (as another chute process holds it)
    try:
        with pytest.raises(chute.UsageError, match="is in use by chute pid") as busy:
            chute.load([str(exports)], table="t", target=str(db))
        assert busy.value.terminal is False
        out = run("load", "exports", "--table", "t", "--target", "busy.db", cwd=tmp_path)
        assert out.returncode == 2 and "try again when it ends" in out.stderr  # (exit code as documented)
    finally:
        held.release()
    assert chute.load([str(exports)], table="t", target=str(db)).files_loaded == 2


def test_a_reader_that_stops_early_gets_no_engine_noise(tmp_path: Path) -> None:
    # `chute status | head -1`: rich ends a print to a closed pipe with SystemExit, which skipped
    # the command's own exit and let the engine's teardown print "Exception in
    # global_context->shutdown(): The ShutdownTablesThreadPool is not initialized".
    _exports(tmp_path)
    assert run("load", "exports", "--table", "t", "-q", cwd=tmp_path).returncode == 0
    for command in (["status"], ["status", "--json"], ["query", "SELECT number FROM numbers(100000)"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "chute.cli", *command],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "CHUTE_TARGET": ""},
        )
        assert proc.stdout is not None
        proc.stdout.close()  # the reader is gone before the first line
        _, err = proc.communicate(timeout=60)
        assert err == "", (command, err)
        assert proc.returncode in (0, 1, 141), (command, proc.returncode)  # (141: as SIGPIPE stops a process)


def test_a_table_named_with_and_without_its_database_is_one_table_loaded_once(tmp_path: Path) -> None:
    # `--table default.t` then `--table t` (one table in the target's database): the ledger kept
    # units under each spelling, so the second load found every file new: each row twice.
    exports = _exports(tmp_path)
    db = str(tmp_path / "spell.db")
    assert chute.load([str(exports)], table="default.t", target=db).files_loaded == 2
    again = chute.load([str(exports)], table="t", target=db)
    assert (again.files_loaded, again.files_skipped) == (0, 2)
    assert again.notes[0] == "table t is the table loaded before as default.t: its ledger entries go by that name"
    assert chute.query("SELECT count() FROM t", target=db) == "3\n"
    assert [r["table"] for r in chute.status(table="t", target=db)] == ["default.t", "default.t"]
    forgotten = chute.forget([str(exports / "more.csv")], table="t", target=db)
    assert forgotten.files == [str(exports / "more.csv")] and forgotten.rows_deleted == 1
    assert chute.load([str(exports)], table="t", target=db).files_loaded == 1
    assert chute.query("SELECT count() FROM default.t", target=db) == "3\n"
    # The other way round, and a table of another database keeps its own name.
    assert chute.load([str(exports)], table="u", target=db).files_loaded == 2
    assert chute.load([str(exports)], table="default.u", target=db).files_skipped == 2
    assert chute.load([str(exports)], table="other.u", target=db).files_loaded == 2
    assert chute.query("SELECT (SELECT count() FROM u), (SELECT count() FROM other.u)", target=db) == "3\t3\n"


def test_a_tilde_the_shell_left_alone_is_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--target=~/w.db` (no expansion after `=`) made a directory named "~" where the user stood;
    # a quoted glob '~/exports/*.csv' matched no file.
    home = tmp_path / "home"
    home.mkdir()
    _exports(home)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    out = subprocess.run(
        [sys.executable, "-m", "chute.cli", "load", "~/exports/*.csv", "--table", "t", "--target=~/w.db", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=work,
        env={**os.environ, "CHUTE_TARGET": ""},
    )
    assert out.returncode == 0, out.stderr
    assert os.listdir(work) == [] and (home / "w.db").is_dir()
    assert chute.query("SELECT count() FROM t", target="~/w.db") == "3\n"
    assert chute.forget(["~/exports/more.csv"], table="t", target="~/w.db").files == [str(home / "exports/more.csv")]
    chute.export("t", "~/out", target="~/w.db")
    assert (home / "out" / "_chute_export.json").is_file() and not (work / "~").exists()


def test_a_python_process_that_used_a_directory_is_named_idle_not_loading(tmp_path: Path) -> None:
    # A notebook that ran chute.load keeps the engine, and the directory, while its kernel runs:
    # the command said "in use by chute pid N (loading t since ...)" long after the load ended.
    exports = _exports(tmp_path)
    script = (
        "import sys, chute; "
        f"chute.load([{str(exports)!r}], table='t', target={str(tmp_path / 'nb.db')!r}); "
        "print('loaded', flush=True); sys.stdin.read()"
    )
    notebook = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert notebook.stdout is not None and notebook.stdout.readline() == "loaded\n"
        out = run("status", "--target", "nb.db", cwd=tmp_path)
    finally:
        notebook.communicate("", timeout=60)
    assert out.returncode == 2
    assert out.stderr.startswith(
        f"chute: error: {tmp_path}/nb.db is in use by the Python process {notebook.pid}, which opened it through chute "
        "and keeps it open while it runs (idle since "
    ), out.stderr
    assert out.stderr.endswith(": end that process, or its notebook's kernel); try again when it ends\n")
    assert run("status", "--target", "nb.db", cwd=tmp_path).returncode == 0  # (it ended)


def test_a_directory_another_program_s_engine_holds_is_one_line(tmp_path: Path) -> None:
    # chDB in a notebook (or clickhouse-local) on the directory: the engine printed "Code: 76.
    # DB::Exception: Cannot lock file .../status. Another server instance ..." and chute
    # "[36 BAD_ARGUMENTS] Error initializing EmbeddedServer: ." (exit 1).
    _exports(tmp_path)
    assert run("load", "exports", "--table", "t", "--target", "db", "-q", cwd=tmp_path).returncode == 0
    opened = f"import chdb; c = chdb.connect({str(tmp_path / 'db')!r}); c.query('SELECT 1')"
    script = f"import sys; {opened}; print('open', flush=True); sys.stdin.read()"
    other = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline() == "open\n"
        outs = [
            run(*command, "--target", "db", cwd=tmp_path) for command in (["status"], ["load", "exports", "-t", "t"])
        ]
    finally:
        other.communicate("", timeout=60)
    for out in outs:
        assert out.returncode == 2
        assert out.stderr == (
            f"chute: error: {tmp_path}/db is in use by another program's ClickHouse engine (pid {other.pid}: chDB, "
            "clickhouse-local); try again when it ends\n"
        )


def test_design_refuses_a_time_budget_that_leaves_no_time(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # `--time-budget -1` (or 0) measured nothing yet printed a layout, exit 0.
    exports = _exports(tmp_path)
    for budget in ("-1", "0"):
        assert main(["design", str(exports), "--time-budget", budget]) == 2
        told = f"chute: error: design: --time-budget must be more than 0 seconds, not {budget}\n"
        assert capsys.readouterr() == ("", told)


def test_an_empty_file_says_what_to_do(tmp_path: Path) -> None:
    # It fails on every run (documented): "empty file (0 bytes)" did not say what would end that.
    exports = _exports(tmp_path)
    (exports / "none.csv").write_text("")
    report = chute.load([str(exports)], table="t", target=str(tmp_path / "e.db"))
    failed = [f for f in report.files if f.state == "failed"]
    assert [f.error for f in failed] == [
        f"{exports}/none.csv: empty file (0 bytes), nothing to load: remove it or leave it out"
    ]


def test_status_after_the_table_was_dropped_by_hand_says_dropped(tmp_path: Path) -> None:
    """A table dropped by hand took its rows: status said `done` for its files, while the
    next load loads them again. It says `dropped` (the ledger's word for it), and the load then
    loads every row once."""
    exports = _exports(tmp_path)
    db = tmp_path / "dropped.db"
    chute.load(exports, table="t", target=db)
    chute.query("DROP TABLE t", target=db)
    assert [row["state"] for row in chute.status(target=db, table="t")] == ["dropped", "dropped"]
    assert [row["state"] for row in chute.status(target=db)] == ["dropped", "dropped"]
    assert chute.load(exports, table="t", target=db).files_loaded == 2
    assert chute.query("SELECT count() FROM t", target=db) == "3\n"
    assert [row["state"] for row in chute.status(target=db, table="t")] == ["done", "done"]
