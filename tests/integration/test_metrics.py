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
