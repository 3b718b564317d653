"""Fetching: one consumer per partition reads a unit's offsets into one buffer."""

from __future__ import annotations

import bisect
import contextlib
import os
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from chute.errors import SourceError
from chute.sources.kafka.client import kafka_lib, logger
from chute.sources.kafka.framing import Framing, escape_keys
from chute.sources.ranges import FileSlice, Payload

CONSUME_BATCH = 50_000
"""Messages per consume() call: big enough that Python's per-call work is noise."""
STALL_SECONDS = 30.0
"""A fetch that gets no message for this long fails (the unit is tried again next run)."""


@dataclass
class Fetched:
    """One unit's messages as the engine reads them."""

    data: bytes | None  # in memory, or
    path: str | None  # in a spill file
    nbytes: int
    count: int  # messages in the buffer
    skipped: int  # messages without a payload (null or empty), left out
    offsets: bytes | None = None  # RowBinary UInt64 offsets of the rows, when they have gaps
    timestamps: bytes = b""  # RowBinary Int64 message timestamps (ms), one per row
    keys: bytes = b""  # TSV Nullable(String) message keys, one per row

    def payload(self) -> Payload:
        if self.data is not None:
            return self.data
        assert self.path is not None
        return FileSlice(self.path, 0, self.nbytes)


class Buffer:
    """Chunks of one unit, in memory until `memory_left` runs out, then in a spill file."""

    def __init__(self, spill_dir: Callable[[], str], memory_left: int) -> None:
        self.spill_dir = spill_dir
        self.memory_left = memory_left
        self.parts: list[bytes] = []
        self.file: Any = None
        self.path: str | None = None
        self.nbytes = 0

    def add(self, chunk: bytes) -> None:
        self.nbytes += len(chunk)
        if self.file is None and self.nbytes > self.memory_left:
            fd, self.path = tempfile.mkstemp(prefix="unit-", suffix=".bin", dir=self.spill_dir())
            self.file = os.fdopen(fd, "wb")
            for part in self.parts:
                self.file.write(part)
            self.parts = []
        if self.file is not None:
            self.file.write(chunk)
        else:
            self.parts.append(chunk)

    def finish(self) -> tuple[bytes | None, str | None]:
        if self.file is not None:
            self.file.close()
            return None, self.path
        return b"".join(self.parts), None

    def discard(self) -> None:
        if self.file is not None:
            self.file.close()
        if self.path:
            with contextlib.suppress(OSError):
                os.remove(self.path)


class Reader:
    """One consumer on one partition, read forward; reading elsewhere re-assigns it."""

    def __init__(self, config: dict[str, Any], topic: str, partition: int) -> None:
        kafka = kafka_lib()
        self.kafka = kafka
        self.consumer = kafka.Consumer(config, logger=logger)
        self.topic = topic
        self.partition = partition
        self.next: int | None = None  # where `pending` (and then the consumer) go on
        self.pending: list[Any] = []  # messages consumed past the end of the last read
        self.lock = threading.Lock()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.consumer.close()

    def _messages(self, start: int, end: int, name: str) -> Iterator[list[Any]]:
        """Lists of messages in offset order, from `start` until every offset below `end` was seen."""
        kafka = self.kafka
        if self.next != start:
            self.pending = []
            self.consumer.assign([kafka.TopicPartition(self.topic, self.partition, start)])
        self.next = None
        seen = start  # every offset below `seen` is accounted for
        quiet_since = time.monotonic()
        while seen < end:
            if self.pending:
                batch, self.pending = self.pending, []
            else:
                # Asking for no more than the unit still needs returns as soon as they are here.
                batch = self.consumer.consume(max(1, min(CONSUME_BATCH, end - seen)), 0.2)
            if not batch:
                if time.monotonic() - quiet_since > STALL_SECONDS:
                    raise SourceError(
                        f"{name}: offsets {seen} to {end - 1} did not arrive in {STALL_SECONDS:.0f} s "
                        "(broker gone, or messages deleted)"
                    )
                continue
            quiet_since = time.monotonic()
            eof_at = -1
            if any(map(kafka.Message.error, batch)):  # (C-level: no Python loop over messages)
                messages = []
                for i, m in enumerate(batch):
                    error = m.error()
                    if error is None:
                        messages.append(m)
                    elif error.code() == kafka.KafkaError._PARTITION_EOF:
                        eof_at = m.offset()
                        self.pending = [x for x in batch[i + 1 :] if x.error() is None] + self.pending
                        break
                    elif error.code() in (kafka.KafkaError._AUTO_OFFSET_RESET, kafka.KafkaError.OFFSET_OUT_OF_RANGE):
                        self.next = None
                        raise SourceError(
                            f"{name}: offset {seen} is no longer in the topic (deleted by retention?); "
                            "those messages cannot be loaded"
                        )
                    elif error.fatal() or not error.retriable():
                        if error.code() in (kafka.KafkaError._TRANSPORT, kafka.KafkaError._ALL_BROKERS_DOWN):
                            continue  # the client reconnects by itself; the stall timer decides
                        self.next = None
                        raise SourceError(f"{name}: {error.str()}")
                batch = messages
            if batch and batch[-1].offset() >= end:
                cut = bisect.bisect_left(batch, end, key=lambda m: m.offset())
                self.pending = batch[cut:] + self.pending
                batch = batch[:cut]
                seen = end
            elif batch:
                seen = batch[-1].offset() + 1
            if eof_at >= end:
                seen = end
            if batch:
                yield batch
        self.next = end

    def read(self, start: int, end: int, name: str, buffer: Buffer, framing: Framing) -> Fetched:
        """Offsets [start, end) joined into one buffer the engine reads in `framing`'s format,
        with each row's timestamp and key (and offset, where offsets have gaps) beside it.

        Each consumed batch is taken apart with C-level calls (`map` over the message
        type's own methods, `bytes.join`): no Python code runs per message, except where
        a batch holds tombstones or messages with keys (`escape_keys`)."""
        message = self.kafka.Message
        second = itemgetter(1)
        count = skipped = 0
        offsets: array[int] | None = None
        timestamps = array("q")
        keys: list[bytes] = []
        expected = start
        keep_empty = framing.kind == "raw"
        with self.lock:
            try:
                if framing.header:
                    buffer.add(framing.header)
                for batch in self._messages(start, end, name):
                    first, last = batch[0].offset(), batch[-1].offset()
                    values = list(map(message.value, batch))
                    kept = batch
                    if None in values or (not keep_empty and b"" in values):
                        # Tombstones (and empty messages) hold no row: left out, so the offsets have gaps.
                        kept = [m for m, v in zip(batch, values, strict=True) if v or (keep_empty and v is not None)]
                        skipped += len(batch) - len(kept)
                        values = [v for v in values if v or (keep_empty and v is not None)]
                    gaps = first != expected or last - first + 1 != len(batch) or len(kept) != len(batch)
                    if gaps and offsets is None:
                        offsets = array("Q", range(start, start + count))
                    if offsets is not None:
                        offsets.extend(map(message.offset, kept))
                    expected = last + 1
                    if not values:
                        continue
                    timestamps.extend(map(second, map(message.timestamp, kept)))
                    keys.append(escape_keys(list(map(message.key, kept))))
                    buffer.add(framing.frame(values))
                    count += len(values)
            except BaseException:
                buffer.discard()
                raise
        data, path = buffer.finish()
        return Fetched(
            data,
            path,
            buffer.nbytes,
            count,
            skipped,
            offsets.tobytes() if offsets is not None else None,
            timestamps.tobytes(),
            b"".join(keys),
        )
