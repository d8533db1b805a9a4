"""Transactional data: control markers are never handed over; read_committed hides aborted records."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from test_consumer import drain

from kafka_core.consumer.sync import KafkaConsumer

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


def write_transactions(bootstrap: str, topic: str) -> None:
    """committed k0-k4, aborted a0-a4, committed k5-k9, then one plain record."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    for keys, commit in ((range(0, 5), True), (range(5), False), (range(5, 10), True)):
        p.begin_transaction()
        for i in keys:
            p.produce(topic, key=(b"k%d" if commit else b"a%d") % i, value=b"v", partition=0)
        assert p.flush(30) == 0  # written to the log before the outcome is decided
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, key=b"plain", value=b"v", partition=0)
    assert plain.flush(30) == 0


def test_read_uncommitted_skips_markers_only(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    write_transactions(bootstrap_servers, topic)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="earliest"
    ) as c:
        got = drain(c, 16)
        assert c.poll(300) == []
    keys = [m.key for m in got]
    assert keys == [b"k%d" % i for i in range(5)] + [b"a%d" % i for i in range(5)] + [
        b"k%d" % i for i in range(5, 10)
    ] + [b"plain"]
    # Offsets have gaps where the commit/abort markers sit.
    offsets = [m.offset for m in got]
    assert offsets == sorted(offsets) and offsets[-1] > len(offsets) - 1


@pytest.mark.tansu_deviation("aborted records are still delivered to read_committed consumers")
def test_read_committed_hides_aborted(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    write_transactions(bootstrap_servers, topic)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        topics=[topic],
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    ) as c:
        got = drain(c, 11)
        assert c.poll(300) == []
    assert [m.key for m in got] == [b"k%d" % i for i in range(10)] + [b"plain"]
