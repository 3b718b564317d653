"""kill -9 at random moments, then the same command again: the same table as a clean run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chute.engine import open_engine

from ..harness.data import write_with_engine

FILES = 44
ROWS_PER_FILE = 20_000
CHECKSUM = "SELECT count() AS n, sum(cityHash64(id, name, score, _source, _source_row, _source_mtime)) AS h FROM t"


def _make_files(engine, directory: Path) -> None:  # type: ignore[no-untyped-def]
    directory.mkdir()
    for i in range(FILES):
        start = i * ROWS_PER_FILE
        select = (
            f"SELECT number AS id, concat('row-', toString(number)) AS name, number / 7 AS score "
            f"FROM numbers({start}, {ROWS_PER_FILE})"
        )
        path = write_with_engine(engine, directory / f"part_{i:03d}.json.gz", "JSONEachRow", select, "gzip")
        os.utime(path, (1_750_000_000 + i, 1_750_000_000 + i))


def _command(data: Path, db: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "chute.cli",
        "load",
        str(data),
        "--table",
        "t",
        "--target",
        str(db),
        "--batch-mb",
        "1",
        "--quiet",
    ]


def _checksum(db: Path) -> tuple[int, int]:
    # A child process reads the table: this process's engine holds another directory.
    code = (
        "import json, sys; from chute.engine import open_engine; e = open_engine(sys.argv[1]); "
        "exists = e.rows(\"SELECT count() AS n FROM system.tables WHERE name = 't'\")[0]['n']; "
        f"print(json.dumps(e.rows({CHECKSUM!r})[0] if exists else {{'n': 0, 'h': 0}}))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True)
    import json

    row = json.loads(out.stdout)
    return int(row["n"]), int(row["h"])


def _loading(db: Path, proc: subprocess.Popen[bytes]) -> float:
    """When the process began loading (its directory lock says so), or ended."""
    lock = db / ".chute-lock"
    while proc.poll() is None:
        try:
            if b"loading" in lock.read_bytes():
                break
        except OSError:
            pass
        time.sleep(0.005)
    return time.monotonic()


@pytest.mark.slow
def test_sigkill_at_random_moments_then_rerun(tmp_path: Path) -> None:
    engine = open_engine(str(tmp_path / "gen"))
    data = tmp_path / "data"
    _make_files(engine, data)
    engine.close()

    clean = tmp_path / "clean"
    subprocess.run(_command(data, clean), check=True)
    expected = _checksum(clean)
    assert expected[0] == FILES * ROWS_PER_FILE

    # How long the load itself takes, past start-up (the process's lock says "loading").
    timing = subprocess.Popen(_command(data, tmp_path / "timing"))
    loading_at = _loading(tmp_path / "timing", timing)
    timing.wait()
    full = time.monotonic() - loading_at

    rng = random.Random(20261121)
    kills_during_load = 0
    partial_tables = 0
    for trial in range(12):
        db = tmp_path / f"trial{trial}"
        # Kill up to twice per trial, at random moments of the run, then finish.
        for _ in range(2):
            proc = subprocess.Popen(_command(data, db))
            _loading(db, proc)
            time.sleep(rng.uniform(0.0, full * 0.8))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills_during_load += 1
            proc.wait()
        rows_after_kills = _checksum(db)[0]
        partial_tables += 0 < rows_after_kills < expected[0]
        subprocess.run(_command(data, db), check=True)
        assert _checksum(db) == expected, f"trial {trial} differs from the clean run"
        subprocess.run(_command(data, db), check=True)
        assert _checksum(db) == expected, f"trial {trial}: a second re-run changed the table"
    assert kills_during_load >= 10
    # The kills must land inside loads, not only before or after them.
    assert partial_tables >= 3, partial_tables
