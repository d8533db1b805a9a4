"""Request bodies built in more than one place (the client's own operations and the admin), so
each is written once."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_core.client.metadata import NewTopic, OffsetAndMetadata, TopicPartition, as_topic_partition
from kafka_core.protocol.messages import CreateTopicsRequest, OffsetCommitRequest, OffsetForLeaderEpochRequest

__all__ = [
    "create_topics_request",
    "offset_commit_request",
    "offset_for_leader_epoch_request",
    "offsets_by_partition",
]


def offsets_by_partition(
    offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetAndMetadata],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets as the user may give them (plain ints, ``(topic, partition)`` keys), normalised."""
    return {
        as_topic_partition(k): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
        for k, v in offsets.items()
    }


def offset_commit_request(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> OffsetCommitRequest:
    """An OffsetCommit of ``offsets``; generation -1 and no member: a group with no live members."""
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part_cls = OffsetCommitRequest.OffsetCommitRequestPartition
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for tp, om in offsets.items():
        by_topic[tp.topic].append(
            part_cls(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def create_topics_request(
    topics: Iterable[NewTopic], *, timeout_ms: float, validate_only: bool
) -> CreateTopicsRequest:
    topic_cls = CreateTopicsRequest.CreatableTopic
    config_cls = CreateTopicsRequest.CreatableTopicConfig
    return CreateTopicsRequest(
        topics=[
            topic_cls(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs=[config_cls(name=k, value=v) for k, v in t.configs.items()],
            )
            for t in topics
        ],
        timeout_ms=int(timeout_ms),
        validate_only=validate_only,
    )


def offset_for_leader_epoch_request(
    epochs: Mapping[TopicPartition, tuple[int, int]],
) -> OffsetForLeaderEpochRequest:
    """A consumer's OffsetForLeaderEpoch: per partition ``(current_leader_epoch, leader_epoch)``,
    the first fencing a stale leader (v2+), the second the epoch whose end offset is wanted."""
    part_cls = OffsetForLeaderEpochRequest.OffsetForLeaderPartition
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for tp, (current, epoch) in epochs.items():
        by_topic[tp.topic].append(
            part_cls(partition=tp.partition, current_leader_epoch=current, leader_epoch=epoch)
        )
    return OffsetForLeaderEpochRequest(
        replica_id=-1,  # a consumer (v3+; older versions have no such field)
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )
