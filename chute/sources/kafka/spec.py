"""kafka:// URLs and their options, and the ledger names of units."""

from __future__ import annotations

import datetime
import json
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from chute.errors import UsageError

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

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
KEY = re.compile(
    r"^kafka://(?P<host>[^/]*)/(?P<topic>[^/]+)/(?P<partition>\d+)#offsets=\[(?P<start>\d+),(?P<end>\d+)\)$"
)


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


def parse_time(text: str) -> int:
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
        urls = _Urls.read(patterns)
        if len(urls.bootstraps) > 1:
            raise UsageError("one Kafka cluster per load: the URLs name different brokers")
        if len(urls.logins) > 1:
            raise UsageError("one Kafka login per load: the URLs name different users")
        user, password = urls.logins.pop()
        params = urls.params
        options = {"format", "start", "group", "batch", "max_units", "schema", "sasl_mechanism", "tls", "ca"}
        unknown = set(params) - options
        if unknown:
            known = ", ".join(sorted(options))
            raise UsageError(f"kafka sources: unknown option {', '.join(sorted(unknown))} (known: {known})")
        fmt, avro_schema = _message_format(params, format_override)
        start = params.get("start", "earliest")
        if start not in ("earliest", "latest"):
            parse_time(start)
        numbers: dict[str, int | None] = {}
        for name in ("batch", "max_units"):
            text = params.get(name)
            if text is not None and (not text.isdigit() or int(text) < 1):
                raise UsageError(f"kafka sources: {name}= takes a positive number")
            numbers[name] = int(text) if text else None
        mechanism, ca = _security_params(params)
        return cls(
            urls.bootstraps.pop(),
            tuple(urls.topics),
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


@dataclass
class _Urls:
    """What the kafka:// URLs of one load name, before the options are checked."""

    bootstraps: set[str] = field(default_factory=set)
    topics: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    logins: set[tuple[str | None, str | None]] = field(default_factory=set)

    @classmethod
    def read(cls, patterns: list[str]) -> _Urls:
        urls = cls()
        for pattern in patterns:
            parts = urllib.parse.urlsplit(pattern)
            shown = display_url(pattern)
            userinfo, _, hosts = parts.netloc.rpartition("@")
            if parts.scheme.lower() != "kafka" or not hosts:
                raise UsageError(f"{shown}: give kafka://[user[:password]@]host:port[,host:port]/topic[,topic]")
            urls.bootstraps.add(hosts)
            if userinfo:
                login, colon, secret = userinfo.partition(":")
                urls.logins.add((urllib.parse.unquote(login), urllib.parse.unquote(secret) if colon else None))
            else:
                urls.logins.add((None, None))
            names = [t for t in parts.path.strip("/").split(",") if t]
            if not names:
                raise UsageError(f"{shown}: no topic given (kafka://host:port/topic)")
            for name in names:
                if not TOPIC.match(name):
                    raise UsageError(f"{shown}: {name!r} is not a Kafka topic name")
                if name not in urls.topics:
                    urls.topics.append(name)
            for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
                if name in urls.params and urls.params[name] != value:
                    raise UsageError(f"kafka sources: {name}= given twice with different values")
                urls.params[name] = value
        return urls


def _message_format(params: dict[str, str], format_override: str | None) -> tuple[str, str]:
    """The message format, and the writer's schema for Avro messages ("" otherwise)."""
    fmt = (params.get("format") or format_override or "json").lower()
    if fmt not in MESSAGE_FORMATS:
        raise UsageError(f"kafka sources: format={fmt} is not supported; json, csv, raw, avro or avro-confluent")
    avro_schema = ""
    if fmt in AVRO_FORMATS:
        avro_schema = _read_schema(params.get("schema"))
    elif params.get("schema"):
        raise UsageError("kafka sources: schema= is for format=avro or avro-confluent")
    return fmt, avro_schema


def _security_params(params: dict[str, str]) -> tuple[str, str | None]:
    """The SASL mechanism and the CA file, checked; `tls=` is checked to be 0 or 1."""
    mechanism = params.get("sasl_mechanism", "PLAIN").upper()
    if mechanism not in SASL_MECHANISMS:
        raise UsageError(f"kafka sources: sasl_mechanism={mechanism}: one of {', '.join(SASL_MECHANISMS)}")
    if params.get("tls", "0") not in ("0", "1"):
        raise UsageError("kafka sources: tls= takes 0 or 1")
    ca = params.get("ca") or None
    if ca is not None and not os.path.isfile(ca):
        raise UsageError(f"kafka sources: ca={ca}: no such file")
    return mechanism, ca


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
