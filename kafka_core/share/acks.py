"""The share consumer's acknowledgement book: what was delivered, what awaits sending, counters.

Records handed over by a poll are *delivered* (awaiting acknowledgement); ``acknowledge`` moves
one to *pending* (with its type); requests take the pending ones for the partitions they cover.
Implicit mode accepts everything delivered at the next poll, commit or close. Every check is done
before anything changes, so a bad acknowledgement leaves the book as it was. The book is
thread-safe (one lock): the blocking face acknowledges from the application's thread while the
event loop takes pending acknowledgements for its requests.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable
from collections.abc import Set as AbstractSet
from itertools import pairwise, repeat
from operator import attrgetter
from typing import Any, TypeVar, cast

from kafka_core.client.metadata import TopicPartition
from kafka_core.share.records import (
    GAP,
    LOCK_LOST_CODES,
    AcknowledgeMode,
    AcknowledgeType,
    Acks,
    DoneMemory,
    KafkaAcknowledgementError,
)

_OFFSET = attrgetter("offset")
_ONE = 1
DONE_MEMORY = 1_000_000  # acknowledged records remembered to tell "twice" from "never"
_ACCEPT, _RELEASE, _REJECT, _RENEW = (
    int(AcknowledgeType.ACCEPT),
    int(AcknowledgeType.RELEASE),
    int(AcknowledgeType.REJECT),
    int(AcknowledgeType.RENEW),
)


F = TypeVar("F", bound=Callable[..., Any])


def _locked(fn: F) -> F:
    @functools.wraps(fn)
    def method(self: AckBook, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return fn(self, *args, **kwargs)

    return cast(F, method)


class AckBook:
    def __init__(self, mode: AcknowledgeMode) -> None:
        self.mode = mode
        # Guards everything below: the application's thread (acknowledge, poll on the sync
        # face) and the loop (ShareFetch/ShareAcknowledge answers) both change it.
        self._lock = threading.RLock()
        # tp -> {offset: delivery count}: handed over, not acknowledged yet
        self.delivered: dict[TopicPartition, dict[int, int]] = {}
        self._runs: list[tuple[TopicPartition, int, int]] = []  # implicit: delivered ranges
        self.pending: dict[TopicPartition, Acks] = {}
        # RENEWs (KIP-1222) awaiting a ShareAcknowledge of their own: the record stays delivered
        self.renewals: dict[TopicPartition, dict[int, int]] = {}
        self.renewed = 0
        self._done = DoneMemory(DONE_MEMORY)
        self._lock_deadline: dict[TopicPartition, float] = {}
        self.acquired_total = 0
        # acquired offsets whose acknowledgement has not gone out in a request yet: what the
        # broker still counts against its in-flight limit per share partition
        self.outstanding = 0
        self._pending_n = 0  # acknowledgements in ``pending`` (kept, not summed per poll)
        self.redelivered = 0
        self.counts = {_ACCEPT: 0, _RELEASE: 0, _REJECT: 0}
        self.ack_failures = 0
        self.lock_expiries = 0
        self.late_acks = 0
        self._latency_sum = 0.0
        self._latency_max = 0.0
        self._latency_n = 0

    # -- delivery ---------------------------------------------------------------------------------

    @_locked
    def acquired(self, chunks: Iterable[Any]) -> None:
        """Count what ShareFetch acquired (redelivered: acquired with a delivery count above 1)."""
        for c in chunks:
            self.acquired_total += c.size
            self.outstanding += c.size
            self.redelivered += sum(last - first + 1 for first, last, count in c.ranges if count > 1)

    def _deadline(self, tp: TopicPartition, lock_ms: float) -> None:
        self._lock_deadline[tp] = time.monotonic() + lock_ms / 1000.0

    @_locked
    def delivered_records(self, tp: TopicPartition, records: list[Any], lock_ms: float) -> None:
        """``records`` (all of ``tp``, in offset order) were handed over by a poll."""
        if not records:
            return
        first, last = records[0].offset, records[-1].offset
        if last - first + 1 == len(records):  # contiguous (the usual case): a range, no pass
            self._delivered_range(tp, first, last)
        else:
            self._delivered(tp, dict.fromkeys(map(_OFFSET, records), _ONE))
        self._deadline(tp, lock_ms)

    @_locked
    def delivered_columns(
        self, tp: TopicPartition, table: Any, single: tuple[int, int, int] | None, lock_ms: float
    ) -> None:
        """The rows of ``table`` (all of ``tp``) were handed over by poll_columns."""
        n = table.num_rows
        if not n:
            return
        col = table.column("offset")
        first, last = col[0].as_py(), col[n - 1].as_py()
        if single is not None and last - first + 1 == n:  # one acquired range, no gaps: no pass
            self._delivered_range(tp, first, last)
        else:
            self._delivered(tp, dict.fromkeys(col.to_pylist(), _ONE))
        self._deadline(tp, lock_ms)

    def _delivered(self, tp: TopicPartition, offsets: dict[int, int]) -> None:
        self._flush_runs()
        book = self.delivered.get(tp)
        if book is None:
            self.delivered[tp] = offsets
        else:
            book.update(offsets)

    def _delivered_range(self, tp: TopicPartition, first: int, last: int) -> None:
        """Implicit mode keeps contiguous deliveries as ranges (no per-offset entry: it never
        looks one up, everything is accepted at the next poll); explicit mode needs them."""
        if self.mode is AcknowledgeMode.IMPLICIT and not self.delivered:
            self._runs.append((tp, first, last))
        else:
            self._delivered(tp, dict.fromkeys(range(first, last + 1), _ONE))

    def _flush_runs(self) -> None:
        """Ranges as per-offset entries (before anything that looks offsets up)."""
        runs, self._runs = self._runs, []
        for tp, first, last in runs:
            self.delivered.setdefault(tp, {}).update(dict.fromkeys(range(first, last + 1), _ONE))

    # -- settling ---------------------------------------------------------------------------------

    @_locked
    def settle_before_poll(self) -> None:
        """Explicit: records of the last poll still unacknowledged raise; implicit: accept them."""
        if self.mode is AcknowledgeMode.EXPLICIT:
            left = sum(len(v) for v in self.delivered.values())
            if left:
                first = next((tp, min(v)) for tp, v in self.delivered.items() if v)
                raise KafkaAcknowledgementError(
                    f"{left} record(s) of the last poll are not acknowledged (first: {first[0]} offset "
                    f"{first[1]}); with share_acknowledgement_mode='explicit' acknowledge every record "
                    "before polling again"
                )
            return
        self._accept_all()

    @_locked
    def settle_for_commit(self) -> None:
        if self.mode is AcknowledgeMode.IMPLICIT:
            self._accept_all()

    @_locked
    def settle_for_close(self) -> None:
        """Implicit: accept what was delivered; explicit: release what was not acknowledged."""
        if self.mode is AcknowledgeMode.IMPLICIT:
            self._accept_all()
        else:
            self._move_all(_RELEASE)

    @_locked
    def release_all_delivered(self) -> None:
        self._move_all(_RELEASE)

    def _accept_all(self) -> None:
        self._move_all(_ACCEPT)

    def _move_all(self, kind: int) -> None:
        self.renewals = {}  # every delivered record gets a final type now
        runs, self._runs = self._runs, []
        for tp, first, last in runs:
            self._check_lock(tp)
            self._pending_n += self._pending_of(tp).add_range(first, last, kind)
            self.counts[kind] += last - first + 1
        for tp, offsets in self.delivered.items():
            if offsets:
                self._check_lock(tp)
                self._add_pending(tp, dict.fromkeys(offsets, kind))
                self.counts[kind] += len(offsets)
                self._remember(tp, offsets)
        self.delivered = {}

    @_locked
    def release_offsets(self, tp: TopicPartition, offsets: list[int]) -> None:
        """Acquired but never handed over: released (not counted as the application's)."""
        if offsets:
            self._add_pending(tp, dict.fromkeys(offsets, _RELEASE))

    @_locked
    def gaps(self, tp: TopicPartition, offsets: list[int]) -> None:
        if offsets:
            self._add_pending(tp, dict.fromkeys(offsets, GAP))

    def _add_pending(self, tp: TopicPartition, acks: dict[int, int]) -> None:
        self._pending_n += self._pending_of(tp).add(acks)

    def _pending_of(self, tp: TopicPartition) -> Acks:
        book = self.pending.get(tp)
        if book is None:
            book = self.pending[tp] = Acks()
        return book

    # -- the application's acknowledgements -------------------------------------------------------

    def _check(self, topic: str, partition: int, offset: int) -> TopicPartition:
        if self.mode is AcknowledgeMode.IMPLICIT:
            raise KafkaAcknowledgementError(
                "acknowledge() needs share_acknowledgement_mode='explicit' (implicit mode accepts "
                "every record at the next poll)"
            )
        tp = TopicPartition(topic, partition)
        self._flush_runs()
        offsets = self.delivered.get(tp)
        if offsets is not None and offset in offsets:
            return tp
        if (topic, partition, offset) in self._done:
            raise KafkaAcknowledgementError(f"{tp} offset {offset} was already acknowledged")
        raise KafkaAcknowledgementError(
            f"{tp} offset {offset} was not delivered to this consumer (or not by its latest polls): "
            "only records this consumer polled can be acknowledged"
        )

    @_locked
    def acknowledge(self, topic: str, partition: int, offset: int, kind: AcknowledgeType) -> None:
        tp = self._check(topic, partition, offset)
        if kind is AcknowledgeType.RENEW:
            self._renew([(tp, offset)])
            return
        self._apply([(tp, offset)], int(kind))

    def _renew(self, items: list[tuple[TopicPartition, int]]) -> None:
        """The records stay delivered (acknowledged again later); a RENEW goes out at the next
        commit, and their lock deadline starts again once it is sent."""
        for tp, offset in items:
            self.renewals.setdefault(tp, {})[offset] = _RENEW
        self.renewed += len(items)

    @_locked
    def acknowledge_many(self, keys: list[tuple[str, int, int]], kind: AcknowledgeType) -> None:
        checked = []
        seen: set[tuple[str, int, int]] = set()
        for topic, partition, offset in keys:
            if (topic, partition, offset) in seen:
                raise KafkaAcknowledgementError(f"{topic}[{partition}] offset {offset} appears twice")
            seen.add((topic, partition, offset))
            checked.append((self._check(topic, partition, offset), offset))
        if kind is AcknowledgeType.RENEW:
            self._renew(checked)
            return
        self._apply(checked, int(kind))

    @_locked
    def acknowledge_ranges(self, ranges: list[tuple[str, int, int, int]], kind: AcknowledgeType) -> bool:
        """Acknowledge (topic, partition, first, last) ranges as ``kind`` with no per-offset
        Python (a columnar batch); False (nothing changed) when a check fails: the caller then
        goes offset by offset for the exact error."""
        if self.mode is AcknowledgeMode.IMPLICIT or kind is AcknowledgeType.RENEW:
            return False
        self._flush_runs()
        by_tp: dict[TopicPartition, list[tuple[int, int]]] = {}
        for topic, partition, first, last in ranges:
            tp = TopicPartition(topic, partition)
            offsets = self.delivered.get(tp)
            if offsets is None or not all(map(offsets.__contains__, range(first, last + 1))):
                return False
            by_tp.setdefault(tp, []).append((first, last))
        for spans in by_tp.values():  # one offset twice: refused, by the offset-by-offset path
            spans.sort()
            if any(a[1] >= b[0] for a, b in pairwise(spans)):
                return False
        k = int(kind)
        for tp, spans in by_tp.items():
            self._check_lock(tp)
            offsets = self.delivered[tp]
            acks = self._pending_of(tp)
            renewing = self.renewals.get(tp)
            for first, last in spans:
                if renewing:
                    deque(map(renewing.pop, range(first, last + 1), repeat(None)), maxlen=0)
                deque(map(offsets.pop, range(first, last + 1)), maxlen=0)
                self._pending_n += acks.add_range(first, last, k)
                self.counts[k] += last - first + 1
                self._remember(tp, range(first, last + 1))
            if not offsets:
                del self.delivered[tp]
        return True

    def _apply(self, items: list[tuple[TopicPartition, int]], kind: int) -> None:
        for tp, offset in items:
            self._check_lock(tp)
            renewing = self.renewals.get(tp)
            if renewing is not None:  # acknowledged for good: no need to renew it any more
                renewing.pop(offset, None)
            del self.delivered[tp][offset]
            if not self.delivered[tp]:
                del self.delivered[tp]
            self._add_pending(tp, {offset: kind})
            self.counts[kind] += 1
            self._remember(tp, (offset,))

    def _check_lock(self, tp: TopicPartition) -> None:
        deadline = self._lock_deadline.get(tp)
        if deadline is not None and time.monotonic() > deadline:
            self.late_acks += 1  # its lock has probably expired: the broker may refuse it

    def _remember(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        if self.mode is AcknowledgeMode.IMPLICIT:
            return  # acknowledge() is refused in implicit mode anyway
        self._done.add_offsets(tp.topic, tp.partition, offsets)

    # -- sending ----------------------------------------------------------------------------------

    @_locked
    def pending_partitions(self) -> set[TopicPartition]:
        return set(self.pending)

    @_locked
    def take_pending(self, tps: AbstractSet[TopicPartition] | None) -> dict[TopicPartition, Acks]:
        """Remove and return the pending acknowledgements (of ``tps``, or all)."""
        if tps is None:
            out, self.pending = self.pending, {}
        else:
            out = {tp: self.pending.pop(tp) for tp in list(self.pending) if tp in tps}
        n = sum(map(len, out.values()))
        self._pending_n -= n
        self.outstanding = max(self.outstanding - n, 0)
        return out

    @_locked
    def take_renewals(self) -> dict[TopicPartition, Acks]:
        """Remove and return the pending RENEWs (sent in a ShareAcknowledge of their own)."""
        out: dict[TopicPartition, Acks] = {}
        for tp, offsets in self.renewals.items():
            if offsets:
                out[tp] = Acks()
                out[tp].add(offsets)
        self.renewals = {}
        return out

    @_locked
    def renewal_sent(self, tps: Iterable[TopicPartition], lock_ms: float) -> None:
        """The broker took the RENEWs of ``tps``: their lock deadline starts again."""
        for tp in tps:
            self._deadline(tp, lock_ms)

    @_locked
    def restore(self, acks: dict[TopicPartition, Acks]) -> None:
        """Acknowledgements taken for a request that never went out are pending again (a commit
        that timed out while waiting must not lose them)."""
        for tp, book in acks.items():
            n = len(book)
            mine = self.pending.get(tp)
            if mine is None:
                self.pending[tp] = book
            else:
                for first, last, kind in book.runs:
                    mine.add_range(first, last, kind)
                mine.add(book.offsets)
            self._pending_n += n
            self.outstanding += n

    @_locked
    def restore_renewals(self, acks: dict[TopicPartition, Acks]) -> None:
        """RENEWs taken for a request that never went out are pending again."""
        for tp, book in acks.items():
            self.renewals.setdefault(tp, {}).update(book.offsets)

    def unacknowledged_after_send(self) -> int:
        """Acquired records the broker would still count as in flight once the pending
        acknowledgements went out (a ShareFetch acquires nothing while that is at its limit)."""
        return self.outstanding - self._pending_n

    @_locked
    def outcomes(self, results: dict[TopicPartition, tuple[Collection[int], BaseException | None]]) -> None:
        for offsets, err in results.values():
            if err is not None:
                self.ack_failures += len(offsets)
                if getattr(err, "code", None) in LOCK_LOST_CODES:
                    self.lock_expiries += 1

    @_locked
    def ack_latency(self, seconds: float) -> None:
        self._latency_n += 1
        self._latency_sum += seconds
        self._latency_max = max(self._latency_max, seconds)

    @_locked
    def snapshot(self) -> dict[str, Any]:
        n = self._latency_n
        return {
            "records_acquired": self.acquired_total,
            "records_accepted": self.counts[_ACCEPT],
            "records_released": self.counts[_RELEASE],
            "records_rejected": self.counts[_REJECT],
            "records_renewed": self.renewed,
            "records_redelivered": self.redelivered,
            "records_awaiting_acknowledgement": sum(len(v) for v in self.delivered.values())
            + sum(last - first + 1 for _, first, last in self._runs),
            "acknowledgements_pending": sum(len(v) for v in self.pending.values()),
            "acknowledgement_failures": self.ack_failures,
            "lock_expiries": self.lock_expiries,
            "acknowledged_after_lock_timeout": self.late_acks,
            "ack_requests": n,
            "ack_latency_avg_ms": (self._latency_sum / n * 1000.0) if n else 0.0,
            "ack_latency_max_ms": self._latency_max * 1000.0,
        }
