"""How messages become one buffer the engine reads: JSON lines, CSV, escaped text or Avro."""

from __future__ import annotations

import os
from dataclasses import dataclass

from chute.sources.kafka.spec import AVRO_FORMATS, KafkaSpec

CONFLUENT_HEADER = 5
"""Bytes before the Avro datum in Confluent's wire format: a zero magic byte and a 4-byte schema id."""


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


def escape_keys(keys: list[bytes | None]) -> bytes:
    """Keys as one TSV column of Nullable(String): `\\N` for a missing key, the rest escaped.

    Without keys (the common case) one C-level repeat; keys without newlines one join and
    escape; only a mix of missing keys and keys goes key by key."""
    missing = keys.count(None)
    if missing == len(keys):
        return b"\\N\n" * missing
    if not missing:
        joined = b"\n".join(keys)  # type: ignore[arg-type]  # (no None among them)
        if joined.count(b"\n") == len(keys) - 1:
            return _escape_raw(joined) + b"\n"
    return b"".join(b"\\N\n" if k is None else _escape_raw(k).replace(b"\n", b"\\n") + b"\n" for k in keys)


def _escape_raw(chunk: bytes) -> bytes:
    """Raw messages as escaped text fields: backslash, tab and CR escaped (newlines apart)."""
    return chunk.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\r", b"\\r")


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
