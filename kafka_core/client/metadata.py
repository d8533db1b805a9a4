"""Cluster metadata as plain frozen dataclasses, decoupled from any Metadata response version."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def as_topic_partition(key: Any) -> TopicPartition:
    """A ``TopicPartition`` from one, or from the ``(topic, partition)`` pair users may pass."""
    return key if isinstance(key, TopicPartition) else TopicPartition(key[0], int(key[1]))


@dataclass(frozen=True, slots=True)
class BrokerMeta:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    partition: int
    leader: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    leader_epoch: int = -1
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicMeta:
    name: str
    partitions: list[PartitionMeta]
    topic_id: uuid.UUID | None = None
    is_internal: bool = False
    error_code: int = 0

    def partition(self, index: int) -> PartitionMeta | None:
        ps = self.partitions
        if 0 <= index < len(ps) and ps[index].partition == index:
            return ps[index]  # the usual order: no walk over thousands of partitions per lookup
        for p in ps:
            if p.partition == index:
                return p
        return None

    @property
    def ready(self) -> bool:
        """Every partition has a leader (what producers and consumers need to start)."""
        return self.error_code == 0 and bool(self.partitions) and all(p.leader >= 0 for p in self.partitions)


@dataclass(frozen=True, slots=True)
class ClusterMeta:
    brokers: list[BrokerMeta]
    topics: list[TopicMeta]
    controller_id: int = -1
    cluster_id: str | None = None

    def broker(self, node_id: int) -> BrokerMeta | None:
        for b in self.brokers:
            if b.node_id == node_id:
                return b
        return None

    def topic(self, name: str) -> TopicMeta | None:
        for t in self.topics:
            if t.name == name:
                return t
        return None


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """One ListOffsets answer: the offset found for a timestamp (or earliest/latest)."""

    offset: int
    timestamp: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """One OffsetForLeaderEpoch answer: the largest epoch <= the one asked for, and the offset
    its log ends at on the leader (-1 each: undefined). ``error_code`` is a non-retriable error."""

    leader_epoch: int = -1
    end_offset: int = -1
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed group offset (offset of the next record to consume) with its metadata string."""

    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


# ListOffsets special timestamps.
EARLIEST = -2
LATEST = -1


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    epoch: int
