"""Ctrl-C (and SIGTERM) during one of the engine's statements stops the run when the statement
ends, not never: the engine drops what a progress callback raises, where Python runs the signal's
handler, so the interrupt used to vanish and the load went on to report success."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from chute.cli import main
from chute.engine import engine_progress
from chute.load import loader as loader_module

from ..harness.data import table_checksum, write_with_engine


@pytest.fixture(autouse=True)
def _ctrl_c_as_a_terminal_gives_it() -> Iterator[None]:
    """SIGINT as a shell gives it to a command it runs: Python's handler. A worker of the test
    run may hold SIGINT ignored (an earlier test's library left it so: the whole suite showed
    it), which its children inherit: these tests would then measure that, not chute."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _sigint_by_default() -> None:
    """In the child before it runs chute: SIGINT's default action, as a terminal's shell leaves it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


LONG = "SELECT count() AS n FROM numbers(150000000) WHERE sipHash64(number) % 7 = 0 SETTINGS max_threads = 1"


def test_ctrl_c_during_a_statement_with_progress_raises_when_it_ends(engine) -> None:  # type: ignore[no-untyped-def]
    heard = threading.Event()

    def listener(number: int, payload: object) -> None:
        heard.set()

    def interrupt() -> None:
        heard.wait(30)  # the statement runs (its progress is reported): Ctrl-C now
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    try:
        with engine_progress(listener):
            sender.start()
            with pytest.raises(KeyboardInterrupt):
                engine.rows(LONG)
    finally:
        sender.join()
    assert heard.is_set()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    assert engine.rows("SELECT 1 AS one") == [{"one": 1}]  # nothing kept for the next statement


def test_ctrl_c_during_a_load_stops_it_and_the_same_command_finishes_it(
    engine,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    select = "SELECT number AS id, concat('u-', toString(number % 1000)) AS name, number / 3 AS x FROM numbers(2500000)"
    write_with_engine(engine, data / "big.json", "JSONEachRow", select)
    engine.close()
    db = tmp_path / "chute.db"
    command = ["load", str(data), "--table", "t", "--target", str(db), "--json"]

    # Ctrl-C while the load's statement runs (its progress is past a fifth), as a user would press it.
    heard = threading.Event()
    real_progress = loader_module.engine_progress

    def progress(listener):  # type: ignore[no-untyped-def]
        def told(number: int, payload: Mapping[str, int]) -> None:
            if payload.get("read_rows", 0) >= 500_000:  # (the load's INSERT, not a first look)
                heard.set()
            listener(number, payload)

        return real_progress(told)

    monkeypatch.setattr(loader_module, "engine_progress", progress)

    def interrupt() -> None:
        if heard.wait(60):
            os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    try:
        code = main(command)
    finally:
        heard.set()
        sender.join()
    out, err = capsys.readouterr()
    assert code == 130, (out, err)
    assert json.loads(out) == {"ok": False, "error": "interrupted; re-run the same command to finish the load"}
    assert "Traceback" not in err

    monkeypatch.setattr(loader_module, "engine_progress", real_progress)
    assert main(command) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["files_loaded"] == 1
    rows, distinct = table_checksum(db, "SELECT count() AS n, uniqExact(id) AS h FROM t")
    assert (rows, distinct) == (2_500_000, 2_500_000)


def test_the_command_says_it_waits_for_the_statement_and_stops_at_once_on_a_second_ctrl_c(tmp_path: Path) -> None:
    """A long statement (a query here, a big batch in a load) holds Python's handler until it
    ends: the command says so, and a second Ctrl-C ends it at once (as a kill -9, which every
    command survives), not after the statement's minutes."""
    db = tmp_path / "db"
    db.mkdir()
    slow = "SELECT count() FROM numbers(200) WHERE sleepEachRow(0.5) = 0 SETTINGS max_block_size = 1"  # 100 s
    command = [sys.executable, "-m", "chute.cli", "query", slow, "--target", str(db)]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_by_default
    )
    try:
        while not (db / ".chute-lock").exists() and proc.poll() is None:  # the engine is open
            time.sleep(0.01)
        time.sleep(0.5)  # the query runs
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first == "chute: interrupted: stopping when the statement under way ends (Ctrl-C again to stop now)\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert time.monotonic() - started < 20
    assert out == ""
    assert err == "chute: error: interrupted; re-run the same command to finish\n"
