"""One subscription: a group consumer of its own, and a task running its poll/handle/commit loop.

The loop hands each record to the handler in order and commits only what was handled (see
``tracking.CommitTracker``): a handler that raises leaves its record uncommitted, and the error
policy decides what happens next. Rebalances come only inside ``poll`` (never while a record is
being handled), and a revocation commits the handled records of the revoked partitions first, so
the next owner starts right after them. Unsubscribing stops fetching, lets the records already
fetched be handled (the drain), commits, and leaves the group, all within the caller's timeout.
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
from kafka_core.transport.options import ErrorPolicy, HandlerError
from kafka_core.transport.payload import Message
from kafka_core.transport.tracking import CommitTracker
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

    ``make_consumer(on_revoke=..., on_lost=...)`` builds the consumer (the transport passes its
    options); ``threaded`` runs a plain (non-async) handler and ``on_error`` in a thread of the
    subscription's own, in order, so a slow handler does not hold up the event loop.
    """

    def __init__(
        self,
        make_consumer: Callable[..., Any],
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
    ) -> None:
        self.topic = topic
        self.group_id = group_id
        self._handler = handler
        self._policy = policy
        self._on_error = on_error
        self._commit_interval = commit_interval_ms / 1000.0
        self._poll_timeout_ms = poll_timeout_ms
        self._close_timeout = close_timeout
        self._user_on_revoke = on_revoke
        self._user_on_lost = on_lost
        self._worker = HandlerThread(f"kafka-core-handler-{topic}") if threaded else None
        self._tracker = CommitTracker()
        self.consumer = make_consumer(on_revoke=self._revoked, on_lost=self._lost)
        self.error: BaseException | None = None
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        self._shutdown_deadline: float | None = None
        self._next_commit = 0.0
        self._counts = {"handled": 0, "failed": 0, "retried": 0, "skipped": 0, "commits": 0}

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
            self.consumer.stop()  # a waiting poll returns now

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
        """Commit the handled records, then close the consumer (which leaves the group)."""
        loop = asyncio.get_running_loop()
        error: BaseException | None = None
        try:
            async with asyncio.timeout_at(deadline):
                await self._commit(raise_errors=True)
        except TimeoutError:
            error = KafkaTimeoutError(f"the final commit of {self.topic!r} did not finish in time")
        except KafkaError as exc:
            error = exc
        try:
            await self.consumer.close(max(deadline - loop.time(), 0.0), commit=False)
        except KafkaError as exc:
            error = error or exc
        finally:
            if self._worker is not None:
                self._worker.stop()
        if error is not None:
            raise error

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
            for msg in batch:
                self._tracker.fetched(TopicPartition(msg.topic, msg.partition), msg.offset)
            for msg in batch:
                if not await self._handle(msg):
                    return
            loop = asyncio.get_running_loop()
            if batch and loop.time() >= self._next_commit:
                self._next_commit = loop.time() + self._commit_interval
                await self._commit()

    async def _handle(self, msg: Any) -> bool:
        """Run the handler on one record under the error policy; False: the loop must stop."""
        message = Message.from_consumed(msg)
        tp = TopicPartition(msg.topic, msg.partition)
        backoff: Backoff | None = None
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._call(self._handler, message)
            except Exception as exc:
                self._counts["failed"] += 1
                action = self._policy.action_after(attempt)
                if action == "retry" and self._stopping:
                    action = "stop"  # unsubscribing: the next member retries it
                err = HandlerError(message, exc, attempt, action)
                await self._report(err)
                if action == "retry":
                    self._counts["retried"] += 1
                    if backoff is None:
                        backoff = Backoff(self._policy.retry_backoff_ms, self._policy.retry_backoff_max_ms)
                    await asyncio.sleep(backoff.next_s())
                    continue
                if action == "skip":
                    self._counts["skipped"] += 1
                    self._tracker.handled(tp, msg.offset)
                    return True
                if not self._stopping:
                    self.error = err
                return False
            self._counts["handled"] += 1
            self._tracker.handled(tp, msg.offset)
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
                level = logging.WARNING if err.action == "retry" else logging.ERROR
                log.log(level, "%s", err)
            return
        try:
            await self._call(self._on_error, err)
        except Exception as exc:
            log.error("on_error callback failed on %r: %r", err, exc)

    # -- commits -----------------------------------------------------------------------------

    async def _commit(self, tps: Any = None, *, raise_errors: bool = False) -> None:
        offsets = self._tracker.commit_offsets(tps)
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:
            # Not a loss: those records come again after a restart. Retried at the next commit.
            log.warning("subscription to %r: commit of %s failed: %r", self.topic, offsets, exc)
            if raise_errors:
                raise
            return
        self._tracker.committed(offsets)
        self._counts["commits"] += 1

    async def _revoked(self, tps: set[TopicPartition]) -> None:
        """A rebalance takes partitions away: commit their handled records first."""
        try:
            await self._commit(tps)
        finally:
            self._tracker.forget(tps)
            await _chain(self._user_on_revoke, tps)

    async def _lost(self, tps: set[TopicPartition]) -> None:
        """Partitions lost (the session expired): another member may own them, so no commit."""
        self._tracker.forget(tps)
        await _chain(self._user_on_lost or self._user_on_revoke, tps)

    # -- introspection -----------------------------------------------------------------------

    def assignment(self) -> set[TopicPartition]:
        """The partitions this subscription owns now (empty while its group is joining)."""
        return self.consumer.assignment()

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """What this subscription has committed so far, per partition it still owns."""
        return self._tracker.last_committed()

    def metrics(self) -> dict[str, Any]:
        """This subscription's counts and its consumer's ``metrics()`` snapshot."""
        return {
            "topic": self.topic,
            "group_id": self.group_id,
            "running": self.running,
            "error": None if self.error is None else repr(self.error),
            **self._counts,
            "committed": {f"{tp.topic}[{tp.partition}]": off for tp, off in self.committed_offsets().items()},
            "consumer": self.consumer.metrics(),
        }


async def _chain(cb: Callable[..., Any] | None, tps: set[TopicPartition]) -> None:
    if cb is not None:
        result = cb(tps)
        if inspect.isawaitable(result):
            await result
