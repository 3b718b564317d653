"""ClickHouse's own compressed framing, for `?decompress=1` request bodies.

Every server version reads it (18.16 included), unlike HTTP zstd bodies.
A frame: 16-byte CityHash128 of the rest, method byte (0x90 = ZSTD), 4 bytes
compressed size (with the 9-byte header), 4 bytes uncompressed size, data.
"""

from __future__ import annotations

import struct

import zstandard
from clickhouse_cityhash.cityhash import CityHash128

ZSTD_METHOD = 0x90
FRAME_BYTES = 1 << 20  # what clickhouse-client uses (max_compress_block_size)
_LOW64 = (1 << 64) - 1


class NativeCompressor:
    """Compresses a byte stream into checksummed ZSTD frames."""

    def __init__(self, level: int = 1) -> None:
        self._zstd = zstandard.ZstdCompressor(level=level)

    def compress(self, data: bytes | memoryview) -> bytes:
        view = memoryview(data)
        frames = []
        for offset in range(0, len(view), FRAME_BYTES):
            piece = view[offset : offset + FRAME_BYTES]
            packed = self._zstd.compress(piece)
            body = struct.pack("<BII", ZSTD_METHOD, len(packed) + 9, len(piece)) + packed
            digest = CityHash128(body)
            frames.append(struct.pack("<QQ", digest >> 64, digest & _LOW64) + body)
        return b"".join(frames)
