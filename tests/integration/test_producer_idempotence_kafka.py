"""Issue 21 on Apache Kafka: an idempotent producer writing to a topic created a moment before.

Kafka names a new partition's leader in Metadata a moment before that broker leads it, so the
first Produce to it may be answered NOT_LEADER_OR_FOLLOWER; and Kafka takes any first sequence
from a producer it has no state for. A later batch pipelined behind the refused first one used to
be taken as the first, and the first could then never be written: the producer retried it until
``delivery_timeout_ms`` (a flush timed out). Every record must land exactly once, in send order
per partition.

Runs on Apache Kafka whatever the session's broker (``real_kafka``). Timeouts here are hang
guards, never measurements.
"""

from __future__ import annotations

import uuid

import pytest

from kafka_core import KafkaAdmin, KafkaProducer, NewTopic
from kafka_core.devbroker import KafkaCluster
from kafka_core.producer import RecordMetadata

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

PARTITIONS = 24
RECORDS = 6000
ROUNDS = 3


def _read_all(bootstrap: str, topic: str, partitions: int, total: int) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        logs: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        got = idle = 0
        while got < total and idle < 30:  # a hang guard: 30 empty polls of a second
            msg = consumer.poll(1.0)
            if msg is None:
                idle += 1
                continue
            assert msg.error() is None, msg.error()
            logs[msg.partition()].append(msg.value())
            got += 1
        for _ in range(3):  # anything written twice would show up here
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                logs[msg.partition()].append(msg.value())
        return logs
    finally:
        consumer.close()


def _produce_at_once(bootstrap: str, topic: str) -> tuple[list[tuple[int, bytes]], list[RecordMetadata]]:
    """Create ``topic`` and produce to it without waiting for its leaders."""
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result()
    sent: list[tuple[int, bytes]] = []
    with KafkaProducer(bootstrap, idempotent=True, max_in_flight=5, linger_ms=0, batch_size=2048) as producer:
        assert producer.idempotent
        futures = []
        for i in range(RECORDS):
            value = b"%06d-" % i + b"x" * 60
            p = i % PARTITIONS
            futures.append(producer.send(topic, value, partition=p))
            sent.append((p, value))
        producer.flush(timeout=120)
        metas = [f.result(timeout=0) for f in futures]
    return sent, metas


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_idempotent_producer_on_a_just_created_topic_writes_each_record_once_in_order(
    real_kafka: KafkaCluster, round_: int
) -> None:
    topic = f"idem-new-{uuid.uuid4().hex[:10]}"
    sent, metas = _produce_at_once(real_kafka.bootstrap, topic)
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for p, value in sent:
        expected[p].append(value)
    logs = _read_all(real_kafka.bootstrap, topic, PARTITIONS, RECORDS)
    assert logs == expected  # nothing lost, nothing twice, send order per partition
    for (p, value), meta in zip(sent, metas, strict=True):
        assert meta.partition == p and logs[p][meta.offset] == value
