"""What a subscription does with a record's outcome: the consumer-group mode and the queue mode.

One poll/handle loop (``subscription.py``) serves both; a mode owns the consumer and settles
each record:

- ``GroupMode`` (a consumer group): a handled or skipped record becomes committable
  (``tracking.CommitTracker``), a failing one is retried in place with a backoff, and commits
  never pass a record not handled. Rebalances commit the revoked partitions' progress first.
- ``ShareMode`` (a share group, KIP-932: ``subscribe(..., share=True)``): every record is
  acknowledged on its own. Handled: accept. ``retry``: release, so the broker delivers it again
  (to any member) with its delivery count raised, until the count reaches ``max_deliveries``;
  then reject. ``skip``: reject (a poison record, never delivered again). ``stop``: the
  subscription stops; what it did not acknowledge is released when it closes.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaConfigError, KafkaError, KafkaTimeoutError
from kafka_core.share.records import KafkaAcknowledgementError
from kafka_core.transport.options import ErrorPolicy
from kafka_core.transport.tracking import CommitTracker

log = logging.getLogger("kafka_core.transport")

__all__ = ["GroupMode", "ShareMode", "share_action"]

# Outcomes a mode settles a record with (besides "retry", handled in the loop, and "stop").
HANDLED = "handled"


def share_action(policy: ErrorPolicy, delivery_count: int, max_deliveries: int) -> str:
    """The queue-mode action for a record whose handler failed on delivery ``delivery_count``:
    "release" (deliver again), "reject" (poison: never again) or "stop"."""
    if policy.policy == "stop":
        return "stop"
    if policy.policy == "skip":
        return "reject"
    return "release" if delivery_count < max_deliveries else "reject"


def check_max_deliveries(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KafkaConfigError(f"max_deliveries must be an integer >= 1, not {value!r}")
    return value


class GroupMode:
    """A consumer-group subscription: offsets of handled records committed, retries in place."""

    retries_in_place = True

    def __init__(
        self,
        make_consumer: Callable[..., Any],
        topic: str,
        *,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
    ) -> None:
        self.topic = topic
        self._tracker = CommitTracker()
        self._user_on_revoke = on_revoke
        self._user_on_lost = on_lost
        self.commits = 0
        self.consumer = make_consumer(on_revoke=self._revoked, on_lost=self._lost)

    def action_after(self, policy: ErrorPolicy, msg: Any, attempt: int) -> str:
        return policy.action_after(attempt)

    def fetched(self, batch: list[Any]) -> None:
        for msg in batch:
            self._tracker.fetched(TopicPartition(msg.topic, msg.partition), msg.offset)

    def settle(self, msg: Any, outcome: str) -> None:
        """A handled or skipped record may be committed."""
        self._tracker.handled(TopicPartition(msg.topic, msg.partition), msg.offset)

    async def after_batch(self) -> None:
        await self.commit()

    def stop_fetching(self) -> None:
        self.consumer.stop()  # a waiting poll returns now

    async def close(self, deadline: float) -> None:
        """Commit the handled records, then close the consumer (which leaves the group)."""
        loop = asyncio.get_running_loop()
        error: BaseException | None = None
        try:
            async with asyncio.timeout_at(deadline):
                await self.commit(raise_errors=True)
        except TimeoutError:
            error = KafkaTimeoutError(f"the final commit of {self.topic!r} did not finish in time")
        except KafkaError as exc:
            error = exc
        try:
            await self.consumer.close(max(deadline - loop.time(), 0.0), commit=False)
        except KafkaError as exc:
            error = error or exc
        if error is not None:
            raise error

    async def commit(self, tps: Any = None, *, raise_errors: bool = False) -> None:
        offsets = self._tracker.commit_offsets(tps)
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:
            # Not a loss: those records come again after a restart. Retried at the next commit.
            log.warning("subscription to %r: commit of %s failed: %r", self.topic, offsets, exc)
            if raise_errors:
                raise
            return
        self._tracker.committed(offsets)
        self.commits += 1

    async def _revoked(self, tps: set[TopicPartition]) -> None:
        """A rebalance takes partitions away: commit their handled records first."""
        try:
            await self.commit(tps)
        finally:
            self._tracker.forget(tps)
            await _chain(self._user_on_revoke, tps)

    async def _lost(self, tps: set[TopicPartition]) -> None:
        """Partitions lost (the session expired): another member may own them, so no commit."""
        self._tracker.forget(tps)
        await _chain(self._user_on_lost or self._user_on_revoke, tps)

    def committed_offsets(self) -> dict[TopicPartition, int]:
        return self._tracker.last_committed()


class ShareMode:
    """A share-group subscription: each record accepted, released or rejected on its own.

    ``make_consumer()`` builds a share consumer in explicit acknowledgement mode. The
    acknowledgements of a batch travel with the next poll (or the close), so nothing extra is
    sent per batch."""

    retries_in_place = False

    def __init__(self, make_consumer: Callable[[], Any], topic: str, *, max_deliveries: int) -> None:
        self.topic = topic
        self.max_deliveries = check_max_deliveries(max_deliveries)
        self.commits = 0
        self.consumer = make_consumer()

    def action_after(self, policy: ErrorPolicy, msg: Any, attempt: int) -> str:
        return share_action(policy, int(getattr(msg, "delivery_count", 1) or 1), self.max_deliveries)

    def fetched(self, batch: list[Any]) -> None:
        pass

    def settle(self, msg: Any, outcome: str) -> None:
        kind = {HANDLED: "accept", "release": "release", "reject": "reject"}[outcome]
        try:
            self.consumer.acknowledge(msg, kind)
        except KafkaAcknowledgementError as exc:
            # The consumer no longer holds the record (it left the group and rejoined): the
            # broker delivers it again once its lock expires. At least once, never a stop.
            log.warning("subscription to %r: could not %s %s: %s", self.topic, kind, _where(msg), exc)

    async def after_batch(self) -> None:
        pass  # sent with the next poll

    def stop_fetching(self) -> None:
        pass  # the poll in progress ends within poll_timeout_ms

    async def close(self, deadline: float) -> None:
        """Send the acknowledgements (what was not acknowledged is released) and leave the group."""
        loop = asyncio.get_running_loop()
        await self.consumer.close(max(deadline - loop.time(), 0.0))

    def committed_offsets(self) -> dict[TopicPartition, int]:
        return {}  # a share group has no committed offsets (see the admin's share_group_lag)


def _where(msg: Any) -> str:
    return f"{msg.topic}[{msg.partition}]@{msg.offset}"


async def _chain(cb: Callable[..., Any] | None, tps: set[TopicPartition]) -> None:
    if cb is not None:
        result = cb(tps)
        if inspect.isawaitable(result):
            await result
