"""The accumulator: batches filled in callers' threads, sealed by linger or size, memory
accounted, records parked until their topic's partitions are known. No broker, no loop."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fakes.accumulator import Wakeups, make_accumulator, sealed_batches
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafka_core.errors import KafkaCodecError, KafkaConfigError, KafkaTimeoutError
from kafka_core.producer.accumulator import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    Accumulator,
    BufferFull,
    PartitionQueue,
    ProducerBatch,
)
from kafka_core.producer.futures import RecordFuture, RecordMetadata
from kafka_core.producer.partitioner import murmur2_partition


def drain_due(acc: Accumulator, now: float) -> tuple[list[ProducerBatch], float | None]:
    """What the sender does per loop: mark what is due, drain every ready slot (taking every
    partition's first batch), note late batches; returns the batches taken and the next timer."""
    lingered = acc.due(now)
    taken: list[ProducerBatch] = []

    def pick(q: PartitionQueue, room: int | None) -> ProducerBatch | None:
        if acc.head(q) is None:
            return None
        b = acc.take_head(q)
        taken.append(b)
        return b

    acc.drain_ready(lambda slot: 1, pick, 1 << 30)
    return taken, acc.stamp_late(lingered, now)


def test_records_share_a_batch_and_index_in_order() -> None:
    acc = make_accumulator()
    acc.set_partitions("t", 3)
    futs = [acc.append("t", b"v%d" % i, partition=1) for i in range(5)]
    batch = acc.topics["t"].queues[1].open  # type: ignore[index]
    assert batch is not None and batch.count == 5 and batch.values == [b"v%d" % i for i in range(5)]
    assert [f[1] for f in futs] == [0, 1, 2, 3, 4]
    assert all(f[0] is batch.result for f in futs)
    batch.result.set_result(100)
    assert futs[3].result(1) == RecordMetadata("t", 1, 103, batch.result.base_timestamp)


def test_batch_seals_when_full_and_wakes_loop_once_per_batch() -> None:
    wake = Wakeups()
    acc = make_accumulator(batch_size=BATCH_OVERHEAD + 3 * (RECORD_OVERHEAD + 10), wakeup=wake)
    acc.set_partitions("t", 1)
    for _ in range(7):
        acc.append("t", b"x" * 10)
    assert [b.count for b in sealed_batches(acc)] == [3, 3]
    assert acc.topics["t"].queues[0].open.count == 1  # type: ignore[index,union-attr]
    assert wake.count == 1  # the flag stays up until the loop runs (due clears it)
    acc.due(0.0)
    acc.append("t", b"x" * 10)
    acc.append("t", b"x" * 10)
    acc.append("t", b"x" * 10)
    assert wake.count == 2


def test_oversized_record_gets_a_batch_of_its_own() -> None:
    acc = make_accumulator(batch_size=200)
    acc.set_partitions("t", 1)
    acc.append("t", b"a")
    acc.append("t", b"b" * 5000)
    acc.append("t", b"c")
    counts = [b.count for b in sealed_batches(acc)]
    assert counts == [1, 1]
    assert sealed_batches(acc)[1].values == [b"b" * 5000]


def test_linger_and_flush_sealing() -> None:
    acc = make_accumulator(linger_ms=100)
    acc.set_partitions("t", 2)
    acc.append("t", b"x", partition=0)
    created = acc.topics["t"].queues[0].open.created  # type: ignore[index,union-attr]
    taken, next_at = drain_due(acc, created + 0.05)
    assert taken == [] and next_at == pytest.approx(created + 0.1)
    taken, next_at = drain_due(acc, created + 0.1)
    assert [(b.partition, b.count) for b in taken] == [(0, 1)] and next_at is None
    acc.append("t", b"y", partition=1)
    acc.flushing += 1
    taken, _ = drain_due(acc, created)  # flushing: linger is not waited for
    assert [(b.partition, b.count) for b in taken] == [(1, 1)]


def test_keys_go_by_murmur2_and_null_keys_stick() -> None:
    acc = make_accumulator(batch_size=1 << 20)
    acc.set_partitions("t", 5)
    for i in range(50):
        key = b"key-%d" % i
        fut = acc.append("t", b"v", key=key)
        assert fut[0].partition == murmur2_partition(key, 5)
    parts = {acc.append("t", b"v")[0].partition for _ in range(50)}
    assert len(parts) == 1


def test_sticky_moves_when_its_batch_fills() -> None:
    acc = make_accumulator(batch_size=BATCH_OVERHEAD + 2 * (RECORD_OVERHEAD + 1))
    acc.set_partitions("t", 4)
    parts = [acc.append("t", b"x")[0].partition for _ in range(8)]
    assert len(set(parts)) > 1
    assert parts[0] == parts[1]


def test_headers_and_timestamps_are_filled_lazily() -> None:
    acc = make_accumulator()
    acc.set_partitions("t", 1)
    acc.append("t", b"a")
    f = acc.append("t", b"b", headers=[("h", b"1")], timestamp_ms=42)
    acc.append("t", b"c")
    b = acc.topics["t"].queues[0].open  # type: ignore[index]
    assert b.headers == [(), [("h", b"1")], ()]  # type: ignore[union-attr]
    assert b.timestamps == [None, 42, None]  # type: ignore[union-attr]
    b.result.set_result(0)  # type: ignore[union-attr]
    assert f.result(1).timestamp == 42
    assert RecordFuture((b.result, 0)).result(1).timestamp == b.result.base_timestamp  # type: ignore[union-attr]


def test_bad_input_is_a_typed_error() -> None:
    acc = make_accumulator()
    acc.set_partitions("t", 2)
    with pytest.raises(KafkaCodecError):
        acc.append("t", "text is not bytes")
    with pytest.raises(KafkaCodecError):
        acc.append("t", b"v", key=123)
    with pytest.raises(KafkaConfigError):
        acc.append("t", b"v", partition=2)
    acc.append("t", memoryview(b"ok"), key=bytearray(b"k"))


def test_memory_full_blocks_then_times_out() -> None:
    acc = make_accumulator(buffer_memory=100, max_block_ms=50)
    acc.set_partitions("t", 1)
    acc.append("t", b"x" * 60)
    with pytest.raises(KafkaTimeoutError):
        acc.append("t", b"y" * 60)


def test_memory_released_unblocks_a_waiting_sender() -> None:
    acc = make_accumulator(buffer_memory=150, max_block_ms=30_000, batch_size=50)
    acc.set_partitions("t", 1)
    acc.append("t", b"x" * 60)
    acc.append("t", b"x" * 10)  # seals the first batch
    first = sealed_batches(acc)[0]
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(acc.append("t", b"z" * 60)))
    t.start()
    t.join(0.2)
    assert not done
    acc.release(first)
    t.join(10)
    assert len(done) == 1


def test_async_face_gets_buffer_full_instead_of_blocking() -> None:

    acc = make_accumulator(buffer_memory=100)
    acc.block = False
    acc.set_partitions("t", 1)
    acc.append("t", b"x" * 60)
    with pytest.raises(BufferFull):
        acc.append("t", b"y" * 60)


def test_parked_records_forward_to_real_batches() -> None:
    acc = make_accumulator()
    f1 = acc.append("new", b"a", key=b"k")
    f2 = acc.append("new", b"b", partition=1)
    f3 = acc.append("new", b"c", partition=9)
    assert not f1.done()
    forwards = acc.set_partitions("new", 3)
    for result, targets in forwards:
        result.forward(targets)
    assert f3.done() and isinstance(f3.exception(0), KafkaConfigError)
    target, index = f2[0].resolve(f2[1])
    assert target.partition == 1
    target.set_result(10)
    assert f2.result(1).offset == 10 + index
    assert f1[0].resolve(f1[1])[0].partition == murmur2_partition(b"k", 3)


def test_abandon_all_counts_records() -> None:
    acc = make_accumulator()
    acc.set_partitions("t", 2)
    for i in range(5):
        acc.append("t", b"x", partition=i % 2)
    acc.append("parked", b"y")
    taken = acc.abandon_all()
    assert sum(n for _, n in taken) == 6
    assert acc.closed


def test_accelerated_and_python_send_paths_build_the_same_batches() -> None:
    from kafka_core.producer._python import accel as python_accel
    from kafka_core.producer._speedups import IMPLEMENTATION, accel
    from kafka_core.producer.futures import TupleRecordFuture

    if IMPLEMENTATION != "cython":
        pytest.skip("the producer extension is not in use (pure-Python run): nothing to compare")
    python_accel.setup(TupleRecordFuture)  # as futures.py does when the twin is the one in use
    results = []
    for twin in (accel, python_accel):
        acc = make_accumulator(batch_size=BATCH_OVERHEAD + 5 * (RECORD_OVERHEAD + 3), partitioner_seed=11)
        acc.set_partitions("t", 3)
        send = twin.FastAppend(acc, acc._append, RECORD_OVERHEAD, True)
        futures = []
        for i in range(40):
            key = b"k%d" % i if i % 9 == 0 else None
            headers = [("h", b"1")] if i % 13 == 0 else None
            futures.append(send("t", b"%03d" % i, key=key, headers=headers))
        futures.append(send("t", bytearray(b"ba")))
        batches = [
            (q.partition, b.values, b.keys, b.headers, b.count, b.size)
            for q in acc.topics["t"].queues  # type: ignore[union-attr]
            for b in [*q.sealed, *([q.open] if q.open else [])]
        ]
        results.append((batches, [(f[0].partition, f[1]) for f in futures], acc.mem.used))
    assert results[0] == results[1]


# -- any sequence of appends, seals, deliveries and late metadata -----------------------------------


class AccumulatorMachine(RuleBasedStateMachine):
    """Records appended (keyed, sticky or to a chosen partition, to a topic whose partitions are
    known or not yet), batches sealed and delivered in any order: memory is always the sum of
    what is queued, no batch outgrows ``batch_size`` unless one record does, and every delivered
    record is where its future says, each partition's records in the order they were sent."""

    PARTITIONS = 3
    BATCH_SIZE = BATCH_OVERHEAD + 4 * (RECORD_OVERHEAD + 8)

    def __init__(self) -> None:
        super().__init__()
        self.acc = make_accumulator(batch_size=self.BATCH_SIZE, buffer_memory=1 << 30, linger_ms=0)
        self.acc.set_partitions("t", self.PARTITIONS)
        self.sent: list[tuple[Any, bytes, bytes | None, int | None]] = []  # future, value, key, partition
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.flight: dict[tuple[str, int], list[ProducerBatch]] = {}  # drained, in order

    @rule(
        topic=st.sampled_from(["t", "late"]),
        value=st.binary(min_size=0, max_size=40),
        key=st.none() | st.binary(min_size=1, max_size=4),
        partition=st.none() | st.integers(0, PARTITIONS - 1),
    )
    def append(self, topic: str, value: bytes, key: bytes | None, partition: int | None) -> None:
        future = self.acc.append(topic, value, key=key, partition=partition)
        self.sent.append((future, value, key, partition))

    @rule()
    def metadata_arrives(self) -> None:
        for result, targets in self.acc.set_partitions("late", self.PARTITIONS):
            result.forward(targets)

    @rule(flush=st.booleans())
    def drain(self, flush: bool) -> None:
        self.acc.flushing += flush
        taken, _ = drain_due(self.acc, time.monotonic() + 1)
        self.acc.flushing -= flush
        for b in taken:
            self.flight.setdefault((b.topic, b.partition), []).append(b)

    @rule(data=st.data())
    def deliver_one(self, data: st.DataObject) -> None:
        waiting = [where for where, batches in self.flight.items() if batches]
        if not waiting:
            return
        where = data.draw(st.sampled_from(sorted(waiting)))
        b = self.flight[where].pop(0)
        log = self.logs.setdefault(where, [])
        base = len(log)
        log.extend(b.values)
        self.acc.release(b)
        b.result.set_result(base)

    @invariant()
    def memory_is_what_is_queued(self) -> None:
        queued = 0
        for t in self.acc.topics.values():
            queued += sum(rec[5] for rec in t.pending)
            for q in t.queues or ():
                flying = self.flight.get((q.topic, q.partition), [])
                for b in [*flying, *q.sealed, *([q.open] if q.open is not None else [])]:
                    queued += b.size - BATCH_OVERHEAD
                    assert b.size <= self.BATCH_SIZE or b.count == 1
        assert self.acc.mem.used == queued

    @invariant()
    def delivered_records_are_where_their_futures_say(self) -> None:
        last: dict[tuple[str, int], int] = {}
        for future, value, key, partition in self.sent:
            if not future.done():
                continue
            meta = future.result(0)
            assert self.logs[(meta.topic, meta.partition)][meta.offset] == value
            if partition is not None:
                assert meta.partition == partition
            elif key is not None:
                assert meta.partition == murmur2_partition(key, self.PARTITIONS)
            where = (meta.topic, meta.partition)
            assert meta.offset > last.get(where, -1)  # send order kept per partition
            last[where] = meta.offset


TestAccumulatorMachine = AccumulatorMachine.TestCase
TestAccumulatorMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
