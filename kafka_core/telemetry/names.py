"""A client's ``metrics()`` snapshot as KIP-714 metrics: ``org.apache.kafka.<kind>.<group>.<name>``.

The names follow KIP-714's convention as the Java client applies it to its own metrics (group
without ``-metrics``, dashes to dots, tags to snake_case attributes), for the counters this
client keeps: KIP-714's standard ``connection.creation.*`` and ``node.request.latency.*`` for
every client, then the producer's ``record.send.total``... and the consumer's
``coordinator.*`` and ``fetch.manager.*``. Latencies are in milliseconds, as Java's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka_core.telemetry.otlp import Point

__all__ = ["KINDS", "MetricsCollector", "selector"]

KINDS = ("producer", "consumer", "admin")


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
        self.prefix = f"org.apache.kafka.{kind}."
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
        if self.kind == "producer":
            self._producer(snap.get("producer", {}), add, add_sum)
        elif self.kind == "consumer":
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
        add("coordinator.assigned.partitions", cons.get("assigned_partitions", 0))
        rebalances = cons.get("rebalances", 0)
        add_sum("coordinator.rebalance.total", rebalances)
        add_sum("coordinator.failed.rebalance.total", cons.get("rebalance_failures", 0))
        total_ms = cons.get("rebalance_total_s", 0.0) * 1000.0
        add_sum("coordinator.rebalance.latency.total", total_ms)
        add("coordinator.rebalance.latency.avg", total_ms / rebalances if rebalances else None)
        add("coordinator.rebalance.latency.max", cons.get("rebalance_max_s", 0.0) * 1000.0)
        add_sum("fetch.manager.records.consumed.total", cons.get("records_received", 0))
        add_sum("fetch.manager.bytes.consumed.total", cons.get("bytes_received", 0))
        lags = [v for parts in cons.get("lag", {}).values() for v in parts.values() if v is not None]
        add("fetch.manager.records.lag.max", max(lags) if lags else None)
        fetches = snap.get("network", {}).get("requests", {}).get("FETCH", {})
        count = sum(s.get("count", 0) for s in fetches.values())
        total_s = sum(s.get("latency_sum_s", 0.0) for s in fetches.values())
        n = change("fetch.count", count)
        s = change("fetch.sum", total_s)
        add("fetch.manager.fetch.latency.avg", s / n * 1000.0 if n else None)
        if count:
            add(
                "fetch.manager.fetch.latency.max",
                max(st.get("latency_max_s", 0.0) for st in fetches.values()) * 1000,
            )
        for topic, t in cons.get("topics", {}).items():
            attrs = {"topic": topic}
            add_sum("fetch.manager.topic.records.consumed.total", t.get("records_received", 0), attrs)
            add_sum("fetch.manager.topic.bytes.consumed.total", t.get("bytes_received", 0), attrs)


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
