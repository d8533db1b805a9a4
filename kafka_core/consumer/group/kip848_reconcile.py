"""KIP-848 reconciliation: the broker's target assignment (topic ids) brought into the consumer.

The broker sends the whole assignment the member should own, by topic id. Reconciling it means:
resolve the ids to names (metadata; an id not known yet stays pending, retried later), revoke
what is no longer in it first (auto-commit and ``on_revoke``, then the partitions leave the
subscription), tell the membership so that it acknowledges by heartbeating what it owns, then
add the new partitions (into the subscription first, then positioned and ``on_assign`` with only
those). One step at a time: the lock keeps revocations, assignments and losses in order.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.group.rebalance import RebalanceListener
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.errors import KafkaClosedError, KafkaError

log = logging.getLogger("kafka_core.consumer.reconcile")  # its name before the move: log filters keep working

# The broker's assignment: topic id -> partitions.
Target = dict[uuid.UUID, set[int]]


class Reconciler:
    """Owns the member's partitions; it never sees the consumer, only the subscription state and
    the listener, and ``on_owned_changed`` to have the membership acknowledge a change."""

    def __init__(
        self,
        client: Any,
        subscription: SubscriptionState,
        listener: RebalanceListener,
        on_owned_changed: Callable[[], None],
    ) -> None:
        self._client = client
        self._subs = subscription
        self._listener = listener
        self._changed = on_owned_changed
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}
        # One step at a time (revoke, assign, lose): guards ``owned`` and the subscription
        # changes a step makes, so revocations, assignments and losses stay in order.
        self.lock = asyncio.Lock()
        self.owned: set[TopicPartition] = set()

    # -- topic ids ----------------------------------------------------------------------------

    def learn(self, topics: Iterable[Any]) -> None:
        """Remember the ids of ``topics`` (TopicMeta items of a metadata answer)."""
        for t in topics:
            if t.topic_id is not None and t.topic_id.int and not t.error_code:
                self._names[t.topic_id] = t.name
                self._ids[t.name] = t.topic_id

    async def _resolve(self, target: Target) -> tuple[set[TopicPartition], set[uuid.UUID]]:
        """The target by name, and the ids still unknown after a metadata refresh."""
        if any(tid not in self._names for tid in target):
            self.learn(self._client.cached_metadata().topics)
        if any(tid not in self._names for tid in target):
            try:
                self.learn((await self._client.metadata(None)).topics)
            except KafkaClosedError:
                raise
            except KafkaError as exc:
                log.info("metadata for the assigned topic ids failed: %r; retrying later", exc)
        want = {
            TopicPartition(self._names[tid], p)
            for tid, ps in target.items()
            if tid in self._names
            for p in ps
        }
        return want, {tid for tid in target if tid not in self._names}

    def owned_by_id(self) -> dict[uuid.UUID, list[int]]:
        """What the member owns, as the heartbeat reports it (every owned topic's id is known:
        the partitions came by id)."""
        out: dict[uuid.UUID, list[int]] = {}
        for tp in sorted(self.owned):
            out.setdefault(self._ids[tp.topic], []).append(tp.partition)
        return out

    # -- steps --------------------------------------------------------------------------------

    async def reconcile(self, target: Target) -> tuple[bool, bool]:
        """Bring the owned partitions to ``target``: (whether anything changed, whether the
        whole target is in place; False while some topic ids are unknown)."""
        async with self.lock:
            want, pending = await self._resolve(target)
            if pending:
                log.info("assigned topic ids not in the metadata yet: %s", sorted(str(t) for t in pending))
            revoked = self.owned - want
            if revoked:
                await self._remove(revoked, lost=False)
            added = want - self.owned
            if added:
                # Into the subscription first: positions (committed offsets) are looked up for
                # assigned partitions only, and fetching starts once they are known.
                self._subs.add(added)
                try:
                    await self._listener.on_partitions_assigned(set(added))
                except BaseException:
                    # Not positioned (e.g. committed offsets unreadable): not ours yet, so not
                    # fetched either; the next attempt adds them again if they are still wanted.
                    self._subs.remove(added)
                    raise
                self.owned |= added
                self._changed()
            if revoked or added:
                log.info(
                    "assignment now %s (revoked %s, added %s)",
                    sorted(self.owned),
                    sorted(revoked),
                    sorted(added),
                )
            return bool(revoked or added), not pending

    async def lose_all(self) -> None:
        """Fenced or gone: every partition is lost (``on_lost``, no commit: no longer ours)."""
        async with self.lock:
            if self.owned:
                await self._remove(set(self.owned), lost=True)

    async def revoke_all(self) -> None:
        """Closing: every partition is revoked (``on_revoke``)."""
        async with self.lock:
            if self.owned:
                await self._remove(set(self.owned), lost=False)

    async def _remove(self, tps: set[TopicPartition], *, lost: bool) -> None:
        # No more fetching of partitions on their way out (their commit happens meanwhile).
        self._subs.pause(tp for tp in tps if tp in self._subs)
        try:
            if lost:
                await self._listener.on_partitions_lost(set(tps))
            else:
                await self._listener.on_partitions_revoked(set(tps))
        finally:
            self._subs.remove(tps)
            self.owned -= tps
            self._changed()
