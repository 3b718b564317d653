"""The client: confluent-kafka settings, and the metadata consumer of a source."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chute.errors import SourceError, UsageError
from chute.sources.kafka.spec import KafkaSpec, parse_time

TIMEOUT = 15.0
"""Seconds for metadata and offset queries."""
PASSWORD_VARIABLE = "KAFKA_PASSWORD"
"""Where the SASL password comes from when neither the URL nor --password-file gives it."""

logger = logging.getLogger("chute.kafka")
logger.addHandler(logging.NullHandler())
logger.propagate = False


def kafka_lib() -> Any:
    """confluent_kafka, imported on first use: it is an optional dependency."""
    try:
        import confluent_kafka
    except ImportError:
        raise UsageError("kafka:// sources need the confluent-kafka package: pip install 'chute[kafka]'") from None
    return confluent_kafka


def resolve_password(spec: KafkaSpec, password_file: str | None) -> str | None:
    """The SASL password: from the URL, else `--password-file`, else $KAFKA_PASSWORD."""
    if spec.user is None:
        return None
    if spec.password is not None:
        return spec.password
    if password_file:
        try:
            return Path(password_file).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as exc:
            raise UsageError(f"--password-file {password_file}: {exc.strerror or exc}") from None
    found = os.environ.get(PASSWORD_VARIABLE)
    if found is None:
        raise UsageError(
            f"kafka sources: user {spec.user} needs a password: in the URL, --password-file or ${PASSWORD_VARIABLE}"
        )
    return found


def security_config(spec: KafkaSpec, password: str | None) -> dict[str, Any]:
    """librdkafka settings for SASL and TLS; the password goes nowhere else."""
    config: dict[str, Any] = {}
    if spec.user is not None:
        config["security.protocol"] = "SASL_SSL" if spec.tls else "SASL_PLAINTEXT"
        config.update({"sasl.mechanism": spec.sasl_mechanism, "sasl.username": spec.user})
        config["sasl.password"] = password
    elif spec.tls:
        config["security.protocol"] = "SSL"
    if spec.ca:
        config["ssl.ca.location"] = spec.ca
    return config


def consumer_configs(spec: KafkaSpec, password: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """librdkafka settings of a source's consumers: (the metadata consumer's, the readers')."""
    config: dict[str, Any] = {
        "bootstrap.servers": spec.bootstrap,
        "group.id": spec.group or "chute",
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
    config.update(security_config(spec, password))
    # Each partition's reader prefetches into librdkafka's queue on its own: small queues, since
    # a reader per partition holds one. With 64 MiB fetches and queues a 1 M-message load of 3
    # partitions peaked at 530 MiB fetching alone; with these, 270 MiB at the same speed
    # (docs/internals/kafka.md).
    reader_config = {
        **config,
        "fetch.max.bytes": 8 * 2**20,
        "max.partition.fetch.bytes": 2 * 2**20,
        "queued.max.messages.kbytes": 8 * 1024,
        "queued.min.messages": 10_000,
    }
    # Metadata, offsets and one-message probes: small fetches, so that moving on is quick.
    config.update({"max.partition.fetch.bytes": 65536, "fetch.max.bytes": 2**20, "fetch.queue.backoff.ms": 0})
    return config, reader_config


class Admin:
    """A source's one metadata consumer: partitions, end and start offsets, probes, group commits.

    The consumer is made on first use and kept in `held` (the source's resources,
    closed with it); `on_error` is its error callback, where a refused login is said.
    """

    def __init__(
        self,
        spec: KafkaSpec,
        config: dict[str, Any],
        held: list[Any],
        lock: threading.Lock,
        password: str | None,
        on_error: Callable[[Any], None],
    ) -> None:
        self.spec = spec
        self.config = config
        self.held = held
        self.lock = lock
        self.probe_lock = threading.Lock()
        self.password = password
        self.on_error = on_error
        self.login_error = ""

    def scrub(self, text: str) -> str:
        """`text` without the SASL password (a second line of defence: no message should hold it)."""
        return text.replace(self.password, "***") if self.password else text

    def consumer(self) -> Any:
        with self.lock:
            if not self.held:
                config = {**self.config, "error_cb": self.on_error}
                self.held.append(kafka_lib().Consumer(config, logger=logger))
            return self.held[0]

    def partitions(self) -> dict[str, list[int]]:
        kafka = kafka_lib()
        consumer = self.consumer()
        found: dict[str, list[int]] = {}
        for topic in self.spec.topics:
            deadline = time.monotonic() + TIMEOUT
            while True:  # short waits, so that a refused login ends it at once
                try:
                    meta = consumer.list_topics(topic, timeout=0.5)
                    break
                except kafka.KafkaException as exc:
                    consumer.poll(0)  # serves error_cb, where a refused login is said
                    if self.login_error:
                        raise SourceError(
                            f"kafka://{self.spec.host}: login as {self.spec.user} refused ({self.login_error})"
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

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        kafka = kafka_lib()
        try:
            low, high = self.consumer().get_watermark_offsets(
                kafka.TopicPartition(topic, partition), timeout=TIMEOUT, cached=False
            )
        except kafka.KafkaException as exc:
            raise SourceError(f"kafka://{self.spec.host}/{topic}/{partition}: no end offsets ({exc.args[0]})") from None
        return int(low), int(high)

    def start_offset(self, topic: str, partition: int, low: int, high: int) -> int:
        """Where a partition the ledger does not know starts."""
        if self.spec.start == "earliest":
            return low
        if self.spec.start == "latest":
            return high
        kafka = kafka_lib()
        wanted = kafka.TopicPartition(topic, partition, parse_time(self.spec.start))
        try:
            (found,) = self.consumer().offsets_for_times([wanted], timeout=TIMEOUT)
        except kafka.KafkaException as exc:
            raise SourceError(f"kafka://{self.spec.host}/{topic}/{partition}: {exc.args[0]}") from None
        return high if found.offset < 0 else max(low, int(found.offset))

    def probe(self, topic: str, partition: int, start: int, end: int) -> tuple[int, int]:
        """(timestamp ms, bytes) of the last message below `end`, cheaply: one small fetch.

        Gives the unit its time (what `_source_mtime` says) and a size estimate."""
        kafka = kafka_lib()
        consumer = self.consumer()
        with self.probe_lock:
            consumer.assign([kafka.TopicPartition(topic, partition, max(start, end - 1))])
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                for m in consumer.consume(1, 0.5):
                    if m.error() is None and m.offset() < end:
                        return max(0, m.timestamp()[1]), len(m.value() or b"") + 1
                    return 0, 0  # a marker or a gap ends the unit: no sample
        return 0, 0

    def commit(self, positions: list[tuple[str, int, int]], notes: list[str]) -> None:
        """Tell the group how far the ledger got (information only; never read back);
        a failure is a note of the run."""
        kafka = kafka_lib()
        offsets = [kafka.TopicPartition(t, p, o) for t, p, o in positions]
        try:
            self.consumer().commit(offsets=offsets, asynchronous=False)
        except kafka.KafkaException as exc:
            notes.append(f"group {self.spec.group}: offsets not committed ({exc.args[0]})")
