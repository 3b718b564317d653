"""The export manifest: what `chute export` writes and sources read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chute.errors import SourceError
from chute.manifest import MANIFEST, MANIFEST_VERSION, declared, manifest_columns, parse_manifest, read_manifest
from chute.schema import Column

DOC = {
    "chute_export": MANIFEST_VERSION,
    "columns": [{"name": "id", "type": "UInt64"}, {"name": "ts", "type": "DateTime64(3, 'UTC')"}],
    "complete": True,
}


def test_a_manifest_gives_exact_columns_and_whether_it_completed(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps(DOC))
    columns, complete = manifest_columns(str(tmp_path)) or ([], False)
    assert columns == [Column("id", "UInt64"), Column("ts", "DateTime64(3, 'UTC')")] and complete
    assert declared({**DOC, "complete": False}) == (columns, False)
    assert declared(None) is None


def test_no_manifest_or_another_version_is_none(tmp_path: Path) -> None:
    assert read_manifest(str(tmp_path)) is None and manifest_columns(str(tmp_path)) is None
    assert parse_manifest(json.dumps({**DOC, "chute_export": MANIFEST_VERSION + 1}), "x") is None
    assert parse_manifest(b"[1, 2]", "x") is None
    assert parse_manifest(json.dumps(DOC).encode(), "x") == DOC


def test_an_unreadable_manifest_is_a_one_line_source_error(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(SourceError, match="unreadable export manifest"):
        read_manifest(str(tmp_path))
