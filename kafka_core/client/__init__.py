"""The cluster client (asyncio): connections per broker, metadata, coordinators, offsets."""

from kafka_core.client.cluster import KafkaClient
from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta, TopicPartition

__all__ = ["BrokerMeta", "ClusterMeta", "KafkaClient", "PartitionMeta", "TopicMeta", "TopicPartition"]
