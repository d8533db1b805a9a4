"""The no-group stand-in: the application's assignment with the group membership's interface.

The consumer drives either this or a GroupMembership the same way, so it never asks which one
it has (no ``if group`` branches): here joining is instant, there are no heartbeats, and the
commits carry no generation. Topics given by name are every partition of them, followed as the
cluster changes: one created after the consumer started is taken in (from where
``auto_offset_reset`` says) once it appears, added partitions too, and a deleted topic's
partitions are dropped (taken in afresh if it is created again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from kafka_core.client.metadata import ClusterMeta, TopicPartition
from kafka_core.client.watch import TopicInterest, TopicView, topic_view
from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata, RebalanceListener
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.errors import KafkaClosedError, KafkaError, KafkaTimeoutError
from kafka_core.protocol.errors import ErrorCode, error_for

log = logging.getLogger("kafka_core.consumer.consumer")


class ManualAssignment:
    """Partitions named by the application, or every partition of its topics (looked up at start).

    With a ``group_id`` (static partitions whose offsets live in the group) the start waits for
    the group coordinator, so that nothing is consumed from the wrong place when it is not ready.
    """

    def __init__(
        self,
        client: Any,
        subscription: SubscriptionState,
        listener: RebalanceListener,
        *,
        group_id: str | None,
        topics: Iterable[str],
        partitions: list[TopicPartition] | None,
        coordinator_ready_timeout_ms: float,
        metadata_max_age_ms: float = 5_000,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self._client = client
        self._subs = subscription
        self._listener = listener
        self.group_id = group_id
        self._topics = list(topics)
        self._partitions = partitions
        self._gate_timeout_ms = coordinator_ready_timeout_ms
        self._refresh_ms = metadata_max_age_ms
        self._wake = wake
        self._watch: TopicInterest | None = None
        self._view: TopicView = {}  # what the assignment of the named topics was made from
        self._follow: asyncio.Task[None] | None = None  # taking a change of the topics in
        self._changed = False
        if partitions is not None:
            subscription.assign(partitions)  # known now: seek/pause work before the first poll

    @property
    def joining(self) -> bool:
        """Taking a change of the named topics in (no auto-commit meanwhile, as a rebalance)."""
        return self._follow is not None and not self._follow.done()

    async def start(self) -> None:
        """Resolve the assignment and have the listener position it (committed or reset).
        Named topics that do not exist yet are waited on in the background (the watch)."""
        if self._partitions is not None:
            tps = self._partitions
            _refuse_denied(await self._client.metadata(sorted({tp.topic for tp in tps})), "assigned")
        else:
            meta = await self._client.metadata(self._topics)
            _refuse_denied(meta, "subscribed")
            self._view = topic_view(meta.topics, self._topics)
            tps = _partitions(self._view)
        if self.group_id is not None:
            await self._coordinator_gate()
        self._subs.assign(tps)
        await self._listener.on_partitions_assigned(set(tps))
        if self._partitions is None and self._watch is None:
            self._watch = self._client.watch_topics(
                self._topics_changed, topics=self._topics, refresh_ms=self._refresh_ms, view=self._view
            )

    def _topics_changed(self, view: TopicView) -> None:
        self._changed = True
        if self._follow is None or self._follow.done():
            self._follow = asyncio.get_running_loop().create_task(
                self._take_in(), name="kafka-core-follow-topics"
            )

    async def _take_in(self) -> None:
        """Bring the assignment to the watch's view: partitions of topics gone (or recreated
        under another id) are dropped, new ones positioned per ``auto_offset_reset``."""
        named = set(self._topics)
        while self._changed and self._watch is not None:
            self._changed = False
            view = dict(self._watch.view)
            have = {tp for tp in self._subs.assigned() if tp.topic in named}
            stale = {n for n, (_, tid) in self._view.items() if n in view and view[n][1] != tid}
            gone = {tp for tp in have if tp.topic in stale} | (have - set(_partitions(view)))
            added = set(_partitions(view)) - (have - gone)
            try:
                if gone:
                    await self._listener.on_partitions_lost(gone)
                    self._subs.remove(gone)
                if added:
                    self._subs.add(added)
                    await self._listener.on_partitions_assigned(added)
            except KafkaClosedError:
                return
            except KafkaError as exc:
                log.warning("taking in partitions %s failed: %r; trying again", sorted(added), exc)
                self._subs.remove(added)
                self._changed = True
                await asyncio.sleep(1.0)
                continue
            self._view = view
            if gone or added:
                log.info("consuming %s (topics %s changed)", sorted(self._subs.assigned()), self._topics)
            self._wake()

    async def _coordinator_gate(self) -> None:
        """Cold start: the coordinator and a stable offsets topic, or do not start at all."""
        try:
            await self._client.find_coordinator(self.group_id, 0, timeout_ms=self._gate_timeout_ms)
        except KafkaError as exc:
            raise KafkaTimeoutError(
                f"group coordinator for {self.group_id!r} not ready within {self._gate_timeout_ms} ms; "
                f"not consuming (committed offsets untouched): {exc}"
            ) from exc

    def note_poll(self) -> None:
        """No poll deadline without a group."""

    async def wait_active(self, timeout_s: float, interrupt: asyncio.Event | None = None) -> bool:
        return True  # a change being taken in goes on behind poll (new partitions come when ready)

    def metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, -1, "", None)  # never a member

    def commit_args(self) -> dict[str, Any]:
        return {}  # a commit outside any generation (what the broker expects without membership)

    async def next_epoch(self) -> bool:
        """No membership, no member epoch (see ConsumerGroupMembership)."""
        return False

    async def close(self) -> None:
        """Nothing to leave; the watch of the named topics ends."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self._follow is not None:
            self._follow.cancel()
            await asyncio.gather(self._follow, return_exceptions=True)
            self._follow = None


def _refuse_denied(meta: ClusterMeta, how: str) -> None:
    """A topic this consumer may not describe is refused, not absent: taken as absent, its
    partitions would never get a leader and poll return [] for ever. Raised from the start, so
    from every poll until an ACL allows it (each poll starts again), naming the topics, as the
    Java consumer's poll raises TopicAuthorizationException (the group's join does the same)."""
    denied = sorted(t.name for t in meta.topics if t.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if denied:
        raise error_for(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            f"not authorized to describe or read topic(s) {', '.join(map(repr, denied))} {how} "
            f"to this consumer",
        )


def _partitions(view: TopicView) -> list[TopicPartition]:
    return sorted(TopicPartition(name, p) for name, (count, _) in view.items() for p in range(count))
