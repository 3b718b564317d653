"""Whether a zstd or LZ4 file ends where its frames say it does.

The engine's zstd and LZ4 readers stop quietly at the end of a file cut short
(a copy that did not finish, a disk that filled): the rows before the cut load
and the rest are neither in the table nor in the rejects. gzip and xz readers
fail such a file. So the frames of a local zstd or LZ4 file are walked first:
a few bytes of header per block (at most 128 KiB of data each), seeked over,
never decompressed. A file whose last frame is not whole fails with a reason.
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO

ZSTD_MAGIC = 0xFD2FB528
LZ4_MAGIC = 0x184D2204
LZ4_LEGACY_MAGIC = 0x184C2102
SKIPPABLE_MASK, SKIPPABLE_MAGIC = 0xFFFFFFF0, 0x184D2A50


class CutShort(Exception):
    """The file ends inside a frame (or holds bytes that are no frame)."""


def check_frames(path: str, compression: str) -> None:
    """Raise CutShort where the zstd or LZ4 file at `path` is not whole; other compressions pass."""
    if compression not in ("zstd", "lz4"):
        return
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        while fh.tell() < size:
            magic = _u32(fh, "a frame's magic number")
            if magic & SKIPPABLE_MASK == SKIPPABLE_MAGIC:
                _skip(fh, _u32(fh, "a skippable frame's size"), size)
            elif magic == ZSTD_MAGIC and compression == "zstd":
                _zstd_frame(fh, size)
            elif magic == LZ4_MAGIC and compression == "lz4":
                _lz4_frame(fh, size)
            elif magic == LZ4_LEGACY_MAGIC and compression == "lz4":
                return  # (the legacy format has no end mark: nothing to check)
            else:
                raise CutShort(f"bytes at offset {fh.tell() - 4} are not a {compression} frame")


def _read(fh: BinaryIO, n: int, what: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise CutShort(f"the file ends inside {what}")
    return data


def _u32(fh: BinaryIO, what: str) -> int:
    value: int = struct.unpack("<I", _read(fh, 4, what))[0]
    return value


def _skip(fh: BinaryIO, n: int, size: int) -> None:
    if fh.tell() + n > size:
        raise CutShort("the file ends inside a block")
    fh.seek(n, os.SEEK_CUR)


def _zstd_frame(fh: BinaryIO, size: int) -> None:
    descriptor = _read(fh, 1, "a frame header")[0]
    size_flag, single_segment = descriptor >> 6, descriptor >> 5 & 1
    checksum, dict_flag = descriptor >> 2 & 1, descriptor & 3
    header = (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag] + (1 if single_segment else 0, 2, 4, 8)[size_flag]
    _read(fh, header, "a frame header")
    while True:
        block = int.from_bytes(_read(fh, 3, "a block header"), "little")
        last, kind, length = block & 1, block >> 1 & 3, block >> 3
        if kind == 3:
            raise CutShort(f"a reserved block type at offset {fh.tell() - 3}")
        _skip(fh, 1 if kind == 1 else length, size)  # (RLE: one byte, repeated)
        if last:
            break
    if checksum:
        _read(fh, 4, "a frame's checksum")


def _lz4_frame(fh: BinaryIO, size: int) -> None:
    flags = _read(fh, 2, "a frame header")[0]
    block_checksum, content_size, content_checksum, dict_id = flags >> 4 & 1, flags >> 3 & 1, flags >> 2 & 1, flags & 1
    _read(fh, 8 * content_size + 4 * dict_id + 1, "a frame header")  # (+ the header's checksum byte)
    while True:
        length = _u32(fh, "a block size") & 0x7FFFFFFF
        if length == 0:  # the end mark
            break
        _skip(fh, length + 4 * block_checksum, size)
    if content_checksum:
        _read(fh, 4, "a frame's checksum")
