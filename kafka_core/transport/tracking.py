"""Which offsets a subscription may commit: handled records only, never past an unhandled one.

A subscription registers each record it was handed (``fetched``) and marks it ``handled`` once its
handler succeeded or the policy skipped it. The offset to commit for a partition is then the
first record still pending (fetched, not handled), or one past the highest handled record when
nothing is pending. Records are tracked per partition in fetch order, so gaps in the offsets
(compaction, transaction markers) and handling out of order are both safe: the commit never
moves past a record that was not handled. No broker, no I/O: unit-tested on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafka_core.client.metadata import TopicPartition

__all__ = ["CommitTracker"]


class _Partition:
    __slots__ = ("handled_end", "pending")

    def __init__(self) -> None:
        # Insertion-ordered: offsets arrive in increasing order, so the first key is the lowest.
        self.pending: dict[int, None] = {}
        self.handled_end = -1  # one past the highest handled offset; -1: none handled yet

    def commit_offset(self) -> int | None:
        if self.handled_end < 0:
            return None  # nothing handled here yet: no progress to commit
        if self.pending:
            # Never past the first record still pending, even when later ones were handled.
            return min(next(iter(self.pending)), self.handled_end)
        return self.handled_end


class CommitTracker:
    """Handled offsets in, commit offsets (next record to consume, per partition) out."""

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, _Partition] = {}
        self._committed: dict[TopicPartition, int] = {}

    def fetched(self, tp: TopicPartition, offset: int) -> None:
        """A record was handed to the subscription: it blocks commits past it until handled."""
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = _Partition()
        if part.pending and offset < next(reversed(part.pending)):
            # Out of fetch order (a redelivery): keep the first key the lowest.
            part.pending = dict.fromkeys(sorted([*part.pending, offset]))
        else:
            part.pending[offset] = None

    def handled(self, tp: TopicPartition, offset: int) -> None:
        """The record's handler succeeded (or the policy skipped it): it may be committed."""
        part = self._parts.get(tp)
        if part is None or offset not in part.pending:
            raise ValueError(f"{tp} offset {offset} was not fetched (or was already handled)")
        del part.pending[offset]
        part.handled_end = max(part.handled_end, offset + 1)

    def pending(self, tp: TopicPartition) -> list[int]:
        """Offsets fetched and not handled yet, lowest first."""
        part = self._parts.get(tp)
        return sorted(part.pending) if part is not None else []

    def commit_offsets(self, tps: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """What to commit now: per partition with progress not committed yet, the next offset.

        The offset is one past the highest handled record, or the lowest pending record when
        that one is lower (a later record was handled first).
        """
        out: dict[TopicPartition, int] = {}
        for tp in self._parts if tps is None else tps:
            part = self._parts.get(tp)
            if part is None:
                continue
            offset = part.commit_offset()
            if offset is not None and offset > self._committed.get(tp, -1):
                out[tp] = offset
        return out

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Those offsets were committed: ``commit_offsets`` no longer returns them."""
        for tp, offset in offsets.items():
            if offset > self._committed.get(tp, -1):
                self._committed[tp] = offset

    def last_committed(self) -> dict[TopicPartition, int]:
        return dict(self._committed)

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """The partitions were revoked or lost: their next owner starts from the group's commit."""
        for tp in tps:
            self._parts.pop(tp, None)
            self._committed.pop(tp, None)
