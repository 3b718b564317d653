"""A re-run reads no fingerprint of a file it finds as it was (issue 45, P11): the ledger's
identity of a local file holds its change time and inode (its witness) beside the fingerprint;
where both are as recorded the file was not written since, and its recorded fingerprint holds.
A write, a `touch -d` back to the old mtime or a replacement changes them: it is read again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import chute
from chute.sources import files
from chute.units import Unit

pytestmark = pytest.mark.embedded


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths whose fingerprint is read from now on."""
    read: list[str] = []
    real = files.fingerprint

    def counted(path: str, start: int, end: int) -> str:
        read.append(path)
        return real(path, start, end)

    monkeypatch.setattr(files, "fingerprint", counted)
    return read


def test_a_rerun_trusts_the_fingerprint_of_files_found_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "WITNESS_AGE_NS", 0)  # (files written a moment ago count as settled)
    data = tmp_path / "in"
    data.mkdir()
    for i in range(3):
        (data / f"f{i}.json").write_text(f'{{"id": {i}, "s": "aa"}}\n')
    db = str(tmp_path / "db")
    assert chute.load([str(data)], table="t", target=db).rows_loaded == 3

    reads = _reads(monkeypatch)
    again = chute.load([str(data)], table="t", target=db)
    assert again.ok and again.rows_loaded == 0 and again.files_skipped == 3
    assert reads == []  # nothing read: every witness as recorded

    # Same size, old mtime restored (`cp -p`): the change time moved, so it is read, and seen.
    path = data / "f1.json"
    st = path.stat()
    path.write_text('{"id": 1, "s": "zz"}\n')
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed = chute.load([str(data)], table="t", target=db)
    assert reads == [str(path)]
    assert any("changed since it was loaded" in n for n in changed.notes), changed.notes

    # Only its mode changed: read again, the same content, skipped without a word.
    reads.clear()
    other = data / "f2.json"
    other.chmod(0o600)
    quiet = chute.load([str(data)], table="t", target=db, options=chute.LoadOptions(on_change="error"))
    assert str(other) in reads
    errors = {os.path.basename(f.source): f.error for f in quiet.files if f.error}
    assert quiet.rows_loaded == 0 and list(errors) == ["f1.json"], errors  # (f1's change, still not loaded)


def test_a_file_changed_just_before_the_listing_has_no_witness(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{"id": 1}\n')
    st = path.stat()
    assert files.witness(st, st.st_ctime_ns + files.WITNESS_AGE_NS) == ""  # its tick may not be over
    settled = files.witness(st, st.st_ctime_ns + files.WITNESS_AGE_NS + 1)
    assert settled == f"{st.st_ctime_ns}.{st.st_ino}"
    recorded = f"{st.st_size}:{st.st_mtime_ns}:cafe:{settled}"
    assert files.recorded_fingerprint(recorded, st) == "cafe"
    assert files.recorded_fingerprint(f"{st.st_size}:{st.st_mtime_ns}:cafe", st) is None  # (no witness)
    assert files.recorded_fingerprint(f"{st.st_size + 1}:{st.st_mtime_ns}:cafe:{settled}", st) is None
    assert files.recorded_fingerprint(f"{st.st_size}:{st.st_mtime_ns}:cafe:{st.st_ctime_ns}.1", st) is None


def test_an_identity_matches_whatever_witness_was_recorded() -> None:
    unit = Unit("/a", 10, 5, files.detect("/a.json", None, None), fingerprint="beef", witness="7.9")
    assert unit.identity == "10:5:beef:7.9"
    assert unit.matches("10:5:beef:7.9") and unit.matches("10:5:beef:8.9")  # (a chmod, a copy of the bytes)
    assert unit.matches("10:5:beef") and unit.matches("10:5")  # ledgers of earlier versions
    assert not unit.matches("10:5:bee") and not unit.matches("10:5:beef0:7.9") and not unit.matches("10:6:beef:7.9")


def test_a_file_loaded_before_its_witness_was_settled_is_still_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded within WITNESS_AGE_NS of its last change (no witness recorded), then found with
    one: still the loaded file, before any other check (its header here names no column of
    the table, which a new file's would be refused for)."""
    people = tmp_path / "people.csv"
    people.write_text("name,city\nann,paris\nbob,rome\n")
    db = str(tmp_path / "db")
    monkeypatch.setattr(files, "WITNESS_AGE_NS", 10**18)  # (no witness on the first load)
    assert chute.load([str(people)], table="people", target=db).rows_loaded == 3
    monkeypatch.setattr(files, "WITNESS_AGE_NS", 0)
    again = chute.load([str(people)], table="people", target=db, options=chute.LoadOptions(header=True))
    assert again.ok and again.rows_loaded == 0 and again.files_skipped == 1, [f.error for f in again.files]
