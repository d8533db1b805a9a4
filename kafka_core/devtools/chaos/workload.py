"""The traffic a chaos scenario runs its faults under: a paced idempotent producer and a
committing group consumer, each on its own thread, booked in a :class:`Ledger`.

The end of each partition is marked with a sentinel record written after the producer has
flushed (Tansu's high watermark cannot be trusted), so "everything was delivered" is exact.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kafka_core.devtools.chaos.accounting import Ledger
from kafka_core.devtools.chaos.values import parse_value, record_value
from kafka_core.errors import KafkaError

__all__ = ["SENTINEL", "LogRead", "Workload", "read_log", "read_log_report"]

SENTINEL = b"chaos-end"
_TICK = 0.05


class Workload:
    """Producer and consumer threads against one topic; faults are injected from outside."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        rate: int = 400,
        producer_options: dict[str, Any] | None = None,
        consumer_options: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.ledger = Ledger(topic)
        self.producer_options = {
            "idempotent": True,
            "acks": "all",
            "linger_ms": 5,
            "delivery_timeout_ms": 60_000,
            "request_timeout_ms": 10_000,
            "max_block_ms": 30_000,
            **(producer_options or {}),
        }
        self.consumer_options = {
            "group_id": f"chaos-{uuid.uuid4().hex[:10]}",
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": 6_000,  # Tansu answers a join after about half of it
            "heartbeat_interval_ms": 1_000,
            "fetch_max_wait_ms": 200,
            "request_timeout_ms": 10_000,
            **(consumer_options or {}),
        }
        self.producer: Any = None
        self.consumer: Any = None
        self.sentinels: set[int] = set()
        self.unsettled = 0  # records neither acknowledged nor failed once flush returned
        self.flush_error: str | None = None
        self._next = 0
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads: list[threading.Thread] = []
        self._producer_thread: threading.Thread | None = None
        self._futures: list[Any] = []

    # --- running ---

    def start(self, *, produce: bool = True) -> Workload:
        from kafka_core import KafkaConsumer, KafkaProducer

        self.producer = KafkaProducer(self.bootstrap, **self.producer_options)
        self.consumer = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, **self.consumer_options)
        self._spawn(self._consume, "chaos-consumer")
        if produce:
            self._producer_thread = self._spawn(self._produce, "chaos-producer")
        return self

    def _spawn(self, target: Any, name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)
        return thread

    def send(self, n: int) -> None:
        """Queue ``n`` more numbered records now (besides or instead of the paced stream)."""
        for _ in range(n):
            seq = self._next
            self._next += 1
            try:
                fut = self.producer.send(self.topic, self._value(seq))
            except KafkaError as exc:  # e.g. the buffer stayed full past max_block_ms
                self.ledger.error(exc, where="send")
                continue
            self.ledger.sent()
            self._futures.append(fut)
            fut.add_done_callback(partial(self._settled, seq))

    @staticmethod
    def _value(seq: int) -> bytes:
        return record_value(seq)

    def _settled(self, seq: int, fut: Any) -> None:
        try:
            meta = fut.result(0)
        except BaseException as exc:
            self.ledger.fail(seq, exc)
        else:
            self.ledger.ack(seq, meta.partition, meta.offset)

    def _produce(self) -> None:
        per_tick = max(1, int(self.rate * _TICK))
        while not self._stop_producing.wait(_TICK):
            self.send(per_tick)

    def _consume(self) -> None:
        consumer, ledger = self.consumer, self.ledger
        while not self._stop_consuming.is_set():
            try:
                messages = consumer.poll(200)
            except KafkaError as exc:
                ledger.error(exc, where="poll")
                time.sleep(0.1)
                continue
            for m in messages:
                if m.value == SENTINEL:
                    self.sentinels.add(m.partition)
                else:
                    ledger.deliver(m.partition, m.offset, m.value)
            if messages:
                try:
                    consumer.commit()
                except KafkaError as exc:
                    ledger.error(exc, where="commit")

    def wait_progress(self, since: float, timeout: float) -> tuple[float | None, float | None]:
        """Seconds from ``since`` to the first acknowledgement and the first delivery after it.

        Each is taken when first seen (polled every 10 ms), never later: were one side to stay
        down, the other's figure must still say when *it* resumed, not when the wait gave up.
        """
        deadline = time.monotonic() + timeout
        first_ack: float | None = None
        first_got: float | None = None
        while True:
            ack, got = self.ledger.last_ack, self.ledger.last_delivery
            if first_ack is None and ack > since:
                first_ack = ack - since
            if first_got is None and got > since:
                first_got = got - since
            if (first_ack is not None and first_got is not None) or time.monotonic() > deadline:
                return first_ack, first_got
            time.sleep(0.01)

    # --- ending ---

    def finish(self, flush_timeout: float, drain_timeout: float) -> None:
        """Stop producing, settle every record, mark each partition's end, let the consumer drain."""
        self._stop_producing.set()
        if self._producer_thread is not None:
            self._producer_thread.join(flush_timeout)
        try:
            self.producer.flush(flush_timeout)
        except KafkaError as exc:
            self.flush_error = f"{type(exc).__name__}: {exc}"
        self.unsettled = sum(1 for f in self._futures if not f.done())
        try:
            marks = [self.producer.send(self.topic, SENTINEL, partition=p) for p in range(self.partitions)]
            self.producer.flush(flush_timeout)
            for mark in marks:
                mark.result(0)
        except KafkaError as exc:
            self.flush_error = self.flush_error or f"sentinels not written: {type(exc).__name__}: {exc}"
        deadline = time.monotonic() + drain_timeout
        while len(self.sentinels) < self.partitions and time.monotonic() < deadline:
            time.sleep(0.1)

    def close(self) -> None:
        self._stop_producing.set()
        self._stop_consuming.set()
        for thread in self._threads:
            thread.join(15)
        for client in (self.consumer, self.producer):
            if client is not None:
                with contextlib.suppress(KafkaError):
                    client.close(**({"commit": False} if client is self.consumer else {"timeout": 5}))

    @property
    def drained(self) -> bool:
        return len(self.sentinels) >= self.partitions


@dataclass
class LogRead:
    """An independent read of the topic: the log when every sentinel was reached, and, always,
    how far each partition got, so a run that did not drain shows where the read stalled."""

    log: dict[int, list[tuple[int, int]]] | None
    progress: dict[int, dict[str, Any]] = field(default_factory=dict)


def read_log(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
) -> dict[int, list[tuple[int, int]]] | None:
    """Every partition up to its sentinel (see :func:`read_log_report`), or None."""
    return read_log_report(bootstrap, topic, partitions, timeout).log


def read_log_report(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> LogRead:
    """Every partition up to its sentinel, read by confluent-kafka (a client independent of ours).

    The log maps partition -> [(offset, seq)] (seq -1 for a body that is not ours); it is None
    when confluent-kafka is not installed or a sentinel was not reached: then no loss can be put
    down to the broker, or the log no longer starts at offset 0 (retention). The per-partition progress (records read, last offset, sentinel reached,
    watermarks, the last error, seconds since the last record) is kept either way.
    """
    try:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    except ImportError:
        return LogRead(None)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-verify-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    log: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    last_at = {p: time.monotonic() for p in range(partitions)}
    last_error: dict[int, str] = {}
    open_partitions = set(range(partitions))
    progress: dict[int, dict[str, Any]] = {}
    try:
        # From the log start, not offset 0: a broker with retention (the mock cluster keeps a
        # bounded log) has moved it, and offset 0 would be reset to the end.
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while open_partitions and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                p = msg.partition()
                if msg.error() is not None:
                    if p is not None and p >= 0:
                        last_error[p] = str(msg.error())[:200]
                    continue
                if p not in open_partitions:
                    continue
                last_at[p] = time.monotonic()
                if msg.value() == SENTINEL:
                    open_partitions.discard(p)
                    continue
                offset = msg.offset()
                if offset is None:  # only error events lack an offset, and they are skipped above
                    continue
                seq = parse_value(msg.value())
                log[p].append((offset, -1 if seq is None else seq))
        now = time.monotonic()
        for p in range(partitions):
            entry: dict[str, Any] = {
                "read": len(log[p]),
                "first_offset": log[p][0][0] if log[p] else None,
                "last_offset": log[p][-1][0] if log[p] else None,
                "sentinel": p not in open_partitions,
                "idle_s": round(now - last_at[p], 1),
            }
            if p in last_error:
                entry["last_error"] = last_error[p]
            if p in open_partitions:
                with contextlib.suppress(Exception):
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                    entry["low"], entry["high"] = low, high
            progress[p] = entry
    finally:
        consumer.close()
    # A log that no longer starts at offset 0 lost its head to retention: it cannot vouch for a
    # missing record, so it is no log at all for the books (the progress still says so).
    trimmed = any(entries and entries[0][0] > 0 for entries in log.values())
    return LogRead(None if open_partitions or trimmed else log, progress)
