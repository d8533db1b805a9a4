"""The blocking KafkaConsumer: the asyncio consumer on a private loop thread.

Only polling, iteration, run() and close are written here, so that handlers and rebalance
callbacks run in the caller's thread and the thread hop happens once per poll (whole fetch
results), not once per record.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from kafka_core._sync import SyncFace, sync_face
from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.columns import ColumnDecoder, decode_columns, first_offsets
from kafka_core.consumer.consumer import KafkaConsumer as AsyncKafkaConsumer
from kafka_core.consumer.message import ConsumedMessage
from kafka_core.consumer.polling import rewind
from kafka_core.errors import KafkaClosedError, KafkaError

_log = logging.getLogger(__name__)

T = TypeVar("T")


class _CallbackRelay:
    """Hands rebalance callbacks from the loop thread to the application thread.

    The group join awaits the callback's future, so a revocation (and whatever the callback
    does, e.g. a commit) completes before the member rejoins. A thread inside poll() (or close)
    runs the callback; until one is, the join waits, as in Java. Each waiting call has its own
    queue, so a close() from another thread never steals the end of someone else's poll().
    Holds no reference to the face, so the face can still be garbage collected.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.direct = False  # closing from the GC finaliser: no application thread to ask
        self._lock = threading.Lock()  # guards _pending and _servers (loop and application threads)
        self._pending: list[Any] = []
        self._servers: list[queue.SimpleQueue[Any]] = []

    async def __call__(self, cb: Callable[..., Any], tps: set[Any]) -> None:
        if self.direct:
            result = cb(tps)
            if inspect.isawaitable(result):
                await result
            return
        fut: asyncio.Future[None] = self.loop.create_future()
        with self._lock:
            if self._servers:
                self._servers[-1].put((cb, tps, fut))
            else:
                self._pending.append((cb, tps, fut))
        await fut

    def enter(self) -> queue.SimpleQueue[Any]:
        q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        with self._lock:
            self._servers.append(q)
            for item in self._pending:
                q.put(item)
            self._pending.clear()
        return q

    def leave(self, q: queue.SimpleQueue[Any]) -> None:
        with self._lock:
            self._servers.remove(q)
            left: list[Any] = []
            while not q.empty():
                item = q.get_nowait()
                if isinstance(item, tuple):
                    left.append(item)
            target = self._servers[-1] if self._servers else None
            for item in left:
                if target is not None:
                    target.put(item)
                else:
                    self._pending.append(item)


@sync_face(AsyncKafkaConsumer, exclude=("set_callback_runner",))
class KafkaConsumer(SyncFace):
    """Same constructor and methods as :class:`kafka_core.aio.KafkaConsumer`, but blocking.

    Rebalance callbacks run in the thread that calls poll() (also iteration, run and close),
    so they may call the blocking methods of this consumer (commit, committed, seek...).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stopped = False
        client = kwargs.get("client")
        if client is None:
            super().__init__(*args, **kwargs)
            self._finalizer.detach()
            owns_loop = True
        else:
            loop_thread = getattr(client, "loop_thread", None)  # a blocking face: SyncFace.loop_thread
            if loop_thread is None:
                from kafka_core.errors import KafkaConfigError

                raise KafkaConfigError("the sync KafkaConsumer takes a sync kafka_core.KafkaClient as client")
            # The client's async twin lives on the client's loop thread: the consumer runs there
            # too, and closing the consumer leaves that loop (and the client) to their owner.
            kwargs["client"] = client.async_object
            self._loop_thread = loop_thread
            self._async_obj = loop_thread.call(self._async_class, *args, **kwargs)
            owns_loop = False
        self._relay = _CallbackRelay(self._loop_thread.loop)
        self._loop_thread.call(self._async_obj.set_callback_runner, self._relay)
        # Its own finaliser (the relay, a borrowed loop), not the one SyncFace types.
        finalizer: Any = weakref.finalize(
            self, _finalize, self._loop_thread, self._async_obj, self._relay, owns_loop
        )
        self._finalizer = finalizer

    def __enter__(self) -> KafkaConsumer:
        return self

    # -- running coroutines while serving rebalance callbacks ---------------------------------

    def _serve(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop; meanwhile run the rebalance callbacks it asks for, here."""
        lt = self._loop_thread
        if not lt.alive:
            coro.close()
            raise KafkaClosedError("this consumer is closed")
        q = self._relay.enter()
        try:
            return lt.run(coro, inbox=q, handle=lambda item: self._run_callback(*item))
        finally:
            self._relay.leave(q)

    def _run_callback(self, cb: Callable[..., Any], tps: set[Any], fut: asyncio.Future[None]) -> None:
        loop = self._loop_thread.loop

        def settle(exc: BaseException | None) -> None:
            if fut.done():
                return
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

        try:
            result = cb(tps)
            if inspect.isawaitable(result):
                self._loop_thread.run(result)
        except Exception as exc:
            loop.call_soon_threadsafe(settle, exc)
        except BaseException:
            # Ctrl-C in the callback: the join must not wait forever for it.
            loop.call_soon_threadsafe(settle, KafkaError(f"rebalance callback {cb!r} interrupted"))
            raise
        else:
            loop.call_soon_threadsafe(settle, None)

    # -- the public face -------------------------------------------------------------------

    def poll(self, timeout_ms: float = 1_000, max_records: int | None = None) -> list[ConsumedMessage]:
        """Records handed over now (empty after ``timeout_ms`` without data)."""
        return self._serve(self._async_obj.poll(timeout_ms, max_records))

    def poll_columns(
        self,
        timeout_ms: float = 1_000,
        max_records: int | None = None,
        *,
        key_decoder: ColumnDecoder | None = None,
        value_decoder: ColumnDecoder | None = None,
    ) -> Any:
        """Like poll, as one ``pyarrow.RecordBatch`` (no Python object per record), or None.

        ``key_decoder``/``value_decoder`` (e.g.
        ``kafka_core.schema_registry.columnar.AvroColumnDeserializer``) turn
        those columns into typed ones here, in the caller's thread (see consumer.columns)."""
        batch = self._serve(self._async_obj.poll_columns(timeout_ms, max_records))
        if batch is None or (key_decoder is None and value_decoder is None):
            return batch
        try:
            return decode_columns(batch, key_decoder, value_decoder)
        except BaseException:
            for (topic, partition), offset in first_offsets(batch).items():
                self.seek(TopicPartition(topic, partition), offset)
            raise

    def __iter__(self) -> Iterator[ConsumedMessage]:
        self._stopped = False
        while not self._stopped:
            batch = self.poll(1_000)
            handed = 0
            try:
                for msg in batch:
                    if self._stopped:
                        break
                    handed += 1
                    yield msg
            finally:
                # stop() or a break out of the loop: the rest of the batch comes again later.
                if handed < len(batch) and self._loop_thread.alive:
                    self._rewind(batch[handed:])

    def run(self, handler: Callable[[ConsumedMessage], Any]) -> None:
        """Poll and call ``handler(message)`` in this thread until stop() (from any thread)."""
        self._stopped = False
        while not self._stopped:
            batch = self.poll(1_000)
            for i, msg in enumerate(batch):
                if self._stopped:
                    self._rewind(batch[i:])
                    return
                handler(msg)

    def _rewind(self, unhandled: list[ConsumedMessage]) -> None:
        self._loop_thread.call(rewind, self._async_obj, unhandled)

    def stop(self) -> None:
        self._stopped = True
        if self._loop_thread.alive:
            self._loop_thread.loop.call_soon_threadsafe(self._async_obj.stop)

    def close(self, timeout: float | None = None, *, commit: bool = True) -> None:
        """Commit (auto-commit), run on_revoke here, leave the group; then release the loop.

        ``timeout`` (seconds) bounds it: see :meth:`kafka_core.aio.KafkaConsumer.close`.
        """
        try:
            if self._loop_thread.alive and not self._async_obj.closed:
                self._serve(self._async_obj.close(timeout, commit=commit))
        finally:
            self._finalizer()


def _finalize(loop_thread: Any, obj: Any, relay: _CallbackRelay, owns_loop: bool) -> None:
    """GC or close(): close the consumer (callbacks in the loop thread now), stop an owned loop."""
    relay.direct = True
    try:
        if loop_thread.alive:
            loop_thread.run(obj.close())
    except Exception as exc:  # from GC nobody can take it; an explicit close() raised its own
        _log.warning("closing a KafkaConsumer that was not closed failed: %s", exc)
    finally:
        if owns_loop:
            loop_thread.stop()
