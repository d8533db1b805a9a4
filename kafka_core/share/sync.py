"""The blocking KafkaShareConsumer: the asyncio one on a private loop thread."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_core._sync import SyncFace, sync_face
from kafka_core.share.consumer import KafkaShareConsumer as AsyncKafkaShareConsumer
from kafka_core.share.records import AcknowledgeType, ShareRecord


@sync_face(AsyncKafkaShareConsumer)
class KafkaShareConsumer(SyncFace):
    """Same constructor and methods as :class:`kafka_core.aio.KafkaShareConsumer`, but blocking."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> KafkaShareConsumer:
        """A share consumer from Java-style names (see the asyncio class's ``from_config``)."""
        from kafka_core.share.options import share_keywords

        return cls(**share_keywords(config, overrides))

    def __enter__(self) -> KafkaShareConsumer:
        return self

    def poll(self, timeout_ms: float = 1_000, max_records: int | None = None) -> list[ShareRecord]:
        """The records acquired for this member (empty after ``timeout_ms`` without any)."""
        return self._run(self._async_obj.poll(timeout_ms, max_records))

    def acknowledge(self, record: Any, type: Any = AcknowledgeType.ACCEPT) -> None:
        """See :meth:`kafka_core.aio.KafkaShareConsumer.acknowledge` (runs here: no thread hop)."""
        self._async_obj.acknowledge(record, type)

    def acknowledge_batch(self, batch: Any, type: Any = AcknowledgeType.ACCEPT, rows: Any = None) -> None:
        """See :meth:`kafka_core.aio.KafkaShareConsumer.acknowledge_batch` (runs here)."""
        self._async_obj.acknowledge_batch(batch, type, rows)

    def close(self, timeout: float | None = None) -> None:
        """Send what is pending, close the share sessions, leave the group; then stop the loop."""
        try:
            if self._loop_thread.alive and not self._async_obj.closed:
                self._run(self._async_obj.close(timeout))
        finally:
            self._finalizer()

    def __iter__(self) -> Any:
        while not self._async_obj.closed:
            yield from self.poll(1_000)
