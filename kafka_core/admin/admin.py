"""The asyncio admin client: topics, configs, groups, offsets and ACLs over one ``KafkaClient``.

Each family of calls lives in its own mixin module (topics, configs, groups, share_groups,
offsets, acls); this class owns the client they share and its lifecycle. Calls over many resources return
``{key: Result}``; see ``kafka_core.admin.results``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Self

from kafka_core.admin.acls import AclsMixin
from kafka_core.admin.configs import ConfigsMixin
from kafka_core.admin.groups import GroupsMixin
from kafka_core.admin.offsets import OffsetsMixin
from kafka_core.admin.share_groups import ShareGroupsMixin
from kafka_core.admin.topics import TopicsMixin
from kafka_core.client.cluster import KafkaClient
from kafka_core.config import keywords_from_config

DEFAULT_API_TIMEOUT_MS = 60_000


class KafkaAdmin(TopicsMixin, ConfigsMixin, GroupsMixin, ShareGroupsMixin, OffsetsMixin, AclsMixin):
    """Asyncio admin client. ``async with KafkaAdmin(bootstrap_servers=...) as admin: ...``.

    Takes the same options as :class:`kafka_core.aio.KafkaClient`; unlike it, the admin never
    auto-creates a topic by asking about it (``allow_auto_create_topics`` defaults to False).
    Calls without a ``timeout_ms`` use ``api_timeout_ms`` (60 s).
    """

    def __init__(
        self, bootstrap_servers: str | Iterable[str] = "localhost:9092", **client_options: Any
    ) -> None:
        client_options.setdefault("allow_auto_create_topics", False)
        client_options.setdefault("client_id", "kafka-core-admin")
        self.client = KafkaClient(bootstrap_servers, **client_options)
        self.default_timeout_ms = float(client_options.get("api_timeout_ms", DEFAULT_API_TIMEOUT_MS))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """An admin from Java-style names (``{"bootstrap.servers": ...}``: the client's), with
        ``overrides`` (keyword names) on top; unknown names raise KafkaConfigError naming them."""
        return cls(**keywords_from_config(config, "client", overrides))

    async def __aenter__(self) -> KafkaAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to the cluster (every call does it on first use)."""
        await self.client.start()

    async def close(self) -> None:
        """Close the connections. Idempotent."""
        await self.client.close()

    def metrics(self) -> dict[str, Any]:
        """A snapshot of the underlying client's counters (requests, errors, latency by API)."""
        return self.client.metrics()


__all__ = ["KafkaAdmin"]
