"""Follower fetching (KIP-392) against a fake three-node cluster with racks.

``RackCluster``: node 1 leads every partition, nodes 1-3 are its replicas in racks a, b, c. A
Fetch to the leader that carries a rack with a live replica in it is answered as Apache Kafka's
RackAwareReplicaSelector has the leader answer: no records, the replica to read from. Any node
serves the records of a Fetch it is sent (the fake keeps no per-replica logs). A node can
refuse connections (``dead``: as a killed broker before the controller fences it, when its
leader still names it and the metadata shows it online), be shown offline in the metadata
(``offline``), no longer be named by the leader (``fenced``), or answer errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fakes.consumer_client import FakeClient
from fakes.consumer_helpers import check_once_in_order, fill_each, read

from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.errors import KafkaConnectionError
from kafka_core.protocol import ErrorCode
from kafka_core.protocol.messages import FetchRequest, FetchResponse

pytestmark = pytest.mark.timeout(60)

T = "t"
PARTITIONS = 6
RACKS = {1: "a", 2: "b", 3: "c"}


class RackCluster(FakeClient):
    def __init__(self) -> None:
        super().__init__({T: PARTITIONS})
        self.dead: set[int] = set()
        self.offline: set[int] = set()
        self.fenced: set[int] = set()
        self.refused: list[tuple[int, float]] = []  # node, when
        self.errors: dict[int, list[int]] = {}  # node -> codes for its next partitions answered
        self.wire: list[tuple[int, FetchRequest, set[int]]] = []  # node, request, partitions with records
        self.times: list[float] = []  # when each of ``wire`` was answered
        self.resets = 0

    def cached_metadata(self) -> ClusterMeta:
        offline = tuple(sorted(self.offline))
        parts = [
            PartitionMeta(p, 1, replicas=(1, 2, 3), isr=(1, 2, 3), offline_replicas=offline)
            for p in range(PARTITIONS)
        ]
        brokers = [
            BrokerMeta(n, "127.0.0.1", 9000 + n, rack) for n, rack in RACKS.items() if n not in offline
        ]
        return ClusterMeta(brokers=brokers, topics=[TopicMeta(T, parts, topic_id=self.topic_ids[T])])

    async def list_offsets(self, timestamps: dict, **kw: Any) -> dict:
        self.resets += 1
        return await super().list_offsets(timestamps, **kw)

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        assert isinstance(body, FetchRequest)
        if node in self.dead:
            self.refused.append((node, time.monotonic()))
            await asyncio.sleep(0)
            raise KafkaConnectionError(f"node {node} refused the connection (fake)")
        near = next((n for n, rack in RACKS.items() if rack == body.rack_id and n not in self.fenced), None)
        if node == 1 and near is not None and near != 1:
            parts = [
                FetchResponse.PartitionData(
                    partition_index=p.partition,
                    high_watermark=self.log(T, p.partition).end,
                    preferred_read_replica=near,
                )
                for t in body.topics
                for p in t.partitions
            ]
            self.wire.append((node, body, set()))
            self.times.append(time.monotonic())
            topics = [FetchResponse.FetchableTopicResponse(topic_id=self.topic_ids[T], partitions=parts)]
            return FetchResponse(responses=topics if parts else [])
        resp = await super().send(node, body, version, **kw)
        codes = self.errors.get(node)
        for t in resp.responses:
            for p in t.partitions:
                if codes:
                    p.error_code, p.records = codes.pop(0), None
        self.times.append(time.monotonic())
        self.wire.append(
            (node, body, {p.partition_index for t in resp.responses for p in t.partitions if p.records})
        )
        return resp


def served_by(client: RackCluster, since: int = 0) -> set[int]:
    """The nodes whose answers carried records."""
    return {node for node, _, parts in client.wire[since:] if parts}


def consumer(client: RackCluster, **kw: Any) -> KafkaConsumer:
    return KafkaConsumer(T, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20, **kw)


@contextlib.asynccontextmanager
async def reading(
    per_partition: int, **kw: Any
) -> AsyncIterator[tuple[RackCluster, KafkaConsumer, list[Any]]]:
    """A cluster with ``per_partition`` records on each partition and a consumer (``kw``) that
    has read them all into the list it yields; the consumer is closed on the way out."""
    client = RackCluster()
    fill_each(client, PARTITIONS, per_partition)
    c = consumer(client, **kw)
    got: list[Any] = []
    try:
        await read(c, per_partition * PARTITIONS, got)
        yield client, c, got
    finally:
        await c.close()


def test_a_consumer_reads_from_the_replica_in_its_rack_and_from_the_leader_without_a_rack() -> None:
    async def main(rack: str | None) -> RackCluster:
        async with reading(5, client_rack=rack) as (client, _, got):
            pass  # read everything, then closed
        check_once_in_order(got, PARTITIONS, 5)
        assert {b.rack_id for _, b, _ in client.wire} == {rack or ""}
        return client

    near = asyncio.run(asyncio.wait_for(main("b"), 40))
    assert served_by(near) == {2}
    leader = asyncio.run(asyncio.wait_for(main(None), 40))
    assert served_by(leader) == {1}


def test_the_replica_killed_the_consumer_goes_on_from_the_leader_with_nothing_lost_or_read_twice() -> None:
    async def main() -> None:
        async with reading(5, client_rack="b") as (client, c, got):
            assert served_by(client) == {2}
            client.dead.add(2)  # killed: its leader names it still, the metadata shows it online
            fill_each(client, PARTITIONS, 5, 5)
            mark = len(client.wire)
            deadline = time.monotonic() + 10
            while not client.refused and time.monotonic() < deadline:
                got.extend(await c.poll(20))
            await asyncio.sleep(0.3)
            fenced_at = time.monotonic()
            client.fenced.add(2)  # the controller fenced it: out of the ISR, offline
            client.offline.add(2)
            await read(c, 5 * PARTITIONS - (len(got) - 5 * PARTITIONS), got)
            assert served_by(client, mark) == {1}
            first_refused = client.refused[0][1]
            to_leader = [t for (n, _, _), t in zip(client.wire, client.times, strict=True) if n == 1]
            assert any(first_refused < t < fenced_at for t in to_leader), (
                "not back to the leader on a failed Fetch"
            )
            assert client.resets == 1  # the first positions only
        check_once_in_order(got, PARTITIONS, 10)

    asyncio.run(asyncio.wait_for(main(), 40))


@pytest.mark.parametrize("code", [ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.NOT_LEADER_OR_FOLLOWER])
def test_an_error_from_the_replica_sends_the_partition_back_to_its_leader_and_resets_nothing(
    code: int,
) -> None:
    """OFFSET_OUT_OF_RANGE from a replica is no reset (KIP-392): the leader is asked next."""

    async def main() -> None:
        async with reading(5, client_rack="b") as (client, c, got):
            client.errors[2] = [code]
            fill_each(client, PARTITIONS, 5, 5)
            mark = len(client.wire)
            await read(c, 5 * PARTITIONS, got)
            after = client.wire[mark:]
            failed = next(i for i, (n, _, _) in enumerate(after) if n == 2)
            assert any(n == 1 for n, _, _ in after[failed:]), "the leader was not asked again"
            assert served_by(client, mark) == {2}  # and it named the replica again
            assert client.resets == 1, "a replica's out-of-range offset reset the position"
        check_once_in_order(got, PARTITIONS, 10)

    asyncio.run(asyncio.wait_for(main(), 40))


def test_the_replica_is_leased_for_metadata_max_age_ms_then_the_leader_is_asked_again() -> None:
    async def main() -> None:
        async with reading(2, client_rack="b", metadata_max_age_ms=300) as (client, c, got):
            mark = len(client.wire)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not any(n == 1 for n, _, _ in client.wire[mark:]):
                assert await c.poll(50) == []
            assert any(n == 1 for n, _, _ in client.wire[mark:]), "the lease never ended"
            fill_each(client, PARTITIONS, 2, 2)
            mark = len(client.wire)
            await read(c, 2 * PARTITIONS, got)
            assert served_by(client, mark) == {2}
        check_once_in_order(got, PARTITIONS, 4)

    asyncio.run(asyncio.wait_for(main(), 40))


def test_a_partition_read_from_a_replica_goes_to_its_leader_when_the_metadata_shows_it_offline() -> None:
    async def main() -> None:
        async with reading(2, client_rack="b") as (client, c, _):
            assert served_by(client) == {2}
            client.offline.add(2)  # the metadata says so; its leader still names it
            mark = len(client.wire)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not any(n == 1 for n, _, _ in client.wire[mark:]):
                assert await c.poll(50) == []
            back = next((mark + i for i, (n, _, _) in enumerate(client.wire[mark:]) if n == 1), None)
            assert back is not None, "the leader was not asked again"
            for _ in range(10):
                assert await c.poll(50) == []
            # the leader names node 2 in each answer: the consumer no longer takes it
            assert [n for n, _, _ in client.wire[back:]] == [1] * len(client.wire[back:])

    asyncio.run(asyncio.wait_for(main(), 40))
