"""What the accumulator holds: batches, per-partition queues, per-topic state, and their sizes.

Kept apart from the accumulator's logic so that each module stays readable on its own.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kafka_core.errors import KafkaCodecError
from kafka_core.producer.futures import BatchResult

if TYPE_CHECKING:  # the pure-Python twin declares the fields the C struct has
    from kafka_core.producer._python.accel import BatchBase
else:
    from kafka_core.producer._speedups import accel

    BatchBase = accel.BatchBase

__all__ = [
    "BATCH_OVERHEAD",
    "RECORD_OVERHEAD",
    "UNFILED",
    "PartitionQueue",
    "ProducerBatch",
    "TopicState",
    "check_bytes",
    "headers_size",
    "now_ms",
]

BATCH_OVERHEAD = 61  # RecordBatch v2 header
# Upper bound of a record's framing for records under 1 MiB: length(3) attributes(1)
# timestampDelta(10) offsetDelta(3) keyLength(3) valueLength(3) headerCount(1).
RECORD_OVERHEAD = 24


# PartitionQueue.filed of a queue in no drain index (None is the index of unknown leaders).
UNFILED: Any = object()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def check_bytes(obj: Any, what: str) -> int:
    """Size of a bytes-like ``obj`` (0 for None); anything else fails alone, at send time."""
    if obj is None:
        return 0
    if not isinstance(obj, str):
        try:
            return memoryview(obj).nbytes
        except TypeError:
            pass
    raise KafkaCodecError(f"{what} must be bytes-like or None, not {type(obj).__name__}")


def headers_size(headers: Sequence[tuple[str, Any]]) -> int:
    size = 0
    for k, v in headers:
        size += 10 + len(k) * 4 + (0 if v is None else len(v))
    return size


class ProducerBatch(BatchBase):
    """Records for one partition, sent (and retried) as one RecordBatch."""

    __slots__ = (
        "attempts",
        "columns",
        "created",
        "deadline",
        "encoded",
        "encoded_for",
        "expired",
        "headers",
        "keys",
        "partition",
        "producer_epoch",
        "producer_id",
        "resent",
        "retry_at",
        "sequence",
        "stamps",
        "timestamps",
        "topic",
        "unknown_outcome",
    )

    def __init__(self, topic: str, partition: int, created: float, deadline: float) -> None:
        self.topic = topic
        self.partition = partition
        self.keys: list[Any] | None = None  # None while every key so far is null
        self.values: list[Any] = []
        self.headers: list[Any] | None = None
        self.timestamps: list[int | None] | None = None
        self.columns: tuple[Any, Any, Any, Any] | None = None
        self.count = 0
        self.size = BATCH_OVERHEAD
        self.created = created
        self.deadline = deadline
        self.result = BatchResult(topic, partition, now_ms())
        self.attempts = 0
        self.retry_at = 0.0
        self.sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.encoded: bytearray | None = None
        self.encoded_for: tuple[int, int, int] | None = None
        self.unknown_outcome = False
        # Sent again under the sequence numbers it was sent with before (a retry): until it is
        # answered no new batch of its partition is numbered (see sender).
        self.resent = False
        self.expired = False  # failed at its deadline while in flight; the request is still out
        # Past its linger and still open (waiting for its partition to be able to send): records
        # keep coming, so their time is noted as (record count, ms) points by the sender's ticks
        # instead of per record, which would take them off the fast path. None until then.
        self.stamps: list[tuple[int, int | None]] | None = None

    def stamp(self) -> None:
        """Note that the records added since the last point were added by now."""
        stamps = self.stamps
        if stamps is not None and self.count > stamps[-1][0]:
            stamps.append((self.count, now_ms()))

    def settle_timestamps(self) -> list[int | None] | None:
        """Per-record timestamps (None: the batch's base) once no more records come."""
        stamps = self.stamps
        if stamps is None:
            return self.timestamps
        self.stamp()
        self.stamps = None
        out: list[int | None] = []
        lo = 0
        for hi, ts in stamps:
            out += [ts] * (hi - lo)
            lo = hi
        given = self.timestamps
        if given is not None:  # a timestamp the caller gave wins
            out = [s if g is None else g for g, s in zip(given, out, strict=True)]
        self.timestamps = self.result.timestamps = out
        return out

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.topic}[{self.partition}] n={self.count} seq={self.sequence}>"


class PartitionQueue:
    """One partition's open batch, its sealed batches in order, and what is in flight."""

    __slots__ = (
        "acked_next",
        "epoch_acked",
        "filed",
        "in_flight",
        "last_error",
        "leader",
        "muted_until",
        "next_sequence",
        "open",
        "partition",
        "retry",
        "sealed",
        "sent_to",
        "topic",
        "unresolved",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.open: ProducerBatch | None = None
        self.sealed: deque[ProducerBatch] = deque()
        self.in_flight: deque[ProducerBatch] = deque()
        self.retry: list[ProducerBatch] = []
        self.leader = -1
        self.next_sequence = 0
        self.acked_next = 0  # the sequence the broker expects after the last batch it acknowledged
        # The broker acknowledged a batch of ours under the current producer id and epoch, so it
        # holds our state and refuses any sequence but the next. Until then it takes any first
        # sequence: a later batch could be written before a refused first one, so one batch is
        # in flight until this is set (see sender).
        self.epoch_acked = False
        self.muted_until = 0.0
        # The end sequence of a batch failed at its deadline that may have been written: until an
        # acknowledgement past it (written) or a sequence error (not written) says which, no new
        # batch is numbered; if nothing is left to tell, the epoch is bumped (see sender).
        self.unresolved = -1
        # The slot (broker connection) the batches in flight went to: while any is out, nothing
        # goes to another one (the leader moved), as librdkafka waits for the old leader's answers.
        self.sent_to: Any = None
        self.last_error: BaseException | None = None  # the cause named when a record times out
        # The broker connection (the sender's slot) whose drain index holds this queue while it
        # has records not sent yet; UNFILED when it is in no index (see Accumulator.slots).
        self.filed: Any = UNFILED


class TopicState:
    """Partition queues of a topic, or records parked until its metadata is known."""

    __slots__ = (
        "num_partitions",
        "pending",
        "pending_result",
        "pending_since",
        "queues",
        "sticky",
        "topic",
    )

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.num_partitions = 0
        self.queues: list[PartitionQueue] | None = None
        self.sticky: int | None = None
        self.pending: list[tuple[Any, Any, int | None, Any, int | None, int]] = []
        self.pending_result: BatchResult | None = None
        self.pending_since = 0.0
