"""A local destination's listing while another thread of the same run removes its files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chute.export.dest import LocalDest

pytestmark = pytest.mark.unit


def test_a_file_removed_between_the_listing_and_its_size_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """chute copy --method files: one partition's file is removed (it is in the stage) while
    another partition asks what the directory holds; that was "cannot write into DIR"."""
    (tmp_path / "gone").write_bytes(b"x" * 3)
    (tmp_path / "kept").write_bytes(b"y" * 5)
    real = os.scandir

    def listing_then_removal(path: str) -> Iterator[os.DirEntry[str]]:
        entries = list(real(path))
        os.remove(tmp_path / "gone")  # after the listing, before each entry's stat
        return iter(entries)

    monkeypatch.setattr(os, "scandir", listing_then_removal)
    assert LocalDest(str(tmp_path)).names() == {"kept": 5}
