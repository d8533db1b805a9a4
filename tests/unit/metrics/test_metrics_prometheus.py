"""The Prometheus collector: exposition of metrics() snapshots, parsed back with prometheus_client."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kafka_core.metrics import ConsumerMetrics, NetworkMetrics, ProducerMetrics
from kafka_core.metrics import prometheus as kprom
from kafka_core.protocol import ApiKey


class FakeProducer:
    """Anything with metrics() returning a client snapshot will do."""

    def __init__(self, client_id: str = "p1") -> None:
        self.net = NetworkMetrics()
        self.prod = ProducerMetrics()
        self.client_id = client_id
        self.closed = False

    def metrics(self) -> dict[str, Any]:
        if self.closed:
            raise RuntimeError("closed")
        snap = self.prod.snapshot()
        snap["buffer_used_bytes"] = 123
        snap["buffer_limit_bytes"] = 1000
        return {"client_id": self.client_id, "network": self.net.snapshot({1: 1}), "producer": snap}


def _consumer_snapshot() -> dict[str, Any]:
    c = ConsumerMetrics()
    c.fetched("t", 900)
    c.delivered("t", 9)
    parts = [(SimpleNamespace(topic="t", partition=2), SimpleNamespace(position=9, high_watermark=14))]
    return {"client_id": "c1", "network": NetworkMetrics().snapshot(), "consumer": c.snapshot(parts)}


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_exposition_of_producer_and_nested_consumer() -> None:
    registry = CollectorRegistry()
    producer = FakeProducer()
    producer.net.request_done(ApiKey.PRODUCE, 1, 0.003)
    producer.net.request_done(ApiKey.PRODUCE, 1, 0.2)
    producer.net.error_code(ApiKey.PRODUCE, 1, 6)
    producer.net.throttled(ApiKey.PRODUCE, 1, 250)
    producer.prod.batch_sent("orders", 40, 4000)
    kprom.register(producer, registry)
    # A transport-like object: snapshots nested under its own keys.
    kprom.register(
        lambda: {"published": 3, "subscriptions": [{"topic": "t", "consumer": _consumer_snapshot()}]},
        registry,
    )

    samples = _samples(registry)
    p = (("client_id", "p1"), ("kind", "producer"))
    api = (("api", "PRODUCE"), ("broker", "1"))
    assert samples[("kafka_core_requests_total", tuple(sorted(p + api)))] == 2
    hist = tuple(sorted(p + api))
    assert samples[("kafka_core_request_latency_seconds_count", hist)] == 2
    assert samples[("kafka_core_request_latency_seconds_sum", hist)] == pytest.approx(0.203)
    assert (
        samples[("kafka_core_request_latency_seconds_bucket", tuple(sorted((*hist, ("le", "0.005")))))] == 1
    )
    assert samples[("kafka_core_request_latency_seconds_bucket", tuple(sorted((*hist, ("le", "+Inf")))))] == 2
    err = tuple(sorted((*p, *api, ("error", "NOT_LEADER_OR_FOLLOWER"))))
    assert samples[("kafka_core_request_errors_total", err)] == 1
    assert samples[("kafka_core_request_throttle_seconds_total", tuple(sorted(p + api)))] == 0.25
    topic = tuple(sorted((*p, ("topic", "orders"))))
    assert samples[("kafka_core_producer_records_sent_total", topic)] == 40
    assert samples[("kafka_core_producer_bytes_sent_total", topic)] == 4000
    assert samples[("kafka_core_producer_batch_records_count", p)] == 1
    assert samples[("kafka_core_producer_batch_records_sum", p)] == 40
    assert samples[("kafka_core_producer_buffer_used_bytes", p)] == 123
    assert samples[("kafka_core_in_flight_requests", p)] == 1

    c = (("client_id", "c1"), ("kind", "consumer"))
    lag = tuple(sorted((*c, ("partition", "2"), ("topic", "t"))))
    assert samples[("kafka_core_consumer_lag", lag)] == 5
    assert samples[("kafka_core_consumer_records_received_total", tuple(sorted((*c, ("topic", "t")))))] == 9
    assert samples[("kafka_core_consumer_bytes_received_total", tuple(sorted((*c, ("topic", "t")))))] == 900
    assert samples[("kafka_core_consumer_rebalance_seconds_count", c)] == 0


def test_scrape_reads_live_values_and_skips_closed_objects() -> None:
    registry = CollectorRegistry()
    a, b = FakeProducer("same"), FakeProducer("same")
    kprom.register(a, registry, prefix="app")
    kprom.register(b, registry, prefix="app")
    kprom.register(a, registry, prefix="app")  # once only
    a.prod.batch_sent("t", 5, 50)
    first = _samples(registry)
    ids = {dict(k[1])["client_id"] for k in first if k[0] == "app_producer_retries_total"}
    assert ids == {"same", "same#2"}  # same client_id twice: series kept apart
    a.prod.batch_sent("t", 5, 50)
    key = ("app_producer_records_sent_total", (("client_id", "same"), ("kind", "producer"), ("topic", "t")))
    assert _samples(registry)[key] == 10
    a.closed = True
    after = _samples(registry)
    assert key not in after
    assert {dict(k[1])["client_id"] for k in after if k[0] == "app_producer_retries_total"} == {"same"}
    kprom.unregister(a, registry, prefix="app")
    kprom.unregister(b, registry, prefix="app")
    assert _samples(registry) == {}


def test_missing_prometheus_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ImportError, match=r"kafka-core\[metrics\]"):
        kprom.register(FakeProducer(), object())
