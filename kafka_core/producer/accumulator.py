"""The record accumulator: per-partition batches filled in the caller's thread, drained by the I/O loop.

``append`` is the hot path of ``send``: one lock, two list appends and a tuple, no event-loop hop
(its common cases are ``accel.FastAppend``, in C when the extension is built). The loop is woken
only when a batch opens (to arm its linger timer) or fills up. Memory is accounted in estimated
encoded bytes; when ``buffer_memory`` is used up, ``append`` blocks up to ``max_block_ms`` (the
sync face) or raises at once so that the async face can wait instead.

Records are placed in their partition's open batch (the sticky partition for null keys kept up
as KIP-480 and KIP-794 say). A batch is sealed when it is full; otherwise it stays open until a
drain takes it. Drains work per broker connection (the sender's *slot*), as the Java client's
``RecordAccumulator.drain``: a slot is *ready* once one of its partitions has a full batch, a
batch past its linger or a retry past its backoff (every slot while flushing, closing or short
of memory), and a drain of a ready slot then takes the first batch of every partition it leads,
lingered or not, into one Produce request up to ``max_request_size``, starting where the last
request stopped (a drained queue goes to the back). So a thousand partitions whose batches open
a few microseconds apart go out in one request, not in a thousand. While a slot has all its
requests in flight its batches keep filling, so a slow broker gets bigger batches, not a queue
of tiny ones; the time of the records such a "late" batch takes is noted at ticks
(``ProducerBatch.stamps``), so they keep the fast path and still carry when they were sent,
within a tick.

Nothing here walks every partition on the send path or per drain: queues with records not sent
yet are indexed per slot (``slots``), what is due is a heap of linger deadlines (``timers``) and
a set of ready slots (``ready``), and the expiry pass runs only when a deadline has come.

This module owns the accumulator's one lock and the state it guards (see ``__init__``): the
callers' side (``append``, parking, refusing, ``send_batch``) and the I/O loop's (sealing,
draining, settling, retrying, expiry, flush, abort, close) are methods here, so the sender and
the expiry never take the lock themselves. The C fast path is handed the accumulator and takes
the same lock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from kafka_core.errors import KafkaClosedError, KafkaConfigError, KafkaTimeoutError
from kafka_core.producer._speedups import accel
from kafka_core.producer.batches import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    UNFILED,
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
    "FULL",
    "PARTITION_OVERHEAD",
    "RECORD_OVERHEAD",
    "Accumulator",
    "BufferFull",
    "PartitionQueue",
    "ProducerBatch",
    "TopicState",
]


class Accumulator:
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
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.max_block = max_block_ms / 1000.0
        self.linger = linger_ms / 1000.0
        self.tick = max(self.linger, 0.01)  # how often a late batch notes the time of its records
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self.partitioner = partitioner
        self.wakeup = wakeup  # wakes the I/O loop (thread-safe on the blocking face)

        # The accumulator's one lock: ``send`` runs in callers' threads while the I/O loop
        # drains. It guards everything declared below down to ``send_refusal``: ``topics`` with
        # every TopicState and PartitionQueue in it (open, sealed, retry and in-flight batches,
        # sequence numbers, parked records), the batches' record lists, ``fast``, ``mem``,
        # ``wake_pending``, ``closed``, the partitioner's sticky state, and ``send_refusal``.
        # Only this module's methods take it (and ``accel.FastAppend``, handed this object);
        # methods documented "called with the lock held" are for this module's own use, or are
        # callbacks it makes (``available``, a drain's ``pick``).
        self.lock = threading.Lock()
        self._space = threading.Condition(self.lock)  # blocking senders wait here for memory
        self._space_waiters = 0
        self.mem = accel.Budget(buffer_memory)
        self.topics: dict[str, TopicState] = {}
        # topic -> open batch of its sticky partition, while it holds values only: all the
        # common ``send`` has to look up.
        self.fast: dict[str, ProducerBatch] = {}
        self.wake_pending = False
        self.closed = False
        # Why records may not be added now (a transactional producer outside a transaction):
        # the error to raise, made per send. Set by :meth:`gate_sends`.
        self.send_refusal: Callable[[], BaseException] | None = None
        # The drain index (see the module docstring): per slot (``slot_of``; None while the
        # leader is unknown: never drained), the queues with records not sent yet, in drain
        # order; the slots with something due; the heap of (when, tie, queue, open batch or None
        # for a retry's backoff) that makes slots due.
        self.slots: dict[Hashable, dict[PartitionQueue, None]] = {}
        self.ready: set[Hashable] = set()
        self.timers: list[tuple[float, int, PartitionQueue | None, ProducerBatch | None]] = []
        self._tie = itertools.count()
        # The open batches past their linger that their slot could not take yet ("late"), and
        # whether the one tick that notes their records' time is in ``timers`` (an entry with
        # no queue). One entry per tick for them all: a timer per late batch, each filing its
        # slot ready again, made every tick cost a heap push, a pop and a drain walk per
        # partition, O(partitions) every 10 ms whether records moved or not.
        self.late: dict[PartitionQueue, ProducerBatch] = {}
        self._late_tick = False
        self.exhausted = False  # a sender waits for memory: every slot drains, as Java's
        self.expiry_at: float | None = None  # no deadline comes before this (None: none at all)

        # Read under the lock, set without it by the loop (flush) or once at start:
        self.flushing = 0  # flushes running: linger is ignored while any is
        self.closed_by: BaseException | None = None  # a fatal start error, raised by later sends
        self.block = True  # False for the async face: it waits for memory itself
        self.space_event: Any = None  # asyncio.Event of the async face, set when memory frees up
        self.loop_thread: int | None = None  # the I/O thread of the sync face (must never block)
        # Whether a partition can take records now (its leader known and not failing); the sticky
        # partition for null keys is chosen among those, as KIP-794 skips partitions without a
        # working leader. Set by the sender; called with the lock held.
        self.available: Callable[[PartitionQueue], bool] | None = None
        # The slot (broker connection) a queue's batches go to now, None while its leader is
        # unknown; set by the sender, called with the lock held.
        self.slot_of: Callable[[PartitionQueue], Hashable] = _one_slot
        # Sync face: wait for a topic's partitions (``max_block_ms``); returns why they could not
        # be had, and the record then fails with it at once (see :meth:`refuse`).
        self.lookup: Callable[[str], BaseException | None] | None = None
        # Told of each record :meth:`refuse` fails (metrics; a transaction cannot commit now).
        # Called in the sender's thread; the sync face makes it hop to the loop.
        self.on_refused: Callable[[str, BaseException], None] | None = None

        # ``append``: the common cases (null key into the sticky batch; in C also a murmur2 key
        # into its partition's batch), anything else going to :meth:`_append`.
        self.append: Callable[..., RecordFuture] = accel.FastAppend(
            self, self._append, RECORD_OVERHEAD, type(partitioner) is DefaultPartitioner
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
            self.append.gated = refusal is not None  # type: ignore[attr-defined]

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` records can go to now; 0 while its metadata is not known."""
        t = self.topics.get(topic)
        return t.num_partitions if t is not None and t.queues is not None else 0

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
            self._file(q, ready=True)  # a full batch makes its slot ready
            if t.sticky == q.partition:
                self._next_sticky(t)
        b = q.open = ProducerBatch(t.topic, q.partition, now, now + self.delivery_timeout)
        if t.sticky == q.partition:
            self.fast[t.topic] = b
        self._file(q)
        heapq.heappush(self.timers, (now + self.linger, next(self._tie), q, b))
        if self.expiry_at is None:
            self.expiry_at = b.deadline
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
        if not self.exhausted:  # free memory sooner: every slot drains now, lingered or not
            self.exhausted = True
            self.wakeup()
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

    # -- the callers' side (any thread) ----------------------------------------------------------

    def _append(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Sequence[tuple[str, Any]] | None,
        timestamp_ms: int | None,
    ) -> RecordFuture:
        """Add one record (``append`` past its common cases); returns its future at once
        (blocks only while memory is full).

        A record without ``timestamp_ms`` carries the time its batch was opened (at most about
        ``linger_ms`` earlier: a batch takes no records once its linger has passed).
        """
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
            self._file(q, ready=True)
            if self.expiry_at is None:
                self.expiry_at = b.deadline
            self.mem.used += size
            if not self.wake_pending:
                self.wake_pending = True
                self.wakeup()
            return b.result

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

    # -- the drain index (lock held) -------------------------------------------------------------

    def _file(self, q: PartitionQueue, *, ready: bool = False) -> None:
        """Index ``q`` under its slot (it has records not sent yet); mark the slot ready."""
        key = q.filed
        if key is UNFILED:
            key = q.filed = self.slot_of(q)
            queues = self.slots.get(key)
            if queues is None:
                queues = self.slots[key] = {}
            queues[q] = None
        if ready and key is not None:
            self.ready.add(key)

    def _unfile(self, q: PartitionQueue) -> None:
        queues = self.slots.get(q.filed)
        if queues is not None:
            queues.pop(q, None)
            if not queues:
                del self.slots[q.filed]
        q.filed = UNFILED

    def _lingered(self, q: PartitionQueue, now: float) -> bool:
        """``q``'s open batch has records and its linger has passed."""
        b = q.open
        return b is not None and b.count > 0 and b.created + self.linger <= now

    @staticmethod
    def _unsent(q: PartitionQueue) -> bool:
        return bool(q.sealed or q.retry or (q.open is not None and q.open.count))

    def due(self, now: float) -> list[tuple[PartitionQueue, ProducerBatch]]:
        """Mark ready the slots with something due at ``now`` (every slot while flushing, closing
        or short of memory); returns the open batches whose linger has just passed, for
        :meth:`stamp_late` after the drain."""
        lingered: list[tuple[PartitionQueue, ProducerBatch]] = []
        with self.lock:
            self.wake_pending = False
            if self.flushing > 0 or self.closed or self.exhausted:
                self.exhausted = False
                self.ready.update(key for key in self.slots if key is not None)
            timers = self.timers
            while timers and timers[0][0] <= now:
                _, _, q, b = heapq.heappop(timers)
                if q is None:  # the late batches' tick: their slots are ready already
                    self._late_tick = False
                    lingered.extend(self.late.items())
                elif b is None:  # a retry's backoff is over (it held back a lingered batch too)
                    if q.sealed or q.retry or self._lingered(q, now):
                        self._file(q, ready=True)
                elif q.open is b and b.count:
                    self._file(q, ready=True)
                    lingered.append((q, b))
        return lingered

    def stamp_late(self, lingered: list[tuple[PartitionQueue, ProducerBatch]], now: float) -> float | None:
        """Batches :meth:`due` found past their linger and still open after the drain (their slot
        had every request in flight, or the partition could not send) keep filling: note the time
        of what they take (``ProducerBatch.stamps``), again at each tick while they stay open; a
        failing leader's sticky partition is left. Their slots need no new look at a tick: what
        held a batch back marks its slot ready when it goes (a request ending, a retry's backoff,
        a leader found). Returns when the next timer is due."""
        with self.lock:
            late = self.late
            for q, b in lingered:
                if q.open is not b:
                    if late.get(q) is b:
                        del late[q]
                    continue
                late[q] = b
                if b.stamps is None:
                    b.stamps = [(b.count, None)]  # the records so far: the batch's time
                else:
                    b.stamp()
                t = self.topics.get(q.topic)
                if (
                    t is not None
                    and t.sticky == q.partition
                    and self.available is not None
                    and not self.available(q)
                ):
                    self._next_sticky(t)  # its leader is failing: null keys go elsewhere
            if late and not self._late_tick:
                self._late_tick = True
                heapq.heappush(self.timers, (now + self.tick, next(self._tie), None, None))
            return self.timers[0][0] if self.timers else None

    def drain_ready(
        self,
        capacity: Callable[[Hashable], int],
        pick: Callable[[PartitionQueue, int | None], ProducerBatch | object | None],
        max_request_size: int,
    ) -> list[tuple[Hashable, list[list[tuple[PartitionQueue, ProducerBatch]]]]]:
        """Build the Produce requests to send now: for each ready slot with ``capacity(slot)``
        requests free, requests of at most one batch per partition and ``max_request_size``
        bytes (a first batch goes whatever its size), in drain order from where the last one
        stopped. ``pick(q, room)`` (the sender's, called with the lock held: no callbacks, no
        I/O) decides whether ``q``'s first batch goes, takes it (:meth:`take_head`) and returns
        it, returns None, or :data:`FULL` when it does not fit in ``room`` bytes (None: the
        request is empty). A slot with no capacity stays ready for when a request ends."""
        out: list[tuple[Hashable, list[list[tuple[PartitionQueue, ProducerBatch]]]]] = []
        now = time.monotonic()
        with self.lock:
            for key in list(self.ready):
                free = capacity(key)
                if free <= 0:
                    continue
                self.ready.discard(key)
                requests: list[list[tuple[PartitionQueue, ProducerBatch]]] = []
                more = False
                while free > 0 and key in self.slots:
                    items, more = self._drain_one(key, self.slots[key], pick, max_request_size, now)
                    if not items:
                        break
                    requests.append(items)
                    free -= 1
                    if not more:
                        break
                if more:
                    self.ready.add(key)
                if requests:
                    out.append((key, requests))
        return out

    def _drain_one(
        self,
        key: Hashable,
        queues: dict[PartitionQueue, None],
        pick: Callable[[PartitionQueue, int | None], ProducerBatch | object | None],
        max_request_size: int,
        now: float,
    ) -> tuple[list[tuple[PartitionQueue, ProducerBatch]], bool]:
        """One request's batches from ``key``'s queues; also whether more is due there: a
        partition whose next batch is sealed or past its linger already (nothing else would
        mark the slot ready for it: a late batch's tick does not)."""
        items: list[tuple[PartitionQueue, ProducerBatch]] = []
        size = 0
        more = False
        for q in list(queues):
            where = self.slot_of(q)
            if where != key:  # its leader moved (or is unknown): it goes elsewhere
                self._unfile(q)
                self._file(q, ready=True)
                continue
            b = pick(q, max_request_size - size if items else None)
            if b is FULL:
                more = True  # the request is full: the next one starts here
                break
            del queues[q]
            if isinstance(b, ProducerBatch):
                items.append((q, b))
                size += b.size + PARTITION_OVERHEAD
                more = more or bool(q.sealed) or self._lingered(q, now)
            if self._unsent(q):
                queues[q] = None  # to the back: the next request starts after it
            else:
                q.filed = UNFILED
        if not queues and self.slots.get(key) is queues:
            del self.slots[key]
        return items, more

    def head(self, q: PartitionQueue) -> ProducerBatch | None:
        """The batch ``q`` would send next (its open one when nothing is sealed); lock held."""
        if q.sealed:
            return q.sealed[0]
        b = q.open
        return b if b is not None and b.count else None

    def take_head(self, q: PartitionQueue) -> ProducerBatch:
        """Take :meth:`head` out of ``q``, sealing it if it was open; lock held (a drain's pick)."""
        if q.sealed:
            return q.sealed.popleft()
        b = q.open
        assert b is not None
        q.open = None
        b.stamp()
        if self.fast.get(q.topic) is b:
            del self.fast[q.topic]
        t = self.topics.get(q.topic)
        if t is not None and t.sticky == q.partition:
            self._next_sticky(t)
        return b

    def refile(self) -> None:
        """Leaders changed: every indexed queue is filed again under the slot it goes to now."""
        with self.lock:
            for key, queues in list(self.slots.items()):
                for q in list(queues):
                    if self.slot_of(q) != key:
                        self._unfile(q)
                        self._file(q, ready=True)

    def poke(self) -> None:
        """Something that held every partition back is gone (a transaction's partitions added):
        every slot is looked at again."""
        with self.lock:
            self.ready.update(key for key in self.slots if key is not None)

    def _drop_open(self, t: TopicState, q: PartitionQueue) -> ProducerBatch | None:
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

    def settle(self, q: PartitionQueue, b: ProducerBatch) -> None:
        """``b`` leaves flight; if ``q`` has nothing else out, its parked retries go first."""
        with self.lock:
            if b in q.in_flight:
                q.in_flight.remove(b)
            if not q.in_flight and q.retry:
                q.retry.sort(key=lambda x: (x.sequence, x.created))
                q.sealed.extendleft(reversed(q.retry))
                q.retry.clear()
            # Its slot may have passed it over (its in-flight limit): look again if it is due.
            if q.sealed or self._lingered(q, time.monotonic()):
                self._file(q, ready=True)

    def park_retry(self, q: PartitionQueue, b: ProducerBatch, muted_until: float) -> None:
        """``b`` failed and is retried: out of flight, parked until ``q`` has nothing in flight,
        and ``q`` sends nothing before ``muted_until`` (the retry backoff)."""
        with self.lock:
            if b in q.in_flight:
                q.in_flight.remove(b)
            q.retry.append(b)
            q.muted_until = muted_until
            self._file(q)
            heapq.heappush(self.timers, (muted_until, next(self._tie), q, None))

    def split_in_flight(self, q: PartitionQueue, b: ProducerBatch, parts: Sequence[ProducerBatch]) -> None:
        """``b`` (too large for the broker) is resent as ``parts``: out of flight, parked as retries."""
        with self.lock:
            if b in q.in_flight:
                q.in_flight.remove(b)
            q.retry.extend(parts)
            self._file(q)

    def restart_sequences(self) -> None:
        """A new producer id or epoch: every partition numbers from 0 again, the batches not
        acknowledged yet renumbered in their order."""
        now = time.monotonic()
        with self.lock:
            for t in self.topics.values():
                for q in t.queues or ():
                    q.next_sequence = 0
                    q.acked_next = 0
                    q.epoch_acked = False
                    q.unresolved = -1
                    pending = sorted(
                        [*q.retry, *q.sealed], key=lambda x: (x.sequence < 0, x.sequence, x.created)
                    )
                    q.retry.clear()
                    q.sealed.clear()
                    for b in pending:
                        b.sequence = -1
                        b.unknown_outcome = False
                        b.resent = False
                    q.sealed.extend(pending)
                    if pending or self._lingered(q, now):  # a lingered batch waited for the bump too
                        self._file(q, ready=True)

    def take_in_flight(self) -> list[ProducerBatch]:
        """Close: every batch in flight, taken out of flight (the caller fails them)."""
        with self.lock:
            out: list[ProducerBatch] = []
            for t in self.topics.values():
                for q in t.queues or ():
                    out.extend(q.in_flight)
                    q.in_flight.clear()
            return out

    def take_expired(
        self, now: float
    ) -> tuple[list[tuple[PartitionQueue, ProducerBatch, str]], float | None]:
        """Every batch past its deadline at ``now``, with where it waited: ``queued`` (open),
        ``in flight`` (it stays in flight, marked ``expired``: its request's end settles it),
        ``waiting to be retried``, ``waiting behind in-flight requests`` or ``waiting to be
        sent``; all but those in flight are taken out. Also returns the next deadline of
        anything still waiting (None if nothing is)."""
        expired: list[tuple[PartitionQueue, ProducerBatch, str]] = []
        next_at: float | None = None
        with self.lock:
            if self.expiry_at is None or now < self.expiry_at:
                return expired, self.expiry_at  # no deadline has come: no pass over the queues
            for t in self.topics.values():
                for q in t.queues or ():
                    b = q.open
                    if b is not None and b.count:
                        if b.deadline <= now:
                            dropped = self._drop_open(t, q)
                            if dropped is not None:
                                expired.append((q, dropped, "queued"))
                        elif next_at is None or b.deadline < next_at:
                            next_at = b.deadline
                    for b in q.in_flight:
                        if b.expired:
                            continue
                        if b.deadline <= now:
                            b.expired = True
                            expired.append((q, b, "in flight"))
                        elif next_at is None or b.deadline < next_at:
                            next_at = b.deadline
                    if q.retry:
                        keep = []
                        for b in q.retry:
                            if b.deadline <= now:
                                expired.append((q, b, "waiting to be retried"))
                            else:
                                keep.append(b)
                                if next_at is None or b.deadline < next_at:
                                    next_at = b.deadline
                        q.retry[:] = keep
                    while q.sealed and q.sealed[0].deadline <= now:
                        b = q.sealed.popleft()
                        where = "waiting to be retried" if b.attempts else "waiting behind in-flight requests"
                        if not q.in_flight and not b.attempts:
                            where = "waiting to be sent"
                        expired.append((q, b, where))
                    if q.sealed:
                        first = min(q.sealed[0].deadline, q.sealed[-1].deadline)
                        if next_at is None or first < next_at:
                            next_at = first
            self.expiry_at = next_at
        return expired, next_at

    def woken(self) -> None:
        """The loop has run: the next batch opened wakes it again."""
        self.wake_pending = False

    def last_error(self, topic: str, partition: int) -> BaseException | None:
        """The last error a partition's batches met (None when it has no queue yet)."""
        t = self.topics.get(topic)
        if t is not None and t.queues is not None and 0 <= partition < len(t.queues):
            return t.queues[partition].last_error
        return None

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


def _one_slot(q: PartitionQueue) -> Hashable:
    """Every queue in one slot: an accumulator without a sender (unit tests)."""
    return 0


# What a drain's ``pick`` returns when a partition's batch does not fit in the request.
FULL = object()
# A partition's share of a Produce request besides its batch: index, records length, tags.
PARTITION_OVERHEAD = 16


def _plain(b: ProducerBatch | None) -> ProducerBatch | None:
    """``b`` if the fast path may append to it (values only so far), else None."""
    if b is None or b.keys is not None or b.headers is not None or b.timestamps is not None:
        return None
    return b


class BufferFull(Exception):
    """Memory is full and this accumulator must not block: the asyncio face waits, then retries."""
