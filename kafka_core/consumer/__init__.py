"""The consumer: asyncio core (``consumer.py``) and its thin sync face (``sync.py``)."""

from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata
from kafka_core.consumer.message import ConsumedMessage, KafkaDeserializationError
from kafka_core.consumer.policies import IsolationLevel, OffsetReset

__all__ = [
    "ConsumedMessage",
    "ConsumerGroupMetadata",
    "IsolationLevel",
    "KafkaConsumer",
    "KafkaDeserializationError",
    "OffsetReset",
]
