"""File formats and compressions the engine reads, chosen by extension or flag."""

from __future__ import annotations

from dataclasses import dataclass

from chute.errors import SourceError, UsageError

# Every format goes through the same code path: the engine's file() reader.
FORMAT_BY_EXTENSION = {
    "json": "JSONEachRow",
    "jsonl": "JSONEachRow",
    "ndjson": "JSONEachRow",
    "csv": "CSV",
    "tsv": "TSV",
    "tab": "TSV",
    "parquet": "Parquet",
    "native": "Native",
    "orc": "ORC",
    "avro": "Avro",
    "arrow": "Arrow",
    "feather": "Arrow",
    "arrows": "ArrowStream",
}

# User-facing names accepted by --format, mapped to engine format names.
FORMAT_ALIASES = {
    "json": "JSONEachRow",
    "jsonl": "JSONEachRow",
    "ndjson": "JSONEachRow",
    "jsoneachrow": "JSONEachRow",
    "csv": "CSV",
    "tsv": "TSV",
    "parquet": "Parquet",
    "native": "Native",
    "orc": "ORC",
    "avro": "Avro",
    "arrow": "Arrow",
    "arrowstream": "ArrowStream",
}

COMPRESSION_BY_EXTENSION = {
    "gz": "gzip",
    "gzip": "gzip",
    "zst": "zstd",
    "zstd": "zstd",
    "bz2": "bz2",
    "xz": "xz",
    "lz4": "lz4",
}

COMPRESSION_ALIASES = {
    "none": "none",
    "gzip": "gzip",
    "gz": "gzip",
    "zstd": "zstd",
    "zst": "zstd",
    "bz2": "bz2",
    "xz": "xz",
    "lz4": "lz4",
}

UNSUPPORTED_CONTAINERS = {"zip", "tar", "tgz", "7z", "rar"}

TEXT_FORMATS = frozenset({"JSONEachRow", "CSV", "TSV"})


@dataclass(frozen=True)
class FileFormat:
    """How the engine should read one file."""

    format: str
    compression: str  # "none" or an engine compression name

    @property
    def is_text(self) -> bool:
        return self.format in TEXT_FORMATS


def normalize_format(name: str) -> str:
    try:
        return FORMAT_ALIASES[name.lower()]
    except KeyError:
        raise UsageError(f"unknown format {name!r}; known: {', '.join(sorted(FORMAT_ALIASES))}") from None


def normalize_compression(name: str) -> str:
    try:
        return COMPRESSION_ALIASES[name.lower()]
    except KeyError:
        known = ", ".join(sorted(COMPRESSION_ALIASES))
        raise UsageError(f"unknown compression {name!r}; known: {known}") from None


def detect(path: str, format_override: str | None = None, compression_override: str | None = None) -> FileFormat:
    """Pick format and compression from the flags, else from the file name."""
    name = path.rsplit("/", 1)[-1].lower()
    parts = name.split(".")
    suffixes = parts[1:] if len(parts) > 1 else []
    compression = "none"
    if compression_override:
        compression = normalize_compression(compression_override)
        if suffixes and suffixes[-1] in COMPRESSION_BY_EXTENSION:
            suffixes = suffixes[:-1]
    elif suffixes and suffixes[-1] in COMPRESSION_BY_EXTENSION:
        compression = COMPRESSION_BY_EXTENSION[suffixes.pop()]
    elif suffixes and suffixes[-1] in UNSUPPORTED_CONTAINERS:
        raise SourceError(
            f"{path}: .{suffixes[-1]} archives are not supported; extract the files first "
            "(single-stream compressions are: .gz .zst .xz .lz4)"
        )
    if format_override:
        return FileFormat(normalize_format(format_override), compression)
    if not suffixes or suffixes[-1] not in FORMAT_BY_EXTENSION:
        ext = "." + ".".join(parts[1:]) if len(parts) > 1 else "no extension"
        raise SourceError(
            f"{path}: cannot tell the format from {ext}; "
            "pass --format (json, csv, tsv, parquet, native, orc, avro, arrow)"
        )
    return FileFormat(FORMAT_BY_EXTENSION[suffixes[-1]], compression)


def refuse_unreadable(path: str, fmt: FileFormat) -> None:
    """A bzip2 file cannot be read by the embedded engine: one message wherever it is met
    (its pre-check, or the schema inference of a new table)."""
    if fmt.compression == "bz2":
        raise SourceError(
            f"{path}: bzip2 files cannot be read: the embedded engine has no bzip2 reader; "
            "decompress it (bunzip2) or recompress it (zstd, gzip, xz)"
        )
