"""The source: Kafka topics as units of offsets, fetched ahead of the loader."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from chute.errors import SourceError, UsageError
from chute.formats import FileFormat
from chute.schema import Column
from chute.sources.base import RowPositions, SourceBase, SourceOptions
from chute.sources.kafka.client import Admin, consumer_configs, kafka_lib, resolve_password
from chute.sources.kafka.framing import Framing
from chute.sources.kafka.planning import Planner
from chute.sources.kafka.reader import Buffer, Fetched, Reader
from chute.sources.kafka.spec import KafkaSpec, UnitRange, parse_key
from chute.sources.ranges import blob_url, forget_url
from chute.sql import quote_str
from chute.units import Unit

RAW_COLUMN = "message"
KEY_COLUMN = ("_source_key", "Nullable(String)")
"""The message key: a provenance column of Kafka loads (null for messages without a key)."""

BATCH_BYTES = 64 * 2**20
"""Messages per loader batch (one INSERT, one commit of rows and ledger together), at most, by
the units' estimated sizes: the engine loads one batch while the next is fetched, and neither
grows with the topic (docs/internals/kafka.md)."""
MEMORY_CACHE = 2 * BATCH_BYTES
"""Buffers kept in memory: the batch being loaded and the next; past this they go to spill
files (read with sendfile)."""
DISK_CACHE = 4 * 2**30
"""Spilled buffers kept; the least recently used are dropped (and fetched again if asked for)."""
PREFETCH_BYTES = BATCH_BYTES
"""Fetched ahead of the unit the loader asked for last (by the units' estimated sizes): one batch."""


@dataclass(frozen=True)
class _UnitUrls:
    data: str
    timestamps: str
    keys: str
    offsets: str | None

    def all(self) -> list[str]:
        return [u for u in (self.data, self.timestamps, self.keys, self.offsets) if u]


def _column_array(url: str, fmt: str, type_: str) -> str:
    """A scalar subquery: one column of a loopback buffer as an array, read once per statement.

    Text is ordered by row number (the engine may parse it in parallel segments);
    values go through a tuple, since groupArray leaves NULLs out.
    """
    call = f"url({quote_str(url)}, {quote_str(fmt)}, {quote_str('v ' + type_)})"
    if fmt == "RowBinary":
        return f"(SELECT groupArray(v) FROM {call})"
    return f"(SELECT arrayMap(x -> x.1, groupArray(tuple(v))) FROM (SELECT v FROM {call} ORDER BY _row_number))"


# -- the source --------------------------------------------------------------


@dataclass
class _Plan:
    unit: Unit
    range: UnitRange
    index: int


@dataclass
class _Cache:
    entries: OrderedDict[str, Fetched] = field(default_factory=OrderedDict)
    memory: int = 0
    disk: int = 0


@dataclass
class _Resources:
    """What a source holds open; closed by `close()`, by the garbage collector or at exit."""

    readers: dict[tuple[str, int], Reader] = field(default_factory=dict)
    meta: list[Any] = field(default_factory=list)  # the one metadata consumer, once made
    urls: list[str] = field(default_factory=list)
    spill: list[str] = field(default_factory=list)

    def close(self) -> None:
        for url in self.urls:
            forget_url(url)
        self.urls.clear()
        for reader in list(self.readers.values()):
            reader.close()
        self.readers.clear()
        for consumer in self.meta:
            with contextlib.suppress(Exception):
                consumer.close()
        self.meta.clear()
        for path in self.spill:
            shutil.rmtree(path, ignore_errors=True)
        self.spill.clear()


open_sources: weakref.WeakSet[KafkaSource] = weakref.WeakSet()


def close_all() -> None:
    """Close every Kafka source still open (at exit, and after each pass of `follow`)."""
    for source in list(open_sources):
        source.close()


atexit.register(close_all)


class KafkaSource(SourceBase, RowPositions):
    """Kafka topics as units of offsets; the engine reads each unit's messages from memory."""

    batch_bytes: int | None = BATCH_BYTES

    def __init__(self, patterns: list[str], options: SourceOptions) -> None:
        if not patterns:
            raise UsageError("no source given")
        self.spec = KafkaSpec.parse(patterns, options.format)
        password = resolve_password(self.spec, options.password_file)
        if options.compression not in (None, "none"):
            raise UsageError("kafka sources: --compression does not apply (the client undoes Kafka's own compression)")
        self.options = options
        self.fmt = FileFormat(self.spec.engine_format, "none")
        self.framing = Framing.for_spec(self.spec)
        self.notes: list[str] = []
        """What a person should hear about this run (gaps, skipped messages)."""
        config, self._reader_config = consumer_configs(self.spec, password)
        self._lock = threading.Lock()
        self._held = _Resources()
        self._admin = Admin(self.spec, config, self._held.meta, self._lock, password, self._on_client_error)
        self._plans: dict[str, _Plan] = {}
        self._order: list[Unit] = []
        self._cache = _Cache()
        self._futures: dict[str, Future[Fetched]] = {}
        self._urls: dict[str, _UnitUrls] = {}
        self._requested = -1  # the unit (in plan order) the loader asked for last
        self._wake = threading.Condition(self._lock)
        self._prefetch: threading.Thread | None = None
        self._closed = False
        self._release = weakref.finalize(self, self._held.close)
        open_sources.add(self)

    def scrub(self, text: str) -> str:
        """`text` without the SASL password (a second line of defence: no message should hold it)."""
        return self._admin.scrub(text)

    def _on_client_error(self, error: Any) -> None:
        """librdkafka's errors outside any call: a refused login is only said here."""
        kafka = kafka_lib()
        if error.code() in (kafka.KafkaError._AUTHENTICATION, kafka.KafkaError.SASL_AUTHENTICATION_FAILED):
            self._admin.login_error = self.scrub(error.str())

    def _reader(self, topic: str, partition: int) -> Reader:
        with self._lock:
            reader = self._held.readers.get((topic, partition))
            if reader is None:
                reader = self._held.readers[(topic, partition)] = Reader(self._reader_config, topic, partition)
            return reader

    def close(self) -> None:
        """Stop fetching, close the consumers, drop buffers and spill files."""
        with self._lock:
            self._closed = True
            self._wake.notify_all()
            self._cache = _Cache()
            self._urls.clear()
        self._release()
        open_sources.discard(self)

    def _spill_dir(self) -> str:
        with self._lock:
            if not self._held.spill:
                self._held.spill.append(tempfile.mkdtemp(prefix=f"chute-kafka-{os.getpid()}-"))
            return self._held.spill[0]

    # -- planning -------------------------------------------------------------

    def units(self) -> list[Unit]:
        planned = Planner(self.spec, self.options, self._admin, self.fmt, self.notes).plan()
        units = [u for u, _ in planned]
        with self._lock:
            self._plans = {u.key: _Plan(u, r, i) for i, (u, r) in enumerate(planned)}
            self._order = units
        return units

    def unit_done(self, units: list[Unit]) -> None:
        """After the ledger says done: commit the group's offsets (information only)."""
        if not self.spec.group:
            return
        ends: dict[tuple[str, int], int] = {}
        for unit in units:
            r = parse_key(unit.key)
            if r is not None:
                ends[(r.topic, r.partition)] = max(ends.get((r.topic, r.partition), 0), r.end)
        self._admin.commit([(t, p, o) for (t, p), o in ends.items()], self.notes)

    # -- fetching -------------------------------------------------------------

    def _fetched(self, key: str) -> Fetched:
        """The unit's buffer: cached, being fetched (wait), or fetched now."""
        with self._lock:
            entry = self._cache.entries.get(key)
            if entry is not None:
                self._cache.entries.move_to_end(key)
                return entry
            future = self._futures.get(key)
            mine = future is None
            if future is None:
                future = self._futures[key] = Future()
        if mine:
            self._fetch_into(key, future)
        return future.result()

    def _fetch_into(self, key: str, future: Future[Fetched]) -> None:
        plan = self._plans[key]
        r = plan.range
        with self._lock:
            memory_left = max(0, MEMORY_CACHE - self._cache.memory)
        buffer = Buffer(self._spill_dir, memory_left)
        try:
            fetched = self._reader(r.topic, r.partition).read(r.start, r.end, key, buffer, self.framing)
        except BaseException as exc:
            with self._lock:
                self._futures.pop(key, None)
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if fetched.skipped:
            self.notes.append(f"{key}: {fetched.skipped} messages without a payload (null or empty) left out")
        with self._lock:
            self._futures.pop(key, None)
            self._cache.entries[key] = fetched
            if fetched.data is not None:
                self._cache.memory += fetched.nbytes
            else:
                self._cache.disk += fetched.nbytes
            self._evict()
        future.set_result(fetched)

    def _evict(self) -> None:
        """Drop the least recently used buffers past the budgets (lock held); never one
        fetched ahead and not yet asked for."""
        cache = self._cache
        for key in list(cache.entries):
            memory_over, disk_over = cache.memory > MEMORY_CACHE, cache.disk > DISK_CACHE
            if not memory_over and not disk_over:
                return
            plan = self._plans.get(key)
            entry = cache.entries[key]
            if (plan is not None and plan.index > self._requested) or (
                memory_over if entry.data is None else disk_over and not memory_over
            ):
                continue
            del cache.entries[key]
            if entry.data is not None:
                cache.memory -= entry.nbytes
            else:
                cache.disk -= entry.nbytes
                if entry.path:
                    with contextlib.suppress(OSError):
                        os.remove(entry.path)

    def _asked(self, unit: Unit) -> None:
        """The loader wants `unit`: the fetcher keeps PREFETCH_BYTES ahead of it. The unit
        asked last, not the furthest: inference samples units far ahead before the first
        batch, and the fetcher must not take that for where the load is."""
        with self._lock:
            plan = self._plans.get(unit.key)
            if plan is None:
                raise SourceError(f"{unit.key}: not a unit of this load")
            if plan.index != self._requested:
                self._requested = plan.index
                self._wake.notify_all()
            if self._prefetch is None and not self._closed:
                self._prefetch = threading.Thread(
                    target=_prefetch_loop, args=(weakref.ref(self),), name="chute-kafka-prefetch", daemon=True
                )
                self._prefetch.start()

    def _claim_ahead(self, i: int) -> Future[Fetched] | str:
        """For the prefetcher: a claim on unit `i` to fetch it, or "skip" (cached or being
        fetched), "wait" (too far ahead of the loader; after waiting a while), "stop"."""
        with self._lock:
            if self._closed or i >= len(self._order):
                return "stop"
            ahead = sum(u.size for u in self._order[self._requested + 1 : i])
            if i > self._requested + 1 and ahead >= PREFETCH_BYTES:
                self._wake.wait(0.5)
                return "wait"
            key = self._order[i].key
            if key in self._cache.entries or key in self._futures:
                return "skip"
            future: Future[Fetched] = Future()
            self._futures[key] = future
            return future

    def _urls_for(self, unit: Unit) -> _UnitUrls:
        """Loopback URLs for the unit's buffer, its rows' timestamps and keys, and
        (where offsets have gaps) its rows' offsets."""
        self._asked(unit)
        fetched = self._fetched(unit.key)
        with self._lock:
            urls = self._urls.get(unit.key)
        if urls is None:
            ref, key = weakref.ref(self), unit.key
            urls = _UnitUrls(
                blob_url(lambda: _live(ref, key).payload()),
                blob_url(lambda: _live(ref, key).timestamps),
                blob_url(lambda: _live(ref, key).keys),
                blob_url(lambda: _live(ref, key).offsets or b"") if fetched.offsets is not None else None,
            )
            with self._lock:
                self._held.urls += urls.all()
                urls = self._urls.setdefault(key, urls)
        return urls

    # -- Source ---------------------------------------------------------------

    def offset_expression(self, unit: Unit) -> str:
        """SQL for a row's offset, from the engine's 0-based `_row_number` in the unit's buffer."""
        urls = self._urls_for(unit)
        if urls.offsets is None:
            return f"({self._plans[unit.key].range.start} + _row_number)"
        return f"arrayElement({_column_array(urls.offsets, 'RowBinary', 'UInt64')}, _row_number + 1)"

    def extra_provenance_columns(self) -> list[tuple[str, str]]:
        """Provenance columns beyond the four every source fills: the message key."""
        return [KEY_COLUMN]

    def provenance_expressions(self, unit: Unit, row_expression: str) -> dict[str, str]:
        """Per-message provenance, looked up by the row's offset (`row_expression`):
        `_source_mtime` is the message's timestamp, `_source_key` its key."""
        urls = self._urls_for(unit)
        offset = f"toUInt64({row_expression})"
        if urls.offsets is None:
            index = f"({offset} - {self._plans[unit.key].range.start} + 1)"
        else:
            index = f"indexOfAssumeSorted({_column_array(urls.offsets, 'RowBinary', 'UInt64')}, {offset})"
        stamps = _column_array(urls.timestamps, "RowBinary", "Int64")
        return {
            "_source_mtime": f"fromUnixTimestamp64Milli(arrayElement({stamps}, {index}), 'UTC')",
            KEY_COLUMN[0]: f"arrayElement({_column_array(urls.keys, 'TSV', KEY_COLUMN[1])}, {index})",
        }

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        url = self._urls_for(unit).data
        fmt = fmt_name or self.fmt.format
        args = [quote_str(url), quote_str(fmt)]
        if structure is not None:
            args.append(quote_str(structure))
        return f"url({', '.join(args)})"

    def row_at_position(self, unit: Unit, position: str) -> str:
        """The offset of the message at 1-based `position` in the unit (the careful pass counts so)."""
        urls = self._urls_for(unit)
        if urls.offsets is None:
            return f"(toUInt64({position}) + {self._plans[unit.key].range.start - 1})"
        return f"arrayElement({_column_array(urls.offsets, 'RowBinary', 'UInt64')}, toUInt64({position}))"

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        return None

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        if self.fmt.format == "CustomSeparated":
            return [Column(RAW_COLUMN, "String")]
        return None

    def unchanged(self, unit: Unit) -> bool:
        """Messages never change: what was fetched is what the offsets hold."""
        return True

    def row_number_expression(self, unit: Unit) -> str:
        """The offset: `_source_row` holds each message's offset, not a count."""
        return self.offset_expression(unit)

    def needs_serial_read(self, unit: Unit) -> bool:
        return False


def _live(ref: weakref.ref[KafkaSource], key: str) -> Fetched:
    """A unit's buffer for the loopback server, which must not keep a closed source alive."""
    source = ref()
    if source is None or source._closed:
        raise SourceError(f"{key}: the load that read it has ended")
    return source._fetched(key)


def _prefetch_loop(ref: weakref.ref[KafkaSource]) -> None:
    """Fetch units in load order, up to PREFETCH_BYTES ahead of the loader; holds the
    source only while it works, so a source nobody uses can be collected (and closed)."""
    i = 0
    while True:
        source = ref()
        if source is None:
            return
        claim = source._claim_ahead(i)
        if claim == "stop":
            return
        if isinstance(claim, Future):
            with contextlib.suppress(Exception):  # the loader sees the error when it asks
                source._fetch_into(source._order[i].key, claim)
        if claim != "wait":
            i += 1
        del source
