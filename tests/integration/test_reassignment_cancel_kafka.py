"""Cancelling a partition reassignment under way, on the three-node Apache Kafka (``kafka_three``).

A move can only be cancelled while it runs, and on loopback a small partition moves in well under
a second: a replication throttle (1 KiB/s on every node, every replica of the topic throttled)
holds the new replica behind a few MiB of data, so the move stays under way for as long as the
test needs it. Cancelled, the partition is back on its original replica alone (the one being added
dropped, its copy deleted), nothing under way, and every record still there.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from fakes.timing import wait_until
from fakes.topics import wait_writable

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, TopicPartition
from kafka_core.admin import ConfigResource
from kafka_core.devbroker import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

RATE = "1024"  # bytes/s: a few MiB take an hour to copy
RECORDS, RECORD_BYTES = 400, 10_000  # 4 MB, more than one replica fetch (1 MiB) carries
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture
def admin(kafka_three: KafkaCluster) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(kafka_three.bootstrap, api_timeout_ms=30_000) as a:
        yield a


@pytest.fixture
def throttled(kafka_three: KafkaCluster, admin: KafkaAdmin) -> Iterator[None]:
    """Every node's replication throttled to RATE while the test runs; removed after (the cluster
    is shared with the other three-node tests)."""
    brokers = [ConfigResource.broker(n.node_id) for n in kafka_three.nodes]
    rates = admin.incremental_alter_configs({b: dict.fromkeys(BROKER_THROTTLES, RATE) for b in brokers})
    assert all(r.error is None for r in rates.values()), rates
    try:
        yield
    finally:
        admin.incremental_alter_configs({b: dict.fromkeys(BROKER_THROTTLES) for b in brokers})


def placement(admin: KafkaAdmin, tp: TopicPartition) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader, replicas, isr) of the partition, from fresh metadata."""
    (p,) = [
        p
        for p in admin.describe_topics([tp.topic])[tp.topic].result().partitions
        if p.partition == tp.partition
    ]
    return p.leader, tuple(p.replicas), tuple(p.isr)


def holds(admin: KafkaAdmin, node: int, tp: TopicPartition) -> bool:
    """Whether ``node`` has a copy of the partition in one of its log dirs."""
    dirs = admin.describe_log_dirs([node], topics=[tp.topic])[node].result()
    return any(tp in d.replicas for d in dirs.values())


def test_a_throttled_move_cancelled_under_way_leaves_the_partition_where_it_was(
    kafka_three: KafkaCluster, admin: KafkaAdmin, throttled: None
) -> None:
    topic = f"cancel-{uuid.uuid4().hex[:10]}"
    kafka_three.create_topic(topic, 1, 1, dict.fromkeys(TOPIC_THROTTLES, "*"))
    wait_writable(kafka_three.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    with KafkaProducer(kafka_three.bootstrap, acks="all", linger_ms=5) as producer:
        futures = [
            producer.send(topic, i.to_bytes(4, "big") * (RECORD_BYTES // 4), partition=0)
            for i in range(RECORDS)
        ]
        for future in futures:
            future.result(60)
    source, (original,), _ = placement(admin, tp)
    assert source == original
    target = next(n.node_id for n in kafka_three.nodes if n.node_id != source)

    admin.alter_partition_reassignments({tp: [target]})[tp].result()
    assert wait_until(lambda: tp in admin.list_partition_reassignments([tp]), 30)
    under_way = admin.list_partition_reassignments([tp])[tp]
    assert set(under_way.replicas) == {source, target}
    assert under_way.adding == (target,) and under_way.removing == (source,)
    assert wait_until(lambda: holds(admin, target, tp), 30)  # the copy has begun on the target...
    leader, replicas, isr = placement(admin, tp)
    assert leader == source and set(replicas) == {source, target} and isr == (source,)  # ...not caught up

    cancelled = admin.alter_partition_reassignments({tp: None})
    assert cancelled[tp].error is None, cancelled[tp].error
    assert wait_until(lambda: admin.list_partition_reassignments([tp]) == {}, 60)
    assert wait_until(lambda: placement(admin, tp) == (source, (source,), (source,)), 60)
    assert wait_until(lambda: not holds(admin, target, tp), 60)  # the partial copy deleted
    again = admin.alter_partition_reassignments({tp: None})
    assert again[tp].error is not None and again[tp].error.name == "NO_REASSIGNMENT_IN_PROGRESS"

    # Every record is still there, in order, on the original replica.
    read: list[int] = []
    with KafkaConsumer(
        topic, bootstrap_servers=kafka_three.bootstrap, group_id=None, auto_offset_reset="earliest"
    ) as consumer:
        deadline = time.monotonic() + 60
        while len(read) < RECORDS and time.monotonic() < deadline:
            read += [int.from_bytes((m.value or b"")[:4], "big") for m in consumer.poll(timeout_ms=500)]
    assert read == list(range(RECORDS))
