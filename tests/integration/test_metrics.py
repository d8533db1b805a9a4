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
