"""Blocking ``KafkaClient``: the asyncio client run on a private loop thread (see ``_sync``)."""

from __future__ import annotations

from kafka_core._sync import SyncFace, sync_face
from kafka_core.client import cluster


@sync_face(cluster.KafkaClient, exclude=("watch_topics",))
class KafkaClient(SyncFace):
    """Same constructor and methods as :class:`kafka_core.aio.KafkaClient`, but blocking.

    Usable from any thread, with or without an event loop of the caller's own; use it as a
    context manager or call ``close()``.
    """

    def __enter__(self) -> KafkaClient:
        return self


__all__ = ["KafkaClient"]
