"""The blocking KafkaConsumer: the asyncio consumer on a private loop thread.

Only iteration and run() are written here, so that a handler runs in the caller's thread and the
thread hop happens once per poll (whole fetch results), not once per record.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from kafka_core._sync import SyncFace, sync_face
from kafka_core.consumer.consumer import KafkaConsumer as AsyncKafkaConsumer
from kafka_core.consumer.message import ConsumedMessage


@sync_face(AsyncKafkaConsumer)
class KafkaConsumer(SyncFace):
    """Same constructor and methods as :class:`kafka_core.aio.KafkaConsumer`, but blocking."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stop_flag = threading.Event()
        client = kwargs.get("client")
        if client is None:
            super().__init__(*args, **kwargs)
            return
        loop_thread = getattr(client, "_loop_thread", None)
        if loop_thread is None:
            from kafka_core.errors import KafkaConfigError

            raise KafkaConfigError("the sync KafkaConsumer takes a sync kafka_core.KafkaClient as client")
        # The client's async twin lives on the client's loop thread: the consumer runs there too,
        # and closing the consumer leaves that loop (and the client) to their owner.
        kwargs["client"] = client.async_object
        obj = loop_thread.call(self._async_class, *args, **kwargs)
        self._loop_thread = loop_thread
        self._async_obj = obj
        self._finalizer = weakref.finalize(self, _close_only, loop_thread, obj)

    def __enter__(self) -> KafkaConsumer:
        return self

    def __iter__(self) -> Iterator[ConsumedMessage]:
        self._stop_flag.clear()
        while not self._stop_flag.is_set():
            batch = self.poll(1_000)
            handed = 0
            try:
                for msg in batch:
                    if self._stop_flag.is_set():
                        break
                    handed += 1
                    yield msg
            finally:
                # stop() or a break out of the loop: the rest of the batch comes again later.
                if handed < len(batch) and self._loop_thread.alive:
                    self._rewind(batch[handed:])

    def run(self, handler: Callable[[ConsumedMessage], Any]) -> None:
        """Poll and call ``handler(message)`` in this thread until stop() (from any thread)."""
        self._stop_flag.clear()
        while not self._stop_flag.is_set():
            batch = self.poll(1_000)
            for i, msg in enumerate(batch):
                if self._stop_flag.is_set():
                    self._rewind(batch[i:])
                    return
                handler(msg)

    def _rewind(self, unhandled: list[ConsumedMessage]) -> None:
        self._loop_thread.call(self._async_obj._rewind, unhandled)

    def stop(self) -> None:
        self._stop_flag.set()
        if self._loop_thread.alive:
            self._loop_thread.loop.call_soon_threadsafe(self._async_obj.stop)


def _close_only(loop_thread: Any, obj: Any) -> None:
    if loop_thread.alive:
        loop_thread.run(obj.close())
