"""The producer's waits for topic metadata (a base class of the asyncio producer): a record for a
topic whose partitions are not known yet, ``send_batch`` and ``partitions_for`` wait for them,
each within ``max_block_ms``. As the Java client's ``waitOnMetadata``: an answer that cannot
change by asking again (TOPIC_AUTHORIZATION_FAILED, an invalid name, a refused login) ends the
wait at once, and running out of time ends it naming the last cause (unknown topic, no broker
reachable); either way that record fails then, not ``delivery_timeout_ms`` later."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from kafka_core.client.waiting import wait_event, within
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)

if TYPE_CHECKING:
    from kafka_core.producer.accumulator import Accumulator
    from kafka_core.producer.sender import Sender

__all__ = ["TopicWaits", "final", "with_cause"]


def with_cause(exc: BaseException | None) -> str:
    """``"; last error: <exc>"`` to end a message with, or nothing without a cause."""
    return f"; last error: {exc}" if exc is not None else ""


def final(exc: BaseException | None) -> bool:
    """Whether asking again cannot help: a refused login or TLS handshake, or a non-retriable
    broker error such as TOPIC_AUTHORIZATION_FAILED."""
    if isinstance(exc, KafkaAuthenticationError):
        return True
    return isinstance(exc, KafkaProtocolError) and not exc.retriable


class TopicWaits:
    """The metadata waits of the asyncio producer (its base class); see ``KafkaProducer``."""

    client: Any
    _acc: Accumulator
    _sender: Sender
    _max_block: float
    _closed: bool
    _ready: asyncio.Event | None
    _connected: asyncio.Event | None
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
        """Partition count of ``topic``, fetching metadata if unknown. Raises an error that asking
        again cannot mend (a refused login or TLS handshake, a non-retriable broker error such as
        TOPIC_AUTHORIZATION_FAILED) as soon as it is seen, else KafkaTimeoutError with the last
        cause once ``max_block_ms`` has passed (however long a lookup would take)."""
        known = self._acc.partition_count(topic)
        if known:
            return known
        deadline = time.monotonic() + self._max_block
        cause: BaseException | None = None
        while True:
            if self._closed:
                raise KafkaClosedError("the producer is closed")
            left = deadline - time.monotonic()
            connected = self._connected
            assert connected is not None
            try:
                if not await wait_event(connected, left):
                    raise TimeoutError
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"topic {topic!r}: no broker reachable within max_block_ms "
                    f"({self._max_block * 1000:.0f} ms){with_cause(cause or self._start_cause())}"
                ) from None
            if self._start_error is not None:
                raise self._start_error
            answer: BaseException | None = None  # this round's reason, if any
            try:
                meta = await within(self.client.metadata([topic]), max(left, 0.001))
                self._sender.leaders.apply(meta, [topic])  # notes the topic's error, if any
                answer = self._sender.leaders.last_error.get(topic)
            except KafkaClosedError:
                raise
            except KafkaError as exc:
                answer = cause = self._sender.leaders.last_error[topic] = exc
            except TimeoutError:
                pass
            known = self._acc.partition_count(topic)
            if known:
                self._wake()
                return known
            if answer is not None and final(answer):
                raise answer
            if time.monotonic() >= deadline:
                cause = cause or self._sender.leaders.last_error.get(topic)
                raise KafkaTimeoutError(
                    f"topic {topic!r} not available within max_block_ms ({self._max_block * 1000:.0f} ms)"
                    + with_cause(cause)
                )
            await asyncio.sleep(min(self._sender.backoff, max(deadline - time.monotonic(), 0.0)))

    async def _lookup(self, topic: str) -> BaseException | None:
        """A record for ``topic`` whose partitions are not known: wait for them as
        :meth:`wait_topic` does. Returns why they could not be had (the record then fails with
        it), or None when they are known (or the producer failed to start: the caller raises)."""
        if self._acc.partition_count(topic):
            return None
        if self._task is None:
            self._begin(asyncio.get_running_loop())
        try:
            await self.wait_topic(topic)
        except KafkaClosedError:
            return None  # the caller raises why the producer is closed
        except KafkaError as exc:
            if exc is self._start_error:
                return None
            return exc
        return None

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (waiting up to ``max_block_ms`` for its metadata)."""
        return list(range(await self.wait_topic(topic)))
