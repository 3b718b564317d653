"""What an export is asked (formats, compressions, options) and what it reports."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from chute.errors import UsageError

# --format -> (engine format, file extension); CSV and TSV files start with a header line.
FORMATS: dict[str, tuple[str, str]] = {
    "native": ("Native", "native"),
    "parquet": ("Parquet", "parquet"),
    "csv": ("CSVWithNames", "csv"),
    "tsv": ("TSVWithNames", "tsv"),
    "jsonl": ("JSONEachRow", "jsonl"),
}
# --compression -> file extension (Parquet compresses inside the file instead).
COMPRESSIONS: dict[str, str] = {"zstd": "zst", "lz4": "lz4", "gzip": "gz", "none": ""}
_COMPRESSION_ALIASES = {"zst": "zstd", "gz": "gzip", "": "none"}
PARQUET_CODECS = {"zstd": "zstd", "lz4": "lz4", "gzip": "gzip", "none": "none"}
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_QUERY_START = re.compile(r"^\s*(\(|select\b|with\b)", re.IGNORECASE)

ProgressCallback = Callable[[int, int, int], None]
"""(partitions done, rows written, bytes written) after each partition."""


@dataclass(frozen=True)
class ExportOptions:
    format: str = "native"
    compression: str = "zstd"
    partition_by: str | None = None
    max_file_bytes: int | None = None
    workers: int | None = None
    password_file: str | None = None
    insecure: bool = False
    s3_endpoint: str | None = None
    """For s3:// destinations: an S3-compatible endpoint; default AWS_ENDPOINT_URL, else AWS."""


@dataclass
class ExportedFile:
    path: str  # relative to the destination
    partition: str
    rows: int
    bytes: int


@dataclass
class ExportReport:
    source: str
    dest: str
    format: str
    compression: str
    partitions_total: int = 0
    partitions_written: int = 0
    partitions_skipped: int = 0
    files: list[ExportedFile] = field(default_factory=list)
    rows_written: int = 0
    bytes_written: int = 0
    rows_total: int = 0
    seconds: float = 0.0
    manifest: str = ""

    @property
    def ok(self) -> bool:
        """True: an export that fails raises (no report). As every report has it, for a task's
        one `if not report.ok` check."""
        return True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok}
        out.update(asdict(self))
        out["files_written"] = len(self.files)
        out["rows_per_s"] = round(self.rows_written / self.seconds) if self.seconds > 0 else 0
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


@dataclass
class Partition:
    value: str | None  # toString of the partition expression; None for NULL
    rows: int
    pid: str = ""


def normalize_compression(name: str | None, fmt: str) -> str:
    text = (name or "zstd").lower()
    text = _COMPRESSION_ALIASES.get(text, text)
    if text not in COMPRESSIONS:
        raise UsageError(f"unknown compression {name!r}: use one of {', '.join(COMPRESSIONS)}")
    return text


def partition_id(value: str | None) -> str:
    """A file-name-safe id for a partition value (hashed when the value is not plain)."""
    if value is None:
        return "null"
    if _SAFE_ID.match(value) and ".." not in value:
        return value
    return "h" + hashlib.sha1(value.encode()).hexdigest()[:16]


def is_query(source: str) -> bool:
    return bool(_QUERY_START.match(source))
