"""kafka_core: a fast Kafka client for Python (asyncio core with a sync face).

Blocking classes are importable from here (``kafka_core.KafkaClient``); their asyncio twins from
``kafka_core.aio``. Imports are lazy so that ``import kafka_core.codec`` stays cheap and a
problem in one component cannot break the import of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_core._version import __version__

if TYPE_CHECKING:
    from kafka_core.admin.sync import KafkaAdmin
    from kafka_core.client.metadata import NewTopic, OffsetAndMetadata, TopicPartition
    from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata
    from kafka_core.consumer.message import KafkaDeserializationError
    from kafka_core.consumer.policies import GroupProtocol, IsolationLevel, OffsetReset
    from kafka_core.consumer.sync import KafkaConsumer
    from kafka_core.producer.sync import KafkaProducer, complete_transaction, fence_transactional_id
    from kafka_core.producer.transactions.prepared import PreparedTransaction
    from kafka_core.protocol.error_codes import ErrorCode
    from kafka_core.share.records import AcknowledgeType
    from kafka_core.share.sync import KafkaShareConsumer
    from kafka_core.sync_client import KafkaClient
    from kafka_core.transport.sync import KafkaStreamTransport

_LAZY = {
    "KafkaClient": "kafka_core.sync_client",
    "KafkaProducer": "kafka_core.producer.sync",
    "KafkaConsumer": "kafka_core.consumer.sync",
    "TopicPartition": "kafka_core.client.metadata",
    "OffsetAndMetadata": "kafka_core.client.metadata",
    "NewTopic": "kafka_core.client.metadata",
    "KafkaAdmin": "kafka_core.admin.sync",
    "KafkaStreamTransport": "kafka_core.transport.sync",
    "KafkaShareConsumer": "kafka_core.share.sync",
    "AcknowledgeType": "kafka_core.share.records",
    "ErrorCode": "kafka_core.protocol.error_codes",
    "KafkaDeserializationError": "kafka_core.consumer.message",
    "OffsetReset": "kafka_core.consumer.policies",
    "IsolationLevel": "kafka_core.consumer.policies",
    "GroupProtocol": "kafka_core.consumer.policies",
    "ConsumerGroupMetadata": "kafka_core.consumer.group.rebalance",
    "PreparedTransaction": "kafka_core.producer.transactions.prepared",
    "complete_transaction": "kafka_core.producer.sync",
    "fence_transactional_id": "kafka_core.producer.sync",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafka_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "AcknowledgeType",
    "ConsumerGroupMetadata",
    "ErrorCode",
    "GroupProtocol",
    "IsolationLevel",
    "KafkaAdmin",
    "KafkaClient",
    "KafkaConsumer",
    "KafkaDeserializationError",
    "KafkaProducer",
    "KafkaShareConsumer",
    "KafkaStreamTransport",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetReset",
    "PreparedTransaction",
    "TopicPartition",
    "__version__",
    "complete_transaction",
    "fence_transactional_id",
]
