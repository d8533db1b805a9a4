"""What our producer writes, the peer clients read exactly; keyed records land where theirs do."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fakes.stamps import RECENT_MS

from kafka_core.producer import KafkaProducer, murmur2_partition

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]


N = 400


def _records() -> list[dict[str, Any]]:
    return [
        {
            "key": None if i % 7 == 0 else b"key-%d" % (i % 37),
            "value": None if i % 50 == 49 else b"value-%d-" % i + bytes(range(i % 256)),
            "headers": [] if i % 3 else [("h1", b"x%d" % i), ("empty", b""), ("null", None)],
            "timestamp": RECENT_MS + i * 1000,
        }
        for i in range(N)
    ]


def _produce(bootstrap: str, topic: str, compression: str = "none") -> list[tuple[dict[str, Any], Any]]:
    records = _records()
    with KafkaProducer(bootstrap, compression=compression, linger_ms=2, batch_size=8192) as p:
        futures = [
            p.send(topic, r["value"], key=r["key"], headers=r["headers"], timestamp_ms=r["timestamp"])
            for r in records
        ]
        p.flush(60)
        return [(r, f.result(0)) for r, f in zip(records, futures, strict=True)]


def _check(sent: list[tuple[dict[str, Any], Any]], got: dict[tuple[int, int], dict[str, Any]]) -> None:
    assert len(got) == len(sent)
    for record, meta in sent:
        if record["key"] is not None:
            assert meta.partition == murmur2_partition(record["key"], 3)
        seen = got[(meta.partition, meta.offset)]
        assert seen["key"] == record["key"]
        assert seen["value"] == record["value"]
        assert seen["timestamp"] == record["timestamp"]
        assert seen["headers"] == record["headers"]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_reads_what_we_produce(
    bootstrap_servers: str, new_topic: Callable[..., str], compression: str
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = new_topic(3)
    sent = _produce(bootstrap_servers, topic, compression)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "fetch.wait.max.ms": 100,
        }
    )
    got: dict[tuple[int, int], dict[str, Any]] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, m.error()
                got[(m.partition(), m.offset())] = {
                    "key": m.key(),
                    "value": m.value(),
                    "timestamp": m.timestamp()[1],
                    "headers": list(m.headers() or []),
                }
    finally:
        consumer.close()
    _check(sent, got)


def test_kafka_python_reads_what_we_produce(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = new_topic(3)
    sent = _produce(bootstrap_servers, topic, "gzip")
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    got: dict[tuple[int, int], dict[str, Any]] = {}
    try:
        parts = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                for m in batch:
                    got[(m.partition, m.offset)] = {
                        "key": m.key,
                        "value": m.value,
                        "timestamp": m.timestamp,
                        "headers": [(k, v) for k, v in m.headers],
                    }
    finally:
        consumer.close()
    _check(sent, got)


def test_keyed_partitions_match_librdkafka_murmur2(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """librdkafka's murmur2_random (Java-compatible) and we put every key on the same partition."""
    from confluent_kafka import Producer

    topic = new_topic(3)
    keys = [b"user-%d" % i for i in range(200)] + [b"", b"a", b"ab", b"abc", bytes(range(256))]
    theirs: dict[bytes, int] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        theirs[msg.key()] = msg.partition()

    peer = Producer({"bootstrap.servers": bootstrap_servers, "partitioner": "murmur2_random"})
    for k in keys:
        peer.produce(topic, b"v", key=k, on_delivery=on_delivery)
    assert peer.flush(60) == 0
    with KafkaProducer(bootstrap_servers) as p:
        ours = {k: p.send(topic, b"v", key=k) for k in keys}
        p.flush(60)
    for k in keys:
        assert ours[k].result(0).partition == theirs[k] == murmur2_partition(k, 3)


def test_keyed_partitions_match_kafka_python(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    from kafka import KafkaProducer as PeerProducer

    topic = new_topic(3)
    keys = [b"order-%d" % i for i in range(100)]
    peer = PeerProducer(bootstrap_servers=bootstrap_servers)
    try:
        theirs = {k: peer.send(topic, b"v", key=k) for k in keys}
        peer.flush(60)
        their_parts = {k: f.get(30).partition for k, f in theirs.items()}
    finally:
        peer.close()
    with KafkaProducer(bootstrap_servers) as p:
        ours = {k: p.send(topic, b"v", key=k) for k in keys}
        p.flush(60)
    assert {k: f.result(0).partition for k, f in ours.items()} == their_parts
