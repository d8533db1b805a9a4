"""The consumer's start, once, and the flags saying how far it got (started, closed)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kafka_core.consumer.fetch.fetcher import Fetcher
from kafka_core.consumer.group.rebalance import Membership
from kafka_core.consumer.offsets import ConsumerOffsets
from kafka_core.errors import KafkaClosedError


class Lifecycle:
    """Starts the membership (the assignment and its positions), then the fetcher; the consumer
    face sets ``closed`` when its close begins. Runs on the event loop only."""

    def __init__(
        self,
        membership: Membership,
        fetcher: Fetcher,
        offsets: ConsumerOffsets,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        self._on_started = on_started  # the KIP-714 metrics push, started with the consumer
        self._group = membership
        self._fetcher = fetcher
        self._offsets = offsets
        # Guards the one start: ``started``, the membership's and the fetcher's start.
        self._start_lock = asyncio.Lock()
        self.started = False
        self.closed = False  # close() began

    async def start(self) -> None:
        if self.closed:
            raise KafkaClosedError("this consumer is closed")
        async with self._start_lock:
            if self.started:
                return
            self._offsets.restart_auto_commit_clock()
            await self._group.start()
            self._fetcher.start()
            self.started = True
            if self._on_started is not None:
                self._on_started()

    async def ensure_started(self) -> None:
        if not self.started:
            await self.start()
