"""Blocking ``KafkaAdmin``: the asyncio admin run on a private loop thread (see ``kafka_core._sync``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_core._sync import SyncFace, sync_face
from kafka_core.admin import admin
from kafka_core.config import keywords_from_config


@sync_face(admin.KafkaAdmin)
class KafkaAdmin(SyncFace):
    """Same constructor and methods as :class:`kafka_core.aio.KafkaAdmin`, but blocking.

    ``with KafkaAdmin(bootstrap_servers=...) as admin: admin.create_topics([...])``.
    """

    def __enter__(self) -> KafkaAdmin:
        return self

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> KafkaAdmin:
        """An admin from Java-style names (``{"bootstrap.servers": ...}``: the client's), with
        ``overrides`` (keyword names) on top; unknown names raise KafkaConfigError naming them."""
        return cls(**keywords_from_config(config, "client", overrides))


__all__ = ["KafkaAdmin"]
