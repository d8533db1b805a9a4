"""Leader hints (KIP-951): a Produce or Fetch answer refusing a partition names its new leader,
and the producer and the consumer go there at once, without a metadata round trip.

The cluster (tests/fakes/moving_cluster.py) serves real sockets to the real clients; its
Metadata is frozen before the leader moves, so whatever reaches the new leader was routed there by
the hint alone (without it, Metadata goes on naming the old leader and nothing gets there).
"""

from __future__ import annotations

import asyncio

import pytest
from fakes.moving_cluster import MovingCluster
from fakes.timing import aio

from kafka_core.aio import KafkaClient, KafkaConsumer, KafkaProducer
from kafka_core.client.hints import LeaderHint, leader_hint
from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta, TopicPartition
from kafka_core.client.metadata_cache import MetadataCache
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import FetchResponse, ProduceResponse

pytestmark = pytest.mark.timeout(90)

T = "moving"


def _answer(leader: int, epoch: int) -> ClusterMeta:
    return ClusterMeta(
        brokers=[BrokerMeta(1, "h", 1), BrokerMeta(2, "h", 2)],
        topics=[TopicMeta(T, [PartitionMeta(0, leader, (1, 2), (1, 2), leader_epoch=epoch)])],
    )


def test_the_cache_takes_only_a_newer_epoch_and_a_stale_answer_does_not_move_it_back() -> None:
    cache = MetadataCache(300.0)
    cache.update(_answer(1, 5), full=False)
    assert not cache.take_leader(T, 0, 2, 4)  # older than the cache's
    assert not cache.take_leader(T, 0, 2, 5)  # same epoch, another leader: not taken
    assert cache.take_leader(T, 0, 1, 5)  # what the cache says already
    assert cache.take_leader(T, 0, 2, 6)
    part = cache.fresh_topic(T).partition(0)  # type: ignore[union-attr]
    assert part is not None and (part.leader, part.leader_epoch) == (2, 6)
    assert cache.snapshot().topic(T).partition(0).leader == 2  # type: ignore[union-attr]
    # A broker behind the others answers with the old leader: what is taken, and returned, keeps the new.
    taken = cache.update(_answer(1, 5), full=False)
    assert taken.topic(T).partition(0).leader == 2  # type: ignore[union-attr]
    assert cache.topic(T).partition(0).leader == 2  # type: ignore[union-attr]
    assert not cache.take_leader("unknown", 0, 2, 9)  # a topic never answered: left to Metadata
    assert not cache.take_leader(T, 7, 2, 9)


def test_a_hint_is_read_from_produce_and_fetch_answers_only_for_a_moved_leader() -> None:
    resp = ProduceResponse(
        node_endpoints=[ProduceResponse.NodeEndpoint(node_id=3, host="h3", port=93, rack="b")]
    )
    moved = ProduceResponse.PartitionProduceResponse(
        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
        current_leader=ProduceResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=7),
    )
    assert leader_hint(moved, resp) == LeaderHint(3, 7, (BrokerMeta(3, "h3", 93, "b"),))
    older = ProduceResponse.PartitionProduceResponse(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert leader_hint(older, resp) is None  # before v10 the field reads -1
    other = ProduceResponse.PartitionProduceResponse(
        error_code=ErrorCode.NOT_ENOUGH_REPLICAS,
        current_leader=ProduceResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=7),
    )
    assert leader_hint(other, resp) is None
    fenced = FetchResponse.PartitionData(
        error_code=ErrorCode.FENCED_LEADER_EPOCH,
        current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=4),
    )
    assert leader_hint(fenced, FetchResponse()) == LeaderHint(2, 4)


@aio
async def test_a_producer_follows_the_leader_a_produce_answer_names() -> None:
    async with MovingCluster(2) as cluster:
        async with KafkaProducer(
            cluster.bootstrap, linger_ms=0, delivery_timeout_ms=20_000, request_timeout_ms=5_000
        ) as producer:
            await (await producer.send(T, b"before", partition=0))
            cluster.freeze_metadata()
            cluster.move(0, 2)
            for i in range(20):
                await (await producer.send(T, b"after-%d" % i, partition=0))
        assert cluster.records(0) == [b"before"] + [b"after-%d" % i for i in range(20)]
        assert [node for node, _, _ in cluster.written] == [1] + [2] * 20


@aio
async def test_a_producer_connects_to_a_leader_metadata_never_named() -> None:
    async with MovingCluster(3) as cluster:
        cluster.listed_nodes = [1, 2]  # node 3's address comes only in the Produce answer
        async with KafkaProducer(
            cluster.bootstrap, linger_ms=0, delivery_timeout_ms=20_000, request_timeout_ms=5_000
        ) as producer:
            await (await producer.send(T, b"before", partition=0))
            cluster.freeze_metadata()
            cluster.move(0, 3)
            await (await producer.send(T, b"after", partition=0))
        assert [node for node, _, _ in cluster.written] == [1, 3]


@aio
async def test_without_a_hint_the_producer_waits_on_metadata() -> None:
    """The control: the same move, the answers without a hint, Metadata frozen: nothing reaches
    the new leader (the producer keeps asking the old one until the record's deadline)."""
    async with MovingCluster(2, hints=False) as cluster:
        async with KafkaProducer(
            cluster.bootstrap, linger_ms=0, delivery_timeout_ms=3_000, request_timeout_ms=2_000
        ) as producer:
            await (await producer.send(T, b"before", partition=0))
            cluster.freeze_metadata()
            cluster.move(0, 2)
            future = await producer.send(T, b"after", partition=0)
            with pytest.raises(Exception, match="NOT_LEADER_OR_FOLLOWER"):
                await future
        assert [node for node, _, _ in cluster.written] == [1]


@aio
async def test_a_consumer_follows_the_leader_a_fetch_answer_names_and_reads_everything_once() -> None:
    async with MovingCluster(2, partitions=2) as cluster:
        async with KafkaProducer(cluster.bootstrap, linger_ms=0) as producer:
            for i in range(10):
                await (await producer.send(T, b"a-%d" % i, partition=0))
            consumer = KafkaConsumer(
                bootstrap_servers=cluster.bootstrap,
                topics=[T],
                group_id=None,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=100,
            )
            got: list[bytes | None] = []
            try:
                while len(got) < 10:
                    got += [m.value for m in await consumer.poll(200)]
                cluster.freeze_metadata()
                cluster.move(0, 2)
                for i in range(10):
                    await (await producer.send(T, b"b-%d" % i, partition=0))
                for _ in range(100):
                    got += [m.value for m in await consumer.poll(200)]
                    if len(got) >= 20:
                        break
            finally:
                await consumer.close()
        assert got == [b"a-%d" % i for i in range(10)] + [b"b-%d" % i for i in range(10)]
        assert cluster.requests[(2, 1)] > 0  # fetched from the new leader (api key 1: Fetch)


@aio
async def test_the_client_takes_a_hint_and_leader_for_answers_it_without_a_request() -> None:
    async with MovingCluster(3) as cluster:
        cluster.listed_nodes = [1, 2]
        async with KafkaClient(cluster.bootstrap) as client:
            assert await client.leader_for(T, 0) == 1
            asked = cluster.requests[(1, 3)] + cluster.requests[(2, 3)]
            endpoint = BrokerMeta(3, cluster.host, cluster.ports[3])
            assert not client.take_leader_hint(T, 0, LeaderHint(3, 1))  # not newer: the cache's epoch is 1
            assert not client.take_leader_hint(T, 0, LeaderHint(3, 2))  # node 3 unknown, no address given
            assert client.take_leader_hint(T, 0, LeaderHint(3, 2, (endpoint,)))
            assert client.leader_hints == 1
            assert await client.leader_for(T, 0) == 3
            assert (
                cluster.requests[(1, 3)] + cluster.requests[(2, 3)] == asked
            )  # no Metadata before the answer
            await client.connection(3)
            await asyncio.sleep(0.1)  # the background refresh: it says node 1 (epoch 1): not taken
            assert await client.leader_for(T, 0) == 3
            assert client.cached_metadata().topic(T).partition(0).leader_epoch == 2  # type: ignore[union-attr]
            assert TopicPartition(T, 0) == (T, 0)
