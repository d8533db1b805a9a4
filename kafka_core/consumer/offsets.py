"""The consumer's offsets: starting positions, commits (serialised), committed offsets, seeks,
lag, and the commit-and-forget steps of a revocation.

Owned by the consumer face, which delegates its offset methods here; it works on the
subscription state, fetcher, client and group membership it is given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka_core.client.metadata import (
    EARLIEST,
    LATEST,
    ListedOffset,
    OffsetAndMetadata,
    TopicPartition,
    as_topic_partition,
)
from kafka_core.consumer.fetch.fetcher import Fetcher
from kafka_core.consumer.group.rebalance import Membership
from kafka_core.consumer.message import ConsumedMessage
from kafka_core.consumer.policies import IsolationLevel, OffsetReset
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.errors import KafkaConfigError, KafkaError, KafkaProtocolError, KafkaTimeoutError
from kafka_core.protocol.errors import MEMBER_FENCED_CODES, REJOIN_CODES, ErrorCode

log = logging.getLogger("kafka_core.consumer.consumer")


class ConsumerOffsets:
    """Positions and commits of one consumer. Runs on the event loop only."""

    def __init__(
        self,
        client: Any,
        subs: SubscriptionState,
        fetcher: Fetcher,
        membership: Membership,
        *,
        group_id: str | None,
        auto_offset_reset: OffsetReset,
        isolation_level: IsolationLevel,
        auto_commit: bool,
        auto_commit_interval_s: float,
        coordinator_ready_timeout_ms: float,
        report: Callable[[BaseException], None],
    ) -> None:
        self._client = client
        self._subs = subs
        self._fetcher = fetcher
        self._group = membership  # generation and member id for commits (none without a group)
        self.group_id = group_id
        self._reset_policy = auto_offset_reset
        self._isolation = isolation_level
        self.auto_commit = auto_commit
        self._auto_commit_interval = auto_commit_interval_s
        self._gate_timeout_ms = coordinator_ready_timeout_ms
        self._report = report  # an error for the next poll to raise
        self._next_auto_commit = 0.0  # loop time of the next auto-commit
        self._closing = False  # close() began: its final commit replaces a revocation's
        # Guards the OffsetCommit requests (in order: an older one never lands last); the marks
        # in _committed_positions are set after it, on the loop, so need no lock.
        self._commit_lock = asyncio.Lock()
        self._committed_positions: dict[TopicPartition, int] = {}
        # Partitions whose position may differ from its commit mark: those moved or marked since
        # (issue 40: a commit's work is what moved, not the assignment).
        self._maybe_uncommitted: set[TopicPartition] = set()

    def restart_auto_commit_clock(self) -> None:
        self._next_auto_commit = asyncio.get_running_loop().time() + self._auto_commit_interval

    def auto_commit_due(self) -> dict[TopicPartition, int]:
        """What an auto-commit at this poll commits (nothing before its time, or without it)."""
        if not self.auto_commit or asyncio.get_running_loop().time() < self._next_auto_commit:
            return {}
        return self.uncommitted()  # now: what was handed over before this poll, no more

    def closing(self) -> None:
        """close() began: revocations from now on do not commit (its final commit did)."""
        self._closing = True

    async def init_positions(self, tps: Iterable[TopicPartition]) -> None:
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
                self._maybe_uncommitted.add(tp)
                # A committed leader epoch has the position validated before fetching (KIP-320).
                self._subs.seek(tp, om.offset, om.leader_epoch)
            elif st.reset is None:
                self._subs.request_reset(tp, self._reset_policy)
        self._fetcher.wake()

    async def commit_revoked(self, tps: set[TopicPartition]) -> None:
        """Auto-commit what was handed over of partitions about to go (before their callback)."""
        if not self.auto_commit or self._closing:  # on close, the final commit did it
            return
        try:
            await self.commit_positions(tps)
        except KafkaError as exc:
            # Not data loss (those records come again to the next owner), but never silent.
            log.warning("commit on revoke failed for %s: %r", sorted(tps), exc)
            self._report(exc)

    async def _existing(self, tps: set[TopicPartition]) -> set[TopicPartition]:
        """``tps`` without those of deleted topics: the broker drops a deleted topic's committed
        offsets and answers a commit of them UNKNOWN_TOPIC_OR_PARTITION, retried until the
        timeout, which would hold the poll or the rebalance that takes the topic away. Only a
        topic the client's cache lacks is asked about."""
        cached = self._client.cached_metadata()
        topics = sorted({tp.topic for tp in tps if cached.topic(tp.topic) is None})
        if not topics:  # all known (an error about a topic drops it from the cache)
            return set(tps)
        meta = await self._client.metadata(topics, allow_auto_topic_creation=False)
        gone = {t.name for t in meta.topics if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        if gone:
            log.info("not committing offsets of deleted topic(s) %s", sorted(gone))
        return {tp for tp in tps if tp.topic not in gone}

    def forget(self, tps: set[TopicPartition]) -> None:
        """Partitions gone (revoked or lost): their buffered data and commit marks with them."""
        self._fetcher.drop(tps)
        for tp in tps:
            self._committed_positions.pop(tp, None)

    def _group_args(self) -> dict[str, Any]:
        return self._group.commit_args()  # generation and member id (none without a group)

    def uncommitted(self, tps: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Positions (handed over so far) not committed yet; the auto-commit clock restarts."""
        self._next_auto_commit = asyncio.get_running_loop().time() + self._auto_commit_interval
        pool = self._maybe_uncommitted
        pool |= self._subs.take_moved()
        out: dict[TopicPartition, int] = {}
        for tp in list(pool) if tps is None else tps:
            pos = self._subs.state(tp).position if tp in self._subs else None
            if pos is not None and self._committed_positions.get(tp) != pos:
                out[tp] = pos
            elif tps is None:
                pool.discard(tp)  # committed as it stands (or gone): until it moves again
        return out

    async def commit_positions(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Commit the positions handed over (those of deleted topics left out)."""
        todo = self.uncommitted(tps)
        if todo:
            kept = await self._existing(set(todo))
            if kept:
                await self.commit_offsets({tp: off for tp, off in todo.items() if tp in kept})

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

    async def commit_offsets(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> None:
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
            self._maybe_uncommitted.add(tp)

    async def run_auto_commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """An auto-commit (behind poll). One the group's rebalance overtook (ILLEGAL_GENERATION,
        REBALANCE_IN_PROGRESS...) is not the application's error: the member rejoins, the
        revocation commits again, and at worst those records come again, as Java's auto-commit
        logs it and goes on. Any other error is raised by the next poll."""
        try:
            kept = await self._existing(set(offsets))
            if kept:
                await self.commit_offsets({tp: off for tp, off in offsets.items() if tp in kept})
        except KafkaProtocolError as exc:
            if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not exc.retriable:
                log.warning("auto-commit of group %s: %s", self.group_id, exc)  # a deleted topic
                return
            if exc.code not in REJOIN_CODES and exc.code not in MEMBER_FENCED_CODES:
                raise
            log.warning("auto-commit overtaken by a rebalance of group %s: %s", self.group_id, exc)

    async def commit(self, offsets: Any = None) -> None:
        """The face's commit: positions, a {tp: offset} map, or messages (past them)."""
        if offsets is None:
            await self.commit_positions()
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
                    pos = self._subs.state(tp).position if tp in self._subs else None
                    if pos is None:
                        raise KafkaConfigError(f"{tp} has no position to commit")
                    todo[tp] = pos
        await self.commit_offsets(todo)

    async def committed(self, partitions: Iterable[Any] | None = None) -> dict[TopicPartition, int | None]:
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
        tp = as_topic_partition(tp)
        epoch = offset.leader_epoch if isinstance(offset, OffsetAndMetadata) else None
        where = offset.offset if isinstance(offset, OffsetAndMetadata) else offset
        if where < 0:
            raise KafkaConfigError(f"offset must be >= 0, not {where}")
        self._subs.seek(tp, where, epoch)
        self._fetcher.drop([tp])

    def reset(self, tps: Iterable[Any] | None, policy: OffsetReset) -> None:
        """Positions of ``tps`` (None: every assigned partition) looked up again by ``policy``."""
        targets = [as_topic_partition(x) for x in tps] if tps is not None else sorted(self._subs.assigned())
        for tp in targets:
            self._subs.request_reset(tp, policy)
        self._fetcher.drop(targets)

    def position(self, tp: Any) -> int | None:
        return self._subs.state(as_topic_partition(tp)).position

    async def offsets_for_times(
        self, timestamps: Mapping[Any, int]
    ) -> dict[TopicPartition, ListedOffset | None]:
        got = await self._client.list_offsets({as_topic_partition(k): int(v) for k, v in timestamps.items()})
        return {tp: (lo if lo.offset >= 0 else None) for tp, lo in got.items()}

    async def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        got = await self._client.list_offsets({as_topic_partition(x): EARLIEST for x in partitions})
        return {tp: lo.offset for tp, lo in got.items()}

    async def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        tps = [as_topic_partition(x) for x in partitions]
        got = await self._client.list_offsets({tp: LATEST for tp in tps}, isolation_level=self._isolation)
        return await self._fetcher.true_ends({tp: lo.offset for tp, lo in got.items()})

    async def lag(self) -> dict[TopicPartition, int | None]:
        ends = await self.end_offsets(self._subs.assigned())
        out: dict[TopicPartition, int | None] = {}
        for tp, st in self._subs.items():
            end = max(ends.get(tp, -1), st.high_watermark)
            for buffered in self._fetcher.buffer.get(tp, ()):
                end = max(end, buffered.next_offset)
            out[tp] = None if st.position is None else max(end - st.position, 0)
        return out
