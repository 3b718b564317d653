"""Pieces of the remote methods that need no server: the size that bounds a file's rows,
and the pipelined Native stream's hand-over of blocks and errors."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from chute.formats import FileFormat
from chute.load.sizing import uncompressed_size
from chute.nativecompress import NativeCompressor, pipelined
from chute.units import Unit


def _unit(path: Path, compression: str) -> Unit:
    return Unit(str(path), path.stat().st_size, path.stat().st_mtime_ns, FileFormat("JSONEachRow", compression))


def test_uncompressed_size_from_the_gzip_trailer(tmp_path: Path) -> None:
    text = b"".join(b'{"a": %d}\n' % i for i in range(20_000))
    gz = tmp_path / "a.json.gz"
    gz.write_bytes(gzip.compress(text))
    assert uncompressed_size(_unit(gz, "gzip")) == len(text)
    plain = tmp_path / "a.json"
    plain.write_bytes(text)
    assert uncompressed_size(_unit(plain, "none")) == len(text)
    zst = tmp_path / "a.json.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(text))
    assert uncompressed_size(_unit(zst, "zstd")) is None  # not sent as it is: no bound needed
    # Two members: the trailer tells the last one only; a size below the file's is not believed.
    two = tmp_path / "b.json.gz"
    two.write_bytes(gzip.compress(text) + gzip.compress(b"{}\n"))
    assert uncompressed_size(_unit(two, "gzip")) is None


def _framed_sizes(frames: list[bytes]) -> int:
    """Uncompressed bytes in ClickHouse frames (header: 16 checksum bytes, method, sizes)."""
    return sum(int.from_bytes(f[16 + 5 : 16 + 9], "little") for f in frames)


def test_pipelined_blocks_arrive_in_order_and_compressed() -> None:
    blocks = [bytes([i]) * (1000 + i) for i in range(50)]
    frames = list(pipelined(((memoryview(b), b) for b in blocks), NativeCompressor(), depth=2))
    assert len(frames) == 50 and _framed_sizes(frames) == sum(len(b) for b in blocks)
    assert frames == [NativeCompressor().compress(b) for b in blocks]


def test_pipelined_raises_the_producers_error_and_stops_it_early() -> None:
    def failing() -> Iterator[tuple[memoryview, object]]:
        yield memoryview(b"x" * 10), None
        raise ValueError("engine failed")

    with pytest.raises(ValueError, match="engine failed"):
        list(pipelined(failing(), NativeCompressor()))

    closed = threading.Event()

    def endless() -> Iterator[tuple[memoryview, object]]:
        try:
            while True:
                yield memoryview(b"y" * 100), None
        finally:
            closed.set()

    stream = pipelined(endless(), NativeCompressor(), depth=1)
    next(stream)
    stream.close()  # the consumer (an HTTP body) stopped: the producer stops and closes its source
    assert closed.wait(5)


def test_engine_views_outlive_later_blocks_while_their_owner_is_kept() -> None:
    """The pipeline holds several blocks at once: each view must stay intact while later blocks
    are fetched (the engine's result object owns its bytes)."""
    from chute.engine import shared_engine

    sql = "SELECT number, toString(number) AS s FROM numbers(300000) SETTINGS max_block_size = 10000"
    held = list(shared_engine().stream_views(sql, "Native"))
    assert len(held) == 30
    assert b"".join(bytes(view) for view, _owner in held) == b"".join(shared_engine().stream(sql, "Native"))


def test_the_stream_gate_opens_when_the_last_body_is_sent_not_when_the_server_answers() -> None:
    from chute.targets.gate import StreamGate

    lock = threading.Lock()
    with StreamGate(lock, 2) as gate:
        first, second = gate.passing(iter([b"a", b"b"])), gate.passing(iter([b"c"]))
        assert list(first) == [b"a", b"b"] and lock.locked()  # one body still to send
        assert list(second) == [b"c"]
        assert not lock.locked()  # every body sent: the next batch may stream while this one waits
        assert lock.acquire(blocking=False)
        lock.release()
    assert not lock.locked()
    with StreamGate(lock, 1) as gate:  # a body never started (the request failed first)
        gate.passing(iter([b"x"]))
        assert lock.locked()
    assert not lock.locked()
    with pytest.raises(ValueError), StreamGate(lock, 1):
        raise ValueError("the insert failed")
    assert not lock.locked()
