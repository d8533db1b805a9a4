"""What confluent-kafka (librdkafka) and kafka-python produce, we consume exactly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from fakes.stamps import RECENT_MS
from prerequisites import need_module

from kafka_core.consumer.sync import KafkaConsumer

pytestmark = [pytest.mark.broker, pytest.mark.interop, pytest.mark.timeout(180)]

COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]


def expected(n: int, *, null_headers: bool = True) -> list[tuple[bytes | None, bytes | None, list, int]]:
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else b"key-%d" % i
        value = None if i % 11 == 5 and key is not None else (b"\x00\xff" * (i % 50)) + b"value-%d" % i
        null = None if null_headers else b"-"  # kafka-python refuses null header values
        headers = [] if i % 4 == 0 else [("h1", b"a%d" % i), ("h\u00e9", null), ("h1", b"")]
        out.append((key, value, headers, RECENT_MS + i * 1000))
    return out


def consume_all(bootstrap: str, topic: str, n: int, columns: bool = False) -> list[Any]:
    got: list[Any] = []
    with KafkaConsumer(bootstrap_servers=bootstrap, topics=[topic], auto_offset_reset="earliest") as c:
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            if columns:
                b = c.poll_columns(500)
                if b is not None:
                    got.extend(b.to_pylist())
            else:
                got.extend(c.poll(500))
        assert c.poll(200) == []
    return sorted(got, key=lambda m: m["offset"] if columns else m.offset)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_from_confluent_kafka(
    bootstrap_servers: str, new_topic: Callable[..., str], compression: str
) -> None:
    from confluent_kafka import Producer

    topic = new_topic(1)
    want = expected(200)
    p = Producer({"bootstrap.servers": bootstrap_servers, "compression.type": compression, "linger.ms": 20})
    for key, value, headers, ts in want:
        p.produce(topic, key=key, value=value, headers=headers or None, timestamp=ts, partition=0)
    assert p.flush(30) == 0
    got = consume_all(bootstrap_servers, topic, len(want))
    assert [(m.key, m.value, m.headers, m.timestamp) for m in got] == want
    assert [m.offset for m in got] == list(range(len(want)))
    assert {m.timestamp_type for m in got} == {0}
    rows = consume_all(bootstrap_servers, topic, len(want), columns=True)
    assert [(r["key"], r["value"]) for r in rows] == [(k, v) for k, v, _, _ in want]
    assert [[(h["key"], h["value"]) for h in r["headers"]] for r in rows] == [h for _, _, h, _ in want]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_from_kafka_python(bootstrap_servers: str, new_topic: Callable[..., str], compression: str) -> None:
    kafka = need_module("kafka")
    topic = new_topic(1)
    want = expected(150, null_headers=False)
    p = kafka.KafkaProducer(
        bootstrap_servers=bootstrap_servers,
        compression_type=None if compression == "none" else compression,
        linger_ms=20,
    )
    try:
        for key, value, headers, ts in want:
            p.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts, partition=0)
        p.flush(30)
    finally:
        p.close(10)
    got = consume_all(bootstrap_servers, topic, len(want))
    assert [(m.key, m.value, m.headers, m.timestamp) for m in got] == want
