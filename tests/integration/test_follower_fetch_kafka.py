"""Follower fetching (KIP-392) on a three-node Apache Kafka whose nodes are in racks a, b and c
and whose leaders pick a replica in the consumer's rack (RackAwareReplicaSelector): a consumer
with ``client_rack`` reads from the replica in its rack, not the leader; that replica killed
(SIGKILL), it goes on from the leader with every record once, in order.

Where each Fetch went and which answers carried records is recorded by wrapping the consumer's
client (the node is the one the request was sent to); the client's per-node request counts
(``metrics()``) say the same. The cluster is this module's own (it runs on one worker, see
tests/xdist_scheduling.py): the shared three-node cluster has no racks, and a node is killed here.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from prerequisites import unavailable

from kafka_core import KafkaAdmin, KafkaProducer, NewTopic
from kafka_core.aio import KafkaClient
from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.devtools.brokers.common import BrokerStartError
from kafka_core.devtools.brokers.kafka import KafkaCluster
from kafka_core.protocol.messages import FetchRequest

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

RACKS = ("rack-a", "rack-b", "rack-c")
FOLLOWER = 2  # the node whose rack the consumer is in, and that is killed
PARTITIONS = 6
GUARD_S = 90.0  # hang guard, not a timing assertion


@pytest.fixture(scope="module")
def racked() -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(3, racks=RACKS)
    try:
        cluster.start()
    except BrokerStartError as exc:
        cluster.close()
        unavailable("a three-node Apache Kafka with racks", f"it did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.close()


def _topic(cluster: KafkaCluster) -> tuple[str, list[int]]:
    """A new topic on every node, and its partitions that ``FOLLOWER`` does not lead."""
    name = f"follower-fetch-{uuid.uuid4().hex[:10]}"
    with KafkaAdmin(cluster.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, PARTITIONS, replication_factor=3)]).values()
        assert result.ok, f"creating {name!r}: {result.error}"

    async def leaders() -> dict[int, int]:
        async with KafkaClient(cluster.bootstrap) as client:
            deadline = time.monotonic() + GUARD_S
            while True:
                meta = await client.metadata([name])
                [t] = meta.topics
                if len(t.partitions) == PARTITIONS and all(
                    p.leader >= 0 and len(p.isr) == 3 for p in t.partitions
                ):
                    assert {b.node_id: b.rack for b in meta.brokers} == dict(
                        zip((1, 2, 3), RACKS, strict=True)
                    )
                    return {p.partition: p.leader for p in t.partitions}
                assert time.monotonic() < deadline, f"{name}: not every partition has a leader and 3 in sync"
                await asyncio.sleep(0.2)

    led = asyncio.run(leaders())
    mine = sorted(p for p, leader in led.items() if leader != FOLLOWER)
    assert mine, f"node {FOLLOWER} leads every partition: {led}"
    return name, mine


def _produce(cluster: KafkaCluster, topic: str, partitions: list[int], n: int, start: int) -> None:
    with KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5) as producer:
        futures = [
            producer.send(topic, b"%d-%d" % (p, i), partition=p)
            for i in range(start, start + n)
            for p in partitions
        ]
        producer.flush(GUARD_S)
        for f in futures:
            f.result(GUARD_S)


class Wire:
    """Each Fetch's node, and the partitions its answer carried records of."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.fetches: list[tuple[int, FetchRequest, set[int]]] = []
        client = consumer._client
        send = client.send

        async def recording(node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
            resp = await send(node, body, version, **kw)
            if isinstance(body, FetchRequest):
                parts = {p.partition_index for t in resp.responses for p in t.partitions if p.records}
                self.fetches.append((node, body, parts))
            return resp

        client.send = recording

    def served_by(self, since: int = 0) -> set[int]:
        return {node for node, _, parts in self.fetches[since:] if parts}


def _consumer(
    cluster: KafkaCluster, topic: str, partitions: list[int], rack: str | None, **kw: Any
) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        partitions={topic: partitions},
        group_id=None,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=200,
        client_rack=rack,
        **kw,
    )


async def _read(c: KafkaConsumer, n: int, out: list[Any]) -> None:
    deadline = time.monotonic() + GUARD_S
    want = len(out) + n
    while len(out) < want and time.monotonic() < deadline:
        out.extend(await c.poll(200))
    assert len(out) >= want, f"{len(out)} of {want} records within {GUARD_S} s"


def _check_once_in_order(got: list[Any], partitions: list[int], per_partition: int) -> None:
    by: dict[int, list[int]] = defaultdict(list)
    for m in got:
        by[m.partition].append(m.offset)
        assert m.value == b"%d-%d" % (m.partition, m.offset), "a record's value is not its own"
    assert dict(by) == {p: list(range(per_partition)) for p in partitions}, "records lost or read twice"


def _fetch_counts(c: KafkaConsumer) -> dict[int, int]:
    """Fetch requests per node from the client's own metrics."""
    fetch = c.metrics()["network"]["requests"].get("FETCH", {})
    return {int(node): s["count"] for node, s in fetch.items()}


def test_read_committed_on_the_replica_skips_aborted_records(racked: KafkaCluster) -> None:
    """A replica keeps the transaction markers and aborted ranges as its leader does: a
    read_committed consumer reading from it gets the committed records only."""
    topic, partitions = _topic(racked)
    with KafkaProducer(
        bootstrap_servers=racked.bootstrap, transactional_id=f"ff-{uuid.uuid4().hex[:8]}"
    ) as tx:
        tx.init_transactions()
        for i, commit in enumerate((True, False, True)):
            tx.begin_transaction()
            for p in partitions:
                tx.send(topic, b"%s-%d" % (b"kept" if commit else b"aborted", i), partition=p)
            if commit:
                tx.commit_transaction()
            else:
                tx.abort_transaction()

    async def main() -> list[Any]:
        c = _consumer(racked, topic, partitions, RACKS[FOLLOWER - 1], isolation_level="read_committed")
        wire = Wire(c)
        got: list[Any] = []
        try:
            await _read(c, 2 * len(partitions), got)
            for _ in range(5):  # the aborted ones never come
                got.extend(await c.poll(200))
        finally:
            await c.close()
        assert wire.served_by() == {FOLLOWER}, f"records came from nodes {wire.served_by()}"
        return got

    got = asyncio.run(asyncio.wait_for(main(), 120))
    assert sorted((m.partition, m.value) for m in got) == sorted(
        (p, v) for p in partitions for v in (b"kept-0", b"kept-2")
    )


def test_a_consumer_reads_from_the_replica_in_its_rack_and_from_the_leader_once_it_is_killed(
    racked: KafkaCluster,
) -> None:
    topic, partitions = _topic(racked)
    first, second = 20, 20
    _produce(racked, topic, partitions, first, 0)

    async def control() -> set[int]:
        """Without a rack: every record from the leaders."""
        c = _consumer(racked, topic, partitions, None)
        wire = Wire(c)
        try:
            await _read(c, first * len(partitions), [])
        finally:
            await c.close()
        return wire.served_by()

    leaders = asyncio.run(control())
    assert FOLLOWER not in leaders, f"node {FOLLOWER} served a rackless consumer: {leaders}"

    async def main() -> None:
        c = _consumer(racked, topic, partitions, RACKS[FOLLOWER - 1])
        wire = Wire(c)
        got: list[Any] = []
        try:
            await _read(c, first * len(partitions), got)
            assert wire.served_by() == {FOLLOWER}, f"records came from nodes {wire.served_by()}"
            assert all(b.rack_id == RACKS[FOLLOWER - 1] for _, b, _ in wire.fetches)
            fetcher = c._fetcher
            assert {fetcher.replicas.node(TopicPartition(topic, p)) for p in partitions} == {FOLLOWER}
            assert _fetch_counts(c).get(FOLLOWER, 0) > 0

            racked.kill_node(FOLLOWER)
            mark = len(wire.fetches)
            await asyncio.to_thread(_produce, racked, topic, partitions, second, first)
            await _read(c, second * len(partitions), got)
            after = wire.served_by(mark)
            assert after and FOLLOWER not in after, f"records after the kill came from {after}"
            assert after <= leaders, f"records after the kill from {after}, the leaders are {leaders}"
            for _ in range(5):  # and nothing more comes
                got.extend(await c.poll(200))
        finally:
            await c.close()
        _check_once_in_order(got, partitions, first + second)

    asyncio.run(asyncio.wait_for(main(), 240))
