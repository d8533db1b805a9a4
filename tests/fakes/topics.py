"""Test topics that are ready to write to."""

from __future__ import annotations

import time
from typing import Any


def wait_writable(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Return once every partition of ``topic`` answers ListOffsets at its leader.

    Apache Kafka's broker publishes a new topic's leaders in its metadata a moment before its
    replica manager has made the partitions leaders: Metadata already names the leader while
    Produce and ListOffsets still answer NOT_LEADER_OR_FOLLOWER. ListOffsets goes through the
    same leader check as Produce, so a partition that answers it takes writes. Asked with
    confluent-kafka, independent of our own code.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wait-writable"})
    try:
        deadline = time.monotonic() + timeout
        pending = set(range(partitions))
        while pending:
            for p in sorted(pending):
                try:
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)
                except KafkaException:
                    continue
                pending.discard(p)
            if pending and time.monotonic() > deadline:
                raise TimeoutError(f"{topic} partitions {sorted(pending)} not writable after {timeout} s")
            if pending:
                time.sleep(0.05)
    finally:
        consumer.close()


def listing_with(admin: Any, names: list[str], timeout: float = 30.0) -> list[str]:
    """``admin.list_topics()`` once it has ``names``: Apache Kafka answers CreateTopics once the
    controller has created them, and a broker's metadata has them a moment later (Java's admin is
    as eventually consistent; seen in CI, a listing right after the answer was still empty). Read
    until they come (``timeout``: a hang guard); the last listing either way."""
    deadline = time.monotonic() + timeout
    listed = admin.list_topics()
    while not set(names) <= set(listed) and time.monotonic() < deadline:
        time.sleep(0.1)
        listed = admin.list_topics()
    return list(listed)
