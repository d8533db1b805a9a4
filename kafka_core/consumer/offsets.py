"""The consumer's offsets apart from its poll loop: starting positions, commits (serialised),
committed offsets, seeks, lag, and the commit-and-forget steps of a revocation.

A mixin of KafkaConsumer, kept apart so that each module stays readable; it works on the
consumer's subscription state, fetcher and client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.client.metadata import (
    EARLIEST,
    LATEST,
    ListedOffset,
    OffsetAndMetadata,
    TopicPartition,
    as_topic_partition,
)
from kafka_core.consumer.message import ConsumedMessage
from kafka_core.consumer.policies import IsolationLevel, OffsetReset
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.errors import KafkaConfigError, KafkaError, KafkaProtocolError, KafkaTimeoutError
from kafka_core.protocol.errors import ErrorCode

log = logging.getLogger("kafka_core.consumer.consumer")


class ConsumerOffsets:
    _client: Any
    _subs: SubscriptionState
    _fetcher: Any
    _group: Any
    group_id: str | None
    _isolation: IsolationLevel
    _auto_commit_interval: float
    _next_auto_commit: float
    _committed_positions: dict[TopicPartition, int]
    _commit_lock: asyncio.Lock

    _auto_commit: bool
    auto_offset_reset: OffsetReset
    _closed: bool
    _gate_timeout_ms: float
    _pending_errors: list[BaseException]

    if TYPE_CHECKING:  # the consumer's (declared, not overridden)

        async def _ensure_started(self) -> None: ...

    async def _init_positions(self, tps: Iterable[TopicPartition]) -> None:
        """Committed offset when the group has one, else the auto_offset_reset policy."""
        # A seek before the first poll wins over committed offsets and the reset policy.
        tps = [tp for tp in tps if tp in self._subs and self._subs.state(tp).position is None]
        committed: dict[TopicPartition, OffsetAndMetadata] = {}
        if self.group_id is not None and tps:
            try:
                committed = await self._client.fetch_committed_offsets(
                    self.group_id, tps, require_stable=True, timeout_ms=self._gate_timeout_ms
                )
            except KafkaError as exc:
                raise KafkaTimeoutError(
                    f"committed offsets of group {self.group_id!r} not readable within "
                    f"{self._gate_timeout_ms} ms; not consuming: {exc}"
                ) from exc
        for tp in tps:
            st = self._subs.state(tp)
            om = committed.get(tp)
            if om is not None and om.offset >= 0:
                self._committed_positions[tp] = om.offset
                # A committed leader epoch has the position validated before fetching (KIP-320).
                self._subs.seek(tp, om.offset, om.leader_epoch)
            elif st.reset is None:
                self._subs.request_reset(tp, self.auto_offset_reset)
        self._fetcher.wake()

    async def _commit_revoked(self, tps: set[TopicPartition]) -> None:
        """Auto-commit what was handed over of partitions about to go (before their callback)."""
        if not self._auto_commit or self._closed:  # on close, the final commit did it
            return
        try:
            await self._commit_positions(tps)
        except KafkaError as exc:
            # Not data loss (those records come again to the next owner), but never silent.
            log.warning("commit on revoke failed for %s: %r", sorted(tps), exc)
            self._pending_errors.append(exc)

    def _forget(self, tps: set[TopicPartition]) -> None:
        """Partitions gone (revoked or lost): their buffered data and commit marks with them."""
        self._fetcher.drop(tps)
        for tp in tps:
            self._committed_positions.pop(tp, None)

    def _group_args(self) -> dict[str, Any]:
        return self._group.commit_args()  # generation and member id (none without a group)

    def _uncommitted(self, tps: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Positions (handed over so far) not committed yet; the auto-commit clock restarts."""
        self._next_auto_commit = asyncio.get_running_loop().time() + self._auto_commit_interval
        positions = self._subs.positions()
        if tps is not None:
            positions = {tp: positions[tp] for tp in tps if tp in positions}
        return {tp: off for tp, off in positions.items() if self._committed_positions.get(tp) != off}

    async def _commit_positions(self, tps: Iterable[TopicPartition] | None = None) -> None:
        todo = self._uncommitted(tps)
        if todo:
            await self._commit(todo)

    def _with_epochs(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> dict[TopicPartition, int | OffsetAndMetadata]:
        """Offsets at a partition's position carry the leader epoch of the record before it
        (committed_leader_epoch, KIP-320), so that whoever resumes there can validate it."""
        out: dict[TopicPartition, int | OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if not isinstance(value, OffsetAndMetadata) and tp in self._subs:
                st = self._subs.state(tp)
                if st.offset_epoch is not None and st.position == int(value):
                    value = OffsetAndMetadata(int(value), "", st.offset_epoch)
            out[tp] = value
        return out

    async def _commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> None:
        if self.group_id is None:
            raise KafkaConfigError("commit needs a group_id")
        offsets = self._with_epochs(offsets)
        async with self._commit_lock:
            try:
                await self._client.commit_offsets(self.group_id, offsets, **self._group_args())
            except KafkaProtocolError as exc:
                # KIP-848: the member epoch moved while the commit was on its way; once the next
                # heartbeat brought the new one (the group's next_epoch), commit once more.
                if exc.code != ErrorCode.STALE_MEMBER_EPOCH or not await self._group.next_epoch():
                    raise
                await self._client.commit_offsets(self.group_id, offsets, **self._group_args())
        for tp, value in offsets.items():
            off = value.offset if isinstance(value, OffsetAndMetadata) else int(value)
            self._committed_positions[tp] = off

    async def commit(self, offsets: Any = None) -> None:
        """Commit positions (None: every assigned partition), a {tp: offset} map, or messages.

        Offsets are of the next record to consume. A message (or list of them) commits past it.
        """
        await self._ensure_started()
        if offsets is None:
            await self._commit_positions()
            return
        if isinstance(offsets, ConsumedMessage):
            offsets = [offsets]
        if isinstance(offsets, Mapping):
            todo = {as_topic_partition(k): v for k, v in offsets.items()}
        else:
            todo = {}
            for item in offsets:
                if isinstance(item, ConsumedMessage):
                    tp = item.topic_partition
                    todo[tp] = max(todo.get(tp, 0), item.offset + 1)
                else:
                    tp = as_topic_partition(item)
                    pos = self._subs.positions().get(tp)
                    if pos is None:
                        raise KafkaConfigError(f"{tp} has no position to commit")
                    todo[tp] = pos
        await self._commit(todo)

    async def committed(self, partitions: Iterable[Any] | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where nothing is committed).

        A stable read (KIP-447), as Java's consumer makes: offsets a transaction committed are
        waited for until its markers are written (UNSTABLE_OFFSET_COMMIT, retried), not reported
        as the older ones (or none) that a plain read gives in the meantime."""
        if self.group_id is None:
            raise KafkaConfigError("committed offsets need a group_id")
        tps = (
            [as_topic_partition(x) for x in partitions]
            if partitions is not None
            else sorted(self._subs.assigned())
        )
        got = await self._client.fetch_committed_offsets(self.group_id, tps, require_stable=True)
        return {tp: (got[tp].offset if tp in got else None) for tp in tps}

    def seek(self, tp: Any, offset: int | OffsetAndMetadata) -> None:
        """Consume ``tp`` from ``offset`` next (also the way past a corrupt batch).

        An ``OffsetAndMetadata`` with a ``leader_epoch`` (e.g. from ``committed``-style storage
        of your own) has the position validated against the leader's log first (KIP-320): a
        truncated log resets per ``auto_offset_reset``, or with "none" makes poll raise
        KafkaLogTruncationError.
        """
        tp = as_topic_partition(tp)
        epoch = offset.leader_epoch if isinstance(offset, OffsetAndMetadata) else None
        where = offset.offset if isinstance(offset, OffsetAndMetadata) else offset
        if where < 0:
            raise KafkaConfigError(f"offset must be >= 0, not {where}")
        self._subs.seek(tp, where, epoch)
        self._fetcher.drop([tp])

    def _reset(self, tps: Iterable[Any] | None, policy: OffsetReset) -> None:
        targets = [as_topic_partition(x) for x in tps] if tps is not None else sorted(self._subs.assigned())
        for tp in targets:
            self._subs.request_reset(tp, policy)
        self._fetcher.drop(targets)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        self._reset(partitions, OffsetReset.EARLIEST)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        self._reset(partitions, OffsetReset.LATEST)

    async def position(self, tp: Any) -> int | None:
        """The offset of the next record poll() will hand over for ``tp`` (once it is known)."""
        await self._ensure_started()
        return self._subs.state(as_topic_partition(tp)).position

    async def offsets_for_times(
        self, timestamps: Mapping[Any, int]
    ) -> dict[TopicPartition, ListedOffset | None]:
        """Earliest offset whose timestamp is >= the given one, per partition (None: no such record)."""
        got = await self._client.list_offsets({as_topic_partition(k): int(v) for k, v in timestamps.items()})
        return {tp: (lo if lo.offset >= 0 else None) for tp, lo in got.items()}

    async def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        got = await self._client.list_offsets({as_topic_partition(x): EARLIEST for x in partitions})
        return {tp: lo.offset for tp, lo in got.items()}

    async def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        tps = [as_topic_partition(x) for x in partitions]
        got = await self._client.list_offsets({tp: LATEST for tp in tps}, isolation_level=self._isolation)
        return {
            tp: await self._fetcher.true_end(tp, lo.offset) if lo.offset > 0 else lo.offset
            for tp, lo in got.items()
        }

    async def lag(self) -> dict[TopicPartition, int | None]:
        """Records between each position and the log end (None while the position is unknown)."""
        await self._ensure_started()
        ends = await self.end_offsets(self._subs.assigned())
        out: dict[TopicPartition, int | None] = {}
        for tp, st in self._subs.items():
            end = max(ends.get(tp, -1), st.high_watermark)
            for buffered in self._fetcher.buffer.get(tp, ()):
                end = max(end, buffered.next_offset)
            out[tp] = None if st.position is None else max(end - st.position, 0)
        return out
