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
fetching overlaps with the engine's work. The loader's batches stay below
`KafkaSource.batch_bytes` (64 MiB): the engine loads one while the next is
fetched, and memory does not grow with the topic (docs/internals/kafka.md).

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

The package: `spec` (URLs, options, unit keys), `client` (confluent-kafka
settings, the metadata consumer), `planning` (a run's units), `framing` (the
buffer formats, Avro), `reader` (fetching a unit), `source` (KafkaSource: the
cache, prefetching, the engine's SQL), `follow` (loading until stopped).
"""

from __future__ import annotations

from chute.sources.kafka.follow import follow, follow_patterns, with_options
from chute.sources.kafka.framing import Framing, avro_header
from chute.sources.kafka.source import KafkaSource, close_all
from chute.sources.kafka.spec import KafkaSpec, UnitRange, display_url, parse_key, unit_key

__all__ = [
    "Framing",
    "KafkaSource",
    "KafkaSpec",
    "UnitRange",
    "avro_header",
    "close_all",
    "display_url",
    "follow",
    "follow_patterns",
    "parse_key",
    "unit_key",
    "with_options",
]
