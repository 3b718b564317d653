"""On a terminal: the progress bar moves within a batch, and the engine rings no bell.

Run as a user would, under a pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

from chute.engine import open_engine

from ..harness.data import write_with_engine


def on_terminal(args: list[str], timeout: float = 300) -> tuple[int, bytes]:
    """Run `args` with stdin, stdout and stderr on a pseudo-terminal of 80 columns; (exit code, all it wrote)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    child = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif child.poll() is not None:
                break
        return child.wait(timeout=timeout), out
    finally:
        os.close(master)


def test_a_60_file_load_on_a_terminal_shows_its_progress_within_the_batch(tmp_path: Path) -> None:
    engine = open_engine(str(tmp_path / "gen"))
    data = tmp_path / "data"
    data.mkdir()
    for i in range(60):
        write_with_engine(
            engine,
            data / f"f{i:02d}.csv",
            "CSVWithNames",
            f"SELECT number AS id, toString(cityHash64(number)) AS s, number * 2 AS x FROM numbers({i * 35000}, 35000)",
        )
    engine.close()
    code, out = on_terminal(
        [sys.executable, "-m", "chute.cli", "load", str(data), "--table", "t", "--target", str(tmp_path / "db")]
    )
    assert code == 0, out[-2000:]
    assert b"\x07" not in out
    # The bar shows "done/total MiB", the rate and the time left; the report follows it.
    bar, _, report = out.partition(b"2,100,000 loaded")
    assert report, out[-2000:]
    shown = re.findall(rb"(\d+\.\d)/\d+\.\d MiB", bar)
    assert len(set(shown)) >= 5, sorted(set(shown))
    assert re.search(rb"\d+\.\d MiB/s", bar) and re.search(rb"\d:\d\d:\d\d left", bar)
    rows = {int(n.replace(b",", b"")) for n in re.findall(rb"([\d,]+) rows", bar)}
    assert any(0 < n < 2_100_000 for n in rows), sorted(rows)  # rows counted within the batch too


def test_no_bell_from_a_long_statement_on_a_terminal(tmp_path: Path) -> None:
    """The engine sends BEL to a terminal's stderr after a statement of 5 s or more, on any of
    its connections (the main thread's and a worker thread's)."""
    script = (
        "import sys, threading; from chute.engine import open_engine;"
        "engine = open_engine(sys.argv[1]);"
        "long = 'SELECT sleepEachRow(0.9) FROM numbers(7) SETTINGS max_block_size = 1';"
        "worker = threading.Thread(target=lambda: engine.execute(long)); worker.start();"
        "engine.execute(long); worker.join(); print('done')"
    )
    code, out = on_terminal([sys.executable, "-c", script, str(tmp_path / "db")])
    assert code == 0 and b"done" in out, out
    assert b"\x07" not in out
