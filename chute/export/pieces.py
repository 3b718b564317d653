"""Output files: compressed as they are written, under temporary names."""

from __future__ import annotations

import contextlib
import gzip
import os
import uuid
from typing import IO, Any

from chute.export.dest import TMP_SUFFIX, unlink_quietly
from chute.export.model import ExportedFile

ZSTD_LEVEL = 1  # level 3 costs 40% more CPU here for a file 0.3% smaller (hits-like data)
GZIP_LEVEL = 1


def rows_in_block(chunk: bytes, format_name: str) -> int | None:
    """Rows in one output block, when the bytes say it without parsing values."""
    if format_name == "Native":
        _columns, pos = _varint(chunk, 0)
        rows, _ = _varint(chunk, pos)
        return rows
    if format_name in ("JSONEachRow", "TSV"):  # these escape newlines inside values
        return chunk.count(b"\n")
    return None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


class PieceWriter:
    """One output file under a temporary name, compressed as it is written."""

    def __init__(self, work: str, pid: str, compression: str, header: bytes) -> None:
        self.pid = pid
        self.tmp = os.path.join(work, f".{pid}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
        self.raw: IO[bytes] = open(self.tmp, "wb")  # noqa: SIM115 - closed in finish/abort
        self.out: Any = _compressor(self.raw, compression)
        self.rows = 0
        if header:
            self.out.write(header)

    @property
    def size(self) -> int:
        """Compressed bytes so far (what reached the file)."""
        return self.raw.tell()

    def write(self, chunk: bytes, rows: int) -> None:
        self.out.write(chunk)
        self.rows += rows

    def finish(self) -> ExportedFile:
        """Close the file; the result's `path` is the temporary file."""
        if self.out is not self.raw:
            self.out.close()
        self.raw.flush()
        self.raw.close()
        return ExportedFile(self.tmp, self.pid, self.rows, os.path.getsize(self.tmp))

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()
        unlink_quietly(self.tmp)


def _compressor(raw: IO[bytes], compression: str) -> Any:
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(raw, closefd=False)
    if compression == "lz4":
        import lz4.frame

        return lz4.frame.LZ4FrameFile(raw, mode="wb")
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)
    return raw
