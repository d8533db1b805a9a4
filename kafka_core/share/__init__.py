"""Share groups (KIP-932, queues for Kafka): the share consumer.

``kafka_core.KafkaShareConsumer`` (blocking) and ``kafka_core.aio.KafkaShareConsumer`` (asyncio);
see docs/share-groups.md.
"""

from kafka_core.share.records import (
    AcknowledgeMode,
    AcknowledgeType,
    KafkaAcknowledgementError,
    KafkaShareGroupsUnsupportedError,
    ShareRecord,
)

__all__ = [
    "AcknowledgeMode",
    "AcknowledgeType",
    "KafkaAcknowledgementError",
    "KafkaShareGroupsUnsupportedError",
    "ShareRecord",
]
