"""kafka_core.metrics.otel read through the OpenTelemetry SDK's InMemoryMetricReader: KIP-714
names, counters for totals and gauges for values now, the client's attributes, one snapshot per
collection, several objects on one provider, and close."""

from __future__ import annotations

import builtins
import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum

from kafka_core.metrics.kip714 import METRICS
from kafka_core.metrics.otel import METER_NAME, export_metrics

PRODUCER: dict[str, Any] = {
    "client_id": "orders-writer",
    "network": {
        "connections": {"created": 2},
        "requests": {
            "PRODUCE": {
                1: {
                    "count": 4,
                    "latency_sum_s": 0.04,
                    "latency_max_s": 0.02,
                    "throttle_time_sum_ms": 30,
                    "throttle_time_max_ms": 20,
                }
            }
        },
    },
    "producer": {
        "records_sent": 10,
        "records_failed": 1,
        "retries": 2,
        "bytes_sent": 500,
        "batch_bytes": {"avg": 125.0, "max": 200, "count": 4},
        "record_queue_time_ms": {"avg": 6.5, "max": 9, "count": 4, "sum": 26},
        "buffer_limit_bytes": 1000,
        "buffer_used_bytes": 100,
        "topics": {"t": {"records_sent": 10, "bytes_sent": 500, "records_failed": 1}},
    },
}
CONSUMER: dict[str, Any] = {
    "client_id": "orders-reader",
    "network": {
        "connections": {"created": 1},
        "requests": {
            "FETCH": {2: {"count": 2, "latency_sum_s": 1.0, "latency_max_s": 0.6}},
            "OFFSET_COMMIT": {3: {"count": 2, "latency_sum_s": 0.01, "latency_max_s": 0.006}},
        },
    },
    "consumer": {
        "records_received": 7,
        "bytes_received": 70,
        "lag": {"t": {0: 3, 1: None, 2: 5}},
        "assigned_partitions": 3,
        "rebalances": 1,
        "rebalance_failures": 0,
        "rebalance_total_s": 0.5,
        "rebalance_max_s": 0.5,
        "polls": 4,
        "poll_idle_ratio_sum": 1.0,
        "topics": {"t": {"records_received": 7, "bytes_received": 70}},
    },
}


class Source:
    """An object with metrics(), as every client is; counts the snapshots taken."""

    def __init__(self, snap: dict[str, Any]) -> None:
        self.snap = snap
        self.calls = 0

    def metrics(self) -> dict[str, Any]:
        self.calls += 1
        return copy.deepcopy(self.snap)


@pytest.fixture
def reader() -> Iterator[tuple[MeterProvider, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


def collected(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    if data is None:
        return {}
    return {
        m.name: m.data
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        if sm.scope.name == METER_NAME
        for m in sm.metrics
        if m.data.data_points
    }


def points(data: Any) -> dict[tuple[tuple[str, Any], ...], Any]:
    return {tuple(sorted(p.attributes.items())): p.value for p in data.data_points}


def test_a_producer_snapshot_under_kip_714_names_with_its_attributes(
    reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, r = reader
    export_metrics(Source(PRODUCER), provider)
    got = collected(r)
    p = "org.apache.kafka.producer."
    me = (("client_id", "orders-writer"),)
    sent = got[p + "record.send.total"]
    assert isinstance(sent, Sum) and sent.is_monotonic and points(sent) == {me: 10}
    assert points(got[p + "record.error.total"]) == {me: 1}
    assert points(got[p + "record.retry.total"]) == {me: 2}
    assert points(got[p + "byte.total"]) == {me: 500}
    assert points(got[p + "topic.record.send.total"]) == {(*me, ("topic", "t")): 10}
    assert isinstance(got[p + "batch.size.max"], Gauge) and points(got[p + "batch.size.max"]) == {me: 200}
    assert points(got[p + "buffer.available.bytes"]) == {me: 900}
    assert points(got[p + "record.queue.time.avg"]) == {me: 6.5}
    assert points(got[p + "record.queue.time.max"]) == {me: 9}
    assert points(got[p + "node.request.latency.max"]) == {(*me, ("node_id", "1")): pytest.approx(20.0)}
    assert points(got[p + "node.request.latency.avg"]) == {(*me, ("node_id", "1")): pytest.approx(10.0)}
    assert points(got[p + "produce.throttle.time.avg"]) == {me: pytest.approx(7.5)}
    assert points(got[p + "produce.throttle.time.max"]) == {me: 20}
    assert not any(name.startswith("org.apache.kafka.consumer.") for name in got)


def test_a_consumer_snapshot_with_partition_lag_commit_latency_and_poll_idle_ratio(
    reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, r = reader
    export_metrics(Source(CONSUMER), provider)
    got = collected(r)
    c = "org.apache.kafka.consumer."
    me = (("client_id", "orders-reader"),)
    assert points(got[c + "fetch.manager.records.consumed.total"]) == {me: 7}
    assert points(got[c + "fetch.manager.records.lag"]) == {
        (*me, ("partition", "0"), ("topic", "t")): 3,
        (*me, ("partition", "2"), ("topic", "t")): 5,
    }
    assert points(got[c + "fetch.manager.records.lag.max"]) == {me: 5}
    assert points(got[c + "coordinator.commit.latency.avg"]) == {me: pytest.approx(5.0)}
    assert points(got[c + "coordinator.commit.latency.max"]) == {me: pytest.approx(6.0)}
    assert points(got[c + "fetch.manager.fetch.latency.max"]) == {me: pytest.approx(600.0)}
    assert points(got[c + "poll.idle.ratio.avg"]) == {me: pytest.approx(0.25)}
    assert points(got[c + "coordinator.rebalance.total"]) == {me: 1}


def test_each_collection_takes_one_snapshot_and_counters_follow_the_client(
    reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, r = reader
    source = Source(PRODUCER)
    export_metrics(source, provider)
    collected(r)
    assert source.calls == 1
    source.snap = copy.deepcopy(PRODUCER)
    source.snap["producer"]["records_sent"] = 25
    got = collected(r)
    assert source.calls == 2
    assert points(got["org.apache.kafka.producer.record.send.total"]) == {
        (("client_id", "orders-writer"),): 25
    }


def test_several_objects_on_one_provider_and_close(
    reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, r = reader
    first = export_metrics(Source(PRODUCER), provider)
    with export_metrics(Source(PRODUCER), provider) as second:  # the same client_id: kept apart
        export_metrics(Source(CONSUMER), provider)
        got = collected(r)
        assert {k[0][1] for k in points(got["org.apache.kafka.producer.record.send.total"])} == {
            "orders-writer",
            "orders-writer#2",
        }
        assert "org.apache.kafka.consumer.fetch.manager.records.consumed.total" in got
    assert second.closed and not first.closed
    first.close()
    first.close()  # idempotent
    got = collected(r)
    assert "org.apache.kafka.producer.record.send.total" not in got
    assert "org.apache.kafka.consumer.fetch.manager.records.consumed.total" in got


def test_a_failing_object_does_not_stop_the_others(
    reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, r = reader

    def closed() -> dict[str, Any]:
        raise RuntimeError("closed")

    export_metrics(closed, provider)
    export_metrics(Source(CONSUMER), provider)
    assert "org.apache.kafka.consumer.fetch.manager.records.consumed.total" in collected(r)


def test_a_nested_snapshot_exports_every_client_and_a_bare_client_as_admin(
    reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, r = reader
    bare = {"client_id": "ops", "network": {"connections": {"created": 3}, "requests": {}}}
    export_metrics(lambda: {"producer": PRODUCER, "consumers": [CONSUMER], "admin": bare}, provider)
    got = collected(r)
    assert points(got["org.apache.kafka.admin.client.connection.creation.total"]) == {
        (("client_id", "ops"),): 3
    }
    assert "org.apache.kafka.producer.record.send.total" in got
    assert "org.apache.kafka.consumer.fetch.manager.records.consumed.total" in got


def test_every_exported_metric_is_described_with_its_kind(
    reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, r = reader
    export_metrics(Source(PRODUCER), provider)
    export_metrics(Source(CONSUMER), provider)
    got = collected(r)
    kinds = {f"org.apache.kafka.{k}.{i.name}": i.sum for k, infos in METRICS.items() for i in infos}
    assert got and all(isinstance(data, Sum) == kinds[name] for name, data in got.items())


def test_without_opentelemetry_it_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real: Callable[..., Any] = builtins.__import__

    def no_otel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    with pytest.raises(ImportError, match=r"kafka-core\[otel\]"):
        export_metrics(Source(PRODUCER))


def test_a_share_consumer_is_a_consumer_without_the_group_consumers_metrics(
    reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, r = reader
    share = {
        "client_id": "sharer",
        "network": {"connections": {"created": 2}, "requests": {}},
        "share": {"group_id": "g", "assignment": ["t-0"]},
    }
    export_metrics(lambda: share, provider)
    got = collected(r)
    assert points(got["org.apache.kafka.consumer.connection.creation.total"]) == {
        (("client_id", "sharer"),): 2
    }
    assert "org.apache.kafka.consumer.coordinator.assigned.partitions" not in got
