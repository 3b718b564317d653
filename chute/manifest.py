"""The export manifest (`_chute_export.json`): `chute export` writes it next to its
files, and sources read it back so `chute load DIR` takes the exact column types.

Fields: `chute_export` (the version, MANIFEST_VERSION), `columns` (name, type),
`structure`, `extension`, `complete`, `rows`, `partitions` and `files` (path,
partition, rows, bytes), plus the settings the export was made with.
"""

from __future__ import annotations

import json
import os
from typing import Any

from chute.errors import SourceError
from chute.schema import Column

MANIFEST = "_chute_export.json"
MANIFEST_VERSION = 1


def parse_manifest(text: bytes | str, where: str) -> dict[str, Any] | None:
    """A manifest's content, or None when it is not one this version writes."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SourceError(f"{where}: unreadable export manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("chute_export") != MANIFEST_VERSION:
        return None
    return data


def read_manifest(directory: str) -> dict[str, Any] | None:
    """The manifest of an export directory, or None when there is none."""
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, "rb") as fh:
            return parse_manifest(fh.read(), path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SourceError(f"{path}: unreadable export manifest ({exc.strerror})") from None


def declared(data: dict[str, Any] | None) -> tuple[list[Column], bool] | None:
    """(columns with their exact types, whether the export completed) from a manifest."""
    if data is None:
        return None
    return [Column(c["name"], c["type"]) for c in data["columns"]], bool(data.get("complete"))


def manifest_columns(directory: str) -> tuple[list[Column], bool] | None:
    """(columns with their exact types, whether the export completed) for a directory."""
    return declared(read_manifest(directory))
