"""The record accumulator: per-partition batches filled in the caller's thread, drained by the I/O loop.

``append`` is the hot path of ``send``: one lock, two list appends and a tuple, no event-loop hop.
The loop is woken only when a batch opens (to arm its linger timer) or fills up. Memory is
accounted in estimated encoded bytes; when ``buffer_memory`` is used up, ``append`` blocks up to
``max_block_ms`` (the sync face) or raises at once so that the async face can wait instead.

The batches themselves, the memory accounting and the I/O loop's side (sealing, expiry, flush,
abort, close) are in :mod:`kafka_core.producer.batch_queues`; this module is the callers' side.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafka_core.errors import KafkaClosedError, KafkaConfigError
from kafka_core.producer._speedups import accel as _accel
from kafka_core.producer.batch_queues import BatchQueues, BufferFull
from kafka_core.producer.batches import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    PartitionQueue,
    ProducerBatch,
    TopicState,
    check_bytes,
    headers_size,
    now_ms,
)
from kafka_core.producer.batching import Chunk, chunk_timestamps, plan_chunks
from kafka_core.producer.futures import BatchResult, RecordFuture
from kafka_core.producer.partitioner import DefaultPartitioner, Partitioner

__all__ = [
    "BATCH_OVERHEAD",
    "RECORD_OVERHEAD",
    "Accumulator",
    "BufferFull",
    "PartitionQueue",
    "ProducerBatch",
    "TopicState",
]


class Accumulator(BatchQueues):
    """Thread-safe batches per partition; see the module docstring."""

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
        super().__init__(
            batch_size=batch_size,
            buffer_memory=buffer_memory,
            max_block_ms=max_block_ms,
            linger_ms=linger_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            partitioner=partitioner,
            wakeup=wakeup,
        )
        self.closed_by: BaseException | None = None  # a fatal start error, raised by later sends
        # Sync face: wait for a topic's partitions (``max_block_ms``); returns why they could not
        # be had, and the record then fails with it at once (see :meth:`refuse`).
        self.lookup: Callable[[str], BaseException | None] | None = None
        # Told of each record :meth:`refuse` fails (metrics; a transaction cannot commit now).
        # Called in the sender's thread; the sync face makes it hop to the loop.
        self.on_refused: Callable[[str, BaseException], None] | None = None
        # Why records may not be added now (a transactional producer outside a transaction):
        # the error to raise, made per send. Set under the lock by :meth:`gate_sends`.
        self.send_refusal: Callable[[], BaseException] | None = None
        if _accel is not None:
            self.append = _accel.FastAppend(  # type: ignore[method-assign]
                self, RECORD_OVERHEAD, type(partitioner) is DefaultPartitioner
            )

    def bind_blocking(
        self,
        lookup: Callable[[str], BaseException | None],
        wakeup: Callable[[], None],
        loop_thread_id: int | None,
        on_refused: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        """Serve callers in other threads than the I/O loop's (the blocking face): ``append``
        then waits for memory itself (up to ``max_block_ms``), waits for a topic's partitions
        through ``lookup`` (failing the record with what it returns), and wakes the loop through
        ``wakeup`` (thread-safe). A send from ``loop_thread_id`` (a delivery callback) never
        blocks: its record waits parked for the topic's metadata."""
        self.block = True
        self.lookup = lookup
        self.on_refused = on_refused
        self.wakeup = wakeup
        self.loop_thread = loop_thread_id

    def gate_sends(self, decide: Callable[[], Callable[[], BaseException] | None]) -> None:
        """Open or close ``append`` as ``decide()`` says, under the lock: a record being appended
        now is in before this returns, and once closed every record is refused with the error
        ``decide()`` gave the maker of (a transaction's end waits for nothing else). ``decide``
        runs with the lock held: it must not take it. Batches (``append_columns``) are not gated."""
        with self.lock:
            refusal = self.send_refusal = decide()
            if _accel is not None:
                self.append.gated = refusal is not None  # type: ignore[attr-defined]

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` records can go to now; 0 while its metadata is not known."""
        t = self.topics.get(topic)
        return t.num_partitions if t is not None and t.queues is not None else 0

    # -- the hot path (caller's thread) ---------------------------------------------------------

    def append(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, Any]] | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Add one record; returns its future at once (blocks only while memory is full).

        A record without ``timestamp_ms`` carries the time its batch was opened (at most about
        ``linger_ms`` earlier: a batch takes no records once its linger has passed).
        """
        if (
            key is None
            and partition is None
            and headers is None
            and timestamp_ms is None
            and type(value) is bytes
        ):
            # The common case, kept to a handful of bytecodes: null key, sticky partition.
            size = len(value) + RECORD_OVERHEAD
            with self.lock:
                b = self.fast.get(topic) if self.send_refusal is None else None
                if b is not None:
                    mem = self.mem
                    used = mem.used + size
                    if b.size + size <= self.batch_size and used <= mem.limit:
                        index = b.count
                        b.count = index + 1
                        b.values.append(value)
                        b.size += size
                        mem.used = used
                        return RecordFuture((b.result, index))
        return self._append(topic, value, key, partition, headers, timestamp_ms)

    def _append(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Sequence[tuple[str, Any]] | None,
        timestamp_ms: int | None,
    ) -> RecordFuture:
        if type(topic) is not str or not topic:
            raise KafkaConfigError(f"topic must be a non-empty str, not {topic!r}")
        failure: BaseException | None = None
        if (
            self.lookup is not None
            and not self.partition_count(topic)
            and threading.get_ident() != self.loop_thread
        ):
            failure = self.lookup(topic)  # partitions unknown: wait for them (max_block_ms)
        if type(value) is bytes:
            size = RECORD_OVERHEAD + len(value)
        else:
            size = RECORD_OVERHEAD + check_bytes(value, "value")
        if key is not None:
            size += len(key) if type(key) is bytes else check_bytes(key, "key")
        if headers:
            size += headers_size(headers)
        with self.lock:
            if failure is None and self.mem.used + size > self.mem.limit and self.mem.used:
                self.wait_for_space(size)
            if self.closed:
                raise self.closed_by or KafkaClosedError("the producer is closed")
            if self.send_refusal is not None:
                raise self.send_refusal()
            t = self.topics.get(topic)
            if t is not None and t.queues is not None:
                if partition is not None and not 0 <= partition < t.num_partitions:
                    raise KafkaConfigError(
                        f"partition {partition} out of range: {topic!r} has {t.num_partitions}"
                    )
                result, index = self.place(t, key, value, partition, headers, timestamp_ms, size)
                self.mem.used += size
                return RecordFuture((result, index))
            if failure is None:
                return self._park(topic, t, key, value, partition, headers, timestamp_ms, size)
        assert failure is not None
        return self._refused(topic, failure)  # outside the lock: its hook may take it

    def refuse(self, topic: str, value: Any, key: Any, error: BaseException) -> RecordFuture:
        """The asyncio face's record whose topic's partitions could not be had: checked as
        ``append`` checks it (closed, outside a transaction, not bytes), then failed with
        ``error`` (see :meth:`TopicWaits._lookup`)."""
        if type(topic) is not str or not topic:
            raise KafkaConfigError(f"topic must be a non-empty str, not {topic!r}")
        if type(value) is not bytes:
            check_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            check_bytes(key, "key")
        with self.lock:
            if self.closed:
                raise self.closed_by or KafkaClosedError("the producer is closed")
            if self.send_refusal is not None:
                raise self.send_refusal()
        return self._refused(topic, error)

    def _refused(self, topic: str, error: BaseException) -> RecordFuture:
        """A future failed with ``error`` for a record that was never queued (as the Java
        client's send returns a failed future for an error in ``waitOnMetadata``). Called
        without the lock held: ``on_refused`` may take it (a transaction failing)."""
        failed = BatchResult(topic, -1, now_ms())
        failed.set_error(error)
        if self.on_refused is not None:
            self.on_refused(topic, error)
        return RecordFuture((failed, 0))

    def _park(
        self,
        topic: str,
        t: TopicState | None,
        key: Any,
        value: Any,
        partition: int | None,
        headers: Any,
        timestamp_ms: int | None,
        size: int,
    ) -> RecordFuture:
        """A record for a topic without metadata yet: keep it until the loop learns the partitions."""
        if t is None:
            t = self.topics[topic] = TopicState(topic)
        if t.pending_result is None:
            t.pending_result = BatchResult(topic, -1, now_ms())
            t.pending_since = time.monotonic()
            t.pending = []
        index = len(t.pending)
        t.pending.append((key, value, partition, list(headers) if headers else None, timestamp_ms, size))
        self.mem.used += size
        if not self.wake_pending:
            self.wake_pending = True
            self.wakeup()
        return RecordFuture((t.pending_result, index))

    # -- columnar (send_batch) -------------------------------------------------------------------

    def plan_batch(
        self, topic: str, values: Any, keys: Any, partition: int | None, headers: Any, timestamps: Any
    ) -> list[Chunk]:
        """Split a ``send_batch`` call into per-partition chunks of at most ``batch_size`` bytes
        (``topic``'s partitions must be known)."""
        with self.lock:
            t = self.topics[topic]
            chunks = plan_chunks(
                t, self.partitioner, values, keys, partition, headers, timestamps, self.batch_size
            )
            self.cache_sticky(t)  # the sticky partition may have moved on
            return chunks

    def append_chunk(self, topic: str, chunk: Chunk) -> BatchResult:
        """Add one planned ``send_batch`` chunk (see :meth:`plan_batch`) as a batch of its own."""
        result = self.append_columns(
            topic,
            chunk.partition,
            chunk.keys,
            chunk.values,
            chunk.headers,
            chunk.timestamps,
            chunk.count,
            chunk.size,
        )
        if chunk.timestamps is not None:
            result.timestamps = chunk_timestamps(chunk.timestamps)
        return result

    def append_columns(
        self,
        topic: str,
        partition: int,
        keys: Any,
        values: Any,
        headers: Any,
        timestamps: Any,
        count: int,
        size: int,
    ) -> BatchResult:
        """Add one pre-sized chunk as a batch of its own (after the partition's open batch)."""
        with self.lock:
            if self.mem.used + size > self.mem.limit and self.mem.used:
                self.wait_for_space(size)
            if self.closed:
                raise self.closed_by or KafkaClosedError("the producer is closed")
            t = self.topics[topic]
            q = t.queues[partition]  # type: ignore[index]
            now = time.monotonic()
            if q.open is not None and q.open.count:
                q.sealed.append(q.open)
            q.open = None
            fast = self.fast.get(topic)
            if fast is not None and fast.partition == partition:
                del self.fast[topic]
            b = ProducerBatch(topic, partition, now, now + self.delivery_timeout)
            b.columns = (keys, values, headers, timestamps)
            b.count = count
            b.size = size
            q.sealed.append(b)
            self.mem.used += size
            if not self.wake_pending:
                self.wake_pending = True
                self.wakeup()
            return b.result
