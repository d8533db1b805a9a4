"""The producer's waits for topic metadata (a base class of the asyncio producer): the first
record of a topic looks its partitions up once, ``send_batch`` and ``partitions_for`` wait for
them, each within ``max_block_ms`` and naming the last cause when it runs out."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from kafka_core.errors import KafkaClosedError, KafkaError, KafkaTimeoutError

if TYPE_CHECKING:
    from kafka_core.producer.accumulator import Accumulator
    from kafka_core.producer.sender import Sender

__all__ = ["TopicWaits", "with_cause"]


def with_cause(exc: BaseException | None) -> str:
    """``"; last error: <exc>"`` to end a message with, or nothing without a cause."""
    return f"; last error: {exc}" if exc is not None else ""


class TopicWaits:
    """The metadata waits of the asyncio producer (its base class); see ``KafkaProducer``."""

    client: Any
    _acc: Accumulator
    _sender: Sender
    _max_block: float
    _closed: bool
    _ready: asyncio.Event | None
    _start_error: BaseException | None
    _task: asyncio.Task[None] | None

    def _begin(self, loop: asyncio.AbstractEventLoop) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        raise NotImplementedError

    def _start_cause(self) -> BaseException | None:
        raise NotImplementedError

    def known_partitions(self, topic: str) -> int:
        """Partition count of ``topic`` if its metadata is already known, else 0 (no lookup)."""
        return self._acc.partition_count(topic)

    async def wait_topic(self, topic: str) -> int:
        """Partition count of ``topic``, fetching metadata if unknown; raises KafkaTimeoutError,
        with the last cause, once ``max_block_ms`` has passed (however long a lookup would take)."""
        known = self._acc.partition_count(topic)
        if known:
            return known
        deadline = time.monotonic() + self._max_block
        cause: BaseException | None = None
        while True:
            if self._closed:
                raise KafkaClosedError("the producer is closed")
            left = deadline - time.monotonic()
            try:
                await asyncio.wait_for(self._ready.wait(), max(left, 0.0))  # type: ignore[union-attr]
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"topic {topic!r}: no broker reachable within max_block_ms "
                    f"({self._max_block * 1000:.0f} ms){with_cause(cause or self._start_cause())}"
                ) from None
            if self._start_error is not None:
                raise self._start_error
            try:
                meta = await asyncio.wait_for(self.client.metadata([topic]), max(left, 0.001))
                self._sender.leaders.apply(meta, [topic])
            except KafkaError as exc:
                cause = self._sender.leaders.last_error[topic] = exc
            except TimeoutError:
                pass
            known = self._acc.partition_count(topic)
            if known:
                self._wake()
                return known
            if time.monotonic() >= deadline:
                cause = cause or self._sender.leaders.last_error.get(topic)
                raise KafkaTimeoutError(
                    f"topic {topic!r} not available within max_block_ms ({self._max_block * 1000:.0f} ms)"
                    + with_cause(cause)
                )
            await asyncio.sleep(min(self._sender.backoff, max(deadline - time.monotonic(), 0.0)))

    async def _lookup(self, topic: str) -> None:
        """First record for ``topic``: one metadata lookup (``max_block_ms`` in all, waiting for a
        broker included) so that records go straight into partition batches; if it does not
        succeed they wait parked instead, until their delivery deadline."""
        if topic in self._acc.topics:
            return
        if self._task is None:
            self._begin(asyncio.get_running_loop())
        deadline = time.monotonic() + self._max_block
        try:
            await asyncio.wait_for(self._ready.wait(), self._max_block)  # type: ignore[union-attr]
            if self._start_error is not None or topic in self._acc.topics:
                return
            left = max(deadline - time.monotonic(), 0.0)
            meta = await asyncio.wait_for(self.client.metadata([topic]), left)
            self._sender.leaders.apply(meta, [topic])
        except KafkaError as exc:
            self._sender.leaders.last_error[topic] = exc
        except TimeoutError:
            pass  # the cause is the client's (cause_for_topic)

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (waiting up to ``max_block_ms`` for its metadata)."""
        return list(range(await self.wait_topic(topic)))
