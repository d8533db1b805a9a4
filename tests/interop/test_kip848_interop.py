"""Our KIP-848 member and librdkafka's (confluent-kafka, ``group.protocol=consumer``) in one
group on librdkafka's mock cluster: the partitions are split, never owned twice, and every
record is consumed once across the two."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fakes.timing import wait_until

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.devtools.mockcluster import MockCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

PARTITIONS = 6


def produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0


class Loop:
    """Polls ``poll()`` in a thread, as an application would, collecting (partition, offset)."""

    def __init__(self, poll: Callable[[], list[tuple[int, int]]]) -> None:
        self.got: list[tuple[int, int]] = []
        self.error: BaseException | None = None
        self._poll = poll
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.got.extend(self._poll())
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise self.error


def test_ours_and_librdkafka_share_a_consumer_group(mock_cluster: MockCluster) -> None:
    from confluent_kafka import Consumer

    mock_cluster.set_group_consumer_timeouts(session_timeout_ms=60_000, heartbeat_interval_ms=200)
    topic = f"kip848-interop-{uuid.uuid4().hex[:8]}"
    mock_cluster.create_topic(topic, PARTITIONS, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    bootstrap = mock_cluster.bootstrap
    produce(bootstrap, topic, 0, 600)

    ours = KafkaConsumer(
        bootstrap_servers=bootstrap,
        topics=[topic],
        group_id=group,
        group_protocol="consumer",
        auto_offset_reset="earliest",
    )
    peer_owned: set[int] = set()
    overlaps: list[set[int]] = []

    def on_assign(_c: Any, parts: list[Any]) -> None:
        new = {p.partition for p in parts}
        mine = {tp.partition for tp in ours.assignment()}
        if new & mine:
            overlaps.append(new & mine)
        peer_owned.update(new)

    def on_revoke(_c: Any, parts: list[Any]) -> None:
        peer_owned.difference_update(p.partition for p in parts)

    peer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
        }
    )

    def peer_poll() -> list[tuple[int, int]]:
        msg = peer.poll(0.2)
        if msg is None or msg.error():
            return []
        return [(msg.partition(), msg.offset())]

    ours_loop = Loop(lambda: [(m.partition, m.offset) for m in ours.poll(200)])
    peer_loop: Loop | None = None
    try:
        assert wait_until(lambda: len(ours.assignment()) == PARTITIONS and len(ours_loop.got) >= 100)
        peer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        peer_loop = Loop(peer_poll)
        assert wait_until(
            lambda: (
                bool(peer_owned)
                and bool(ours.assignment())
                and len({tp.partition for tp in ours.assignment()} | peer_owned) == PARTITIONS
            )
        )
        assert not {tp.partition for tp in ours.assignment()} & peer_owned
        produce(bootstrap, topic, 600, 600)
        assert wait_until(lambda: len(ours_loop.got) + len(peer_loop.got) >= 1200)
    finally:
        ours_loop.stop()
        if peer_loop is not None:
            peer_loop.stop()
    got = ours_loop.got + peer_loop.got
    assert len(got) == len(set(got)) == 1200  # all once, across both members
    assert not overlaps
    mine = {tp.partition for tp in ours.assignment()}
    assert mine and peer_owned and not mine & peer_owned
    assert ours.assignment() == {TopicPartition(topic, p) for p in mine}
    peer.close()
    ours.close(10)  # the peer's leave moves our epoch: the final commit retries STALE_MEMBER_EPOCH
