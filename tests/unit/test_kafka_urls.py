"""Kafka source URLs and unit keys."""

from __future__ import annotations

import pytest

from chute.errors import UsageError
from chute.sources.kafka import KafkaSpec, display_url, parse_key, unit_key, with_options


def test_urls_and_unit_keys() -> None:
    spec = KafkaSpec.parse(["kafka://b1:9092,b2:9092/a,b?format=raw&start=2024-05-01T00:00:00Z&batch=10"])
    assert (spec.bootstrap, spec.topics, spec.message_format, spec.batch) == ("b1:9092,b2:9092", ("a", "b"), "raw", 10)
    assert spec.host == "b1:9092"
    key = unit_key("b1:9092", "a", 2, 100, 200)
    assert key == "kafka://b1:9092/a/2#offsets=[100,200)"
    found = parse_key(key)
    assert found is not None and (found.topic, found.partition, found.start, found.end) == ("a", 2, 100, 200)
    for bad in ("kafka://b:1", "kafka://b:1/bad topic", "kafka://b:1/t?nope=1", "kafka://b:1/t?batch=0"):
        with pytest.raises(UsageError):
            KafkaSpec.parse([bad])
    with pytest.raises(UsageError):
        KafkaSpec.parse(["kafka://b:1/t"], "parquet")
    login = KafkaSpec.parse(["kafka://me:pa%40ss@b1:9092/t?sasl_mechanism=scram-sha-512"])
    assert (login.user, login.password, login.host, login.sasl_mechanism) == ("me", "pa@ss", "b1:9092", "SCRAM-SHA-512")
    assert "pa%40ss" not in repr(login) and "pa@ss" not in repr(login)
    assert display_url("kafka://me:pa%40ss@b1:9092/t") == "kafka://me:***@b1:9092/t"
    with pytest.raises(UsageError) as refused:
        KafkaSpec.parse(["kafka://me:hunter2@b1:9092/bad topic"])
    assert "hunter2" not in str(refused.value)
    flagged = with_options(["kafka://b:1/t?batch=5", "x.json"], group="g", start=None)
    assert flagged == ["kafka://b:1/t?batch=5&group=g", "x.json"]
    assert KafkaSpec.parse(flagged[:1]).group == "g"
