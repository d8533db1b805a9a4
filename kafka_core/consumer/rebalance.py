"""The consumer's side of a rebalance, as the RebalanceListener its group membership tells.

It is made of the consumer's own steps passed in as callables (commit what goes, position what
comes, forget what went, report an error to the next poll), so neither it nor the membership
holds the consumer. The application's callbacks run here, in order with those steps, and the
join waits for them: a revocation (its commit included) completes before the member rejoins.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kafka_core.client.metadata import TopicPartition

log = logging.getLogger("kafka_core.consumer.consumer")

Partitions = set[TopicPartition]
# Runs one application callback with its partitions (the sync face: in the application's thread).
CallbackRunner = Callable[[Callable[..., Any], Partitions], Awaitable[None]]


class ConsumerRebalance:
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
