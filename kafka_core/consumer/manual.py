"""The no-group stand-in: a fixed assignment with the group membership's interface.

The consumer drives either this or a GroupMembership the same way, so it never asks which one
it has (no ``if group`` branches): here joining is instant, there are no heartbeats, and the
commits carry no generation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata, RebalanceListener
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.errors import KafkaError, KafkaTimeoutError


class ManualAssignment:
    """Partitions named by the application, or every partition of its topics (looked up at start).

    With a ``group_id`` (static partitions whose offsets live in the group) the start waits for
    the group coordinator, so that nothing is consumed from the wrong place when it is not ready.
    """

    joining = False  # never: the assignment is known at start

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
    ) -> None:
        self._client = client
        self._subs = subscription
        self._listener = listener
        self.group_id = group_id
        self._topics = list(topics)
        self._partitions = partitions
        self._gate_timeout_ms = coordinator_ready_timeout_ms
        if partitions is not None:
            subscription.assign(partitions)  # known now: seek/pause work before the first poll

    async def start(self) -> None:
        """Resolve the assignment and have the listener position it (committed or reset)."""
        if self._partitions is not None:
            tps = self._partitions
        else:
            tps = await self._all_partitions()
        if self.group_id is not None:
            await self._coordinator_gate()
        self._subs.assign(tps)
        await self._listener.on_partitions_assigned(set(tps))

    async def _all_partitions(self) -> list[TopicPartition]:
        out: list[TopicPartition] = []
        for topic in self._topics:
            meta = await self._client.await_topic_ready(topic, 1, timeout_ms=self._gate_timeout_ms)
            out.extend(TopicPartition(topic, p.partition) for p in meta.partitions)
        return out

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
        return True

    def metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, -1, "", None)  # never a member

    def commit_args(self) -> dict[str, Any]:
        return {}  # a commit outside any generation (what the broker expects without membership)

    async def next_epoch(self) -> bool:
        """No membership, no member epoch (see ConsumerGroupMembership)."""
        return False

    async def close(self) -> None:
        """Nothing to leave."""
