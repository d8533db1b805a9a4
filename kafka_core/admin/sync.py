"""Blocking ``KafkaAdmin``: the asyncio admin run on a private loop thread (see ``kafka_core._sync``)."""

from __future__ import annotations

from kafka_core._sync import SyncFace, sync_face
from kafka_core.admin import admin


@sync_face(admin.KafkaAdmin)
class KafkaAdmin(SyncFace):
    """Same constructor and methods as :class:`kafka_core.aio.KafkaAdmin`, but blocking.

    ``with KafkaAdmin(bootstrap_servers=...) as admin: admin.create_topics([...])``.
    """

    def __enter__(self) -> KafkaAdmin:
        return self


__all__ = ["KafkaAdmin"]
