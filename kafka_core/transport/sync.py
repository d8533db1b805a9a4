"""The blocking ``kafka_core.KafkaStreamTransport``: the asyncio transport on a private loop thread.

Each subscription's plain handler runs in a thread of its own (``threaded=True``), never on the
loop thread, so a slow handler holds up neither publishing nor the other subscriptions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka_core._sync import LoopThread, SyncFace, sync_face
from kafka_core.errors import KafkaError
from kafka_core.transport.payload import Message
from kafka_core.transport.subscription import Subscription
from kafka_core.transport.transport import KafkaStreamTransport as AsyncKafkaStreamTransport

__all__ = ["KafkaStreamTransport", "SyncSubscription"]


class SyncSubscription:
    """The blocking ``unsubscribe()`` callable of one subscription (with ``running``, ``error``)."""

    def __init__(self, loop_thread: LoopThread, sub: Subscription) -> None:
        self._loop_thread = loop_thread
        self._sub = sub

    def __call__(self, timeout: float | None = None) -> None:
        self.unsubscribe(timeout)

    def unsubscribe(self, timeout: float | None = None) -> None:
        """Drain, commit the handled records, leave the group; within ``timeout`` s.

        From inside the handler it only asks the subscription to stop after this record.
        """
        if self._sub.in_handler_thread():
            self._loop_thread.loop.call_soon_threadsafe(self._sub.request_stop)
            return
        if not self._loop_thread.alive:
            return
        self._loop_thread.run(self._sub.unsubscribe(timeout))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the subscription stopped (its policy or unsubscribe); False on timeout."""
        if not self._loop_thread.alive:
            return True
        return self._loop_thread.run(self._sub.wait(timeout))

    @property
    def running(self) -> bool:
        return self._sub.running

    @property
    def error(self) -> BaseException | None:
        """Why the subscription stopped by itself (a HandlerError under "stop"), else None."""
        return self._sub.error

    @property
    def topic(self) -> str:
        return self._sub.topic

    @property
    def group_id(self) -> str:
        return self._sub.group_id

    def assignment(self) -> set[Any]:
        """The partitions this subscription owns now (empty while its group is joining)."""
        return self._loop_thread.call(self._sub.assignment)

    def metrics(self) -> dict[str, Any]:
        return self._loop_thread.call(self._sub.metrics)


@sync_face(AsyncKafkaStreamTransport)
class KafkaStreamTransport(SyncFace):
    """Blocking twin of :class:`kafka_core.aio.KafkaStreamTransport`; same options.

    ``publish`` blocks until the record is acknowledged; ``subscribe`` returns a
    :class:`SyncSubscription` (call it to unsubscribe). Use ``with`` or call ``close()``.
    """

    def subscribe(
        self,
        topic: str,
        group_id: str,
        handler: Callable[[Message], Any],
        *,
        on_error: Callable[[KafkaError], Any] | None = None,
        **options: Any,
    ) -> SyncSubscription:
        """Start handling ``topic`` as a member of ``group_id`` (the handler in its own thread)."""
        options.setdefault("threaded", True)
        sub = self._run(self._async_obj.subscribe(topic, group_id, handler, on_error=on_error, **options))
        return SyncSubscription(self._loop_thread, sub)

    def subscriptions(self) -> list[SyncSubscription]:
        subs = self._loop_thread.call(self._async_obj.subscriptions)
        return [SyncSubscription(self._loop_thread, s) for s in subs]

    def close(self, timeout: float | None = None) -> None:
        """Unsubscribe everything, deliver what is queued, stop (see the asyncio ``close``)."""
        if not self._loop_thread.alive:
            return
        try:
            self._run(self._async_obj.close(timeout))
        finally:
            self._finalizer()

    def __exit__(self, *exc: object) -> None:
        self.close()
