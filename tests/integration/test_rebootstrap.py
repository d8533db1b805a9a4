"""Rebootstrap on a real broker (KIP-899, KIP-1102): a producer, a group consumer and an admin
client whose known brokers stop serving them go on by themselves with the cluster that answers at
their bootstrap address.

The clients bootstrap through an AdvertisingProxy (the bootstrap address), which makes the broker
advertise a FaultProxy in front of itself (itself in front of another AdvertisingProxy, so that
the answers through it name it too): those are the brokers the clients know, and through which
they produce, fetch, heartbeat and commit. Then that FaultProxy is black-holed (connections
are taken, and kept, and nothing is answered, as a dead proxy or a broker cut off behind a load
balancer) and the bootstrap address advertises the broker's own address again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from fakes.advertising_proxy import AdvertisingProxy

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer
from kafka_core.devtools.chaos.proxy import FaultProxy
from kafka_core.errors import KafkaConnectionError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

TRIGGER_MS = 10_000
OPTIONS = {
    "request_timeout_ms": 3_000,
    "connect_timeout_ms": 3_000,
    "retry_backoff_max_ms": 500,
    "metadata_recovery_rebootstrap_trigger_ms": TRIGGER_MS,
}


def _read(consumer: KafkaConsumer, want: set[bytes], seconds: float) -> set[bytes]:
    """Poll until ``want`` came; poll saying the consumer is cut off (its known brokers answer
    nothing for request_timeout_ms) is retriable, as documented: polled on."""
    got: set[bytes] = set()
    deadline = time.monotonic() + seconds
    while not want <= got and time.monotonic() < deadline:
        try:
            got |= {m.value for m in consumer.poll(timeout_ms=500) if m.value is not None}
        except KafkaConnectionError as exc:
            print(f"poll: {exc}")
    return got


def test_producer_group_consumer_and_admin_go_on_with_the_cluster_at_the_bootstrap_address(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1, prefix="rebootstrap")
    host, port = bootstrap_servers.rsplit(":", 1)
    # The known brokers: a FaultProxy in front of a proxy that makes every answer through it
    # name that FaultProxy again (else its Metadata would name the broker's own address).
    with AdvertisingProxy(host, int(port)) as front, AdvertisingProxy(host, int(port)) as inner:
        old = FaultProxy("127.0.0.1", inner.port).start()
        try:
            inner.advertise = front.advertise = ("127.0.0.1", old.port)
            producer = KafkaProducer(front.address, linger_ms=0, delivery_timeout_ms=120_000, **OPTIONS)
            consumer = KafkaConsumer(
                bootstrap_servers=front.address,
                topics=[topic],
                group_id=f"rebootstrap-{uuid.uuid4().hex[:8]}",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=45_000,
                **OPTIONS,
            )
            admin = KafkaAdmin(front.address, **OPTIONS)
            try:
                producer.send(topic, b"before", partition=0).result(60)
                assert _read(consumer, {b"before"}, 60) == {b"before"}
                consumer.commit()
                assert topic in admin.list_topics()
                assert old.connections > 0  # the clients talk to the brokers they were told of
                assert front.rewritten > 0
                before = old.connections

                old.stall(3_600)  # the known brokers: connections taken, nothing answered
                front.advertise = None  # the bootstrap address: the live broker, as it advertises itself
                moved = time.monotonic()
                served = inner.rewritten
                producer.send(topic, b"after", partition=0).result(TRIGGER_MS / 1000 + 60)
                produced_in = time.monotonic() - moved
                assert _read(consumer, {b"after"}, TRIGGER_MS / 1000 + 60) == {b"after"}
                consumed_in = time.monotonic() - moved
                consumer.commit()
                assert topic in admin.list_topics(timeout_ms=TRIGGER_MS + 60_000)
                admin_in = time.monotonic() - moved
                assert inner.rewritten == served  # nothing came through the black-holed brokers
                assert old.connections >= before
                print(
                    f"after the move: produced in {produced_in:.1f}s, consumed in {consumed_in:.1f}s, "
                    f"admin in {admin_in:.1f}s (trigger {TRIGGER_MS / 1000:.0f}s)"
                )
            finally:
                consumer.close()
                producer.close()
                admin.close()
        finally:
            old.close()
