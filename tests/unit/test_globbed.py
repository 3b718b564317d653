"""A glob whose last name alone has wildcards is listed in one go (`files._globbed`): the same
paths as `glob.glob`, hidden names, subdirectories, brackets and relative paths included."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from chute.sources.files import _globbed


@pytest.mark.parametrize(
    "pattern",
    [
        "d/*.json",
        "d/*",
        "d/.*",
        "d/[ab]*.json",
        "d/a?.json",
        "d/*.csv",
        "d/sub/*",
        "d/**/*.json",
        "*/a*",
        "none/*",
        "d/a1.json",
    ],
)
def test_the_same_paths_as_glob(tmp_path: Path, pattern: str, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    for name in ("a1.json", "a2.json", "b1.json", ".hidden.json", "c.csv", "sub/a3.json", "[x].json"):
        (d / name).write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    for form in (pattern, os.path.join(str(tmp_path), pattern)):
        assert sorted(_globbed(form)) == sorted(glob.glob(form, recursive=True)), form
