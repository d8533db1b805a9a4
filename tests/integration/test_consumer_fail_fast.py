"""The consumer against a real broker that goes away: it resumes by itself, and says why it waits.

A persistent Tansu (S3 storage on moto_server, ``TansuBroker.persistent``) of this module's own
is stopped for 25 s while a consumer polls, then started again: every record written before and
after must be delivered, and every poll must have returned within its timeout. Records are
written with confluent-kafka, so only our consumer is under test. Bounds carry 3 s of slack:
they check that a timeout was honoured, never a speed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafka_core import KafkaConsumer
from kafka_core.devbroker import TansuBroker
from kafka_core.errors import KafkaConnectionError, KafkaError, KafkaProtocolError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

PARTITIONS = 3
OUTAGE_S = 25.0
POLL_MS = 500
SLACK = 3.0


@pytest.fixture
def broker(persistent_tansu: TansuBroker) -> TansuBroker:
    persistent_tansu.start()  # a no-op unless an earlier test failed while it was down
    return persistent_tansu


def produce(broker: TansuBroker, topic: str, numbers: range) -> None:
    """Write numbered records with confluent-kafka (an independent client), all acknowledged."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in numbers:
        producer.produce(topic, b"rec-%08d" % i, on_delivery=lambda err, _msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0, "records still unacknowledged after 60 s"
    assert not errors, errors[:3]


class Reader:
    """Polls and checks that each poll returned within its timeout; tallies what came."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self.seen: dict[int, int] = {}  # record number -> times delivered
        self.errors: list[KafkaError] = []

    def poll(self) -> None:
        started = time.monotonic()
        try:
            messages = self.consumer.poll(POLL_MS)
        except KafkaConnectionError as exc:  # the outage, reported: the consumer keeps trying
            self.errors.append(exc)
            messages = []
        took = time.monotonic() - started
        assert took < POLL_MS / 1000 + SLACK, f"poll({POLL_MS}) took {took:.1f}s"
        for m in messages:
            n = int(m.value[4:])
            self.seen[n] = self.seen.get(n, 0) + 1

    def read_until(self, total: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.seen) < total and time.monotonic() < deadline:
            self.poll()
        missing = sorted(set(range(total)) - set(self.seen))
        assert not missing, (
            f"{len(missing)} of {total} records never delivered (e.g. {missing[:5]}); "
            f"errors raised by poll: {[str(e) for e in self.errors[-3:]]}"
        )


@pytest.mark.parametrize("group_id", [pytest.param(None, id="no-group"), pytest.param("g", id="group")])
def test_consumer_resumes_by_itself_after_a_25s_outage(broker: TansuBroker, group_id: str | None) -> None:
    topic = f"outage-{uuid.uuid4().hex[:10]}"
    broker.create_topic(topic, PARTITIONS)
    before, after = 3_000, 3_000
    produce(broker, topic, range(before))
    options: dict[str, Any] = {"auto_offset_reset": "earliest", "request_timeout_ms": 10_000}
    if group_id is not None:
        options.update(group_id=f"{group_id}-{uuid.uuid4().hex[:8]}", session_timeout_ms=6_000)
        options.update(heartbeat_interval_ms=1_000)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, **options)
    reader = Reader(consumer)
    try:
        reader.read_until(before, timeout=60)
        broker.stop()
        down_until = time.monotonic() + OUTAGE_S
        while time.monotonic() < down_until:  # a consumer polling right through the outage
            reader.poll()
        broker.start()
        # Longer than request_timeout_ms: poll said so, with the cause, rather than only [].
        assert reader.errors, "a 25 s outage went by without poll reporting it"
        assert "cut off" in str(reader.errors[0]) and "last error" in str(reader.errors[0])
        produce(broker, topic, range(before, before + after))
        reader.read_until(before + after, timeout=90)
        if group_id is None:  # positions only move on hand-over: nothing twice either
            assert set(reader.seen.values()) == {1}
    finally:
        started = time.monotonic()
        consumer.close(timeout=10)
        assert time.monotonic() - started < 10 + SLACK


def test_close_returns_within_its_timeout_while_the_broker_is_down(broker: TansuBroker) -> None:
    topic = f"outage-{uuid.uuid4().hex[:10]}"
    broker.create_topic(topic, PARTITIONS)
    produce(broker, topic, range(100))
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=f"close-{uuid.uuid4().hex[:8]}",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=1_000,
        auto_offset_reset="earliest",
    )
    reader = Reader(consumer)
    reader.read_until(100, timeout=60)
    broker.stop()
    try:
        started = time.monotonic()
        with pytest.raises(KafkaError) as info:  # the final commit cannot be made: said, in time
            consumer.close(timeout=3)
        assert time.monotonic() - started < 3 + SLACK
        # ... with the real cause: the broker refuses connections, not merely "cut short"
        assert "connect" in str(info.value).lower(), info.value
    finally:
        broker.start()


@pytest.mark.tansu_deviation(
    "JoinGroup takes any session timeout and answers only after half of it: a member with "
    "session_timeout_ms=10**9 waits silently (Apache Kafka rejects it, group.max.session.timeout.ms)"
)
def test_a_session_timeout_the_broker_refuses_is_raised_by_poll(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        group_id=f"s-{uuid.uuid4().hex[:8]}",
        session_timeout_ms=10**9,
    )
    try:
        deadline = time.monotonic() + 10
        with pytest.raises(KafkaProtocolError) as info:
            while time.monotonic() < deadline:
                consumer.poll(1_000)
        assert info.value.code == 26 and "session_timeout_ms=1000000000" in str(info.value)
    finally:
        consumer.close(timeout=5)
