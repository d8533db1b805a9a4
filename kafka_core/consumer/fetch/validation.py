"""Position validation after a leader change (KIP-320): was the log under the position truncated?

A position carries the leader epoch of the record before it (its offset epoch). When the
partition's leader changes, or a position comes with an epoch (a committed offset, a seek with
an OffsetAndMetadata), it is not fetched from until its leader has said, through
OffsetForLeaderEpoch, where its log for that epoch ends. An end below the position means the
records from that end up to the position are gone (an unclean leader election): the consumer
resumes at the end (the first offset known to diverge, as Java's consumer) with a warning naming
the lost range, or with ``auto_offset_reset="none"`` poll raises KafkaLogTruncationError until
the application seeks. A Fetch v12+ answer's ``diverging_epoch`` says the same without the extra
request. A leader that does not offer OffsetForLeaderEpoch v2+ (Tansu), or a position without an
epoch, is not validated, as in Java.

Validation runs on its own task, so the partitions not waiting for it keep being fetched, and
never holds poll: its answer comes at a later round.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka_core.client.metadata import EpochEndOffset, TopicMeta, TopicPartition
from kafka_core.consumer.policies import OffsetReset
from kafka_core.consumer.subscription import PartitionState, SubscriptionState
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import (
    KafkaClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaLogTruncationError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.network.backoff import Backoff
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode, error_for

log = logging.getLogger("kafka_core.consumer.fetcher")

# The longest one validation round may take (its partitions are tried again after it).
VALIDATION_TIMEOUT_MS = 10_000


def current_epoch(meta: Mapping[str, TopicMeta], tp: TopicPartition) -> int:
    """The partition leader's epoch in cached metadata (-1: unknown)."""
    t = meta.get(tp.topic)
    p = t.partition(tp.partition) if t is not None else None
    return p.leader_epoch if p is not None else -1


class PositionValidator:
    """Decides which positions need validation, validates them, applies the answers.

    ``errors`` is the fetcher's per-partition error map (raised at poll until a seek; such a
    partition is not fetched), ``drop`` forgets a partition's buffered data, ``wake`` starts a
    fetch round.
    """

    def __init__(
        self,
        client: Any,
        subs: SubscriptionState,
        *,
        auto_offset_reset: OffsetReset,
        errors: dict[TopicPartition, tuple[int, BaseException]],
        drop: Callable[[TopicPartition], None],
        wake: Callable[[], None],
        outage: OutageTracker,
    ) -> None:
        self._client = client
        self._subs = subs
        self.auto_offset_reset = auto_offset_reset
        self._errors = errors
        self._drop = drop
        self._wake = wake
        self._outage = outage
        self._task: asyncio.Task[None] | None = None
        self._backoff = Backoff(100, 2_000)
        self._next_try = 0.0  # monotonic: after a failed round

    # -- deciding --------------------------------------------------------------------------

    def check_leader(self, tp: TopicPartition, meta: Mapping[str, TopicMeta]) -> None:
        """Note the partition leader's epoch; a newer one than the position's puts the position
        up for validation (when it has an epoch to validate: else it is taken as it is)."""
        st = self._subs.state(tp)
        epoch = current_epoch(meta, tp)
        if epoch < 0 or epoch == st.leader_epoch:
            return
        known = st.leader_epoch >= 0
        st.leader_epoch = epoch
        if known and st.offset_epoch is not None and st.position is not None:
            log.debug("leader epoch of %s is now %d: validating position %s", tp, epoch, st.position)
            self._await(tp, st)

    def fenced(self, tp: TopicPartition) -> None:
        """FENCED_LEADER_EPOCH on a fetch: the leader is newer than our metadata; validate once
        the refreshed metadata names it (check_leader), or now if the position has an epoch."""
        st = self._subs.state(tp)
        if st.offset_epoch is not None and st.position is not None and st.reset is None:
            self._await(tp, st)

    def _await(self, tp: TopicPartition, st: PartitionState) -> None:
        """Hold the position for validation. Records fetched past it from the old leader are
        dropped (as Java's consumer does): the new leader's log may not have them."""
        st.awaiting_validation = True
        self._drop(tp)

    # -- validating ------------------------------------------------------------------------

    def start(self) -> None:
        """Validate the positions waiting for it, on a task of its own (one at a time)."""
        if self._task is not None or time.monotonic() < self._next_try:
            return
        todo = {tp: self._subs.state(tp).epoch for tp in self._subs.awaiting_validation()}
        if todo:
            self._task = asyncio.get_running_loop().create_task(
                self._validate(todo), name="kafka-core-validate-positions"
            )

    @property
    def retry_in(self) -> float | None:
        """Seconds until a failed round may be tried again, None when nothing waits for one."""
        if self._task is not None or not self._subs.awaiting_validation():
            return None
        return max(self._next_try - time.monotonic(), 0.0)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _validate(self, tps: dict[TopicPartition, int]) -> None:
        """``tps``: the partitions to validate, with their position versions (``epoch``)."""
        try:
            await self._validate_round(tps)
        except asyncio.CancelledError:
            raise
        except KafkaClosedError:
            pass
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("position validation failed, will retry: %r", exc)
            self._outage.failed_all([tp for tp in tps if tp in self._subs], exc)
            self._next_try = time.monotonic() + self._backoff.next_s()
        except KafkaError as exc:  # not retriable (authorization...): poll raises it per partition
            log.debug("position validation failed: %r", exc)
            for tp, version in tps.items():
                # Not a partition revoked meanwhile, nor one assigned again (a new version).
                if tp in self._subs and self._subs.state(tp).epoch == version:
                    self._fail(tp, exc)
        finally:
            self._task = None
            self._wake()

    async def _validate_round(self, tps: Iterable[TopicPartition]) -> None:
        asked: dict[TopicPartition, tuple[int, int, int]] = {}  # tp -> (seek count, position, epoch)
        for tp in tps:
            st = self._subs.state(tp) if tp in self._subs else None
            if st is None or not st.awaiting_validation or st.position is None:
                continue
            if st.offset_epoch is None:
                st.awaiting_validation = False  # nothing to validate
                continue
            node = await self._client.leader_for(tp.topic, tp.partition, timeout_ms=VALIDATION_TIMEOUT_MS)
            try:
                await self._client.api_version(node, ApiKey.OFFSET_FOR_LEADER_EPOCH)
            except KafkaUnsupportedVersionError as exc:
                # Kafka before 2.1, or Tansu: no truncation detection there (as Java does).
                log.debug("not validating %s: %s", tp, exc)
                st.awaiting_validation = False
                continue
            asked[tp] = (st.epoch, st.position, st.offset_epoch)
        if not asked:
            return
        try:
            found = await self._client.offsets_for_leader_epochs(
                {tp: epoch for tp, (_, _, epoch) in asked.items()}, timeout_ms=VALIDATION_TIMEOUT_MS
            )
        except KafkaUnsupportedVersionError as exc:  # a leader moved to a broker without it
            log.debug("not validating %s: %s", sorted(asked), exc)
            found = {}
            for tp, (seeks, position, _) in asked.items():
                st = self._subs.state(tp) if tp in self._subs else None
                if st is not None and st.epoch == seeks and st.position == position:
                    st.awaiting_validation = False
        self._outage.ok_all(asked)
        self._backoff.reset()
        meta = {t.name: t for t in self._client.cached_metadata().topics}
        for tp, answer in found.items():
            seeks, position, _ = asked[tp]
            if tp not in self._subs:
                continue
            st = self._subs.state(tp)
            if st.epoch != seeks or st.position != position or not st.awaiting_validation:
                continue  # a seek or reset since: this answer is about a position no longer held
            st.awaiting_validation = False
            epoch = current_epoch(meta, tp)
            if epoch >= 0:
                st.leader_epoch = epoch
            if answer.error_code:
                self._fail(
                    tp, error_for(answer.error_code, f"OffsetForLeaderEpoch {tp.topic}[{tp.partition}]")
                )
                continue
            self.complete(tp, st, position, answer)

    # -- applying --------------------------------------------------------------------------

    def complete(self, tp: TopicPartition, st: PartitionState, position: int, answer: EpochEndOffset) -> bool:
        """Apply the leader's end offset for the position's epoch (from OffsetForLeaderEpoch or
        a Fetch's diverging_epoch); True if the position moved or the partition now has an error."""
        if answer.end_offset < 0 or answer.leader_epoch < 0:
            # The leader knows no epoch at or below the position's: nothing in its log vouches
            # for the position.
            if self.auto_offset_reset is OffsetReset.NONE:
                msg = (
                    f"the leader of {tp.topic}[{tp.partition}] has no log for leader epoch "
                    f"{st.offset_epoch} or before (position {position}) and auto_offset_reset='none'"
                )
                self._fail(tp, error_for(ErrorCode.OFFSET_OUT_OF_RANGE, msg))
            else:
                log.warning(
                    "the leader of %s has no log for leader epoch %s (position %d); resetting to %s",
                    tp,
                    st.offset_epoch,
                    position,
                    self.auto_offset_reset,
                )
                self._subs.request_reset(tp, self.auto_offset_reset)
                self._drop(tp)
            return True
        if answer.end_offset >= position:
            return False  # the log under the position is intact
        if self.auto_offset_reset is OffsetReset.NONE:
            log.warning(
                "truncation detected for %s: offsets %d..%d lost (leader epoch %d ends at %d); "
                "auto_offset_reset='none': not moving the position",
                tp,
                answer.end_offset,
                position - 1,
                answer.leader_epoch,
                answer.end_offset,
            )
            self._fail(tp, KafkaLogTruncationError({tp: (position, answer.end_offset)}))
            return True
        log.warning(
            "truncation detected for %s: offsets %d..%d lost (leader epoch %d ends at %d); "
            "resuming at %d, the first offset known to diverge",
            tp,
            answer.end_offset,
            position - 1,
            answer.leader_epoch,
            answer.end_offset,
            answer.end_offset,
        )
        self._subs.seek_validated(tp, answer.end_offset, answer.leader_epoch)
        self._drop(tp)
        return True

    def _fail(self, tp: TopicPartition, exc: BaseException) -> None:
        st = self._subs.state(tp)
        st.awaiting_validation = False
        self._errors[tp] = (st.epoch, exc)
        self._drop(tp)
