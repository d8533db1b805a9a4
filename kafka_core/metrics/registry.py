"""The counters behind ``metrics()``: plain ints and floats, bumped per request or per batch.

Every object here is touched only on its client's event loop (the asyncio loop already
serialises the updates), so there are no locks; a snapshot is built on that same loop and handed
out as a fresh plain dict that the caller may keep, mutate or serialise.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ERRORS

__all__ = [
    "LATENCY_BOUNDS_S",
    "ConsumerMetrics",
    "NetworkMetrics",
    "ProducerMetrics",
    "RequestStats",
    "SizeStats",
    "api_name",
]

# Request latency histogram bounds in seconds (the last bucket, +Inf, is implicit).
LATENCY_BOUNDS_S: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
_NAMES: dict[int, str] = {}


def api_name(api_key: int) -> str:
    """``ApiKey.PRODUCE`` -> ``"PRODUCE"`` (cached: called per request)."""
    name = _NAMES.get(api_key)
    if name is None:
        try:
            name = ApiKey(api_key).name
        except ValueError:
            name = f"API_{api_key}"
        _NAMES[api_key] = name
    return name


class RequestStats:
    """Latency of one API to one broker: count, sum, max and a fixed-bucket histogram."""

    __slots__ = ("buckets", "count", "errors", "max", "sum", "throttle_max_ms", "throttle_sum_ms")

    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.sum = 0.0
        self.max = 0.0
        self.buckets = [0] * (len(LATENCY_BOUNDS_S) + 1)
        # KIP-219 throttle_time_ms of the responses; only non-zero ones are recorded (a zero
        # changes neither), so the average over ``count`` responses costs nothing unthrottled.
        self.throttle_sum_ms = 0
        self.throttle_max_ms = 0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.sum += seconds
        if seconds > self.max:
            self.max = seconds
        self.buckets[bisect_left(LATENCY_BOUNDS_S, seconds)] += 1

    def throttled(self, ms: int) -> None:
        self.throttle_sum_ms += ms
        if ms > self.throttle_max_ms:
            self.throttle_max_ms = ms

    def quantile(self, q: float) -> float | None:
        """Upper bound of the bucket holding the ``q`` quantile (None without samples; the max
        when it falls in the +Inf bucket): an estimate good to a bucket's width."""
        if not self.count:
            return None
        rank = q * self.count
        seen = 0
        for i, n in enumerate(self.buckets):
            seen += n
            if seen >= rank and n:
                return min(LATENCY_BOUNDS_S[i], self.max) if i < len(LATENCY_BOUNDS_S) else self.max
        return self.max

    def snapshot(self) -> dict[str, Any]:
        cumulative: dict[str, int] = {}
        seen = 0
        for bound, n in zip((*LATENCY_BOUNDS_S, float("inf")), self.buckets, strict=True):
            seen += n
            cumulative["+Inf" if bound == float("inf") else repr(bound)] = seen
        return {
            "count": self.count,
            "errors": self.errors,
            "latency_sum_s": self.sum,
            "latency_max_s": self.max,
            "latency_avg_s": self.sum / self.count if self.count else None,
            "latency_p50_s": self.quantile(0.5),
            "latency_p99_s": self.quantile(0.99),
            "latency_buckets_s": cumulative,
            "throttle_time_sum_ms": self.throttle_sum_ms,
            "throttle_time_max_ms": self.throttle_max_ms,
        }


class SizeStats:
    """Count, sum and max of a size (records or bytes per batch)."""

    __slots__ = ("count", "max", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0
        self.max = 0

    def add(self, n: int) -> None:
        self.count += 1
        self.sum += n
        if n > self.max:
            self.max = n

    def snapshot(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "sum": self.sum,
            "max": self.max,
            "avg": self.sum / self.count if self.count else None,
        }


class NetworkMetrics:
    """Requests, errors, connections and retries of one ``KafkaClient``.

    ``requests`` is keyed by (api key, broker node id; -1 for a bootstrap connection whose node
    id is not known yet); ``errors`` by (api key, node id, error name).
    """

    __slots__ = (
        "connection_failures",
        "connections_active",
        "connections_closed",
        "connections_created",
        "errors",
        "requests",
        "retries",
    )

    def __init__(self) -> None:
        self.requests: dict[tuple[int, int], RequestStats] = {}
        self.errors: dict[tuple[int, int, str], int] = {}
        self.connections_created = 0
        self.connections_closed = 0
        self.connections_active = 0
        self.connection_failures = 0
        self.retries = 0

    def stats(self, api_key: int, node_id: int | None) -> RequestStats:
        key = (api_key, -1 if node_id is None else node_id)
        s = self.requests.get(key)
        if s is None:
            s = self.requests[key] = RequestStats()
        return s

    def request_done(self, api_key: int, node_id: int | None, seconds: float, error_code: int = 0) -> None:
        """One response arrived ``seconds`` after its request was written."""
        self.stats(api_key, node_id).observe(seconds)
        if error_code:
            self.error(api_key, node_id, _code_name(error_code))

    def throttled(self, api_key: int, node_id: int | None, ms: int) -> None:
        """A response of that API said the broker throttled the client for ``ms`` > 0 (KIP-219)."""
        self.stats(api_key, node_id).throttled(ms)

    def error(self, api_key: int, node_id: int | None, name: str, count: int = 1) -> None:
        """``count`` errors named ``name`` (a Kafka error name, or TIMEOUT / CONNECTION) for one API."""
        node = -1 if node_id is None else node_id
        key = (api_key, node, name)
        self.errors[key] = self.errors.get(key, 0) + count
        self.stats(api_key, node).errors += count

    def error_code(self, api_key: int, node_id: int | None, code: int) -> None:
        """An error code found inside a response (e.g. per partition)."""
        self.error(api_key, node_id, _code_name(code))

    def snapshot(self, in_flight: dict[int, int] | None = None) -> dict[str, Any]:
        """``in_flight``: requests awaiting an answer per broker, as the client sees them now."""
        in_flight = in_flight or {}
        requests: dict[str, dict[int, Any]] = {}
        for (api, node), s in sorted(self.requests.items()):
            requests.setdefault(api_name(api), {})[node] = s.snapshot()
        errors: dict[str, dict[int, dict[str, int]]] = {}
        for (api, node, name), n in sorted(self.errors.items()):
            errors.setdefault(api_name(api), {}).setdefault(node, {})[name] = n
        return {
            "requests": requests,
            "errors": errors,
            "connections": {
                "active": self.connections_active,
                "created": self.connections_created,
                "closed": self.connections_closed,
                "failed": self.connection_failures,
            },
            "retries": self.retries,
            "in_flight_requests": sum(in_flight.values()),
            "in_flight_by_broker": dict(sorted(in_flight.items())),
        }


def _code_name(code: int) -> str:
    info = ERRORS.get(code)
    return info.name if info is not None else f"ERROR_{code}"


class ProducerMetrics:
    """What a producer's sender counts, once per batch (never per record)."""

    __slots__ = ("batch_bytes", "batch_records", "queue_ms", "retries", "topics")

    def __init__(self) -> None:
        self.batch_records = SizeStats()
        self.batch_bytes = SizeStats()
        # Per batch drained into a request (a retry again): ms since it opened, as Java's
        # record-queue-time (the time its first record waited in the buffer).
        self.queue_ms = SizeStats()
        self.retries = 0
        # topic -> [records sent, bytes sent, batches sent, records failed, batches failed]
        self.topics: dict[str, list[int]] = {}

    def _topic(self, topic: str) -> list[int]:
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = [0, 0, 0, 0, 0]
        return t

    def batch_sent(self, topic: str, records: int, nbytes: int) -> None:
        """A batch was acknowledged (or written with acks=0)."""
        t = self.topics.get(topic) or self._topic(topic)
        t[0] += records
        t[1] += nbytes
        t[2] += 1
        self.batch_records.add(records)
        self.batch_bytes.add(nbytes)

    def batch_failed(self, topic: str, records: int) -> None:
        t = self.topics.get(topic) or self._topic(topic)
        t[3] += records
        t[4] += 1

    def snapshot(self) -> dict[str, Any]:
        topics = {
            name: {
                "records_sent": t[0],
                "bytes_sent": t[1],
                "batches_sent": t[2],
                "records_failed": t[3],
                "batches_failed": t[4],
            }
            for name, t in sorted(self.topics.items())
        }
        return {
            "records_sent": sum(t[0] for t in self.topics.values()),
            "bytes_sent": sum(t[1] for t in self.topics.values()),
            "batches_sent": sum(t[2] for t in self.topics.values()),
            "records_failed": sum(t[3] for t in self.topics.values()),
            "retries": self.retries,
            "batch_records": self.batch_records.snapshot(),
            "batch_bytes": self.batch_bytes.snapshot(),
            "record_queue_time_ms": self.queue_ms.snapshot(),
            "topics": topics,
        }


class ConsumerMetrics:
    """What a consumer counts: per fetched partition, per poll, per rebalance. Lag is not counted
    but read at snapshot time from the consumer's positions and the high watermarks of Fetch."""

    __slots__ = (
        "assignment_changes",
        "fetch_bytes",
        "heartbeat_errors",
        "last_poll_start",
        "poll_idle_ratio_sum",
        "poll_started_at",
        "polls",
        "rebalance_failures",
        "rebalance_last_s",
        "rebalance_max_s",
        "rebalance_started",
        "rebalance_total_s",
        "rebalances",
        "topics",
    )

    def __init__(self) -> None:
        # topic -> [records handed to the application, bytes fetched, partition fetches]
        self.topics: dict[str, list[int]] = {}
        self.fetch_bytes = SizeStats()
        self.rebalances = 0
        self.rebalance_failures = 0
        self.rebalance_started = 0.0
        self.rebalance_total_s = 0.0
        self.rebalance_max_s = 0.0
        self.rebalance_last_s = 0.0
        self.assignment_changes = 0  # KIP-848: reconciliations that changed what is owned
        self.heartbeat_errors = 0  # KIP-848: heartbeats failed or answered with an error
        # Java's poll-idle-ratio: per poll, its time over itself plus the time since the
        # previous poll began (monotonic seconds; 0.0 = no poll yet).
        self.polls = 0
        self.poll_idle_ratio_sum = 0.0
        self.poll_started_at = 0.0
        self.last_poll_start = 0.0

    def _topic(self, topic: str) -> list[int]:
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = [0, 0, 0]
        return t

    def fetched(self, topic: str, nbytes: int) -> None:
        """One partition's complete record batches from a Fetch response were taken in."""
        t = self.topics.get(topic) or self._topic(topic)
        t[1] += nbytes
        t[2] += 1
        self.fetch_bytes.add(nbytes)

    def delivered(self, topic: str, records: int) -> None:
        """``records`` of one partition were handed to the application by one poll."""
        t = self.topics.get(topic) or self._topic(topic)
        t[0] += records

    def poll_begin(self) -> None:
        """A poll (or one step of iteration) begins."""
        now = time.monotonic()
        self.last_poll_start, self.poll_started_at = self.poll_started_at, now

    def poll_end(self) -> None:
        """It returned or raised: its share of the time since the previous poll began."""
        now = time.monotonic()
        polling = now - self.poll_started_at
        between = self.poll_started_at - self.last_poll_start if self.last_poll_start else 0.0
        self.polls += 1
        if polling + between > 0:
            self.poll_idle_ratio_sum += polling / (polling + between)

    def rebalance_begin(self) -> None:
        if not self.rebalance_started:
            self.rebalance_started = time.monotonic()

    def rebalance_end(self, ok: bool | None) -> None:
        """The join finished: ``ok`` True (joined), False (gave up), None (closed meanwhile)."""
        if not self.rebalance_started:
            return
        took = time.monotonic() - self.rebalance_started
        self.rebalance_started = 0.0
        if ok is None:
            return
        if not ok:
            self.rebalance_failures += 1
            return
        self.rebalances += 1
        self.rebalance_total_s += took
        self.rebalance_last_s = took
        if took > self.rebalance_max_s:
            self.rebalance_max_s = took

    def snapshot(self, partitions: Iterable[tuple[Any, Any]] = ()) -> dict[str, Any]:
        """``partitions``: (TopicPartition, state with ``position`` and ``high_watermark``) pairs."""
        lag: dict[str, dict[int, int | None]] = {}
        for tp, st in partitions:
            known = st.position is not None and st.high_watermark >= 0
            lag.setdefault(tp.topic, {})[tp.partition] = st.high_watermark - st.position if known else None
        topics = {
            name: {"records_received": t[0], "bytes_received": t[1], "partition_fetches": t[2]}
            for name, t in sorted(self.topics.items())
        }
        return {
            "records_received": sum(t[0] for t in self.topics.values()),
            "bytes_received": sum(t[1] for t in self.topics.values()),
            "fetch_bytes": self.fetch_bytes.snapshot(),
            "lag": {t: dict(sorted(parts.items())) for t, parts in sorted(lag.items())},
            "lag_total": sum(v for parts in lag.values() for v in parts.values() if v is not None),
            "assigned_partitions": sum(len(parts) for parts in lag.values()),
            "rebalances": self.rebalances,
            "rebalance_failures": self.rebalance_failures,
            "rebalance_in_progress": bool(self.rebalance_started),
            "rebalance_total_s": self.rebalance_total_s,
            "rebalance_max_s": self.rebalance_max_s,
            "rebalance_last_s": self.rebalance_last_s,
            "assignment_changes": self.assignment_changes,
            "heartbeat_errors": self.heartbeat_errors,
            "polls": self.polls,
            "poll_idle_ratio_sum": self.poll_idle_ratio_sum,
            "poll_idle_ratio_avg": self.poll_idle_ratio_sum / self.polls if self.polls else None,
            "topics": topics,
        }
