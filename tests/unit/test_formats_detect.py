"""Format and compression from a file name or the flags."""

from __future__ import annotations

import pytest

from chute.errors import SourceError, UsageError
from chute.formats import FileFormat, detect


@pytest.mark.parametrize(
    "path,fmt,compression",
    [
        ("events.json", "JSONEachRow", "none"),
        ("/data/events.NDJSON", "JSONEachRow", "none"),
        ("events.jsonl.gz", "JSONEachRow", "gzip"),
        ("a.b.csv.zst", "CSV", "zstd"),
        ("t.tab", "TSV", "none"),
        ("p.parquet", "Parquet", "none"),
        ("x.native.lz4", "Native", "lz4"),
        ("x.feather", "Arrow", "none"),
        ("x.arrows", "ArrowStream", "none"),
        ("x.avro.xz", "Avro", "xz"),
        ("s3://bucket/dir.csv/x.orc.bz2", "ORC", "bz2"),
    ],
)
def test_format_and_compression_from_the_name(path: str, fmt: str, compression: str) -> None:
    assert detect(path) == FileFormat(fmt, compression)


def test_flags_win_over_the_name() -> None:
    assert detect("dump.txt", "csv") == FileFormat("CSV", "none")
    assert detect("dump.gz", "jsonl") == FileFormat("JSONEachRow", "gzip")
    assert detect("data.csv.gz", None, "none") == FileFormat("CSV", "none")  # the flag says: not compressed
    assert detect("data.bin", "parquet", "zst") == FileFormat("Parquet", "zstd")
    assert FileFormat("CSV", "none").is_text and not FileFormat("Parquet", "none").is_text


def test_unknown_names_and_archives_are_one_line_errors() -> None:
    with pytest.raises(SourceError, match=r"cannot tell the format from \.txt"):
        detect("notes.txt")
    with pytest.raises(SourceError, match="no extension"):
        detect("README")
    with pytest.raises(SourceError, match=r"\.zip archives are not supported") as archive:
        detect("all.zip")
    assert ".bz2" not in str(archive.value)  # (no reader for it: not offered instead)
    with pytest.raises(UsageError, match="unknown format 'xml'"):
        detect("a.csv", "xml")
    with pytest.raises(UsageError, match="unknown compression 'rar'"):
        detect("a.csv", None, "rar")
