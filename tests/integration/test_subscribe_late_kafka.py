"""Subscriptions made before their topic exists, on Apache Kafka (issue 32): every client polls
(or subscribes) first, then the topic is created (3 partitions, by the admin: the consumer must
not have auto-created it) and 5 records are produced; every record must arrive. The client
keeps asking for a wanted topic at the retry backoff and the group picks it up (the classic
leader rebalances, KIP-848 and share members heartbeat at once). The bound is a hang guard, not
a timing assertion. Runs on Apache Kafka in every session (``real_kafka``)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fakes.timing import wait_until

from kafka_core import (
    KafkaAdmin,
    KafkaConsumer,
    KafkaProducer,
    KafkaShareConsumer,
    KafkaStreamTransport,
    NewTopic,
)
from kafka_core.admin.results import ConfigResourceType
from kafka_core.devtools.brokers.kafka import KafkaCluster

pytestmark = pytest.mark.timeout(240)

GUARD_S = 60.0  # hang guard: the records come within about a second of the topic on Kafka 4.4
N = 5


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _create(bootstrap: str, topic: str, partitions: int = 3) -> None:
    """Create ``topic``; it must not exist yet (a consumer that auto-created it fails here)."""
    with KafkaAdmin(bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(topic, num_partitions=partitions)]).values()
        assert result.ok, f"creating {topic!r}: {result.error}"


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 3) -> None:
    with KafkaProducer(bootstrap_servers=bootstrap) as producer:
        for i, value in enumerate(values):
            producer.send(topic, value, partition=i % partitions).result(30)


def _late_topic_round(
    kafka: KafkaCluster, consumer: Any, topic: str, ready: Callable[[], bool]
) -> list[bytes]:
    """Poll until the subscription is in place and waiting (``ready``), then create and fill
    the topic; poll until every record came or the guard passed."""
    got: list[bytes] = []
    deadline = time.monotonic() + GUARD_S
    while not ready():
        assert time.monotonic() < deadline, "the subscription was never in place"
        got.extend(m.value for m in _poll(consumer))
    assert got == []
    values = [f"v{i}".encode() for i in range(N)]
    _create(kafka.bootstrap, topic)
    _produce(kafka.bootstrap, topic, values)
    deadline = time.monotonic() + GUARD_S
    while len(got) < N and time.monotonic() < deadline:
        got.extend(m.value for m in _poll(consumer))
    return sorted(got)


def _waiting_for(caplog: pytest.LogCaptureFixture, topic: str) -> Callable[[], bool]:
    """Whether the client said it waits for ``topic`` (its watch asks for it: the late path)."""
    return lambda: any(topic in r.getMessage() and "(yet)" in r.getMessage() for r in caplog.records)


def _joined(consumer: Any) -> Callable[[], bool]:
    return lambda: consumer.group_metadata().generation_id >= 0


def _poll(consumer: Any) -> list[Any]:
    return list(consumer.poll(timeout_ms=500))


def _expected() -> list[bytes]:
    return sorted(f"v{i}".encode() for i in range(N))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_consumer_gets_a_topic_created_after_it_subscribed(
    real_kafka: KafkaCluster, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = _name("late")
    with (
        caplog.at_level(logging.WARNING, logger="kafka_core.client.watch"),
        KafkaConsumer(
            bootstrap_servers=real_kafka.bootstrap,
            topics=[topic],
            group_id=_name("g"),
            group_protocol=protocol,
            auto_offset_reset="earliest",
        ) as consumer,
    ):
        got = _late_topic_round(real_kafka, consumer, topic, _waiting_for(caplog, topic))
        assert {tp.topic for tp in consumer.assignment()} == {topic}
    assert got == _expected()
    # Asked for at the fast cadence while missing, warned about once: no storm of lines.
    warnings = [r.getMessage() for r in caplog.records if topic in r.getMessage()]
    assert len(warnings) == 1 and "does not exist (yet)" in warnings[0]


def test_consumer_without_group_gets_a_topic_created_after_it_started(
    real_kafka: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic = _name("late")
    caplog.set_level(logging.WARNING, logger="kafka_core.client.watch")
    with KafkaConsumer(
        bootstrap_servers=real_kafka.bootstrap, topics=[topic], group_id=None, auto_offset_reset="earliest"
    ) as consumer:
        got = _late_topic_round(real_kafka, consumer, topic, _waiting_for(caplog, topic))
        assert consumer.assignment() == {(topic, p) for p in range(3)}
    assert got == _expected()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_pattern_subscription_gets_a_new_matching_topic(real_kafka: KafkaCluster, protocol: str) -> None:
    stem = _name("latepat")
    topic = f"{stem}-orders"
    with KafkaConsumer(
        bootstrap_servers=real_kafka.bootstrap,
        pattern=re.escape(stem) + r"-.*",
        group_id=_name("g"),
        group_protocol=protocol,
        auto_offset_reset="earliest",
    ) as consumer:
        got = _late_topic_round(real_kafka, consumer, topic, _joined(consumer))
    assert got == _expected()


def test_share_consumer_gets_a_topic_created_after_it_subscribed(
    real_kafka: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = _name("late"), _name("share-g")
    caplog.set_level(logging.WARNING, logger="kafka_core.client.watch")
    with KafkaAdmin(real_kafka.bootstrap) as admin:
        configs = {(ConfigResourceType.GROUP, group): {"share.auto.offset.reset": "earliest"}}
        for result in admin.incremental_alter_configs(configs).values():
            result.result()
    with KafkaShareConsumer(topic, bootstrap_servers=real_kafka.bootstrap, group_id=group) as consumer:
        got = _late_topic_round(real_kafka, consumer, topic, _waiting_for(caplog, topic))
    assert got == _expected()


def test_transport_handler_subscribed_before_the_first_publish(
    real_kafka: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic = _name("late")
    got: list[bytes] = []
    with (
        caplog.at_level(logging.WARNING, logger="kafka_core.client.watch"),
        KafkaStreamTransport(real_kafka.bootstrap) as transport,
    ):
        transport.subscribe(topic, _name("g"), lambda msg: got.append(msg.value))
        # The subscription's consumer is waiting for a topic nobody made yet.
        assert wait_until(lambda: any(topic in r.getMessage() for r in caplog.records), 30)
        for i in range(N):
            transport.publish(topic, f"v{i}".encode())  # the producer auto-creates the topic
        assert wait_until(lambda: len(got) >= N, GUARD_S)
    assert sorted(got) == _expected()


def test_deleted_and_recreated_topic_is_consumed_again(real_kafka: KafkaCluster) -> None:
    topic = _name("again")
    _create(real_kafka.bootstrap, topic, 2)
    _produce(real_kafka.bootstrap, topic, [b"old0", b"old1"], 2)
    with KafkaConsumer(
        bootstrap_servers=real_kafka.bootstrap,
        topics=[topic],
        group_id=_name("g"),
        auto_offset_reset="earliest",
    ) as consumer:
        got: list[bytes] = []
        deadline = time.monotonic() + GUARD_S
        while len(got) < 2 and time.monotonic() < deadline:
            got.extend(m.value for m in _poll(consumer))
        assert sorted(got) == [b"old0", b"old1"]
        with KafkaAdmin(real_kafka.bootstrap) as admin:
            for result in admin.delete_topics([topic]).values():
                result.result()
        # Deleted: the consumer polls on (the topic is wanted again), and takes the new one in.
        assert wait_until(lambda: not consumer.poll(timeout_ms=200) and not consumer.assignment(), GUARD_S)
        deadline = time.monotonic() + GUARD_S
        while time.monotonic() < deadline:
            try:
                _create(real_kafka.bootstrap, topic, 3)
                break
            except AssertionError:  # the deletion is still being carried out
                time.sleep(0.2)
        _produce(real_kafka.bootstrap, topic, [f"new{i}".encode() for i in range(N)], 3)
        again: list[bytes] = []
        deadline = time.monotonic() + GUARD_S
        while len(again) < N and time.monotonic() < deadline:
            again.extend(m.value for m in _poll(consumer))
    assert sorted(again) == sorted(f"new{i}".encode() for i in range(N))
