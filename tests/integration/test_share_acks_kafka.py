"""Share-consumer acknowledgements against Apache Kafka: a commit does not wait behind a
long-polling ShareFetch, RENEW (KIP-1222) keeps a record past its lock timeout, and Kafka 3.9
(no share groups) is a clear, fast error."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from fakes.share_helpers import poll_until
from fakes.share_kafka import explicit_consumer, share_setup

from kafka_core import AcknowledgeType, KafkaProducer, KafkaShareConsumer
from kafka_core.aio import KafkaShareConsumer as AsyncShareConsumer
from kafka_core.client.metadata import TopicPartition
from kafka_core.devbroker import OLDEST_KAFKA_VERSION
from kafka_core.devtools.brokers.kafka import KafkaCluster
from kafka_core.share import KafkaShareGroupsUnsupportedError

pytestmark = pytest.mark.timeout(300)
DEADLINE_S = 60.0


async def _poll_n(c: AsyncShareConsumer, n: int) -> list[Any]:
    return await poll_until(c, n, timeout_ms=500, deadline_s=DEADLINE_S)


def test_commit_and_close_are_not_held_up_by_a_long_poll(real_kafka: KafkaCluster) -> None:
    """fetch_max_wait_ms is 60 s. The asyncio consumer sends a ShareFetch after a poll, while the
    application works: with nothing more to read, one that waited its 60 s at the broker would
    hold up commit_sync(10) (one request per share session at a time)."""
    topic, group = share_setup(real_kafka, 3, prefix="share-ack")

    async def run() -> None:
        c = explicit_consumer(real_kafka, topic, group, fetch_max_wait_ms=60_000)
        try:
            got = await _poll_n(c, 3)
            assert len(got) == 3
            await asyncio.sleep(1.0)  # the application works; the ShareFetch sent meanwhile went
            for r in got:
                c.acknowledge(r, AcknowledgeType.ACCEPT)
            out = await c.commit_sync(timeout=10)
            assert out == {TopicPartition(topic, 0): None}
            assert c.metrics()["share"]["records_accepted"] == 3
            # the session stays in step: a record produced now is fetched and accepted
            with KafkaProducer(bootstrap_servers=real_kafka.bootstrap) as producer:
                producer.send(topic, value=b"late")
            more = await _poll_n(c, 1)
            assert [r.value for r in more] == [b"late"]
            c.acknowledge(more[0])
            assert await c.commit_sync(timeout=10) == {TopicPartition(topic, 0): None}
            assert await c.poll(500) == []
        finally:
            await c.close(timeout=10)

    asyncio.run(run())
    # the blocking face: its last poll's ShareFetch does not hold up close(10) either
    again = KafkaShareConsumer(
        topic, bootstrap_servers=real_kafka.bootstrap, group_id=group, fetch_max_wait_ms=60_000
    )
    try:
        assert again.poll(3_000) == []  # nothing is delivered again: all four were accepted
        assert again.commit_sync(timeout=10) == {}
    finally:
        again.close(timeout=10)


def test_renew_keeps_a_record_past_its_lock_timeout(real_kafka: KafkaCluster) -> None:
    """A record renewed again and again past the group's lock duration (15 s, the least Kafka
    allows) is never delivered to another member; accepted at last, it is done."""
    lock_ms = 15_000
    topic, group = share_setup(
        real_kafka, 1, {"share.record.lock.duration.ms": str(lock_ms)}, prefix="share-ack"
    )

    async def run() -> None:
        slow = explicit_consumer(real_kafka, topic, group)
        other = explicit_consumer(real_kafka, topic, group)
        try:
            got = await _poll_n(slow, 1)
            assert len(got) == 1
            assert slow.metrics()["share"]["acquisition_lock_timeout_ms"] == lock_ms
            record = got[0]
            stolen: list[object] = []
            end = time.monotonic() + lock_ms / 1000.0 * 2.5  # well past the lock
            while time.monotonic() < end:
                slow.acknowledge(record, AcknowledgeType.RENEW)
                assert await slow.commit_sync(timeout=30) == {TopicPartition(topic, 0): None}
                for r in await other.poll(lock_ms / 3):
                    stolen.append(r)
                    other.acknowledge(r, AcknowledgeType.RELEASE)
            assert stolen == []
            assert slow.metrics()["share"]["records_renewed"] >= 3
            slow.acknowledge(record, AcknowledgeType.ACCEPT)
            assert await slow.commit_sync(timeout=30) == {TopicPartition(topic, 0): None}
        finally:
            await slow.close(timeout=60)
            await other.close(timeout=60)

    asyncio.run(run())


def _no_share_groups(bootstrap: str) -> None:
    c = KafkaShareConsumer("t", bootstrap_servers=bootstrap, group_id="g", request_timeout_ms=10_000)
    try:
        with pytest.raises(KafkaShareGroupsUnsupportedError) as info:
            c.poll(60_000)
    finally:
        c.close(timeout=10)
    message = str(info.value)
    assert re.search("share groups", message) and "KIP-932" in message and "4.1" in message


@pytest.mark.compat  # runs in the compatibility run on Kafka 3.9 too, on that session's broker
def test_kafka_3_9_has_no_share_groups_and_says_so(kafka_cluster: KafkaCluster | None) -> None:
    """On the compat run (Kafka 3.9) the session's own broker; else a Kafka 3.9 of its own."""
    if kafka_cluster is not None and kafka_cluster.version.startswith("3."):
        _no_share_groups(kafka_cluster.bootstrap)
        return
    own = KafkaCluster(1, version=OLDEST_KAFKA_VERSION)
    try:
        own.start()
        _no_share_groups(own.bootstrap)
    finally:
        own.close()
