"""Errors at the edges: a full disk and a read-only target, on the embedded target.

Each uses a small tmpfs of the test's own (root is needed to mount; without it
the tests cannot make the fault and fail loudly rather than pretend).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..harness.data import write_with_engine


def _mount(path: Path, options: str) -> None:
    path.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)


@pytest.fixture()
def mounts() -> Iterator[list[Path]]:
    made: list[Path] = []
    yield made
    for path in reversed(made):
        subprocess.run(["umount", "-l", str(path)], check=False)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chute.cli", *args], capture_output=True, text=True, timeout=300)


def _data(tmp_path: Path) -> Path:
    from chute.engine import open_engine

    engine = open_engine(str(tmp_path / "gen"))
    data = tmp_path / "data"
    data.mkdir()
    for i in range(6):
        # Random strings do not compress: the parts really take room.
        write_with_engine(
            engine,
            data / f"p{i}.jsonl",
            "JSONEachRow",
            f"SELECT number AS id, randomPrintableASCII(200) AS junk FROM numbers({i * 20000}, 20000)",
        )
    engine.close()
    return data


def test_disk_full_then_rerun_completes_without_doubles(tmp_path: Path, mounts: list[Path]) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs and needs root (CI runs as root)")
    data = _data(tmp_path)
    disk = tmp_path / "disk"
    _mount(disk, "size=64m")
    mounts.append(disk)
    db = disk / "db"
    filler = disk / "filler"
    first = _cli("load", str(data), "-t", "t", "--target", str(db), "--batch-mb", "4", "--quiet")
    assert first.returncode == 0, first.stderr
    subprocess.run(["truncate", "-s", "0", str(filler)], check=True)
    # Fill the disk so that the next load runs out of room.
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, "wb") as fh:
        fh.write(b"\0" * max(0, free - 2 * 1024 * 1024))
    more = tmp_path / "more"
    more.mkdir()
    for p in data.iterdir():
        (more / ("b_" + p.name)).write_bytes(p.read_bytes())
    full = _cli("load", str(data), str(more), "-t", "t", "--target", str(db), "--batch-mb", "4", "--quiet")
    assert full.returncode != 0
    lines = [line for line in full.stderr.strip().splitlines() if line]
    assert lines and all(line.startswith("chute: ") for line in lines), full.stderr
    assert "Traceback" not in full.stderr
    # One line that names the full disk: the load stops, no file takes the careful pass.
    assert len(lines) == 1 and "NOT_ENOUGH_SPACE" in lines[0], full.stderr
    filler.unlink()
    again = _cli("load", str(data), str(more), "-t", "t", "--target", str(db), "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["table_rows"] == 240_000
    check = _cli("query", "SELECT count(), uniqExact(_source, _source_row) FROM t", "--target", str(db))
    assert check.stdout.split() == ["240000", "240000"]


def test_read_only_target_is_one_line_then_rerun_completes(tmp_path: Path, mounts: list[Path]) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs and needs root (CI runs as root)")
    data = _data(tmp_path)
    disk = tmp_path / "ro"
    _mount(disk, "size=64m")
    mounts.append(disk)
    db = disk / "db"
    first = _cli("load", str(data / "p0.jsonl"), "-t", "t", "--target", str(db), "--quiet")
    assert first.returncode == 0, first.stderr
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    denied = _cli("load", str(data), "-t", "t", "--target", str(db), "--quiet")
    assert denied.returncode != 0
    assert denied.stderr.strip().count("\n") == 0 and "Traceback" not in denied.stderr, denied.stderr
    subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
    again = _cli("load", str(data), "-t", "t", "--target", str(db), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["table_rows"] == 120_000


def test_error_codes_tell_a_full_disk_and_the_partition_limit_apart() -> None:
    """A full disk stops the load (no careful pass over rows that are fine); code 252 is
    worth a retry when merges lag ("too many parts"), not for one block over too many
    partitions, which no retry changes."""
    from chute.errors import OutOfSpace, TransientTargetError, translate_engine_error

    full = translate_engine_error(
        RuntimeError("Code: 243. DB::Exception: Cannot reserve 2.68 MiB, not enough space. (NOT_ENOUGH_SPACE)")
    )
    assert isinstance(full, OutOfSpace) and full.terminal
    enospc = translate_engine_error(
        RuntimeError("Code: 74. DB::ErrnoException: Cannot write to file x: No space left on device. (CANNOT_WRITE)")
    )
    assert isinstance(enospc, OutOfSpace)
    partitions = translate_engine_error(
        RuntimeError(
            "Code: 252. DB::Exception: Too many partitions for single INSERT block (more than 100). (TOO_MANY_PARTS)"
        )
    )
    assert partitions.terminal and not isinstance(partitions, TransientTargetError)
    lagging = translate_engine_error(
        RuntimeError(
            "Code: 252. DB::Exception: Too many parts (3001 with average size of 1 MiB) in table 't'. "
            "Merges are processing significantly slower than inserts. (TOO_MANY_PARTS)"
        )
    )
    assert isinstance(lagging, TransientTargetError)
