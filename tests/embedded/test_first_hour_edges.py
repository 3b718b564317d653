"""A new user's first hour, off the happy path: a target that is a folder of other files, the
Python API's options, two threads loading at once, and the messages a slip gets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import chute


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "CHUTE_TARGET": ""},
    )


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
