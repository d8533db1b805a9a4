"""Metrics against the real broker: exact counts after a known amount of work."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kafka_core import KafkaClient
from kafka_core.aio import KafkaClient as AsyncKafkaClient


def test_client_metrics_count_requests_and_connections(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)

    async def main() -> dict[str, Any]:
        async with AsyncKafkaClient(bootstrap_servers, client_id="metrics-client") as client:
            before = client.metrics()["network"]["requests"].get("METADATA", {})
            for _ in range(3):
                await client.metadata([topic])
            snap = client.metrics()
            after = snap["network"]["requests"]["METADATA"]
            assert sum(s["count"] for s in after.values()) == sum(s["count"] for s in before.values()) + 3
            return snap

    snap = asyncio.run(main())
    assert snap["client_id"] == "metrics-client"
    net = snap["network"]
    assert net["connections"]["created"] >= 1
    assert net["connections"]["active"] >= 1
    assert net["connections"]["failed"] == 0
    assert net["in_flight_requests"] == 0
    for broker, stats in net["requests"]["METADATA"].items():
        assert isinstance(broker, int)
        assert stats["latency_buckets_s"]["+Inf"] == stats["count"]
        assert 0 < stats["latency_max_s"] <= stats["latency_sum_s"]
    assert "API_VERSIONS" in net["requests"]


def test_sync_client_metrics_and_connection_failures(bootstrap_servers: str) -> None:
    with KafkaClient(bootstrap_servers) as client:
        client.metadata()
        snap = client.metrics()
        assert snap["network"]["connections"]["active"] >= 1
        assert snap["network"]["requests"]["METADATA"]
    # Nothing listens on port 1: every bootstrap attempt fails and is counted, with its retries.
    bad = KafkaClient("127.0.0.1:1", api_timeout_ms=600, retry_backoff_ms=50, retry_backoff_max_ms=50)
    try:
        with pytest.raises(Exception, match="bootstrap"):
            bad.start()
        net = bad.metrics()["network"]
        assert net["connections"]["failed"] >= 2
        assert net["retries"] == net["connections"]["failed"] - 1
        assert net["connections"]["created"] == 0
    finally:
        bad.close()


def _encoded_size(records: list[tuple[bytes, bytes]]) -> int:
    """The size of these records encoded as one uncompressed RecordBatch, by the codec itself."""
    from kafka_core.codec import encode_record_batch

    return len(encode_record_batch([(k, v, []) for k, v in records]))


def test_sync_producer_counts_records_batches_and_bytes(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    from kafka_core import KafkaProducer

    topic = new_topic(3)
    records = [(f"k{i}".encode(), b"v" * 50) for i in range(90)]
    with KafkaProducer(bootstrap_servers, linger_ms=10_000, client_id="metrics-producer") as producer:
        # One partition per round, sealed only by the flush (the linger is long): one batch each.
        for p in range(3):
            for k, v in records[p * 30 : (p + 1) * 30]:
                producer.send(topic, v, key=k, partition=p)
            producer.flush(30)
        snap = producer.metrics()
    prod = snap["producer"]
    assert snap["client_id"] == "metrics-producer"
    assert prod["records_sent"] == 90
    assert prod["records_failed"] == 0
    assert prod["topics"][topic]["records_sent"] == 90
    assert prod["batches_sent"] == prod["batch_records"]["count"] == prod["batch_bytes"]["count"] == 3
    assert prod["batch_records"]["sum"] == 90
    assert prod["batch_records"]["max"] == 30
    # Bytes: the encoded batches; only the records' timestamp deltas (varints of 1-3 bytes, 1 in
    # the reference encoding) can differ from the reference batch of the same records.
    assert prod["bytes_sent"] == prod["batch_bytes"]["sum"] == prod["topics"][topic]["bytes_sent"]
    one_batch = _encoded_size(records[:30])
    assert 3 * one_batch <= prod["bytes_sent"] <= 3 * one_batch + 2 * 90
    assert prod["buffer_limit_bytes"] == 64 << 20
    assert prod["buffer_used_bytes"] == 0  # everything acknowledged
    produce = snap["network"]["requests"]["PRODUCE"]
    assert sum(s["count"] for s in produce.values()) == prod["batches_sent"]


def _produce_one_per_batch(bootstrap_servers: str, topic: str, partition: int, n: int) -> None:
    """``n`` records to one partition, one batch each (Tansu's high watermark is only right then)."""
    from kafka_core import KafkaProducer

    with KafkaProducer(bootstrap_servers, linger_ms=0) as producer:
        for i in range(n):
            producer.send(topic, b"x" * 20, key=b"k%d" % i, partition=partition).result(30)


def test_sync_consumer_counts_records_bytes_and_lag(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    from kafka_core import KafkaConsumer

    topic = new_topic(2)
    _produce_one_per_batch(bootstrap_servers, topic, 0, 12)
    _produce_one_per_batch(bootstrap_servers, topic, 1, 5)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        partitions={topic: [0, 1]},
        group_id=None,
        auto_offset_reset="earliest",
        max_poll_records=1,
    )
    try:
        got: list[Any] = []
        # Partition 1 is paused: only partition 0's records come, and lag is kept for both.
        consumer.pause([(topic, 1)])
        while len(got) < 4:
            got.extend(consumer.poll(timeout_ms=5_000, max_records=4 - len(got)))
        snap = consumer.metrics()
    finally:
        consumer.close()
    cons = snap["consumer"]
    assert [m.offset for m in got] == [0, 1, 2, 3]
    assert cons["records_received"] == 4
    assert cons["topics"][topic]["records_received"] == 4
    assert cons["lag"][topic][0] == 12 - 4
    assert cons["lag"][topic][1] in (None, 5)  # paused: lag known only if it was fetched before
    # Bytes: the whole batches fetched (the broker returns them as written, one per record):
    # the first m of partition 0's 12, where 4 <= m <= 12 depending on how much was prefetched.
    sizes = [_encoded_size([(b"k%d" % i, b"x" * 20)]) for i in range(12)]
    assert cons["bytes_received"] in {sum(sizes[:m]) for m in range(4, 13)}
    assert cons["fetch_bytes"]["count"] == cons["topics"][topic]["partition_fetches"] >= 1
    assert cons["rebalances"] == 0
    assert sum(s["count"] for s in snap["network"]["requests"]["FETCH"].values()) >= 1


def test_async_group_consumer_counts_rebalance(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    import uuid

    from kafka_core.aio import KafkaConsumer

    topic = new_topic(2)
    _produce_one_per_batch(bootstrap_servers, topic, 1, 3)

    async def main() -> dict[str, Any]:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            topics=[topic],
            group_id=f"g-{uuid.uuid4().hex[:8]}",
            session_timeout_ms=6_000,
            auto_offset_reset="earliest",
        )
        try:
            assert consumer.metrics()["consumer"]["rebalances"] == 0
            got: list[Any] = []
            for _ in range(60):
                got.extend(await consumer.poll(timeout_ms=1_000))
                if len(got) >= 3:
                    break
            assert len(got) == 3
            return consumer.metrics()
        finally:
            await consumer.close()

    snap = asyncio.run(main())
    cons = snap["consumer"]
    assert cons["rebalances"] == 1
    assert cons["rebalance_failures"] == 0
    assert not cons["rebalance_in_progress"]
    assert 0 < cons["rebalance_last_s"] == cons["rebalance_total_s"] == cons["rebalance_max_s"]
    assert cons["assigned_partitions"] == 2
    assert cons["lag"][topic][1] == 0
    assert cons["records_received"] == 3
    reqs = snap["network"]["requests"]
    assert sum(s["count"] for s in reqs["JOIN_GROUP"].values()) >= 1
    assert sum(s["count"] for s in reqs["SYNC_GROUP"].values()) == 1


def test_async_producer_counts_injected_errors_and_retries(mock_cluster: Any) -> None:
    from kafka_core.aio import KafkaProducer
    from kafka_core.protocol import ApiKey

    topic = mock_cluster.create_topic("metrics-errors", partitions=1, replication=1)
    # The next three Produce requests fail with retriable errors; the fourth succeeds.
    mock_cluster.push_request_errors(ApiKey.PRODUCE, 6, 6, 7)

    async def main() -> dict[str, Any]:
        async with KafkaProducer(mock_cluster.bootstrap, linger_ms=0, retry_backoff_ms=10) as producer:
            fut = await producer.send(topic, b"v", key=b"k")
            await fut
            return producer.metrics()

    snap = asyncio.run(main())
    prod = snap["producer"]
    assert prod["retries"] == 3
    assert prod["records_sent"] == 1 and prod["batches_sent"] == 1 and prod["records_failed"] == 0
    errors = snap["network"]["errors"]["PRODUCE"]
    assert len(errors) == 1  # the one leader
    [(leader, by_name)] = errors.items()
    assert by_name == {"NOT_LEADER_OR_FOLLOWER": 2, "REQUEST_TIMED_OUT": 1}
    produce = snap["network"]["requests"]["PRODUCE"][leader]
    assert produce["count"] == 4
    assert produce["errors"] == 3
