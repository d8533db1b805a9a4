"""One subscription: a consumer of its own, and a task running its poll/handle/settle loop.

The loop hands each record to the handler in order; its mode (``modes.py``) settles the outcome.
In a consumer group only what was handled is committed (see ``tracking.CommitTracker``): a
handler that raises leaves its record uncommitted, and the error policy decides what happens
next. Rebalances come only inside ``poll`` (never while a record is being handled), and a
revocation commits the handled records of the revoked partitions first, so the next owner starts
right after them. In a share group (queue mode) each record is accepted, released or rejected on
its own. Unsubscribing stops fetching, lets the records already fetched be handled (the drain),
settles them, and leaves the group, all within the caller's timeout.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import (
    KafkaClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kafka_core.network.backoff import Backoff
from kafka_core.transport.modes import HANDLED, GroupMode, ShareMode
from kafka_core.transport.options import ErrorPolicy, HandlerError
from kafka_core.transport.payload import Message
from kafka_core.transport.worker import HandlerThread

log = logging.getLogger("kafka_core.transport")

__all__ = ["Subscription"]

# Of unsubscribe's timeout, what is kept for the final commit and leaving the group.
SHUTDOWN_RESERVE_S = 5.0


def _transient(exc: BaseException) -> bool:
    """Errors the consumer keeps retrying by itself: the loop logs them and polls on."""
    if isinstance(exc, KafkaProtocolError):
        return exc.retriable
    return isinstance(exc, KafkaConnectionError | KafkaTimeoutError)


class Subscription:
    """A running ``subscribe()``. Call it (``await unsubscribe()``) to stop it.

    ``make_consumer(on_revoke=..., on_lost=...)`` builds the group consumer (the transport passes
    its options), or ``mode`` is given ready (a :class:`ShareMode` for queue mode); ``threaded``
    runs a plain (non-async) handler and ``on_error`` in a thread of the subscription's own, in
    order, so a slow handler does not hold up the event loop.
    """

    def __init__(
        self,
        make_consumer: Callable[..., Any] | None,
        topic: str,
        group_id: str,
        handler: Callable[[Message], Any],
        *,
        policy: ErrorPolicy,
        on_error: Callable[[KafkaError], Any] | None = None,
        threaded: bool = False,
        commit_interval_ms: float = 0,
        poll_timeout_ms: float = 500,
        close_timeout: float = 30.0,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
        mode: GroupMode | ShareMode | None = None,
    ) -> None:
        self.topic = topic
        self.group_id = group_id
        self._handler = handler
        self._policy = policy
        self._on_error = on_error
        self._commit_interval = commit_interval_ms / 1000.0
        self._poll_timeout_ms = poll_timeout_ms
        self._close_timeout = close_timeout
        if mode is None:
            if make_consumer is None:
                raise ValueError("a subscription needs make_consumer or a mode")
            mode = GroupMode(make_consumer, topic, on_revoke=on_revoke, on_lost=on_lost)
        self._mode = mode
        self.consumer = mode.consumer
        self._worker = HandlerThread(f"kafka-core-handler-{topic}") if threaded else None
        self.error: BaseException | None = None
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        self._shutdown_deadline: float | None = None
        self._next_commit = 0.0
        self._counts = {"handled": 0, "failed": 0, "retried": 0, "skipped": 0, "released": 0, "rejected": 0}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._next_commit = loop.time() + self._commit_interval
        self._task = loop.create_task(self._main(), name=f"kafka-core-subscription-{self.topic}")

    @property
    def running(self) -> bool:
        """True until the subscription has stopped (unsubscribed, or stopped by its policy)."""
        return self._shutdown_task is None or not self._shutdown_task.done()

    def in_handler_thread(self) -> bool:
        """Whether the caller is this subscription's handler thread (threaded subscriptions)."""
        return self._worker is not None and threading.get_ident() == self._worker.ident

    def request_stop(self) -> None:
        """Stop fetching; the loop drains what it fetched, commits and leaves the group itself."""
        if not self._stopping:
            self._stopping = True
            self._mode.stop_fetching()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until the subscription has stopped; False if still running after ``timeout`` s."""
        if self._task is None:
            return True
        await asyncio.wait({self._task}, timeout=timeout)
        if not self._task.done():
            return False
        shutdown = self._shutdown_task
        if shutdown is not None and not shutdown.done():
            await asyncio.wait({shutdown}, timeout=timeout)
        return shutdown is None or shutdown.done()

    def __call__(self, timeout: float | None = None) -> Any:
        """``await unsubscribe()``: the same as :meth:`unsubscribe`."""
        return self.unsubscribe(timeout)

    async def unsubscribe(self, timeout: float | None = None) -> None:
        """Stop: drain the records fetched, commit the handled ones, leave the group.

        Returns within ``timeout`` s (default: the transport's ``close_timeout``). When the drain
        is cut short, the records not handled yet are not committed (the next member of the group
        gets them) and KafkaTimeoutError says so. Called from the handler itself, it only asks
        the loop to stop after this record.
        """
        loop = asyncio.get_running_loop()
        timeout = self._close_timeout if timeout is None else max(float(timeout), 0.0)
        deadline = loop.time() + timeout
        task = self._task
        if task is not None and asyncio.current_task() is task:
            self.request_stop()
            return
        if self._shutdown_deadline is None:
            self._shutdown_deadline = deadline
        self.request_stop()
        cut = False
        if task is not None and not task.done():
            drain_until = deadline - min(timeout / 2, SHUTDOWN_RESERVE_S)
            await asyncio.wait({task}, timeout=max(drain_until - loop.time(), 0.0))
            if not task.done():
                cut = True
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self._shutdown(deadline)
        if cut:
            raise KafkaTimeoutError(
                f"unsubscribe from {self.topic!r} (group {self.group_id!r}) did not drain within "
                f"{timeout}s: the record being handled was not committed and goes to the next member"
            )

    async def _shutdown(self, deadline: float) -> None:
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.get_running_loop().create_task(self._close(deadline))
        task = self._shutdown_task
        left = deadline - asyncio.get_running_loop().time()
        # shield: a caller that gives up (or is cancelled) does not cut the commit and leave short.
        await asyncio.wait({task}, timeout=max(left, 0.0))
        if not task.done():
            raise KafkaTimeoutError(
                f"unsubscribe from {self.topic!r}: the final commit and leaving group "
                f"{self.group_id!r} did not finish in time"
            )
        task.result()

    async def _close(self, deadline: float) -> None:
        """Settle what was handled (commit, or send the acknowledgements), leave the group."""
        try:
            await self._mode.close(deadline)
        finally:
            if self._worker is not None:
                self._worker.stop()

    async def _main(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # not retriable: the subscription stops and says why
            self.error = exc
            log.error("subscription to %r (group %r) stopped: %r", self.topic, self.group_id, exc)
            await self._report(exc)
        if self._shutdown_deadline is None:  # stopped by itself: tidy up now
            self._shutdown_deadline = asyncio.get_running_loop().time() + self._close_timeout
        try:
            await self._shutdown(self._shutdown_deadline)
        except KafkaError as exc:
            log.warning("subscription to %r: closing: %r", self.topic, exc)

    # -- the loop ----------------------------------------------------------------------------

    async def _loop(self) -> None:
        consumer = self.consumer
        while not self._stopping:
            try:
                batch = await consumer.poll(self._poll_timeout_ms)
            except KafkaClosedError:
                if self._stopping:
                    return
                raise
            except KafkaError as exc:
                if not _transient(exc):
                    raise
                log.warning("subscription to %r: %s (still trying)", self.topic, exc)
                await asyncio.sleep(0.1)
                continue
            self._mode.fetched(batch)
            for msg in batch:
                if not await self._handle(msg):
                    return
            loop = asyncio.get_running_loop()
            if batch and loop.time() >= self._next_commit:
                self._next_commit = loop.time() + self._commit_interval
                await self._mode.after_batch()

    async def _handle(self, msg: Any) -> bool:
        """Run the handler on one record under the error policy; False: the loop must stop.

        The mode says what a failure means ("retry" in place, "skip", or in queue mode
        "release"/"reject" by the record's delivery count) and settles the outcome."""
        message = Message.from_consumed(msg)
        backoff: Backoff | None = None
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._call(self._handler, message)
            except Exception as exc:
                self._counts["failed"] += 1
                action = self._mode.action_after(self._policy, msg, attempt)
                if action == "retry" and self._stopping:
                    action = "stop"  # unsubscribing: the next member retries it
                shown = message.delivery_count if message.delivery_count is not None else attempt
                err = HandlerError(message, exc, shown, action)
                await self._report(err)
                if action == "retry":
                    self._counts["retried"] += 1
                    if backoff is None:
                        backoff = Backoff(self._policy.retry_backoff_ms, self._policy.retry_backoff_max_ms)
                    await asyncio.sleep(backoff.next_s())
                    continue
                if action == "stop":
                    if not self._stopping:
                        self.error = err
                    return False
                self._counts[_COUNTED[action]] += 1
                self._mode.settle(msg, action)
                return True
            self._counts["handled"] += 1
            self._mode.settle(msg, HANDLED)
            return True

    async def _call(self, fn: Callable[..., Any], arg: Any) -> None:
        if self._worker is not None and not inspect.iscoroutinefunction(fn):
            result = await self._worker.run(fn, arg)
        else:
            result = fn(arg)
        if inspect.isawaitable(result):
            await result

    async def _report(self, err: BaseException) -> None:
        if self._on_error is None:
            if isinstance(err, HandlerError):
                level = logging.WARNING if err.action in ("retry", "release") else logging.ERROR
                log.log(level, "%s", err)
            return
        try:
            await self._call(self._on_error, err)
        except Exception as exc:
            log.error("on_error callback failed on %r: %r", err, exc)

    # -- introspection -----------------------------------------------------------------------

    def assignment(self) -> set[TopicPartition]:
        """The partitions this subscription owns now (empty while its group is joining)."""
        return self.consumer.assignment()

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """What this subscription has committed so far, per partition it still owns (a consumer
        group; a share group commits no offsets: empty)."""
        return self._mode.committed_offsets()

    def metrics(self) -> dict[str, Any]:
        """This subscription's counts and its consumer's ``metrics()`` snapshot."""
        return {
            "topic": self.topic,
            "group_id": self.group_id,
            "running": self.running,
            "error": None if self.error is None else repr(self.error),
            "share": isinstance(self._mode, ShareMode),
            **self._counts,
            "commits": self._mode.commits,
            "committed": {f"{tp.topic}[{tp.partition}]": off for tp, off in self.committed_offsets().items()},
            "consumer": self.consumer.metrics(),
        }


_COUNTED = {"skip": "skipped", "release": "released", "reject": "rejected"}
