"""A file replaced by one of the same size with its old mtime restored (issue 46, item 6).

`cp -p`, `rsync -t` and `tar x` keep a file's mtime: the new content was never loaded, even with
--on-change reload, and nothing was said. A local file's identity now holds a fingerprint of its
first and last bytes; a ledger written before (size and mtime alone) still counts an unchanged
file as loaded. Checked on the embedded target and the 18.16 server.
"""

from __future__ import annotations

import time
from pathlib import Path

import chute
from chute.engine import open_engine
from chute.sources.files import FINGERPRINT_BYTES

from ..harness.data import set_mtime
from ..harness.servers import server_query
from .test_fidelity import dest, rows

_ = dest  # (the fixture: embedded and the 18.16 server)
MTIME = 1_700_000_000


def _write(path: Path, values: list[str]) -> None:
    path.write_text("id,v\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values, start=1)))
    set_mtime(path, MTIME)


def _run(dest: str, sql: str) -> None:
    """A statement on the target; on the server, a mutation is waited for (18.16 has no mutations_sync)."""
    if "://" not in dest:
        open_engine(dest).execute(sql, {"mutations_sync": 2})
        return
    server_query(dest, sql)
    for _ in range(300):
        pending = "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND is_done = 0"
        if rows(dest, pending) == [["0"]]:
            return
        time.sleep(0.1)
    raise AssertionError("the server did not finish the mutation")


def test_a_same_size_replacement_with_its_old_mtime_follows_on_change(tmp_path: Path, dest: str) -> None:
    path = tmp_path / "a.csv"
    _write(path, ["aa", "bb"])
    assert chute.load([str(path)], table="t", target=dest).rows_loaded == 2
    _write(path, ["xx", "yy"])  # same size, same mtime: what `cp -p` leaves
    skipped = chute.load([str(path)], table="t", target=dest)
    assert skipped.rows_loaded == 0
    assert any("changed since it was loaded" in n for n in skipped.notes), skipped.notes
    error = chute.load([str(path)], table="t", target=dest, options=chute.LoadOptions(on_change="error"))
    assert not error.ok and "changed since it was loaded" in (error.files[0].error or "")
    reloaded = chute.load([str(path)], table="t", target=dest, options=chute.LoadOptions(on_change="reload"))
    assert reloaded.ok and reloaded.rows_loaded == 2
    assert rows(dest, "SELECT id, v FROM t ORDER BY id") == [["1", "xx"], ["2", "yy"]]
    again = chute.load([str(path)], table="t", target=dest)
    assert again.rows_loaded == 0 and not again.notes


def test_a_change_in_the_last_bytes_of_a_big_file_is_seen(tmp_path: Path, dest: str) -> None:
    """The fingerprint reads the first and last 64 KiB of a file (a same-size edit between them,
    mtime restored, is not seen: docs/loading.md): an edit near the end is."""
    path = tmp_path / "big.csv"
    count = 3 * FINGERPRINT_BYTES // 8
    _write(path, [f"{i:05d}" for i in range(count)])
    assert chute.load([str(path)], table="t", target=dest).rows_loaded == count
    _write(path, [f"{i:05d}" if i != count - 2 else "zzzzz" for i in range(count)])
    assert any("changed since" in n for n in chute.load([str(path)], table="t", target=dest).notes)


def test_a_ledger_written_without_fingerprints_still_knows_its_files(tmp_path: Path, dest: str) -> None:
    """After the upgrade an unchanged file is not loaded again: the ledger's identity of an earlier
    version (`size:mtime`) matches a file of that size and mtime."""
    path = tmp_path / "a.csv"
    _write(path, ["aa", "bb"])
    assert chute.load([str(path)], table="t", target=dest).rows_loaded == 2
    _run(dest, "ALTER TABLE _chute_ledger UPDATE identity = replaceRegexpOne(identity, ':[0-9a-f]{16}$', '') WHERE 1")
    size_mtime = f"{path.stat().st_size}:{MTIME * 10**9}"
    assert rows(dest, "SELECT DISTINCT identity FROM _chute_ledger") == [[size_mtime]]
    again = chute.load([str(path)], table="t", target=dest)
    assert again.ok and again.rows_loaded == 0 and not again.notes, again.notes
    assert [f.state for f in again.files] == ["skipped"]
    assert rows(dest, "SELECT count() FROM t") == [["2"]]
