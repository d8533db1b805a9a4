"""Consumer group members as an application runs them, a stream of records beside them, and the
checks of "each record consumed once" across rebalances, for the group tests on Apache Kafka.

A member polls in its own thread: poll, keep the records, commit them synchronously, poll again.
A revocation runs inside poll, after the commit of what was handed over, so "consumed once"
holds exactly, by committed offsets, across every handover. Records come from confluent-kafka
(independent of our producer). Every wait here is a hang guard, none a timing assertion.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

from fakes.delivery import assert_exact
from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.sync import KafkaConsumer

# What the broker acknowledged: (partition, offset) -> value.
Acked = dict[tuple[int, int], bytes]


def _producer(bootstrap: str, linger_ms: int) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "enable.idempotence": True})


class _Acks:
    """Delivery reports: what was acknowledged, and the errors."""

    def __init__(self) -> None:
        self.acked: Acked = {}
        # Delivered without an offset (librdkafka's "possibly persisted": a batch whose first
        # answer was lost, answered DUPLICATE_SEQUENCE_NUMBER or the like on its retry).
        self.unplaced: list[tuple[int, bytes]] = []
        self.errors: list[Any] = []

    def done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
        elif msg.offset() is None:
            self.unplaced.append((msg.partition(), msg.value()))
        else:
            self.acked[(msg.partition(), msg.offset())] = msg.value()

    def settled(self, bootstrap: str, topic: str) -> Acked:
        """Every delivered record at its offset. A record delivered without an offset is looked
        up by its value in its partition's log, read by confluent-kafka (not by the consumer
        under test); one the log does not hold is said in a warning: the peer producer's report,
        not a record our consumer could read."""
        out = dict(self.acked)
        if not self.unplaced:
            return out
        logs = log_values(bootstrap, topic, {p for p, _ in self.unplaced})
        where = {(p, value): offset for p, held in logs.items() for offset, value in held.items()}
        unwritten = []
        for p, value in self.unplaced:
            offset = where.get((p, value))
            if offset is None:
                unwritten.append((p, value))
            else:
                out[(p, offset)] = value
        if unwritten:
            warnings.warn(
                f"librdkafka reported {len(unwritten)} record(s) delivered without an offset that "
                f"the broker's log does not hold: {unwritten[:10]}",
                stacklevel=2,
            )
        return out


def log_values(bootstrap: str, topic: str, partitions: set[int]) -> dict[int, dict[int, bytes]]:
    """What the broker holds on ``partitions`` of ``topic`` (offset -> value), read to each
    partition's high watermark by confluent-kafka."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Part

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"log-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        ends = {p: c.get_watermark_offsets(Part(topic, p), timeout=10)[1] for p in partitions}
        out: dict[int, dict[int, bytes]] = {p: {} for p in partitions}
        left = {p for p in partitions if ends[p] > 0}
        c.assign([Part(topic, p, 0) for p in left])
        deadline = time.monotonic() + 60
        while left and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            out[msg.partition()][msg.offset()] = msg.value()
            if msg.offset() + 1 >= ends[msg.partition()]:
                left.discard(msg.partition())
        assert not left, f"partitions {sorted(left)} not read to their ends {ends} within 60 s"
        return out
    finally:
        c.close()


def produce(bootstrap: str, topic: str, n: int, partitions: int, start: int = 0) -> Acked:
    """``n`` records round the partitions; returns what the broker acknowledged."""
    acks = _Acks()
    p = _producer(bootstrap, 5)
    for i in range(start, start + n):
        p.produce(topic, value=b"v%08d" % i, partition=i % partitions, on_delivery=acks.done)
        p.poll(0)
    assert p.flush(30) == 0 and not acks.errors, acks.errors
    return acks.settled(bootstrap, topic)


class Stream:
    """``burst`` records (one per partition in turn) every ``step_s`` from a thread, until
    stop(), which returns what the broker acknowledged."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        burst: int | None = None,
        step_s: float = 0.05,
        linger_ms: int = 5,
    ) -> None:
        self.topic, self.partitions = topic, partitions
        self._burst = burst or partitions
        self._step_s = step_s
        self._acks = _Acks()
        self.acked = self._acks.acked
        self._bootstrap = bootstrap
        self._producer = _producer(bootstrap, linger_ms)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(self._step_s):  # poll() returns at the first delivery: paced here
            for _ in range(self._burst):
                self._producer.produce(
                    self.topic, value=b"v%08d" % i, partition=i % self.partitions, on_delivery=self._acks.done
                )
                i += 1
            self._producer.poll(0)

    def stop(self) -> Acked:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(60) == 0 and not self._acks.errors, self._acks.errors[:5]
        return self._acks.settled(self._bootstrap, self.topic)


class Member:
    """A group member consuming in its own thread (``consumer_options`` name its topics or
    pattern and protocol). Rebalance callbacks are recorded in ``events`` as
    (name, kind, partitions)."""

    def __init__(self, bootstrap: str, group: str, name: str, events: list, **consumer_options: Any) -> None:
        self.name = name
        self.messages: list[Any] = []
        self.error: BaseException | None = None
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            on_assign=lambda tps: events.append((name, "assign", frozenset(tps))),
            on_revoke=lambda tps: events.append((name, "revoke", frozenset(tps))),
            on_lost=lambda tps: events.append((name, "lost", frozenset(tps))),
            **consumer_options,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                got = self.consumer.poll(200)
                if got:
                    self.messages.extend(got)
                    self.consumer.commit(got)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Stop polling (the thread ends after its commit); raise what the loop raised."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), f"{self.name} did not stop polling"
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.stop()
        self.consumer.close(30)


@contextlib.contextmanager
def closing_members() -> Iterator[list[Member]]:
    """A list for the test's members; on the way out every one is closed, whatever an
    assertion or another close raised (a test's ``members`` fixture)."""
    made: list[Member] = []
    try:
        yield made
    finally:
        for m in made:
            with contextlib.suppress(Exception):
                m.close()


def dealt(live: list[Member], everything: set[TopicPartition]) -> bool:
    """Each live member holds a share, the shares disjoint, together every partition."""
    shares = [m.assignment() for m in live]
    return all(shares) and sum(map(len, shares)) == len(everything) and set().union(*shares) == everything


def consumed(ms: list[Member]) -> list[Any]:
    return [msg for m in ms for msg in m.messages]


def missing(acked: Acked, ms: list[Member], topic: str) -> str:
    """What a wait for every acknowledged record found missing, and where each member stands on
    those partitions (holder, position, what it read last): the evidence a failed wait names."""
    got = {(msg.partition, msg.offset) for msg in consumed(ms)}
    gone = sorted(set(acked) - got)
    lines = [f"{len(got)} of {len(acked)} read; missing {len(gone)}: {gone[:10]}"]
    for p, o in gone[:5]:
        tp = TopicPartition(topic, p)
        for m in ms:
            read = [msg.offset for msg in m.messages if msg.partition == p]
            held = tp in m.assignment() if not m.stopped else None
            position = m.consumer.position(tp) if held else None
            lines.append(
                f"  {topic}[{p}]@{o}: {m.name} holds it: {held}, position {position}, "
                f"read {len(read)} of it (last {read[-3:]})"
            )
    return "\n".join(lines)


def exactly_once(acked: Acked, ms: list[Member], partitions: int) -> None:
    """Every acknowledged record consumed by one of ``ms``, none twice; each member got each
    partition's records in offset order (across members the order is the handover's)."""
    for m in ms:
        by_partition: dict[int, list[int]] = {}
        for msg in m.messages:
            by_partition.setdefault(msg.partition, []).append(msg.offset)
        for p, offsets in by_partition.items():
            assert offsets == sorted(offsets), f"{m.name}: partition {p} delivered out of order"
    assert_exact(acked, sorted(consumed(ms), key=lambda msg: (msg.partition, msg.offset)), partitions)


def ends(acked: Acked, partitions: int) -> dict[int, int]:
    """Each partition's end: one past its last acknowledged offset."""
    out = dict.fromkeys(range(partitions), 0)
    for p, o in acked:
        out[p] = max(out[p], o + 1)
    return out


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """The group's committed offsets, read by a consumer outside the group (no join)."""
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        partitions={topic: range(partitions)},
        enable_auto_commit=False,
    )
    try:
        got = c.committed([(topic, p) for p in range(partitions)])
    finally:
        c.close(10, commit=False)
    return {tp.partition: off for tp, off in got.items()}
