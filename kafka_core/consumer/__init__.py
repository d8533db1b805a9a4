"""The consumer: asyncio core (``consumer.py``) and its thin sync face (``sync.py``)."""

from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.message import ConsumedMessage

__all__ = ["ConsumedMessage", "KafkaConsumer"]
