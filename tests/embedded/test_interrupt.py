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
from collections.abc import Mapping
from pathlib import Path

import pytest

from chute import engine as engine_module
from chute.cli import main
from chute.engine import engine_progress
from chute.load import loader as loader_module

from ..harness.data import table_checksum, write_with_engine

LONG = "SELECT count() AS n FROM numbers(150000000) WHERE sipHash64(number) % 7 = 0 SETTINGS max_threads = 1"


def test_ctrl_c_during_a_statement_with_progress_raises_when_it_ends(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    heard = threading.Event()
    told: list[int] = []

    def listener(number: int, payload: object) -> None:
        heard.set()

    def interrupt() -> None:
        heard.wait(30)  # the statement runs (its progress is reported): Ctrl-C now
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    monkeypatch.setattr(engine_module, "on_interrupt", told.append, raising=False)
    try:
        with engine_progress(listener):
            sender.start()
            with pytest.raises(KeyboardInterrupt):
                engine.rows(LONG)
    finally:
        sender.join()
    assert heard.is_set()
    assert told == [1]
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


def test_the_command_stops_at_once_on_a_second_ctrl_c(tmp_path: Path) -> None:
    """The hook the `chute` command sets: the first interrupt says it stops after the statement,
    the second ends the process (as a kill -9, which every load survives) with exit code 130."""
    script = (
        "import sys; from chute.cli import _interrupted_in_statement as hook; "
        "hook(1); print('still here', file=sys.stderr, flush=True); hook(2); print('not reached')"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "chute: interrupted: stopping when the statement under way ends (Ctrl-C again to stop now)",
        "still here",
        "chute: error: interrupted; re-run the same command to finish",
    ]
