"""The metrics registry: what each counter does with the events it is given."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafka_core.metrics import (
    LATENCY_BOUNDS_S,
    ConsumerMetrics,
    NetworkMetrics,
    ProducerMetrics,
    RequestStats,
)
from kafka_core.protocol import ApiKey


def test_request_stats_histogram_sum_max_and_quantiles() -> None:
    s = RequestStats()
    assert s.quantile(0.5) is None
    for seconds in (0.0005, 0.002, 0.002, 0.3, 45.0):
        s.observe(seconds)
    snap = s.snapshot()
    assert snap["count"] == 5
    assert snap["latency_sum_s"] == pytest.approx(45.3045)
    assert snap["latency_max_s"] == 45.0
    buckets = snap["latency_buckets_s"]
    assert list(buckets) == [repr(b) for b in LATENCY_BOUNDS_S] + ["+Inf"]
    assert buckets["0.001"] == 1
    assert buckets["0.0025"] == 3
    assert buckets["0.25"] == 3
    assert buckets["0.5"] == 4
    assert buckets["30.0"] == 4
    assert buckets["+Inf"] == 5
    assert snap["latency_p50_s"] == 0.0025  # the third of five falls in the 2.5 ms bucket
    assert snap["latency_p99_s"] == 45.0  # beyond the last bound: the max


def test_network_metrics_by_api_and_broker_with_error_names() -> None:
    m = NetworkMetrics()
    m.request_done(ApiKey.PRODUCE, 1, 0.01)
    m.request_done(ApiKey.PRODUCE, 1, 0.02)
    m.request_done(ApiKey.FETCH, 2, 0.5, error_code=0)
    m.request_done(ApiKey.METADATA, None, 0.001, error_code=3)  # a bootstrap connection
    m.error_code(ApiKey.PRODUCE, 1, 6)
    m.error(ApiKey.PRODUCE, 1, "TIMEOUT")
    m.retries += 2
    snap = m.snapshot({1: 2, 2: 0})
    assert snap["requests"]["PRODUCE"][1]["count"] == 2
    assert snap["requests"]["PRODUCE"][1]["errors"] == 2
    assert snap["requests"]["FETCH"][2]["errors"] == 0
    assert snap["requests"]["METADATA"][-1]["errors"] == 1
    assert snap["errors"] == {
        "METADATA": {-1: {"UNKNOWN_TOPIC_OR_PARTITION": 1}},
        "PRODUCE": {1: {"NOT_LEADER_OR_FOLLOWER": 1, "TIMEOUT": 1}},
    }
    assert snap["retries"] == 2
    assert snap["in_flight_requests"] == 2
    assert snap["in_flight_by_broker"] == {1: 2, 2: 0}
    # The snapshot is a copy: later counting does not change it.
    m.request_done(ApiKey.PRODUCE, 1, 0.01)
    assert snap["requests"]["PRODUCE"][1]["count"] == 2


def test_producer_metrics_per_batch_and_topic() -> None:
    m = ProducerMetrics()
    m.batch_sent("a", 10, 1000)
    m.batch_sent("a", 30, 2500)
    m.batch_sent("b", 1, 80)
    m.batch_failed("b", 5)
    m.retries += 1
    snap = m.snapshot()
    assert snap["records_sent"] == 41
    assert snap["bytes_sent"] == 3580
    assert snap["batches_sent"] == 3
    assert snap["records_failed"] == 5
    assert snap["batch_records"] == {"count": 3, "sum": 41, "max": 30, "avg": pytest.approx(41 / 3)}
    assert snap["batch_bytes"]["max"] == 2500
    assert snap["record_queue_time_ms"] == {"count": 0, "sum": 0, "max": 0, "avg": None}
    assert snap["topics"]["b"] == {
        "records_sent": 1,
        "bytes_sent": 80,
        "batches_sent": 1,
        "records_failed": 5,
        "batches_failed": 1,
    }


def test_consumer_metrics_lag_and_rebalances(monkeypatch: pytest.MonkeyPatch) -> None:
    m = ConsumerMetrics()
    m.fetched("t", 500)
    m.fetched("t", 300)
    m.delivered("t", 7)
    parts = [
        (SimpleNamespace(topic="t", partition=0), SimpleNamespace(position=7, high_watermark=20)),
        (SimpleNamespace(topic="t", partition=1), SimpleNamespace(position=None, high_watermark=5)),
        (SimpleNamespace(topic="t", partition=2), SimpleNamespace(position=3, high_watermark=-1)),
    ]
    clock = iter([100.0, 102.5, 200.0, 201.0, 300.0, 300.5])
    monkeypatch.setattr("kafka_core.metrics.registry.time.monotonic", lambda: next(clock))
    m.rebalance_begin()
    m.rebalance_begin()  # already joining: the first start counts
    m.rebalance_end(True)
    m.rebalance_begin()
    m.rebalance_end(True)
    m.rebalance_begin()
    m.rebalance_end(False)
    m.rebalance_end(True)  # nothing begun: ignored
    snap = m.snapshot(parts)
    assert snap["lag"] == {"t": {0: 13, 1: None, 2: None}}
    assert snap["lag_total"] == 13
    assert snap["assigned_partitions"] == 3
    assert snap["records_received"] == 7
    assert snap["bytes_received"] == 800
    assert snap["fetch_bytes"]["count"] == 2
    assert snap["rebalances"] == 2
    assert snap["rebalance_failures"] == 1
    assert snap["rebalance_total_s"] == pytest.approx(3.5)
    assert snap["rebalance_max_s"] == pytest.approx(2.5)
    assert snap["rebalance_last_s"] == pytest.approx(1.0)
    assert snap["rebalance_in_progress"] is False


def test_throttle_times_sum_and_max_per_api_and_broker() -> None:
    m = NetworkMetrics()
    for ms in (0, 30, 0, 10):
        m.request_done(ApiKey.PRODUCE, 1, 0.01)
        if ms:
            m.throttled(ApiKey.PRODUCE, 1, ms)
    s = m.snapshot()["requests"]["PRODUCE"][1]
    assert (s["count"], s["throttle_time_sum_ms"], s["throttle_time_max_ms"]) == (4, 40, 30)


def test_poll_idle_ratio_is_each_polls_time_over_the_time_since_the_previous_poll_began(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = ConsumerMetrics()
    # poll 1: 10.0-10.5 (nothing before it); poll 2: 12.0-13.0, 2 s after poll 1 began: 1/(1+2);
    # poll 3: 13.0-13.0, at once: 0/(0+1)
    clock = iter([10.0, 10.5, 12.0, 13.0, 13.0, 13.0])
    monkeypatch.setattr("kafka_core.metrics.registry.time.monotonic", lambda: next(clock))
    for _ in range(3):
        m.poll_begin()
        m.poll_end()
    snap = m.snapshot()
    assert snap["polls"] == 3
    assert snap["poll_idle_ratio_sum"] == pytest.approx(1.0 + 1 / 3)
    assert snap["poll_idle_ratio_avg"] == pytest.approx((1.0 + 1 / 3) / 3)
