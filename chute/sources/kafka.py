"""Kafka topics: `kafka://broker:port/topic[,topic2][?options]`, batches of offsets as ledger units.

A run is bounded: it takes the end offset of every partition when it starts
and loads up to there. Each unit is one partition's offsets [start, end),
named `kafka://broker:port/topic/partition#offsets=[START,END)`; that name is
also the rows' `_source`, so a unit interrupted by a crash is found in the
ledger as `started`, its rows are deleted by `_source` and it is loaded again
under the same name: no message is lost or doubled.

Where to go on comes from the ledger alone (SourceOptions.loaded): a
partition continues after the largest end offset of the units it knows
(done, started or failed; the last two are planned again as they were).
Kafka's consumer-group offsets are never read: with `group=G` they are
committed, for people and tools that watch the group, and nothing else.

The messages of a unit are fetched with confluent-kafka and joined into one
byte buffer (JSON lines, CSV records, escaped text for raw messages, or an Avro
container whose blocks are the bare datums), which the engine
reads through `url()` from the loopback server in ranges.py, as often as the
loader asks (inference, load, careful pass). Python never parses a message.
Buffers live in a cache (memory, then spill files) and are fetched again if
they were dropped; units are fetched ahead of the loader in a thread, so
fetching overlaps with the engine's work.

Row numbers: `_source_row` is the message's offset. Offsets have no gaps in
most topics, and the offset is then `START + _row_number`; where a unit has
gaps (transaction markers, compaction, tombstones) the offsets of its
messages go to the engine as a second buffer and the row's offset is looked
up in it. (A JSON message of only whitespace is skipped by the engine's
reader and shifts the offsets of the rows after it in its unit; not checked.)
`_source_mtime` is the message's own timestamp and `_source_key` its key
(Nullable(String)): both go to the engine as buffers beside the messages
(RowBinary timestamps, TSV keys) and are looked up by the row's position.
The careful pass numbers records 1-based; `row_at_position` turns that into
the offset. Headers are not carried.

Options (query string): `format=json|csv|raw|avro|avro-confluent` (raw: one
`message String` column; avro: bare datums, avro-confluent: each after
Confluent's 5-byte header, both with `schema=FILE.avsc`),
`start=earliest|latest|TIME` (where a partition with nothing in the ledger
starts; TIME is epoch milliseconds or ISO 8601), `group=G`, `batch=N`
(messages per unit), `max_units=N` (units planned per run); SASL with
`kafka://user[:password]@host` and `sasl_mechanism=`, TLS with `tls=1`, `ca=FILE`.

`follow()` keeps loading (bounded runs one after another) until SIGINT/SIGTERM.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import datetime
import json
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import urllib.parse
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from chute.errors import SourceError, UsageError
from chute.formats import FileFormat
from chute.schema import Column
from chute.sources.base import RowPositions, SourceBase, SourceOptions
from chute.sources.ranges import FileSlice, Payload, blob_url, forget_url
from chute.sql import quote_str
from chute.units import Unit

# Message format name -> engine format. Raw messages are read as escaped text
# (CustomSeparated with its TSV-like defaults), so any byte survives.
MESSAGE_FORMATS = {
    "json": "JSONEachRow",
    "jsonl": "JSONEachRow",
    "ndjson": "JSONEachRow",
    "jsoneachrow": "JSONEachRow",
    "csv": "CSV",
    "raw": "CustomSeparated",
    "string": "CustomSeparated",
    "avro": "Avro",
    "avro-confluent": "Avro",
}
AVRO_FORMATS = frozenset({"avro", "avro-confluent"})
CONFLUENT_HEADER = 5
"""Bytes before the Avro datum in Confluent's wire format: a zero magic byte and a 4-byte schema id."""
RAW_COLUMN = "message"
KEY_COLUMN = ("_source_key", "Nullable(String)")
"""The message key: a provenance column of Kafka loads (null for messages without a key)."""

TARGET_UNIT_BYTES = 16 * 2**20
"""A unit's size when `batch` is not given (estimated from a message at its end)."""
MIN_UNIT_MESSAGES = 1000
MAX_UNIT_MESSAGES = 2_000_000
CONSUME_BATCH = 50_000
"""Messages per consume() call: big enough that Python's per-call work is noise."""
STALL_SECONDS = 30.0
"""A fetch that gets no message for this long fails (the unit is tried again next run)."""
MEMORY_CACHE = 128 * 2**20
"""Buffers kept in memory; past this they go to spill files (read with sendfile)."""
DISK_CACHE = 4 * 2**30
"""Spilled buffers kept; the least recently used are dropped (and fetched again if asked for)."""
PREFETCH_BYTES = 256 * 2**20
"""Fetched ahead of what the loader asked for last (by the units' estimated sizes)."""
TIMEOUT = 15.0
"""Seconds for metadata and offset queries."""

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PASSWORD_VARIABLE = "KAFKA_PASSWORD"
"""Where the SASL password comes from when neither the URL nor --password-file gives it."""

TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
KEY = re.compile(
    r"^kafka://(?P<host>[^/]*)/(?P<topic>[^/]+)/(?P<partition>\d+)#offsets=\[(?P<start>\d+),(?P<end>\d+)\)$"
)

_log = logging.getLogger("chute.kafka")
_log.addHandler(logging.NullHandler())
_log.propagate = False


def _kafka() -> Any:
    """confluent_kafka, imported on first use: it is an optional dependency."""
    try:
        import confluent_kafka
    except ImportError:
        raise UsageError("kafka:// sources need the confluent-kafka package: pip install 'chute[kafka]'") from None
    return confluent_kafka


@dataclass(frozen=True)
class UnitRange:
    """What a unit key names."""

    host: str
    topic: str
    partition: int
    start: int
    end: int


def unit_key(host: str, topic: str, partition: int, start: int, end: int) -> str:
    """The ledger name (and `_source`) of offsets [start, end) of one partition."""
    return f"kafka://{host}/{topic}/{partition}#offsets=[{start},{end})"


def parse_key(key: str) -> UnitRange | None:
    found = KEY.match(key)
    if not found:
        return None
    return UnitRange(found["host"], found["topic"], int(found["partition"]), int(found["start"]), int(found["end"]))


def _parse_time(text: str) -> int:
    """Epoch milliseconds from digits or ISO 8601 (UTC unless it says otherwise)."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"start={text}: give earliest, latest, epoch milliseconds or an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True)
class KafkaSpec:
    """What the kafka:// URLs of one load ask for."""

    bootstrap: str
    topics: tuple[str, ...]
    message_format: str = "json"
    start: str = "earliest"
    group: str | None = None
    batch: int | None = None
    max_units: int | None = None
    avro_schema: str = ""  # the writer's schema (JSON text) for Avro messages
    user: str | None = None  # SASL login, from kafka://user[:password]@host
    password: str | None = field(default=None, repr=False)
    sasl_mechanism: str = "PLAIN"
    tls: bool = False
    ca: str | None = None  # CA certificates (PEM) to verify the brokers with, where not the system's

    @property
    def host(self) -> str:
        """The broker named in unit keys: the first one given."""
        return self.bootstrap.split(",")[0]

    @property
    def engine_format(self) -> str:
        return MESSAGE_FORMATS[self.message_format]

    @classmethod
    def parse(cls, patterns: list[str], format_override: str | None = None) -> KafkaSpec:
        bootstraps: set[str] = set()
        topics: list[str] = []
        params: dict[str, str] = {}
        logins: set[tuple[str | None, str | None]] = set()
        for pattern in patterns:
            parts = urllib.parse.urlsplit(pattern)
            shown = display_url(pattern)
            userinfo, _, hosts = parts.netloc.rpartition("@")
            if parts.scheme.lower() != "kafka" or not hosts:
                raise UsageError(f"{shown}: give kafka://[user[:password]@]host:port[,host:port]/topic[,topic]")
            bootstraps.add(hosts)
            if userinfo:
                login, colon, secret = userinfo.partition(":")
                logins.add((urllib.parse.unquote(login), urllib.parse.unquote(secret) if colon else None))
            else:
                logins.add((None, None))
            names = [t for t in parts.path.strip("/").split(",") if t]
            if not names:
                raise UsageError(f"{shown}: no topic given (kafka://host:port/topic)")
            for name in names:
                if not TOPIC.match(name):
                    raise UsageError(f"{shown}: {name!r} is not a Kafka topic name")
                if name not in topics:
                    topics.append(name)
            for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
                if name in params and params[name] != value:
                    raise UsageError(f"kafka sources: {name}= given twice with different values")
                params[name] = value
        if len(bootstraps) > 1:
            raise UsageError("one Kafka cluster per load: the URLs name different brokers")
        if len(logins) > 1:
            raise UsageError("one Kafka login per load: the URLs name different users")
        user, password = logins.pop()
        options = {"format", "start", "group", "batch", "max_units", "schema", "sasl_mechanism", "tls", "ca"}
        unknown = set(params) - options
        if unknown:
            known = ", ".join(sorted(options))
            raise UsageError(f"kafka sources: unknown option {', '.join(sorted(unknown))} (known: {known})")
        fmt = (params.get("format") or format_override or "json").lower()
        if fmt not in MESSAGE_FORMATS:
            raise UsageError(f"kafka sources: format={fmt} is not supported; json, csv, raw, avro or avro-confluent")
        avro_schema = ""
        if fmt in AVRO_FORMATS:
            avro_schema = _read_schema(params.get("schema"))
        elif params.get("schema"):
            raise UsageError("kafka sources: schema= is for format=avro or avro-confluent")
        start = params.get("start", "earliest")
        if start not in ("earliest", "latest"):
            _parse_time(start)
        numbers: dict[str, int | None] = {}
        for name in ("batch", "max_units"):
            text = params.get(name)
            if text is not None and (not text.isdigit() or int(text) < 1):
                raise UsageError(f"kafka sources: {name}= takes a positive number")
            numbers[name] = int(text) if text else None
        mechanism = params.get("sasl_mechanism", "PLAIN").upper()
        if mechanism not in SASL_MECHANISMS:
            raise UsageError(f"kafka sources: sasl_mechanism={mechanism}: one of {', '.join(SASL_MECHANISMS)}")
        if params.get("tls", "0") not in ("0", "1"):
            raise UsageError("kafka sources: tls= takes 0 or 1")
        ca = params.get("ca") or None
        if ca is not None and not os.path.isfile(ca):
            raise UsageError(f"kafka sources: ca={ca}: no such file")
        return cls(
            bootstraps.pop(),
            tuple(topics),
            fmt,
            start,
            params.get("group") or None,
            numbers["batch"],
            numbers["max_units"],
            avro_schema,
            user or None,
            password,
            mechanism,
            params.get("tls") == "1" or ca is not None,
            ca,
        )


def display_url(pattern: str) -> str:
    """A kafka:// URL as it may be shown: without a password."""
    parts = urllib.parse.urlsplit(pattern)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return pattern
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:***@{hosts}"))


def _read_schema(path: str | None) -> str:
    """An Avro schema file (.avsc), checked to be JSON; messages hold datums without it."""
    if not path:
        raise UsageError("kafka sources: Avro messages need the writer's schema: schema=/path/to/file.avsc")
    try:
        text = Path(path).read_text(encoding="utf-8")
        json.loads(text)
    except OSError as exc:
        raise UsageError(f"schema={path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"schema={path}: not a JSON Avro schema ({exc})") from None
    return text


def _long(n: int) -> bytes:
    """An Avro long: zigzag, then base-128 varint."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def avro_header(schema: str, sync: bytes) -> bytes:
    """The header of an Avro object container file: the engine's Avro reader wants one,
    and Kafka messages carry bare datums; each consumed batch then becomes one block."""
    meta = {"avro.schema": schema.encode(), "avro.codec": b"null"}
    body = b"".join(_long(len(k)) + k.encode() + _long(len(v)) + v for k, v in meta.items())
    return b"Obj\x01" + _long(len(meta)) + body + _long(0) + sync


def _escape_keys(keys: list[bytes | None]) -> bytes:
    """Keys as one TSV column of Nullable(String): `\\N` for a missing key, the rest escaped."""
    return b"".join(b"\\N\n" if k is None else _escape_raw(k).replace(b"\n", b"\\n") + b"\n" for k in keys)


# -- fetching ----------------------------------------------------------------


@dataclass
class _Fetched:
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


class _Buffer:
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


def _escape_raw(chunk: bytes) -> bytes:
    """Raw messages as escaped text fields: backslash, tab and CR escaped (newlines apart)."""
    return chunk.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\r", b"\\r")


class _Reader:
    """One consumer on one partition, read forward; reading elsewhere re-assigns it."""

    def __init__(self, config: dict[str, Any], topic: str, partition: int) -> None:
        kafka = _kafka()
        self.kafka = kafka
        self.consumer = kafka.Consumer(config, logger=_log)
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
            if any(m.error() is not None for m in batch):
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

    def read(self, start: int, end: int, name: str, buffer: _Buffer, framing: Framing) -> _Fetched:
        """Offsets [start, end) joined into one buffer the engine reads in `framing`'s format,
        with each row's timestamp and key (and offset, where offsets have gaps) beside it."""
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
                    values = [m.value() for m in batch]
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
                        offsets.extend(m.offset() for m in kept)
                    expected = last + 1
                    if not values:
                        continue
                    timestamps.extend([m.timestamp()[1] for m in kept])
                    keys.append(_escape_keys([m.key() for m in kept]))
                    buffer.add(framing.frame(values))
                    count += len(values)
            except BaseException:
                buffer.discard()
                raise
        data, path = buffer.finish()
        return _Fetched(
            data,
            path,
            buffer.nbytes,
            count,
            skipped,
            offsets.tobytes() if offsets is not None else None,
            timestamps.tobytes(),
            b"".join(keys),
        )


@dataclass(frozen=True)
class Framing:
    """How a unit's messages become one buffer in the engine format: one message, one row."""

    kind: str  # json | csv | raw | avro
    header: bytes = b""  # written once at the start of a unit's buffer (Avro's container header)
    sync: bytes = b""
    strip: int = 0  # bytes cut from the front of each message (Confluent's schema id header)

    @classmethod
    def for_spec(cls, spec: KafkaSpec) -> Framing:
        if spec.message_format in AVRO_FORMATS:
            sync = os.urandom(16)
            strip = CONFLUENT_HEADER if spec.message_format == "avro-confluent" else 0
            return cls("avro", avro_header(spec.avro_schema, sync), sync, strip)
        kind = {"JSONEachRow": "json", "CSV": "csv", "CustomSeparated": "raw"}[spec.engine_format]
        return cls(kind)

    def frame(self, values: list[bytes]) -> bytes:
        """One consumed batch of message payloads (none empty, except raw ones) as bytes."""
        if self.kind == "avro":
            if self.strip:
                values = [v[self.strip :] for v in values]
            body = b"".join(values)
            return _long(len(values)) + _long(len(body)) + body + self.sync
        chunk = b"\n".join(values)
        if chunk.count(b"\n") != len(values) - 1:
            # Newlines inside messages: escaped for raw, JSON whitespace for JSON; a CSV
            # message loses its line end (quoted newlines are the parser's business).
            if self.kind == "raw":
                chunk = b"\n".join(_escape_raw(v).replace(b"\n", b"\\n") for v in values)
            elif self.kind == "json":
                chunk = b"\n".join(v.replace(b"\r\n", b" ").replace(b"\n", b" ") for v in values)
            else:
                chunk = b"\n".join(v.rstrip(b"\r\n") for v in values)
            return chunk + b"\n"
        return (_escape_raw(chunk) if self.kind == "raw" else chunk) + b"\n"


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
    entries: OrderedDict[str, _Fetched] = field(default_factory=OrderedDict)
    memory: int = 0
    disk: int = 0


@dataclass
class _Resources:
    """What a source holds open; closed by `close()`, by the garbage collector or at exit."""

    readers: dict[tuple[str, int], _Reader] = field(default_factory=dict)
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


_open_sources: weakref.WeakSet[KafkaSource] = weakref.WeakSet()


def close_all() -> None:
    """Close every Kafka source still open (at exit, and after each pass of `follow`)."""
    for source in list(_open_sources):
        source.close()


atexit.register(close_all)


class KafkaSource(SourceBase, RowPositions):
    """Kafka topics as units of offsets; the engine reads each unit's messages from memory."""

    def __init__(self, patterns: list[str], options: SourceOptions) -> None:
        if not patterns:
            raise UsageError("no source given")
        self.spec = KafkaSpec.parse(patterns, options.format)
        self._password = self._resolve_password(options.password_file)
        self._login_error = ""
        if options.compression not in (None, "none"):
            raise UsageError("kafka sources: --compression does not apply (the client undoes Kafka's own compression)")
        self.options = options
        self.fmt = FileFormat(self.spec.engine_format, "none")
        self.framing = Framing.for_spec(self.spec)
        self.notes: list[str] = []
        """What a person should hear about this run (gaps, skipped messages)."""
        self._config: dict[str, Any] = {
            "bootstrap.servers": self.spec.bootstrap,
            "group.id": self.spec.group or "chute",
            "client.id": "chute",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "allow.auto.create.topics": False,
            # A fetch at the end of a partition waits this long at the broker, and a
            # re-assign waits for it: short, since units jump between offsets.
            "fetch.wait.max.ms": 20,
            # librdkafka pauses a partition's fetching this long when its queue is full (1 s by default).
            "fetch.queue.backoff.ms": 10,
        }
        self._config.update(self._security())
        self._reader_config = {
            **self._config,
            "fetch.max.bytes": 64 * 2**20,
            "max.partition.fetch.bytes": 16 * 2**20,
            "queued.max.messages.kbytes": 64 * 1024,
        }
        # Metadata, offsets and one-message probes: small fetches, so that moving on is quick.
        self._config.update({"max.partition.fetch.bytes": 65536, "fetch.max.bytes": 2**20, "fetch.queue.backoff.ms": 0})
        self._lock = threading.Lock()
        self._meta_lock = threading.Lock()
        self._held = _Resources()
        self._plans: dict[str, _Plan] = {}
        self._order: list[Unit] = []
        self._cache = _Cache()
        self._futures: dict[str, Future[_Fetched]] = {}
        self._urls: dict[str, _UnitUrls] = {}
        self._requested = -1  # the furthest unit (in plan order) the loader asked for
        self._wake = threading.Condition(self._lock)
        self._prefetch: threading.Thread | None = None
        self._closed = False
        self._release = weakref.finalize(self, self._held.close)
        _open_sources.add(self)

    def _resolve_password(self, password_file: str | None) -> str | None:
        """The SASL password: from the URL, else `--password-file`, else $KAFKA_PASSWORD."""
        if self.spec.user is None:
            return None
        if self.spec.password is not None:
            return self.spec.password
        if password_file:
            try:
                return Path(password_file).read_text(encoding="utf-8").rstrip("\r\n")
            except OSError as exc:
                raise UsageError(f"--password-file {password_file}: {exc.strerror or exc}") from None
        found = os.environ.get(PASSWORD_VARIABLE)
        if found is None:
            raise UsageError(
                f"kafka sources: user {self.spec.user} needs a password: in the URL, --password-file "
                f"or ${PASSWORD_VARIABLE}"
            )
        return found

    def _security(self) -> dict[str, Any]:
        """librdkafka settings for SASL and TLS; the password goes nowhere else."""
        spec = self.spec
        config: dict[str, Any] = {}
        if spec.user is not None:
            config["security.protocol"] = "SASL_SSL" if spec.tls else "SASL_PLAINTEXT"
            config.update({"sasl.mechanism": spec.sasl_mechanism, "sasl.username": spec.user})
            config["sasl.password"] = self._password
        elif spec.tls:
            config["security.protocol"] = "SSL"
        if spec.ca:
            config["ssl.ca.location"] = spec.ca
        return config

    def scrub(self, text: str) -> str:
        """`text` without the SASL password (a second line of defence: no message should hold it)."""
        return text.replace(self._password, "***") if self._password else text

    # -- client ---------------------------------------------------------------

    def _admin_consumer(self) -> Any:
        with self._lock:
            if not self._held.meta:
                config = {**self._config, "error_cb": self._on_client_error}
                self._held.meta.append(_kafka().Consumer(config, logger=_log))
            return self._held.meta[0]

    def _on_client_error(self, error: Any) -> None:
        """librdkafka's errors outside any call: a refused login is only said here."""
        kafka = _kafka()
        if error.code() in (kafka.KafkaError._AUTHENTICATION, kafka.KafkaError.SASL_AUTHENTICATION_FAILED):
            self._login_error = self.scrub(error.str())

    def _reader(self, topic: str, partition: int) -> _Reader:
        with self._lock:
            reader = self._held.readers.get((topic, partition))
            if reader is None:
                reader = self._held.readers[(topic, partition)] = _Reader(self._reader_config, topic, partition)
            return reader

    def close(self) -> None:
        """Stop fetching, close the consumers, drop buffers and spill files."""
        with self._lock:
            self._closed = True
            self._wake.notify_all()
            self._cache = _Cache()
            self._urls.clear()
        self._release()
        _open_sources.discard(self)

    def _spill_dir(self) -> str:
        with self._lock:
            if not self._held.spill:
                self._held.spill.append(tempfile.mkdtemp(prefix=f"chute-kafka-{os.getpid()}-"))
            return self._held.spill[0]

    def _partitions(self) -> dict[str, list[int]]:
        kafka = _kafka()
        consumer = self._admin_consumer()
        found: dict[str, list[int]] = {}
        for topic in self.spec.topics:
            deadline = time.monotonic() + TIMEOUT
            while True:  # short waits, so that a refused login ends it at once
                try:
                    meta = consumer.list_topics(topic, timeout=0.5)
                    break
                except kafka.KafkaException as exc:
                    consumer.poll(0)  # serves error_cb, where a refused login is said
                    if self._login_error:
                        raise SourceError(
                            f"kafka://{self.spec.host}: login as {self.spec.user} refused ({self._login_error})"
                        ) from None
                    if time.monotonic() > deadline:
                        reason = self.scrub(str(exc.args[0]))
                        raise SourceError(
                            f"kafka://{self.spec.bootstrap}: cannot reach the broker ({reason})"
                        ) from None
            info = meta.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                reason = info.error.str() if info is not None and info.error is not None else "no partitions"
                raise SourceError(f"kafka://{self.spec.host}/{topic}: no such topic ({reason})")
            found[topic] = sorted(info.partitions)
        return found

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        kafka = _kafka()
        try:
            low, high = self._admin_consumer().get_watermark_offsets(
                kafka.TopicPartition(topic, partition), timeout=TIMEOUT, cached=False
            )
        except kafka.KafkaException as exc:
            raise SourceError(f"kafka://{self.spec.host}/{topic}/{partition}: no end offsets ({exc.args[0]})") from None
        return int(low), int(high)

    def _start_offset(self, topic: str, partition: int, low: int, high: int) -> int:
        """Where a partition the ledger does not know starts."""
        if self.spec.start == "earliest":
            return low
        if self.spec.start == "latest":
            return high
        kafka = _kafka()
        wanted = kafka.TopicPartition(topic, partition, _parse_time(self.spec.start))
        try:
            (found,) = self._admin_consumer().offsets_for_times([wanted], timeout=TIMEOUT)
        except kafka.KafkaException as exc:
            raise SourceError(f"kafka://{self.spec.host}/{topic}/{partition}: {exc.args[0]}") from None
        return high if found.offset < 0 else max(low, int(found.offset))

    def _probe(self, topic: str, partition: int, start: int, end: int) -> tuple[int, int]:
        """(timestamp ms, bytes) of the last message below `end`, cheaply: one small fetch.

        Gives the unit its time (what `_source_mtime` says) and a size estimate."""
        kafka = _kafka()
        consumer = self._admin_consumer()
        with self._meta_lock:
            consumer.assign([kafka.TopicPartition(topic, partition, max(start, end - 1))])
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                for m in consumer.consume(1, 0.5):
                    if m.error() is None and m.offset() < end:
                        return max(0, m.timestamp()[1]), len(m.value() or b"") + 1
                    return 0, 0  # a marker or a gap ends the unit: no sample
        return 0, 0

    # -- planning -------------------------------------------------------------

    def _known(self) -> dict[tuple[str, int], list[tuple[UnitRange, str, str]]]:
        """Ledger units of these topics by partition, whatever broker address named them."""
        known: dict[tuple[str, int], list[tuple[UnitRange, str, str]]] = {}
        for key, state in self.options.loaded:
            found = parse_key(key)
            if found is not None and found.topic in self.spec.topics:
                known.setdefault((found.topic, found.partition), []).append((found, state, key))
        return known

    def _per_unit(self, sample_bytes: int) -> int:
        if self.spec.batch:
            return self.spec.batch
        target = min(self.options.split_bytes or TARGET_UNIT_BYTES, TARGET_UNIT_BYTES)
        return max(MIN_UNIT_MESSAGES, min(MAX_UNIT_MESSAGES, target // max(1, sample_bytes or 200)))

    def units(self) -> list[Unit]:
        known = self._known()
        planned: list[tuple[UnitRange, str]] = []  # (range, key) in load order
        new_by_partition: list[list[UnitRange]] = []
        samples: dict[tuple[str, int], int] = {}
        commit: list[tuple[str, int, int]] = []
        for topic, partitions in self._partitions().items():
            for partition in partitions:
                low, high = self._watermarks(topic, partition)
                entries = known.get((topic, partition), [])
                redo = sorted((r for r, state, _ in entries if state != "done"), key=lambda r: r.start)
                keys = {r: k for r, _, k in entries}
                planned += [(r, keys[r]) for r in redo]
                if entries:
                    position = max(r.end for r, _, _ in entries)
                    commit.append((topic, partition, min([r.start for r in redo], default=position)))
                else:
                    position = self._start_offset(topic, partition, low, high)
                where = f"kafka://{self.spec.host}/{topic}/{partition}"
                if position < low:
                    self.notes.append(
                        f"{where}: offsets {position} to {low - 1} were deleted from the topic before they "
                        f"were loaded; going on at {low}"
                    )
                    position = low
                if position > high:
                    self.notes.append(
                        f"{where}: the ledger has offsets up to {position} but the partition ends at {high} "
                        "(topic deleted and made again?); nothing loaded from it"
                    )
                    continue
                if position == high:
                    continue
                _, sample = self._probe(topic, partition, position, high)
                samples[(topic, partition)] = sample
                step = self._per_unit(sample)
                new_by_partition.append(
                    [
                        UnitRange(self.spec.host, topic, partition, a, min(a + step, high))
                        for a in range(position, high, step)
                    ]
                )
        # New units go round-robin over partitions, so a capped run moves every partition on.
        new: list[UnitRange] = []
        for i in range(max((len(p) for p in new_by_partition), default=0)):
            new += [p[i] for p in new_by_partition if i < len(p)]
        if self.spec.max_units is not None:
            new = new[: max(0, self.spec.max_units - len(planned))]
        planned += [(r, unit_key(r.host, r.topic, r.partition, r.start, r.end)) for r in new]
        if self.spec.start == "latest" and not known and not planned:
            self.notes.append("start=latest: nothing to load in a run that stops at the end; use a time or --follow")
        if self.spec.group and commit:
            self._commit(commit)
        units = []
        for r, key in planned:
            stamp, sample = self._probe(r.topic, r.partition, r.start, r.end)
            sample = sample or samples.get((r.topic, r.partition), 0) or 200
            unit = Unit(
                key=key,
                size=max(1, (r.end - r.start) * sample),
                mtime_ns=(stamp or int(time.time() * 1000)) * 1_000_000,
                fmt=self.fmt,
            )
            units.append(unit)
        with self._lock:
            self._plans = {u.key: _Plan(u, r, i) for i, (u, (r, _)) in enumerate(zip(units, planned, strict=True))}
            self._order = units
        return units

    def _commit(self, positions: list[tuple[str, int, int]]) -> None:
        """Tell the group how far the ledger got (information only; never read back)."""
        kafka = _kafka()
        offsets = [kafka.TopicPartition(t, p, o) for t, p, o in positions]
        try:
            self._admin_consumer().commit(offsets=offsets, asynchronous=False)
        except kafka.KafkaException as exc:
            self.notes.append(f"group {self.spec.group}: offsets not committed ({exc.args[0]})")

    def unit_done(self, units: list[Unit]) -> None:
        """After the ledger says done: commit the group's offsets (information only)."""
        if not self.spec.group:
            return
        ends: dict[tuple[str, int], int] = {}
        for unit in units:
            r = parse_key(unit.key)
            if r is not None:
                ends[(r.topic, r.partition)] = max(ends.get((r.topic, r.partition), 0), r.end)
        self._commit([(t, p, o) for (t, p), o in ends.items()])

    # -- fetching -------------------------------------------------------------

    def _fetched(self, key: str) -> _Fetched:
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

    def _fetch_into(self, key: str, future: Future[_Fetched]) -> None:
        plan = self._plans[key]
        r = plan.range
        with self._lock:
            memory_left = max(0, MEMORY_CACHE - self._cache.memory)
        buffer = _Buffer(self._spill_dir, memory_left)
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
        """The loader wants `unit`: note how far it got and keep the fetcher ahead of it."""
        with self._lock:
            plan = self._plans.get(unit.key)
            if plan is None:
                raise SourceError(f"{unit.key}: not a unit of this load")
            if plan.index > self._requested:
                self._requested = plan.index
                self._wake.notify_all()
            if self._prefetch is None and not self._closed:
                self._prefetch = threading.Thread(
                    target=_prefetch_loop, args=(weakref.ref(self),), name="chute-kafka-prefetch", daemon=True
                )
                self._prefetch.start()

    def _claim_ahead(self, i: int) -> Future[_Fetched] | str:
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
            future: Future[_Fetched] = Future()
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


def _live(ref: weakref.ref[KafkaSource], key: str) -> _Fetched:
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


# -- following a topic --------------------------------------------------------


def _with_params(pattern: str, extra: dict[str, str]) -> str:
    parts = urllib.parse.urlsplit(pattern)
    params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    params.update(extra)
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))


def with_options(patterns: list[str], **options: str | int | None) -> list[str]:
    """kafka:// patterns with options from command-line flags (`group`, `start`, `format`,
    `batch`, `max_units`) as query parameters; None leaves one out; other patterns pass as they are.
    For the CLI: `patterns = with_options(patterns, group=args.group, start=args.start)`."""
    extra = {name: str(value) for name, value in options.items() if value is not None}
    if not extra:
        return list(patterns)
    return [_with_params(p, extra) if p.lower().startswith("kafka://") else p for p in patterns]


def follow_patterns(patterns: list[str], units_per_pass: int) -> list[str]:
    """The URLs each pass of `follow` loads: `start=latest` pinned to now (so a later pass
    does not skip what came meanwhile) and at most `units_per_pass` units per pass."""
    now = str(int(time.time() * 1000))
    out = []
    for pattern in patterns:
        spec = KafkaSpec.parse([pattern])
        extra = {"max_units": str(units_per_pass)}
        if spec.start == "latest":
            extra["start"] = now
        out.append(_with_params(pattern, extra))
    return out


def follow(
    patterns: list[str],
    load_once: Callable[[list[str]], Any],
    idle_seconds: float = 1.0,
    units_per_pass: int = 16,
    stop: threading.Event | None = None,
    on_pass: Callable[[Any], None] | None = None,
) -> None:
    """Keep loading until SIGINT/SIGTERM (or `stop`): bounded runs one after another.

    Each pass is an ordinary bounded load of at most `units_per_pass` units, so
    everything a single load promises holds (a SIGKILL at any moment, then a
    restart, leaves each message once); a signal lets the current pass finish
    and then returns. `load_once(patterns)` runs one load and returns its report.
    """
    stop = stop or threading.Event()
    passes = follow_patterns(patterns, units_per_pass)
    previous: dict[signal.Signals, Any] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, on_signal)
    try:
        while not stop.is_set():
            before = set(_open_sources)
            try:
                report = load_once(passes)
            finally:
                for source in set(_open_sources) - before:
                    source.close()  # its consumers and buffers: a pass's own
            if on_pass is not None:
                on_pass(report)
            busy = any(getattr(f, "state", "") == "loaded" for f in getattr(report, "files", []))
            if not busy:
                stop.wait(idle_seconds)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
