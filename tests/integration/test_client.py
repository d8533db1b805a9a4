"""The cluster client against the real test broker (Tansu, or KAFKA_BOOTSTRAP_SERVERS)."""

from __future__ import annotations

import asyncio
import functools
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafka_core.aio import KafkaClient, NewTopic, OffsetAndMetadata, TopicPartition
from kafka_core.client.metadata import EARLIEST, LATEST
from kafka_core.errors import KafkaProtocolError
from kafka_core.network.connection import KAFKA4_MIN_VERSIONS
from kafka_core.protocol import ApiKey
from kafka_core.protocol.messages import MetadataRequest

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]


def aio(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run an async test on a fresh event loop (no pytest-asyncio dependency)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@aio
async def test_negotiated_versions(bootstrap_servers: str, on_tansu: bool) -> None:
    async with KafkaClient(bootstrap_servers) as client:
        per_broker = await client.negotiated_versions()
        assert per_broker, "no broker reported"
        for versions in per_broker.values():
            for key, floor in KAFKA4_MIN_VERSIONS.items():
                if key in versions:
                    assert versions[ApiKey(key)] >= floor
            if on_tansu:
                assert versions[ApiKey.METADATA] == 12
                assert versions[ApiKey.PRODUCE] == 11
                assert versions[ApiKey.FETCH] == 17


@aio
async def test_metadata(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    async with KafkaClient(bootstrap_servers) as client:
        cluster = await client.metadata()
        assert cluster.brokers
        assert cluster.controller_id in {b.node_id for b in cluster.brokers}
        assert cluster.cluster_id
        meta = cluster.topic(topic)
        assert meta is not None
        assert [p.partition for p in meta.partitions] == [0, 1, 2]
        assert all(p.leader in {b.node_id for b in cluster.brokers} for p in meta.partitions)
        assert meta.topic_id is not None
        only = await client.metadata([topic])
        assert [t.name for t in only.topics] == [topic]


@aio
async def test_metadata_reports_missing_topic_without_raising(bootstrap_servers: str) -> None:
    async with KafkaClient(bootstrap_servers, allow_auto_create_topics=False) as client:
        cluster = await client.metadata([unique("absent")], allow_auto_topic_creation=False)
        # Tansu auto-creates topics even when asked not to; Apache Kafka reports error 3.
        for t in cluster.topics:
            assert t.error_code in (0, 3)


@aio
async def test_create_topics_and_await_ready(bootstrap_servers: str) -> None:
    name = unique("created")
    async with KafkaClient(bootstrap_servers) as client:
        assert await client.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)]) == [name]
        meta = await client.await_topic_ready(name, 2, timeout_ms=30_000)
        assert len(meta.partitions) >= 2 and meta.ready
        # Creating it again is a no-op by default, an error when asked.
        assert await client.create_topics([NewTopic(name, 2, 1)]) == []
        with pytest.raises(KafkaProtocolError) as info:
            await client.create_topics([NewTopic(name, 2, 1)], ignore_existing=False)
        assert info.value.name == "TOPIC_ALREADY_EXISTS"


@aio
async def test_leader_for_and_send_to_leader(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    async with KafkaClient(bootstrap_servers) as client:
        leader = await client.leader_for(topic, 1)
        cluster = client.cached_metadata()
        assert cluster.broker(leader) is not None
        body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
        resp = await client.send_to_leader(topic, 1, body)
        assert resp.topics[0].name == topic


@aio
async def test_find_coordinator(bootstrap_servers: str) -> None:
    async with KafkaClient(bootstrap_servers) as client:
        group = await client.find_coordinator(unique("group"))
        txn = await client.find_coordinator(unique("txn"), key_type=1)
        known = {b.node_id for b in (await client.metadata()).brokers}
        assert group.node_id in known and txn.node_id in known
        assert group.port > 0


@aio
async def test_init_producer_id(bootstrap_servers: str) -> None:
    async with KafkaClient(bootstrap_servers) as client:
        a = await client.init_producer_id()
        b = await client.init_producer_id()
        assert a.producer_id >= 0 and a.epoch >= 0
        assert a.producer_id != b.producer_id
        t = await client.init_producer_id(unique("txn"), 30_000)
        assert t.producer_id >= 0


@aio
async def test_offsets_commit_fetch_round_trip(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    group = unique("group")
    async with KafkaClient(bootstrap_servers) as client:
        assert await client.fetch_committed_offsets(group, [(topic, 0)]) == {}
        await client.commit_offsets(
            group, {(topic, 0): 5, TopicPartition(topic, 2): OffsetAndMetadata(9, "m")}
        )
        got = await client.fetch_committed_offsets(group)
        assert got[TopicPartition(topic, 0)].offset == 5
        assert got[TopicPartition(topic, 2)].offset == 9
        assert TopicPartition(topic, 1) not in got
        only = await client.fetch_committed_offsets(group, [TopicPartition(topic, 2)])
        assert list(only) == [TopicPartition(topic, 2)]
        await client.commit_offsets(group, {(topic, 0): 6})
        assert (await client.fetch_committed_offsets(group, [(topic, 0)]))[
            TopicPartition(topic, 0)
        ].offset == 6


@aio
async def test_list_offsets_on_empty_topic(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    async with KafkaClient(bootstrap_servers) as client:
        got = await client.list_offsets({(topic, 0): EARLIEST, (topic, 1): LATEST})
        assert got[TopicPartition(topic, 0)].offset == 0
        assert got[TopicPartition(topic, 1)].offset == 0


@aio
async def test_reconnect_after_the_connection_drops(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    async with KafkaClient(bootstrap_servers, reconnect_backoff_ms=10, retry_backoff_ms=10) as client:
        node = await client.leader_for(topic, 0)
        conn = await client.connection(node)
        assert conn._stream is not None and conn._stream.transport is not None
        conn._stream.transport.abort()  # the socket dies under the client, as on a broker restart
        await conn.wait_closed()
        assert not conn.connected
        cluster = await client.metadata([topic])
        assert cluster.topics[0].name == topic
        fresh = await client.connection(node)
        assert fresh is not conn and fresh.connected


def test_sync_face_without_event_loop(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    import kafka_core.sync_client

    topic = new_topic(2)
    errors: list[BaseException] = []
    results: list[Any] = []

    def worker() -> None:
        # A plain thread: no event loop exists here at all.
        try:
            with kafka_core.sync_client.KafkaClient(bootstrap_servers) as client:
                results.append(client.await_topic_ready(topic, 2, timeout_ms=30_000))
                client.commit_offsets("sync-group-" + topic, {(topic, 1): 3})
                results.append(client.fetch_committed_offsets("sync-group-" + topic))
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    t.join(60)
    assert not errors, errors
    assert results[0].name == topic
    assert results[1][TopicPartition(topic, 1)].offset == 3


def test_cold_start_bootstrap_waits_for_the_broker() -> None:
    """A client started before its broker connects once the broker comes up."""
    from kafka_core._sync import LoopThread
    from kafka_core.devbroker import TansuBroker

    broker = TansuBroker()
    loop = LoopThread("cold-start")
    try:
        client = loop.call(KafkaClient, broker.bootstrap, retry_backoff_ms=50, api_timeout_ms=30_000)
        started = asyncio.run_coroutine_threadsafe(client.start(), loop.loop)
        broker.start()
        started.result(40)
        meta = asyncio.run_coroutine_threadsafe(client.await_topic_ready("cold", 1), loop.loop).result(40)
        assert meta.ready
        loop.run(client.close())
    finally:
        loop.stop()
        broker.close()


@aio
async def test_delete_topics(bootstrap_servers: str) -> None:
    name = unique("doomed")
    async with KafkaClient(bootstrap_servers) as client:
        await client.create_topics([NewTopic(name, 1, 1)])
        await client.await_topic_ready(name, 1, timeout_ms=30_000)
        await client.delete_topics([name])
        # Deletion completes asynchronously on Apache Kafka: poll until the topic is gone.
        for _ in range(100):
            cluster = await client.metadata([name], allow_auto_topic_creation=False)
            if cluster.topics[0].error_code == 3:
                break
            await asyncio.sleep(0.2)
        assert cluster.topics[0].error_code == 3
        with pytest.raises(KafkaProtocolError) as info:
            await client.delete_topics([unique("never-existed")])
        assert info.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
