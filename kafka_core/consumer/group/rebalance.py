"""What a group membership tells its owner (RebalanceListener, ConsumerGroupMetadata), and the
consumer's side of a rebalance, the listener its membership tells.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol

from kafka_core.client.metadata import TopicPartition

log = logging.getLogger("kafka_core.consumer.consumer")

Partitions = set[TopicPartition]
# Runs one application callback with its partitions (the sync face: in the application's thread).
CallbackRunner = Callable[[Callable[..., Any], Partitions], Awaitable[None]]


class ConsumerGroupMetadata(NamedTuple):
    """Who this member is in its group now (Java's ``groupMetadata()``); generation -1 and an
    empty member id while it is not a member (no group, joining, or left)."""

    group_id: str | None
    generation_id: int
    member_id: str
    group_instance_id: str | None


class RebalanceListener(Protocol):
    """What the member tells its owner; the join waits for each call (a revocation completes,
    e.g. its commit, before the member rejoins). The member updates the subscription state itself:
    after ``on_partitions_revoked``/``lost`` it drops those partitions, before
    ``on_partitions_assigned`` it adds them."""

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None: ...

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None: ...

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None: ...


class Membership(Protocol):
    """What the consumer asks of its membership (classic, KIP-848, or ManualAssignment without
    a group): it drives each the same way, never asking which one it has."""

    @property
    def joining(self) -> bool: ...

    async def start(self) -> None: ...

    def note_poll(self) -> None: ...

    async def wait_active(self, timeout_s: float, interrupt: asyncio.Event | None = None) -> bool: ...

    def metadata(self) -> ConsumerGroupMetadata: ...

    def commit_args(self) -> dict[str, Any]: ...

    async def next_epoch(self) -> bool: ...

    async def close(self) -> None: ...


class ConsumerRebalance:
    """The consumer's RebalanceListener, made of the consumer's own steps passed in as callables
    (commit what goes, position what comes, forget what went, report an error to the next poll),
    so neither it nor the membership holds the consumer. The application's callbacks run here,
    in order with those steps, and the join waits for them: a revocation (its commit included)
    completes before the member rejoins."""

    def __init__(
        self,
        *,
        commit: Callable[[Partitions], Awaitable[None]],
        position: Callable[[list[TopicPartition]], Awaitable[None]],
        forget: Callable[[Partitions], None],
        report: Callable[[BaseException], None],
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
    ) -> None:
        self._commit = commit
        self._position = position
        self._forget = forget
        self._report = report
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._on_lost = on_lost if on_lost is not None else on_revoke
        self.runner: CallbackRunner | None = None  # None: callbacks run on the event loop

    async def on_partitions_revoked(self, partitions: Partitions) -> None:
        await self._commit(partitions)
        await self._call(self._on_revoke, partitions)
        self._forget(partitions)

    async def on_partitions_lost(self, partitions: Partitions) -> None:
        await self._call(self._on_lost, partitions)  # not committed: no longer ours to commit
        self._forget(partitions)

    async def on_partitions_assigned(self, partitions: Partitions) -> None:
        await self._position(sorted(partitions))
        await self._call(self._on_assign, partitions)

    async def _call(self, cb: Callable[..., Any] | None, tps: Partitions) -> None:
        """A callback's error is the application's: raised at its next poll; the join goes on."""
        if cb is None:
            return
        try:
            if self.runner is not None:
                await self.runner(cb, tps)
            else:
                result = cb(tps)
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:
            log.error("rebalance callback %r failed: %r", cb, exc)
            self._report(exc)
