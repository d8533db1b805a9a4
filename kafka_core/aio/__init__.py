"""The asyncio API: the same classes as ``kafka_core``, with coroutine methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_core.client.cluster import KafkaClient
from kafka_core.client.metadata import (
    EARLIEST,
    LATEST,
    BrokerMeta,
    ClusterMeta,
    ListedOffset,
    NewTopic,
    OffsetAndMetadata,
    PartitionMeta,
    ProducerIdAndEpoch,
    TopicMeta,
    TopicPartition,
)

if TYPE_CHECKING:
    from kafka_core.admin.admin import KafkaAdmin
    from kafka_core.consumer.consumer import KafkaConsumer
    from kafka_core.producer.producer import KafkaProducer
    from kafka_core.producer.transactions.prepared import (
        PreparedTransaction,
        complete_transaction,
        fence_transactional_id,
    )
    from kafka_core.share.consumer import KafkaShareConsumer
    from kafka_core.transport.transport import KafkaStreamTransport

# Producer and consumer load on first use, so the client never depends on them importing.
_LAZY = {
    "KafkaProducer": "kafka_core.producer.producer",
    "KafkaConsumer": "kafka_core.consumer.consumer",
    "KafkaAdmin": "kafka_core.admin.admin",
    "KafkaStreamTransport": "kafka_core.transport.transport",
    "KafkaShareConsumer": "kafka_core.share.consumer",
    "PreparedTransaction": "kafka_core.producer.transactions.prepared",
    "complete_transaction": "kafka_core.producer.transactions.prepared",
    "fence_transactional_id": "kafka_core.producer.transactions.prepared",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafka_core.aio' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "EARLIEST",
    "LATEST",
    "BrokerMeta",
    "ClusterMeta",
    "KafkaAdmin",
    "KafkaClient",
    "KafkaConsumer",
    "KafkaProducer",
    "KafkaShareConsumer",
    "KafkaStreamTransport",
    "ListedOffset",
    "NewTopic",
    "OffsetAndMetadata",
    "PartitionMeta",
    "PreparedTransaction",
    "ProducerIdAndEpoch",
    "TopicMeta",
    "TopicPartition",
    "complete_transaction",
    "fence_transactional_id",
]
