"""The consumer's poll loop: poll, poll_columns, iteration, run and stop.

Owned by the consumer face, which delegates to it. A poll starts the consumer behind it when
needed, raises what is pending (a callback's error, a fetch error), runs the auto-commit, waits
for a join, and hands over what the fetcher has buffered; it returns or raises within its
``timeout_ms`` whatever goes on behind it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.client.waiting import wait_event
from kafka_core.consumer.fetch.fetcher import Fetcher
from kafka_core.consumer.group.rebalance import Membership
from kafka_core.consumer.lifecycle import Lifecycle
from kafka_core.consumer.message import ConsumedMessage, Deserializer, deserialize_messages
from kafka_core.consumer.offsets import ConsumerOffsets
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import KafkaClosedError, KafkaConnectionError, KafkaTimeoutError
from kafka_core.metrics.registry import ConsumerMetrics


class Poller:
    """Hands the fetcher's records over to the application. Runs on the event loop only."""

    def __init__(
        self,
        client: Any,
        subs: SubscriptionState,
        lifecycle: Lifecycle,
        membership: Membership,
        fetcher: Fetcher,
        offsets: ConsumerOffsets,
        outage: OutageTracker,
        pending: list[BaseException],
        *,
        max_poll_records: int | None,
        deserializers: tuple[Deserializer | None, Deserializer | None] | None,
        stats: ConsumerMetrics | None = None,
    ) -> None:
        self._client = client
        self._stats = stats  # counts each poll's share of the time (poll.idle.ratio)
        self._subs = subs
        self._lifecycle = lifecycle
        self._group = membership
        self._fetcher = fetcher
        self._offsets = offsets
        self._outage = outage
        # Errors for the next poll to raise (a rebalance callback's, a failed commit on
        # revoke...): the parts that report append, this poll loop raises them in order.
        self._pending_errors = pending
        self._max_poll_records = max_poll_records
        self._deserializers = deserializers  # None: bytes as they came
        self._start_task: asyncio.Task[None] | None = None  # a start going on behind poll()
        self._commit_task: asyncio.Task[None] | None = None  # an auto-commit behind poll()
        # Before a first broker answered, poll reports each new failure (none from before us).
        self._reached = False
        self._reported_error: BaseException | None = getattr(client, "last_error", None)
        # stop(): a waiting poll returns early (once), and run()/iteration end (_stopping).
        self._wakeup = asyncio.Event()
        self._stopping = False

    async def cancel_start(self) -> None:
        """close(): a start going on behind poll() ends."""
        if self._start_task is not None:
            self._start_task.cancel()
            await asyncio.gather(self._start_task, return_exceptions=True)

    async def settle_commit(self) -> None:
        """close(): an auto-commit in flight ends (its error superseded by the final commit)."""
        if self._commit_task is not None:
            await asyncio.gather(self._commit_task, return_exceptions=True)

    async def _start_within(self, deadline: float) -> bool:
        """Start (connect, resolve the assignment) as a task; False if it outlasts ``deadline``."""
        loop = asyncio.get_running_loop()
        task = self._start_task
        if task is None:
            task = self._start_task = loop.create_task(
                self._lifecycle.start(), name="kafka-core-consumer-start"
            )
        if not task.done():
            await _wait_until(task, deadline - loop.time(), self._wakeup)
            if not task.done():
                return False
        self._start_task = None
        task.result()  # its error (the next poll starts again)
        return True

    async def _before_poll(self, deadline: float) -> bool:
        """False while the start goes on; else raises what is pending, runs the auto-commit."""
        if self._lifecycle.closed:
            raise KafkaClosedError("this consumer is closed")
        if not self._lifecycle.started and not await self._start_within(deadline):
            return False
        if self._pending_errors:
            raise self._pending_errors.pop(0)
        self._group.note_poll()
        if self._group.joining:
            return True  # no auto-commit mid-rebalance: the revocation commits what it must
        loop = asyncio.get_running_loop()
        if self._commit_task is None:
            todo = self._offsets.auto_commit_due()
            if todo:
                self._commit_task = loop.create_task(
                    self._offsets.run_auto_commit(todo), name="kafka-core-auto-commit"
                )
        task = self._commit_task
        if task is not None:
            # A commit slower than the poll (an outage) goes on behind it; its error comes later.
            await _wait_until(task, deadline - loop.time(), self._wakeup)
            if task.done():
                self._commit_task = None
                task.result()
        return True

    def _nothing(self, columns: bool) -> Any:
        """An empty poll's answer, unless the consumer is cut off: then why, as an error."""
        if not self._reached:
            if self._client.cached_metadata().brokers:
                self._reached = True
            else:
                err = getattr(self._client, "last_error", None)
                if (
                    isinstance(err, KafkaConnectionError | KafkaTimeoutError)
                    and err is not self._reported_error
                ):
                    self._reported_error = err
                    raise KafkaConnectionError(f"no broker reachable yet (still trying): {err}") from err
        err = self._outage.due()
        if err is not None:
            raise err
        return None if columns else []

    def _raise_fetch_errors(self) -> None:
        err = self._fetcher.take_error()
        if err is not None:
            raise err

    async def _poll(self, timeout_ms: float, max_records: int | None, columns: bool) -> Any:
        stats = self._stats
        if stats is None:
            return await self._take(timeout_ms, max_records, columns)
        stats.poll_begin()
        try:
            return await self._take(timeout_ms, max_records, columns)
        finally:
            stats.poll_end()

    async def _take(self, timeout_ms: float, max_records: int | None, columns: bool) -> Any:
        max_records = max_records if max_records is not None else self._max_poll_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        if not await self._before_poll(deadline):
            self._wakeup.clear()
            return self._nothing(columns)
        while True:
            # A join (its callbacks included) may outlast the timeout: it goes on behind poll.
            if not await self._group.wait_active(deadline - loop.time(), self._wakeup):
                self._wakeup.clear()
                return self._nothing(columns)
            if self._pending_errors:
                raise self._pending_errors.pop(0)
            self._raise_fetch_errors()
            out = self._fetcher.drain(max_records, columns, self._pending_errors)
            if out:
                return out
            remaining = deadline - loop.time()
            if remaining <= 0 or self._wakeup.is_set():
                self._wakeup.clear()
                return self._nothing(columns)
            self._fetcher.data_ready.clear()
            if not await wait_event(self._fetcher.data_ready, remaining):
                return self._nothing(columns)

    async def poll(self, timeout_ms: float = 1_000, max_records: int | None = None) -> list[ConsumedMessage]:
        """Records handed over now (empty after ``timeout_ms`` without data)."""
        messages: list[ConsumedMessage] = await self._poll(timeout_ms, max_records, False)
        fns = self._deserializers
        if fns is not None and messages:
            return self._deserialize(messages, *fns)
        return messages

    def _deserialize(
        self, messages: list[ConsumedMessage], key_fn: Deserializer | None, value_fn: Deserializer | None
    ) -> list[ConsumedMessage]:
        """Keys/values through the deserializers; at a failure, the records from it on are not
        handed over (positions back to them) and its error is raised, now or at the next poll."""
        out, err = deserialize_messages(messages, key_fn, value_fn)
        if err is None:
            return out
        self._rewind(messages[len(out) :])
        if not out:
            raise err
        self._pending_errors.append(err)
        return out

    async def poll_columns(self, timeout_ms: float = 1_000, max_records: int | None = None) -> Any:
        """Like poll, as one ``pyarrow.RecordBatch`` (no Python object per record), or None."""
        return await self._poll(timeout_ms, max_records, True)

    async def messages(self) -> AsyncIterator[ConsumedMessage]:
        """Iteration over the consumer: message by message until stop()."""
        self._stopping = False
        while not self._stopping:
            batch = await self.poll(1_000)
            handed = 0
            try:
                for msg in batch:
                    if self._stopping:
                        break
                    handed += 1
                    yield msg
            finally:
                # stop() or a break out of the loop: the rest of the batch comes again later.
                if handed < len(batch):
                    self._rewind(batch[handed:])

    async def run(self, handler: Callable[[ConsumedMessage], Any]) -> None:
        """Poll and call ``handler`` per message (awaited when it returns an awaitable) until stop()."""
        self._stopping = False
        while not self._stopping:
            batch = await self.poll(1_000)
            for i, msg in enumerate(batch):
                if self._stopping:
                    self._rewind(batch[i:])
                    return
                result = handler(msg)
                if inspect.isawaitable(result):
                    await result

    def stop(self) -> None:
        """Make run()/iteration return after the current message; a waiting poll returns early."""
        self._stopping = True
        self._wakeup.set()
        self._fetcher.data_ready.set()

    def _rewind(self, unhandled: list[ConsumedMessage]) -> None:
        assigned = self._subs.assigned()
        for tp, offset in first_offsets(unhandled).items():
            if tp in assigned:
                self._offsets.seek(tp, offset)


def first_offsets(messages: list[ConsumedMessage]) -> dict[TopicPartition, int]:
    """The first offset of each partition among ``messages``."""
    first: dict[TopicPartition, int] = {}
    for m in messages:
        tp = TopicPartition(m.topic, m.partition)
        if m.offset < first.get(tp, m.offset + 1):
            first[tp] = m.offset
    return first


def rewind(consumer: Any, unhandled: list[ConsumedMessage]) -> None:
    """Positions back to the first message not given to the application (nothing skipped),
    through the consumer's public seek (the sync face's loops)."""
    assigned = consumer.assignment()
    for tp, offset in first_offsets(unhandled).items():
        if tp in assigned:
            consumer.seek(tp, offset)


async def _wait_until(task: asyncio.Future[Any], timeout_s: float, interrupt: asyncio.Event) -> None:
    """Wait for ``task`` at most ``timeout_s``, or until ``interrupt`` (stop()) is set."""
    if timeout_s <= 0 or interrupt.is_set():
        return
    waiter = asyncio.get_running_loop().create_task(interrupt.wait())
    try:
        await asyncio.wait({task, waiter}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
