"""A zstd or LZ4 file cut short is found by walking its frames (the engine's readers load the part
before the cut without a word); a whole one passes, whatever the frames' options."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import lz4.frame
import pytest
import zstandard

from chute.sources.frames import CutShort, check_frames

BODY = b"".join(b'{"id": %d, "v": "%s"}\n' % (i, b"x" * (i % 50)) for i in range(60_000))


def _zstd_variants() -> list[bytes]:
    multi = zstandard.ZstdCompressor(level=3, write_checksum=True)
    chunks = [multi.compress(BODY[i : i + 300_000]) for i in range(0, len(BODY), 300_000)]
    skippable = b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"hello"
    return [
        zstandard.ZstdCompressor().compress(BODY),
        zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(BODY),
        b"".join(chunks),
        skippable + zstandard.ZstdCompressor(level=1).compress(BODY) + skippable,
        zstandard.ZstdCompressor().compress(b"a\n"),
    ]


def _lz4_variants() -> list[bytes]:
    return [
        lz4.frame.compress(BODY),
        lz4.frame.compress(BODY, block_size=lz4.frame.BLOCKSIZE_MAX64KB, content_checksum=True, block_checksum=True),
        lz4.frame.compress(BODY, store_size=False) + lz4.frame.compress(b'{"id": 1}\n'),
        lz4.frame.compress(BODY, block_linked=False, return_bytearray=False),
    ]


CASES = [("zstd", i) for i in range(len(_zstd_variants()))] + [("lz4", i) for i in range(len(_lz4_variants()))]


@pytest.mark.parametrize("compression,variant", CASES)
def test_whole_files_pass_and_every_cut_is_found(tmp_path: Path, compression: str, variant: int) -> None:
    data = (_zstd_variants() if compression == "zstd" else _lz4_variants())[variant]
    path = tmp_path / "f"
    path.write_bytes(data)
    check_frames(str(path), compression)
    cuts = {1, 3, 4, 5, 9, len(data) - 1, len(data) - 4, len(data) // 2}
    cuts |= set(random.Random(variant).sample(range(1, len(data)), min(40, len(data) - 1)))
    for cut in sorted(c for c in cuts if 0 < c < len(data)):
        path.write_bytes(data[:cut])
        with pytest.raises(CutShort):
            check_frames(str(path), compression)
    path.write_bytes(data + b"\x00garbage")
    with pytest.raises(CutShort):
        check_frames(str(path), compression)


@pytest.mark.parametrize("tool,compression", [("zstd", "zstd"), ("lz4", "lz4")])
def test_files_of_the_command_line_tools(tmp_path: Path, tool: str, compression: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"no {tool} command")
    plain = tmp_path / "rows.jsonl"
    plain.write_bytes(BODY)
    packed = tmp_path / f"rows.jsonl.{tool}"
    output = ["-o", str(packed)] if tool == "zstd" else [str(packed)]
    subprocess.run([tool, "-q", "-f", str(plain), *output], check=True)
    check_frames(str(packed), compression)
    data = packed.read_bytes()
    packed.write_bytes(data[: len(data) // 2])
    with pytest.raises(CutShort):
        check_frames(str(packed), compression)


def test_other_compressions_are_not_walked(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\x1f\x8b\x08 not checked here")
    for compression in ("none", "gzip", "xz", "bz2"):
        check_frames(str(path), compression)
