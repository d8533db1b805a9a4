"""Prometheus exposition of ``metrics()`` snapshots (the optional extra ``kafka-core[metrics]``).

A custom collector reads each registered object's ``metrics()`` when Prometheus scrapes, so
nothing is done per increment: the clients keep counting in plain ints, and the cost of
exposition is paid once per scrape. ``prometheus_client`` is imported only when used.

    from kafka_core.metrics.prometheus import register
    register(producer)                       # the default registry, prefix "kafka_core"
    prometheus_client.start_http_server(9464)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from kafka_core.metrics.registry import LATENCY_BOUNDS_S
from kafka_core.metrics.snapshots import client_snapshots, distinct_ids, snapshot_of

log = logging.getLogger("kafka_core.metrics")

__all__ = ["KafkaCoreCollector", "register", "unregister"]

_EXTRA_HINT = "pip install 'kafka-core[metrics]'"
_collectors: dict[tuple[int, str], KafkaCoreCollector] = {}
_lock = threading.Lock()


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise ImportError(
            f"Prometheus exposition needs prometheus_client, the optional extra kafka-core[metrics]: {_EXTRA_HINT}"
        ) from exc
    return prometheus_client


def register(obj: Any, registry: Any = None, prefix: str = "kafka_core") -> KafkaCoreCollector:
    """Expose ``obj.metrics()`` (a producer, consumer, client, admin or transport, sync or asyncio:
    anything with a ``metrics()`` returning such a dict, or a callable returning one) through
    ``registry`` (default: prometheus_client's global REGISTRY). Several objects on one registry
    share one collector; returns it."""
    prom = _prometheus()
    if registry is None:
        registry = prom.REGISTRY
    key = (id(registry), prefix)
    with _lock:
        collector = _collectors.get(key)
        if collector is None:
            collector = _collectors[key] = KafkaCoreCollector(prefix)
            registry.register(collector)
        collector.add(obj)
    return collector


def unregister(obj: Any, registry: Any = None, prefix: str = "kafka_core") -> None:
    """Stop exposing ``obj`` (call before closing it, or its series just disappear)."""
    if registry is None:
        registry = _prometheus().REGISTRY
    with _lock:
        collector = _collectors.get((id(registry), prefix))
        if collector is None:
            return
        collector.remove(obj)
        if not collector.sources:
            registry.unregister(collector)
            del _collectors[(id(registry), prefix)]


class KafkaCoreCollector:
    """Turns snapshots into metric families at scrape time (see the module docstring)."""

    def __init__(self, prefix: str = "kafka_core") -> None:
        self.prefix = prefix
        self.sources: list[Any] = []

    def add(self, obj: Any) -> None:
        if not any(s is obj for s in self.sources):
            self.sources.append(obj)

    def remove(self, obj: Any) -> None:
        self.sources = [s for s in self.sources if s is not obj]

    def describe(self) -> list[Any]:
        return []  # no scrape at registration time (the objects may not be started yet)

    def collect(self) -> Iterator[Any]:
        snaps: list[tuple[str, dict[str, Any]]] = []
        for source in list(self.sources):
            try:
                snaps.extend(client_snapshots(snapshot_of(source)))
            except Exception as exc:  # a closed object: its series are gone, the scrape goes on
                log.debug("metrics of %r unavailable: %r", source, exc)
        yield from _Families(self.prefix, snaps).build()


class _Families:
    """One scrape's metric families, filled from every snapshot."""

    def __init__(self, prefix: str, snaps: list[tuple[str, dict[str, Any]]]) -> None:
        _prometheus()
        import prometheus_client.core

        self.core = prometheus_client.core
        self.p = prefix
        self.snaps = snaps
        self.families: dict[str, Any] = {}

    def _family(self, kind: str, name: str, doc: str, labels: list[str]) -> Any:
        fam = self.families.get(name)
        if fam is None:
            cls = {
                "counter": self.core.CounterMetricFamily,
                "gauge": self.core.GaugeMetricFamily,
                "histogram": self.core.HistogramMetricFamily,
                "summary": self.core.SummaryMetricFamily,
            }[kind]
            fam = self.families[name] = cls(f"{self.p}_{name}", doc, labels=["client_id", "kind", *labels])
        return fam

    def counter(self, name: str, doc: str, base: list[str], value: float, **labels: Any) -> None:
        fam = self._family("counter", name, doc, list(labels))
        fam.add_metric([*base, *(str(v) for v in labels.values())], value)

    def gauge(self, name: str, doc: str, base: list[str], value: float, **labels: Any) -> None:
        fam = self._family("gauge", name, doc, list(labels))
        fam.add_metric([*base, *(str(v) for v in labels.values())], value)

    def summary(self, name: str, doc: str, base: list[str], count: int, total: float) -> None:
        self._family("summary", name, doc, []).add_metric(base, count_value=count, sum_value=total)

    def build(self) -> Iterator[Any]:
        for kind, client_id, snap in distinct_ids(self.snaps):
            base = [client_id, kind]
            self._network(base, snap["network"])
            if "producer" in snap:
                self._producer(base, snap["producer"])
            if "consumer" in snap:
                self._consumer(base, snap["consumer"])
        return iter(self.families.values())

    def _network(self, base: list[str], net: dict[str, Any]) -> None:
        bounds = [repr(b) for b in LATENCY_BOUNDS_S] + ["+Inf"]
        for api, by_broker in net["requests"].items():
            for broker, s in by_broker.items():
                labels = [*base, api, str(broker)]
                fam = self._family(
                    "histogram",
                    "request_latency_seconds",
                    "Time from writing a request to its response, per API and broker",
                    ["api", "broker"],
                )
                cumulative = s["latency_buckets_s"]
                fam.add_metric(labels, [(b, cumulative[b]) for b in bounds], s["latency_sum_s"])
                self.counter(
                    "requests",
                    "Requests answered, per API and broker",
                    base,
                    s["count"],
                    api=api,
                    broker=broker,
                )
                if s["throttle_time_sum_ms"]:
                    self.counter(
                        "request_throttle_seconds",
                        "Time the broker asked the client to hold back (KIP-219), per API and broker",
                        base,
                        s["throttle_time_sum_ms"] / 1000.0,
                        api=api,
                        broker=broker,
                    )
        for api, by_broker in net["errors"].items():
            for broker, by_name in by_broker.items():
                for error, n in by_name.items():
                    self.counter(
                        "request_errors",
                        "Failed requests and error codes in responses, per API, broker and error",
                        base,
                        n,
                        api=api,
                        broker=broker,
                        error=error,
                    )
        conns = net["connections"]
        self.gauge("connections_active", "Open broker connections", base, conns["active"])
        self.counter("connection_creations", "Broker connections opened", base, conns["created"])
        self.counter("connection_closes", "Open broker connections that were closed", base, conns["closed"])
        self.counter("connection_failures", "Connection attempts that failed", base, conns["failed"])
        self.counter("client_retries", "Retries of the client's own operations", base, net["retries"])
        self.gauge("in_flight_requests", "Requests awaiting a response", base, net["in_flight_requests"])

    def _producer(self, base: list[str], prod: dict[str, Any]) -> None:
        for topic, t in prod["topics"].items():
            self.counter(
                "producer_records_sent", "Records acknowledged", base, t["records_sent"], topic=topic
            )
            self.counter(
                "producer_bytes_sent", "Bytes of acknowledged batches", base, t["bytes_sent"], topic=topic
            )
            self.counter(
                "producer_batches_sent", "Batches acknowledged", base, t["batches_sent"], topic=topic
            )
            self.counter(
                "producer_records_failed", "Records that failed", base, t["records_failed"], topic=topic
            )
        self.counter("producer_retries", "Batch retries", base, prod["retries"])
        for what in ("records", "bytes"):
            s = prod[f"batch_{what}"]
            self.summary(
                f"producer_batch_{what}",
                f"{what.capitalize()} per acknowledged batch",
                base,
                s["count"],
                s["sum"],
            )
            self.gauge(f"producer_batch_{what}_max", f"Largest batch, in {what}", base, s["max"])
        queued = prod.get("record_queue_time_ms")
        if queued is not None:
            self.summary(
                "producer_record_queue_time_seconds",
                "Time a batch waited in the buffer before it was sent (each drain)",
                base,
                queued["count"],
                queued["sum"] / 1000.0,
            )
            self.gauge(
                "producer_record_queue_time_max_seconds",
                "Longest time a batch waited in the buffer",
                base,
                queued["max"] / 1000.0,
            )
        self.gauge(
            "producer_buffer_used_bytes",
            "Bytes buffered (buffer_memory in use)",
            base,
            prod["buffer_used_bytes"],
        )
        self.gauge("producer_buffer_limit_bytes", "buffer_memory", base, prod["buffer_limit_bytes"])

    def _consumer(self, base: list[str], cons: dict[str, Any]) -> None:
        for topic, t in cons["topics"].items():
            self.counter(
                "consumer_records_received",
                "Records handed to the application",
                base,
                t["records_received"],
                topic=topic,
            )
            self.counter(
                "consumer_bytes_received",
                "Bytes of record batches fetched",
                base,
                t["bytes_received"],
                topic=topic,
            )
        for topic, parts in cons["lag"].items():
            for partition, lag in parts.items():
                if lag is not None:
                    self.gauge(
                        "consumer_lag",
                        "High watermark minus position, per partition",
                        base,
                        lag,
                        topic=topic,
                        partition=partition,
                    )
        self.gauge("consumer_assigned_partitions", "Partitions assigned", base, cons["assigned_partitions"])
        self.summary(
            "consumer_rebalance_seconds",
            "Completed rebalances (group joins) and their duration",
            base,
            cons["rebalances"],
            cons["rebalance_total_s"],
        )
        self.counter("consumer_rebalance_failures", "Group joins given up", base, cons["rebalance_failures"])
        self.gauge(
            "consumer_rebalance_in_progress",
            "1 while the consumer is joining its group",
            base,
            int(cons["rebalance_in_progress"]),
        )
