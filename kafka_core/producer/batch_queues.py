"""The accumulator's batches per partition, and the I/O loop's work on them.

Records are placed in their partition's open batch (the sticky partition for null keys kept up
as KIP-480 and KIP-794 say); memory is waited for and given back here; and the loop seals, takes
out and tears down batches from here. The callers' side (``append``, parking, refusing,
``send_batch``) is :class:`~kafka_core.producer.accumulator.Accumulator`, built on this class:
kept apart so that each module reads on its own.

A batch is sealed when it is full, or once its linger has passed *and* its partition can send
(as the Java client's ``ready`` check): while it waits behind in-flight requests it keeps
filling, so a slow broker gets bigger batches, not a queue of tiny ones. The time of the records
such a "late" batch takes is noted by the sender's ticks (``ProducerBatch.stamps``), so they keep
the fast path and still carry when they were sent, within a tick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafka_core.errors import KafkaConfigError, KafkaTimeoutError
from kafka_core.producer._speedups import Budget
from kafka_core.producer.batches import (
    BATCH_OVERHEAD,
    PartitionQueue,
    ProducerBatch,
    TopicState,
    now_ms,
)
from kafka_core.producer.futures import BatchResult
from kafka_core.producer.partitioner import Partitioner

__all__ = ["BatchQueues", "BufferFull"]


class BatchQueues:
    """Batches per partition under one lock; see the module docstring."""

    def __init__(
        self,
        *,
        batch_size: int,
        buffer_memory: int,
        max_block_ms: float,
        linger_ms: float,
        delivery_timeout_ms: float,
        partitioner: Partitioner,
        wakeup: Callable[[], None],
    ) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.max_block = max_block_ms / 1000.0
        self.linger = linger_ms / 1000.0
        self.tick = max(self.linger, 0.01)  # how often a late batch notes the time of its records
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self.partitioner = partitioner
        self.wakeup = wakeup  # wakes the I/O loop (thread-safe on the blocking face)
        # Guards the batches, queues, ``topics``, ``fast``, ``mem`` and the partitioner's state:
        # ``send`` runs in callers' threads while the I/O loop drains.
        self.lock = threading.Lock()
        self._space = threading.Condition(self.lock)  # blocking senders wait here for memory
        self._space_waiters = 0
        self.mem = Budget(buffer_memory)
        self.topics: dict[str, TopicState] = {}
        # topic -> open batch of its sticky partition, while it holds values only: all the
        # common ``send`` has to look up.
        self.fast: dict[str, ProducerBatch] = {}
        self.wake_pending = False
        self.flushing = 0
        self.closed = False
        self.block = True  # False for the async face: it waits for memory itself
        self.space_event: Any = None  # asyncio.Event of the async face, set when memory frees up
        self.loop_thread: int | None = None  # the I/O thread of the sync face (must never block)
        # Whether a partition can take records now (its leader known and not failing); the sticky
        # partition for null keys is chosen among those, as KIP-794 skips partitions without a
        # working leader. Set by the sender; called with the lock held.
        self.available: Callable[[PartitionQueue], bool] | None = None

    # -- placing records (lock held) --------------------------------------------------------------

    def place(
        self,
        t: TopicState,
        key: Any,
        value: Any,
        partition: int | None,
        headers: Any,
        ts: int | None,
        size: int,
    ) -> tuple[BatchResult, int]:
        """Put one record in its partition's open batch (opening another when it is full);
        returns its result and index. Called with the lock held."""
        if partition is None:
            partition = (
                t.sticky
                if key is None and t.sticky is not None
                else self.partitioner.partition(t.topic, key, t.num_partitions)
            )
        elif not 0 <= partition < t.num_partitions:
            failed = BatchResult(t.topic, partition, now_ms())
            failed.set_error(
                KafkaConfigError(f"partition {partition} out of range: {t.topic!r} has {t.num_partitions}")
            )
            self.mem.used -= size
            return failed, 0
        q = t.queues[partition]  # type: ignore[index]
        current = q.open
        if current is not None and current.size + size <= self.batch_size:
            b = current
        else:
            b = self._new_batch(t, q)
        index = b.count
        b.count = index + 1
        if key is not None or b.keys is not None:
            if b.keys is None:
                b.keys = [None] * index
            b.keys.append(key)
        b.values.append(value)
        b.size += size
        if headers is not None or b.headers is not None:
            self._add_header(b, index, headers)
        if ts is not None or b.timestamps is not None:
            self._add_timestamp(b, index, ts)
        if (b.keys is not None or b.headers is not None or b.timestamps is not None) and self.fast.get(
            t.topic
        ) is b:
            del self.fast[t.topic]  # the fast path appends values only
        return b.result, index

    @staticmethod
    def _add_header(b: ProducerBatch, index: int, headers: Sequence[tuple[str, Any]] | None) -> None:
        if b.headers is None:
            b.headers = [()] * index
        b.headers.append(list(headers) if headers else ())

    @staticmethod
    def _add_timestamp(b: ProducerBatch, index: int, timestamp_ms: int | None) -> None:
        if b.timestamps is None:
            b.timestamps = [None] * index
            b.result.timestamps = b.timestamps
        b.timestamps.append(timestamp_ms)

    def _new_batch(self, t: TopicState, q: PartitionQueue) -> ProducerBatch:
        """Seal the open batch of ``q`` (if any) and open another; wake the loop once."""
        old = q.open
        now = time.monotonic()
        if old is not None and old.count:
            old.stamp()
            q.sealed.append(old)
            if t.sticky == q.partition:
                self._next_sticky(t)
        b = q.open = ProducerBatch(t.topic, q.partition, now, now + self.delivery_timeout)
        if t.sticky == q.partition:
            self.fast[t.topic] = b
        if not self.wake_pending:
            self.wake_pending = True
            self.wakeup()
        return b

    def _next_sticky(self, t: TopicState) -> None:
        """The sticky partition's batch is done (KIP-480): let the partitioner pick the next one,
        passing over partitions that are not available (a few tries; all of them if none is)."""
        if t.sticky is not None:
            self.partitioner.on_new_batch(t.topic, t.num_partitions, t.sticky)
        sticky = t.sticky = self.partitioner.sticky(t.topic, t.num_partitions)
        available, queues = self.available, t.queues
        if available is not None and queues and sticky is not None:
            for _ in range(2 * t.num_partitions):
                if 0 <= sticky < len(queues) and available(queues[sticky]):
                    break
                self.partitioner.on_new_batch(t.topic, t.num_partitions, sticky)
                moved = self.partitioner.sticky(t.topic, t.num_partitions)
                if moved is None or moved == sticky:  # a partitioner that does not move: keep its choice
                    break
                sticky = t.sticky = moved
        self.cache_sticky(t)

    def cache_sticky(self, t: TopicState) -> None:
        """Point ``fast`` at the sticky partition's open batch while the fast path may append to
        it (values only so far); called with the lock held."""
        b = _plain(t.queues[t.sticky].open) if t.sticky is not None and t.queues else None
        if b is None:
            self.fast.pop(t.topic, None)
        else:
            self.fast[t.topic] = b

    # -- memory -----------------------------------------------------------------------------------

    def wait_for_space(self, size: int) -> None:
        """Called with the lock held when ``size`` more bytes would overflow ``buffer_memory``."""
        if not self.block:
            raise BufferFull
        if threading.get_ident() == self.loop_thread:
            # A send from a delivery callback: blocking would stop the loop that frees memory.
            raise KafkaTimeoutError("buffer_memory is full (send from the producer's I/O thread cannot wait)")
        deadline = time.monotonic() + self.max_block
        self._space_waiters += 1
        try:
            while self.mem.used and self.mem.used + size > self.mem.limit and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KafkaTimeoutError(
                        f"buffer_memory ({self.buffer_memory} bytes) still full after max_block_ms"
                    )
                self._space.wait(left)
        finally:
            self._space_waiters -= 1

    def _notify_space(self) -> None:
        if self._space_waiters:
            self._space.notify_all()
        if self.space_event is not None:
            self.space_event.set()

    # -- the I/O loop's side ----------------------------------------------------------------------

    def set_partitions(self, topic: str, num_partitions: int) -> list[tuple[BatchResult, list[Any]]]:
        """Metadata arrived: create queues and partition parked records.

        Returns (parked result, targets) pairs for the caller to ``forward`` outside the lock.
        """
        forwards: list[tuple[BatchResult, list[Any]]] = []
        with self.lock:
            t = self.topics.get(topic)
            if t is None:
                t = self.topics[topic] = TopicState(topic)
            if t.queues is None:
                t.queues = []
            if num_partitions > len(t.queues):
                t.queues.extend(PartitionQueue(topic, p) for p in range(len(t.queues), num_partitions))
            t.num_partitions = max(num_partitions, t.num_partitions)
            if t.sticky is None or t.sticky >= t.num_partitions:
                t.sticky = self.partitioner.sticky(topic, t.num_partitions)
            self.cache_sticky(t)
            if t.pending_result is not None:
                targets = [self.place(t, *rec) for rec in t.pending]
                forwards.append((t.pending_result, targets))
                t.pending_result = None
                t.pending = []
        return forwards

    def expire_parked(self, topic: str) -> tuple[BatchResult, int] | None:
        """Take a topic's parked records out (their delivery timeout passed); returns result and size."""
        with self.lock:
            t = self.topics.get(topic)
            if t is None or t.pending_result is None:
                return None
            result, size = t.pending_result, sum(rec[5] for rec in t.pending)
            t.pending_result = None
            t.pending = []
            self.mem.used -= size
            self._notify_space()
            return result, size

    def parked_topics(self) -> list[tuple[str, float]]:
        with self.lock:
            return [(t.topic, t.pending_since) for t in self.topics.values() if t.pending_result is not None]

    def seal_ready(
        self, now: float, can_send: Callable[[PartitionQueue], bool] | None = None
    ) -> float | None:
        """Seal open batches whose linger passed (all of them while flushing or closing) and whose
        partition ``can_send`` now with nothing sealed before them; the others stay open, late.

        Returns the earliest time an open batch will be past its linger or, for a late batch, due
        to note the time of its records; None if there is no open batch.
        """
        next_at: float | None = None
        with self.lock:
            self.wake_pending = False
            force = self.flushing > 0 or self.closed
            for t in self.topics.values():
                if t.queues is None:
                    continue
                for q in t.queues:
                    b = q.open
                    if b is None or not b.count:
                        continue
                    ready_at = b.created + self.linger
                    if force or ready_at <= now:
                        if not q.sealed and (can_send is None or can_send(q)):
                            b.stamp()
                            q.sealed.append(b)
                            q.open = None
                            if t.sticky == q.partition:
                                self._next_sticky(t)
                            continue
                        if b.stamps is None:
                            b.stamps = [(b.count, None)]  # the records so far: the batch's time
                        else:
                            b.stamp()
                        if t.sticky == q.partition and self.available is not None and not self.available(q):
                            self._next_sticky(t)  # its leader is failing: null keys go elsewhere
                        ready_at = now + self.tick  # note the time of what it takes meanwhile
                    if next_at is None or ready_at < next_at:
                        next_at = ready_at
        return next_at

    def drop_open(self, t: TopicState, q: PartitionQueue) -> ProducerBatch | None:
        """Take ``q``'s open batch out (its deadline passed); called with the lock held."""
        b = q.open
        if b is None or not b.count:
            return None
        q.open = None
        if self.fast.get(t.topic) is b:
            del self.fast[t.topic]
        if t.sticky == q.partition:
            self._next_sticky(t)
        return b

    def release(self, batch: ProducerBatch) -> None:
        """A batch is finished (delivered or failed): give its memory back."""
        with self.lock:
            self.mem.used -= batch.size - BATCH_OVERHEAD if batch.columns is None else batch.size
            batch.keys = None
            batch.values = []
            batch.columns = None
            batch.encoded = None
            self._notify_space()

    def unfinished(self) -> list[BatchResult]:
        """Results of every record not yet delivered (for flush)."""
        with self.lock:
            out: list[BatchResult] = []
            for t in self.topics.values():
                if t.pending_result is not None:
                    out.append(t.pending_result)
                for q in t.queues or ():
                    if q.open is not None and q.open.count:
                        out.append(q.open.result)
                    out.extend(b.result for b in q.sealed)
                    out.extend(b.result for b in q.in_flight)
                    out.extend(b.result for b in q.retry)
            return out

    def take_unsent(self) -> tuple[list[ProducerBatch], list[tuple[BatchResult, int]]]:
        """A transaction is aborted: take every batch not sent yet out of the queues (those in
        flight stay), and the records parked for metadata as (result, record count). The
        accumulator stays open; the caller fails what it took (and releases the batches)."""
        with self.lock:
            batches: list[ProducerBatch] = []
            parked: list[tuple[BatchResult, int]] = []
            for t in self.topics.values():
                if t.pending_result is not None:
                    parked.append((t.pending_result, len(t.pending)))
                    self.mem.used -= sum(rec[5] for rec in t.pending)
                    t.pending_result = None
                    t.pending = []
                self.fast.pop(t.topic, None)
                for q in t.queues or ():
                    if q.open is not None and q.open.count:
                        batches.append(q.open)
                        q.open = None
                    batches.extend(q.sealed)
                    q.sealed.clear()
                    batches.extend(q.retry)
                    q.retry.clear()
            if parked:
                self._notify_space()
            return batches, parked

    def abandon_all(self) -> list[tuple[BatchResult, int]]:
        """Close: take every batch not yet sent out of the queues, as (result, record count)."""
        with self.lock:
            self.closed = True
            out: list[tuple[BatchResult, int]] = []
            for t in self.topics.values():
                if t.pending_result is not None:
                    out.append((t.pending_result, len(t.pending)))
                    t.pending_result = None
                    t.pending = []
                self.fast.pop(t.topic, None)
                for q in t.queues or ():
                    if q.open is not None and q.open.count:
                        out.append((q.open.result, q.open.count))
                    q.open = None
                    out.extend((b.result, b.count) for b in q.sealed)
                    q.sealed.clear()
                    out.extend((b.result, b.count) for b in q.retry)
                    q.retry.clear()
            self.mem.used = 0
            self._space.notify_all()
            return out


def _plain(b: ProducerBatch | None) -> ProducerBatch | None:
    """``b`` if the fast path may append to it (values only so far), else None."""
    if b is None or b.keys is not None or b.headers is not None or b.timestamps is not None:
        return None
    return b


class BufferFull(Exception):
    """Memory is full and this accumulator must not block: the asyncio face waits, then retries."""
