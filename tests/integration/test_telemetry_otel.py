"""kafka_core.metrics.otel on the test broker: after producing and consuming, what the OpenTelemetry
SDK's in-memory reader collected equals the clients' own ``metrics()``, under the KIP-714 names."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from kafka_core import KafkaConsumer, KafkaProducer
from kafka_core.metrics.otel import export_metrics


def collected(reader: InMemoryMetricReader) -> dict[str, dict[tuple[tuple[str, Any], ...], Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        m.name: {tuple(sorted(p.attributes.items())): p.value for p in m.data.data_points}
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.data.data_points
    }


def test_otel_export_equals_the_clients_own_metrics(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, client_id="otel-writer", linger_ms=1)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        client_id="otel-reader",
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
    )
    exports = [export_metrics(producer, provider), export_metrics(consumer, provider)]
    try:
        for i in range(40):
            producer.send(topic, b"v%d" % i, key=b"k%d" % (i % 4))
        producer.flush(30)
        got = 0
        deadline = time.monotonic() + 60
        while got < 40 and time.monotonic() < deadline:
            got += len(consumer.poll(500))
        assert got == 40
        # nothing moves between the snapshots: the producer is flushed, the consumer not polling
        seen = collected(reader)
        prod: dict[str, Any] = producer.metrics()
        cons: dict[str, Any] = consumer.metrics()
    finally:
        for export in exports:
            export.close()
        consumer.close(30)
        producer.close(30)
        provider.shutdown()
    p, c = "org.apache.kafka.producer.", "org.apache.kafka.consumer."
    w, r = (("client_id", "otel-writer"),), (("client_id", "otel-reader"),)
    assert seen[p + "record.send.total"] == {w: prod["producer"]["records_sent"]} == {w: 40}
    assert seen[p + "byte.total"] == {w: prod["producer"]["bytes_sent"]}
    assert seen[p + "topic.record.send.total"] == {(*w, ("topic", topic)): 40}
    assert seen[p + "connection.creation.total"] == {w: prod["network"]["connections"]["created"]}
    assert seen[p + "batch.size.max"] == {w: prod["producer"]["batch_bytes"]["max"]}
    nodes = {str(n) for per_node in prod["network"]["requests"].values() for n in per_node if n >= 0}
    assert {dict(k)["node_id"] for k in seen[p + "node.request.latency.max"]} == nodes
    assert seen[p + "produce.throttle.time.max"] == {w: 0}  # no quota here
    assert (
        seen[c + "fetch.manager.records.consumed.total"]
        == {r: cons["consumer"]["records_received"]}
        == {r: 40}
    )
    assert seen[c + "fetch.manager.bytes.consumed.total"] == {r: cons["consumer"]["bytes_received"]}
    assert seen[c + "coordinator.assigned.partitions"] == {r: 2}
    assert seen[c + "coordinator.rebalance.total"] == {r: cons["consumer"]["rebalances"]}
    lags = {
        (*r, ("partition", str(part)), ("topic", t)): lag
        for t, parts in cons["consumer"]["lag"].items()
        for part, lag in parts.items()
        if lag is not None
    }
    assert seen[c + "fetch.manager.records.lag"] == lags and len(lags) == 2
    assert seen[c + "poll.idle.ratio.avg"][r] == cons["consumer"]["poll_idle_ratio_avg"]
    assert 0 < seen[c + "poll.idle.ratio.avg"][r] <= 1
