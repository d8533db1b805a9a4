"""Batch reads side by side (see test_diff_batch.py): records deleted, a topic recreated, and
gaps in offsets from compaction and transactions."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import CONNECTOR, OURS, T0, Differ, Rec, sample_records, wait_ready

# -- deleted records, a recreated topic ------------------------------------------------------


@pytest.fixture(scope="module")
def truncated(make_topic: Callable[..., str], produce: Callable[..., None], admin: Any) -> str:
    """One partition of 30 records, the first 10 deleted (DeleteRecords)."""
    from kafka_core import TopicPartition

    topic = make_topic(1)
    produce(topic, sample_records(0, 30))
    admin.delete_records({TopicPartition(topic, 0): 10})[TopicPartition(topic, 0)].result()
    return topic


def test_deleted_records_are_not_loss_from_earliest(differ: Differ, truncated: str) -> None:
    out = differ.read({"subscribe": truncated})
    assert out.offsets(truncated, 0) == list(range(10, 30))


def test_deleted_records_fail_on_data_loss(differ: Differ, truncated: str) -> None:
    options = {"subscribe": truncated, "startingOffsets": json.dumps({truncated: {"0": 4}})}
    differ.fail(options, ours=["failOnDataLoss"], theirs=["failOnDataLoss"])


def test_deleted_records_skipped_without_fail_on_data_loss(differ: Differ, truncated: str) -> None:
    options = {
        "subscribe": truncated,
        "startingOffsets": json.dumps({truncated: {"0": 4}}),
        "failOnDataLoss": "false",
    }
    out = differ.read(options)
    assert out.offsets(truncated, 0) == list(range(10, 30))


@pytest.fixture(scope="module")
def recreated(make_topic: Callable[..., str], produce: Callable[..., None], admin: Any) -> str:
    """A topic of 30 records deleted and made again with 10 others."""
    from kafka_core import NewTopic

    topic = make_topic(1)
    produce(topic, sample_records(0, 30))
    admin.delete_topics([topic])[topic].result()
    deadline = time.monotonic() + 60
    while True:  # the name is free again once the controller finished the deletion
        result = admin.create_topics([NewTopic(topic, 1, -1)])[topic]
        if result.ok or time.monotonic() > deadline:
            result.result()
            break
        time.sleep(0.5)
    wait_ready(admin, topic, 1)
    produce(topic, sample_records(0, 10, tag="again"))
    return topic


def test_recreated_topic_is_read_anew(differ: Differ, recreated: str) -> None:
    out = differ.read({"subscribe": recreated})
    assert out.count == 10 and all(v is None or v.startswith(b"again") for v in out.values())


def test_recreated_topic_offsets_past_its_end_fail(differ: Differ, recreated: str) -> None:
    options = {"subscribe": recreated, "startingOffsets": json.dumps({recreated: {"0": 20}})}
    differ.fail(options, ours=["failOnDataLoss"], theirs=["greater than the resolved end offset"])


def test_recreated_topic_offsets_past_its_end_without_fail_on_data_loss(
    differ: Differ, recreated: str
) -> None:
    """On purpose (docs/spark.md): Spark fails whatever failOnDataLoss says; kafka_core skips the
    partition with a warning, as failOnDataLoss=false asks."""
    options = {
        "subscribe": recreated,
        "startingOffsets": json.dumps({recreated: {"0": 20}}),
        "failOnDataLoss": "false",
    }
    message, _ = differ.error(CONNECTOR, options)
    assert "greater than the resolved end offset" in message
    assert differ.run(OURS, options).count == 0


# -- gaps: compaction, transactions ----------------------------------------------------------


def _visible(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[int]:
    """The offsets a consumer sees in partition 0, from the start to the end now."""
    from kafka_core import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    with KafkaConsumer(
        bootstrap_servers=bootstrap,
        partitions={topic: [0]},
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    ) as consumer:
        end = consumer.end_offsets([tp])[tp]
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while (consumer.position(tp) or 0) < end and time.monotonic() < deadline:
            seen.extend(m.offset for m in consumer.poll(500))
        return seen


@pytest.fixture(scope="module")
def compacted(make_topic: Callable[..., str], bootstrap: str, admin: Any) -> str:
    """A compacted topic whose log has gaps (records of repeated keys removed by the cleaner), then
    left alone: the cleaner must not remove more between one format's read and the other's."""
    from kafka_core import KafkaProducer
    from kafka_core.admin import ConfigResource

    topic = make_topic(
        1,
        configs={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "100",
        },
    )
    # One producer for all: the cleaner keeps each producer's last batch (its idempotence state),
    # so the records to compact must not be a producer's last.
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(40):
            key = b"dup" if i % 2 == 0 else f"key{i}".encode()  # the cleaner keeps only the last dup
            producer.send(topic, f"v{i}".encode(), key=key, partition=0, timestamp_ms=T0 + i)
        producer.flush()
        deadline = time.monotonic() + 90
        while True:
            # then a record stamped now rolls the segment (Kafka rolls on the record's timestamp
            # against the segment's first): only closed segments are cleaned
            time.sleep(0.3)
            producer.send(topic, b"r", key=b"roll", partition=0).get(30)
            seen = _visible(bootstrap, topic)
            if seen and seen[0] > 0:  # offset 0 (a dup) is gone: compacted
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the log cleaner left {topic} without gaps: {seen}")
    # Each pass of the loop wrote a "roll" record, and the cleaner would go on removing all but the
    # last: with the policy "delete" and no retention limit it stops, once a pass under way ends
    # (the log reads the same twice, a second apart).
    resource = ConfigResource.topic(topic)
    admin.incremental_alter_configs({resource: {"cleanup.policy": "delete", "retention.ms": "-1"}})[
        resource
    ].result()
    before = _visible(bootstrap, topic)
    deadline = time.monotonic() + 60
    while True:
        time.sleep(1.0)
        now = _visible(bootstrap, topic)
        if now == before:
            return topic
        if time.monotonic() > deadline:
            pytest.fail(f"the log cleaner went on cleaning {topic} after its policy became delete")
        before = now


def test_compacted_topic_with_gaps(differ: Differ, compacted: str) -> None:
    out = differ.read({"subscribe": compacted})
    offsets = out.offsets(compacted, 0)
    assert len(offsets) < offsets[-1]  # gaps


def test_compacted_topic_split_into_tasks(differ: Differ, compacted: str) -> None:
    out = differ.read({"subscribe": compacted, "minPartitions": "4"}, layout=True)
    assert out.count > 0


def test_compacted_topic_bounds_inside_gaps(differ: Differ, compacted: str, bootstrap: str) -> None:
    seen = _visible(bootstrap, compacted)
    assert 4 not in seen and 20 not in seen  # even offsets below 38 were compacted away
    options = {
        "subscribe": compacted,
        "startingOffsets": json.dumps({compacted: {"0": 4}}),
        "endingOffsets": json.dumps({compacted: {"0": 20}}),
    }
    out = differ.read(options, layout=True)
    assert out.offsets(compacted, 0) == list(range(5, 20, 2))


@pytest.fixture(scope="module")
def transactional(
    make_topic: Callable[..., str], produce: Callable[..., None], bootstrap: str
) -> Iterator[str]:
    """Committed, aborted and plain records, and a transaction left open at the end."""
    from kafka_core import KafkaProducer

    topic = make_topic(1)
    with KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=f"diff-{uuid.uuid4().hex[:8]}",
        transaction_timeout_ms=600_000,  # the open one outlives this module's tests
    ) as p:
        p.init_transactions()
        for tag, commit in (("c1-", True), ("a-", False), ("c2-", True)):
            p.begin_transaction()
            for i in range(6):
                p.send(topic, f"{tag}{i}".encode(), key=b"k", partition=0, timestamp_ms=T0 + i)
            p.flush()  # aborting drops what is not sent yet: these are in the log, then aborted
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
        produce(topic, [Rec(0, b"plain", f"p{i}".encode(), (), T0 + i) for i in range(3)])
        p.begin_transaction()
        for i in range(4):
            p.send(topic, f"open-{i}".encode(), partition=0, timestamp_ms=T0 + i)
        p.flush()
        yield topic
        p.abort_transaction()


def test_read_committed(differ: Differ, transactional: str) -> None:
    out = differ.read({"subscribe": transactional, "kafka.isolation.level": "read_committed"})
    values = out.values()
    assert len(values) == 15 and not [v for v in values if v and v.startswith((b"a-", b"open-"))]


def test_read_uncommitted(differ: Differ, transactional: str) -> None:
    out = differ.read({"subscribe": transactional, "kafka.isolation.level": "read_uncommitted"})
    values = out.values()
    assert len(values) == 25 and b"a-0" in values and b"open-3" in values


def test_read_committed_split_into_tasks(differ: Differ, transactional: str) -> None:
    out = differ.read(
        {"subscribe": transactional, "kafka.isolation.level": "read_committed", "minPartitions": "3"},
        layout=True,
    )
    assert out.count == 15
