"""A client's ``metrics()`` snapshot as KIP-714 metrics: ``org.apache.kafka.<kind>.<group>.<name>``.

The names follow KIP-714's convention as the Java client applies it to its own metrics (group
without ``-metrics``, dashes to dots, tags to snake_case attributes), for the counters this
client keeps: KIP-714's standard ``connection.creation.*``, ``node.request.latency.*``,
``produce.throttle.time.*``, ``poll.idle.ratio.avg`` and ``coordinator.commit.latency.*``, then
the producer's ``record.send.total``... and the consumer's ``coordinator.*`` and
``fetch.manager.*``. Latencies are in milliseconds, as Java's. ``METRICS`` describes each one
(kafka_core.telemetry pushes them, kafka_core.metrics.otel exports them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KINDS", "METRICS", "MetricInfo", "MetricsCollector", "Point", "prefix", "selector"]

KINDS = ("producer", "consumer", "admin")
_GROUP_PREFIX = {"admin": "admin.client"}


@dataclass(frozen=True, slots=True)
class Point:
    """One metric's one data point: a gauge, or a monotonic sum (a counter) when ``is_sum``.

    ``start_ns`` is where a sum's count starts (the client's start when cumulative, the previous
    push when delta); an int value is sent as ``as_int``, a float as ``as_double``."""

    name: str
    value: int | float
    is_sum: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)
    unit: str = ""
    description: str = ""


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """One metric the collector makes: ``name`` after ``org.apache.kafka.<kind>.``; ``sum``
    (a monotonic total) or a gauge; its unit (UCUM, as OpenTelemetry's) and meaning."""

    name: str
    sum: bool
    unit: str
    description: str


_COMMON = (
    MetricInfo("connection.creation.total", True, "1", "Connections created"),
    MetricInfo(
        "connection.creation.rate", False, "1/s", "New connections per second since the previous collection"
    ),
    MetricInfo(
        "node.request.latency.avg", False, "ms", "Request latency to the broker since the previous collection"
    ),
    MetricInfo("node.request.latency.max", False, "ms", "Largest request latency to the broker"),
)
_PRODUCER = (
    MetricInfo("record.send.total", True, "1", "Records acknowledged"),
    MetricInfo("record.error.total", True, "1", "Records whose batch failed"),
    MetricInfo("record.retry.total", True, "1", "Batch retries"),
    MetricInfo("byte.total", True, "By", "Bytes of record batches acknowledged"),
    MetricInfo("batch.size.avg", False, "By", "Average acknowledged batch size"),
    MetricInfo("batch.size.max", False, "By", "Largest acknowledged batch size"),
    MetricInfo(
        "record.queue.time.avg", False, "ms", "Average time a batch waited in the buffer before it was sent"
    ),
    MetricInfo(
        "record.queue.time.max", False, "ms", "Longest time a batch waited in the buffer before it was sent"
    ),
    MetricInfo("buffer.total.bytes", False, "By", "buffer_memory"),
    MetricInfo("buffer.available.bytes", False, "By", "buffer_memory not in use"),
    MetricInfo(
        "produce.throttle.time.avg",
        False,
        "ms",
        "Broker throttle time per response since the previous collection",
    ),
    MetricInfo("produce.throttle.time.max", False, "ms", "Largest broker throttle time of a response"),
    MetricInfo("topic.record.send.total", True, "1", "Records acknowledged, per topic"),
    MetricInfo("topic.byte.total", True, "By", "Bytes acknowledged, per topic"),
    MetricInfo("topic.record.error.total", True, "1", "Records failed, per topic"),
)
_CONSUMER = (
    MetricInfo(
        "poll.idle.ratio.avg",
        False,
        "1",
        "Share of the time spent inside poll, per poll, since the previous collection",
    ),
    MetricInfo("coordinator.assigned.partitions", False, "1", "Partitions assigned"),
    MetricInfo("coordinator.rebalance.total", True, "1", "Completed rebalances"),
    MetricInfo("coordinator.failed.rebalance.total", True, "1", "Rebalances given up"),
    MetricInfo("coordinator.rebalance.latency.total", True, "ms", "Time spent in completed rebalances"),
    MetricInfo("coordinator.rebalance.latency.avg", False, "ms", "Average rebalance duration"),
    MetricInfo("coordinator.rebalance.latency.max", False, "ms", "Longest rebalance"),
    MetricInfo(
        "coordinator.commit.latency.avg", False, "ms", "OffsetCommit latency since the previous collection"
    ),
    MetricInfo("coordinator.commit.latency.max", False, "ms", "Largest OffsetCommit latency"),
    MetricInfo("fetch.manager.records.consumed.total", True, "1", "Records handed to the application"),
    MetricInfo("fetch.manager.bytes.consumed.total", True, "By", "Bytes of record batches fetched"),
    MetricInfo("fetch.manager.records.lag", False, "1", "High watermark minus position, per partition"),
    MetricInfo("fetch.manager.records.lag.max", False, "1", "Largest partition lag"),
    MetricInfo("fetch.manager.fetch.latency.avg", False, "ms", "Fetch latency since the previous collection"),
    MetricInfo("fetch.manager.fetch.latency.max", False, "ms", "Largest Fetch latency"),
    MetricInfo(
        "fetch.manager.fetch.throttle.time.avg",
        False,
        "ms",
        "Broker throttle time per response since the previous collection",
    ),
    MetricInfo(
        "fetch.manager.fetch.throttle.time.max", False, "ms", "Largest broker throttle time of a response"
    ),
    MetricInfo(
        "fetch.manager.topic.records.consumed.total",
        True,
        "1",
        "Records handed to the application, per topic",
    ),
    MetricInfo("fetch.manager.topic.bytes.consumed.total", True, "By", "Bytes fetched, per topic"),
)
METRICS: dict[str, tuple[MetricInfo, ...]] = {
    "producer": _COMMON + _PRODUCER,
    "consumer": _COMMON + _CONSUMER,
    "admin": _COMMON,
}


def prefix(kind: str) -> str:
    """What a ``kind`` client's metric names start with. Java names them by their group, less
    ``-metrics``: ``producer-metrics`` makes ``org.apache.kafka.producer.``, the admin's
    ``admin-client-metrics`` ``org.apache.kafka.admin.client.``."""
    return f"org.apache.kafka.{_GROUP_PREFIX.get(kind, kind)}."


def selector(requested: Iterable[str]) -> tuple[str, ...] | None:
    """The prefixes a subscription asks for; None for every metric (``["*"]``), () for none."""
    wanted = tuple(requested)
    if len(wanted) == 1 and wanted[0] == "*":
        return None
    return wanted


def selected(name: str, prefixes: tuple[str, ...] | None) -> bool:
    return prefixes is None or any(name.startswith(p) for p in prefixes)


class MetricsCollector:
    """Turns successive snapshots into points; remembers the previous push's counters, for
    the rates, the interval's average latencies and (delta temporality) the sums' increments."""

    def __init__(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        self.kind = kind
        self.prefix = prefix(kind)
        self._last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._last_time: float | None = None

    def collect(
        self, snap: Mapping[str, Any], now: float, *, delta: bool, prefixes: tuple[str, ...] | None
    ) -> list[Point]:
        """The points of ``snap`` (taken at monotonic time ``now``) that ``prefixes`` select."""
        out: list[Point] = []
        p = self.prefix
        elapsed = None if self._last_time is None else max(now - self._last_time, 1e-9)

        def add(name: str, value: float | None, attrs: Mapping[str, str] | None = None) -> None:
            if value is not None and selected(p + name, prefixes):
                out.append(Point(p + name, value, False, dict(attrs or {})))

        def add_sum(name: str, total: int | float, attrs: Mapping[str, str] | None = None) -> None:
            key = (name, tuple(sorted((attrs or {}).items())))
            before = self._last.get(key, 0)
            self._last[key] = total
            if selected(p + name, prefixes):
                out.append(Point(p + name, total - before if delta else total, True, dict(attrs or {})))

        def change(name: str, total: float) -> float:
            """``total`` minus its value at the previous collect (0 the first time)."""
            key = ("~" + name, ())
            before = self._last.get(key, 0.0)
            self._last[key] = total
            return total - before

        network = snap.get("network", {})
        created = network.get("connections", {}).get("created", 0)
        new_connections = change("connections", created)
        add_sum("connection.creation.total", created)
        if elapsed is not None:
            add("connection.creation.rate", new_connections / elapsed)
        for node, (count, total_s, max_s) in sorted(_per_node(network.get("requests", {})).items()):
            attrs = {"node_id": str(node)}
            n = change(f"count{node}", count)
            s = change(f"sum{node}", total_s)
            add("node.request.latency.avg", s / n * 1000.0 if n else None, attrs)
            add("node.request.latency.max", max_s * 1000.0, attrs)
        throttle = {"producer": "produce.throttle.time", "consumer": "fetch.manager.fetch.throttle.time"}
        if self.kind in throttle:
            # Java records every response's throttle time (0 when not throttled) in its network
            # client: the average is over all responses, the max the largest of any.
            count, throttle_sum, throttle_max = _throttle(network.get("requests", {}))
            n = change("throttle.count", count)
            t = change("throttle.sum", throttle_sum)
            add(throttle[self.kind] + ".avg", t / n if n else None)
            add(throttle[self.kind] + ".max", throttle_max if count else None)
        if self.kind == "producer":
            self._producer(snap.get("producer", {}), add, add_sum)
        elif self.kind == "consumer" and "consumer" in snap:  # not a share consumer's
            self._consumer(snap, add, add_sum, change)
        self._last_time = now
        return out

    @staticmethod
    def _producer(prod: Mapping[str, Any], add: Any, add_sum: Any) -> None:
        add_sum("record.send.total", prod.get("records_sent", 0))
        add_sum("record.error.total", prod.get("records_failed", 0))
        add_sum("record.retry.total", prod.get("retries", 0))
        add_sum("byte.total", prod.get("bytes_sent", 0))
        batch = prod.get("batch_bytes", {})
        add("batch.size.avg", batch.get("avg"))
        add("batch.size.max", batch.get("max") if batch.get("count") else None)
        queued = prod.get("record_queue_time_ms", {})
        add("record.queue.time.avg", queued.get("avg"))
        add("record.queue.time.max", queued.get("max") if queued.get("count") else None)
        if "buffer_limit_bytes" in prod:
            add("buffer.total.bytes", prod["buffer_limit_bytes"])
            add("buffer.available.bytes", prod["buffer_limit_bytes"] - prod.get("buffer_used_bytes", 0))
        for topic, t in prod.get("topics", {}).items():
            attrs = {"topic": topic}
            add_sum("topic.record.send.total", t.get("records_sent", 0), attrs)
            add_sum("topic.byte.total", t.get("bytes_sent", 0), attrs)
            add_sum("topic.record.error.total", t.get("records_failed", 0), attrs)

    @staticmethod
    def _consumer(snap: Mapping[str, Any], add: Any, add_sum: Any, change: Any) -> None:
        cons = snap.get("consumer", {})
        polls = change("polls", cons.get("polls", 0))
        idle = change("poll.idle", cons.get("poll_idle_ratio_sum", 0.0))
        add("poll.idle.ratio.avg", idle / polls if polls else None)
        add("coordinator.assigned.partitions", cons.get("assigned_partitions", 0))
        rebalances = cons.get("rebalances", 0)
        add_sum("coordinator.rebalance.total", rebalances)
        add_sum("coordinator.failed.rebalance.total", cons.get("rebalance_failures", 0))
        total_ms = cons.get("rebalance_total_s", 0.0) * 1000.0
        add_sum("coordinator.rebalance.latency.total", total_ms)
        add("coordinator.rebalance.latency.avg", total_ms / rebalances if rebalances else None)
        add("coordinator.rebalance.latency.max", cons.get("rebalance_max_s", 0.0) * 1000.0)
        requests = snap.get("network", {}).get("requests", {})
        for api, name in (
            ("OFFSET_COMMIT", "coordinator.commit.latency"),
            ("FETCH", "fetch.manager.fetch.latency"),
        ):
            count, total_s, max_s = _latency(requests.get(api, {}))
            n = change(api + ".count", count)
            s = change(api + ".sum", total_s)
            add(name + ".avg", s / n * 1000.0 if n else None)
            add(name + ".max", max_s * 1000.0 if count else None)
        add_sum("fetch.manager.records.consumed.total", cons.get("records_received", 0))
        add_sum("fetch.manager.bytes.consumed.total", cons.get("bytes_received", 0))
        lags = []
        for topic, parts in cons.get("lag", {}).items():
            for partition, lag in parts.items():
                if lag is not None:
                    lags.append(lag)
                    add("fetch.manager.records.lag", lag, {"topic": topic, "partition": str(partition)})
        add("fetch.manager.records.lag.max", max(lags) if lags else None)
        for topic, t in cons.get("topics", {}).items():
            attrs = {"topic": topic}
            add_sum("fetch.manager.topic.records.consumed.total", t.get("records_received", 0), attrs)
            add_sum("fetch.manager.topic.bytes.consumed.total", t.get("bytes_received", 0), attrs)


def _latency(per_node: Mapping[int, Mapping[str, Any]]) -> tuple[int, float, float]:
    """One API's responses over every broker: count, summed and max latency (s)."""
    stats = list(per_node.values())
    return (
        sum(s.get("count", 0) for s in stats),
        sum(s.get("latency_sum_s", 0.0) for s in stats),
        max((s.get("latency_max_s", 0.0) for s in stats), default=0.0),
    )


def _throttle(requests: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> tuple[int, int, int]:
    """Every response: how many, their summed and their largest throttle time (ms)."""
    count = total = most = 0
    for per_node in requests.values():
        for s in per_node.values():
            count += s.get("count", 0)
            total += s.get("throttle_time_sum_ms", 0)
            most = max(most, s.get("throttle_time_max_ms", 0))
    return count, total, most


def _per_node(requests: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> dict[int, tuple[int, float, float]]:
    """Per broker (known node ids only, not bootstrap's -1): requests, their summed and max latency."""
    out: dict[int, tuple[int, float, float]] = {}
    for per_node in requests.values():
        for node, s in per_node.items():
            if int(node) < 0:
                continue
            count, total, most = out.get(int(node), (0, 0.0, 0.0))
            out[int(node)] = (
                count + s.get("count", 0),
                total + s.get("latency_sum_s", 0.0),
                max(most, s.get("latency_max_s", 0.0)),
            )
    return out
