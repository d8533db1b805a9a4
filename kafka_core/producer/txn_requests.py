"""The transaction coordinator's requests (KIP-98, KIP-447): build, send, and read the error codes.

Each function sends one request and returns its error code(s); what a code means for the
transaction (retry, abortable, fatal) is the transaction manager's decision, not made here.
Versions are negotiated by the client, capped where a later version is not a client's to use:
AddPartitionsToTxn v4+ is the brokers' batched form (KIP-890), EndTxn v5 and TxnOffsetCommit v5
belong to KIP-890 part 2, which needs Produce v12 transactions this client does not send.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition
from kafka_core.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
)

__all__ = [
    "ADD_OFFSETS_MAX_VERSION",
    "ADD_PARTITIONS_MAX_VERSION",
    "END_TXN_MAX_VERSION",
    "TXN_OFFSET_COMMIT_MAX_VERSION",
    "add_offsets",
    "add_partitions",
    "end_txn",
    "txn_offset_commit",
]

ADD_PARTITIONS_MAX_VERSION = 3
ADD_OFFSETS_MAX_VERSION = 4
END_TXN_MAX_VERSION = 4
TXN_OFFSET_COMMIT_MAX_VERSION = 4


async def add_partitions(
    client: Any,
    node: int,
    ident: tuple[str, int, int],
    partitions: Iterable[tuple[str, int]],
    timeout_ms: float,
) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn for ``partitions``: the error code of each partition answered."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    txn_id, pid, epoch = ident
    body = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=sorted(ps))
            for t, ps in by_topic.items()
        ],
    )
    resp = await client.send(node, body, max_version=ADD_PARTITIONS_MAX_VERSION, timeout_ms=timeout_ms)
    out: dict[tuple[str, int], int] = {}
    for topic in resp.results_by_topic_v3_and_below:
        for p in topic.results_by_partition:
            out[(topic.name, p.partition_index)] = p.partition_error_code
    return out


async def add_offsets(
    client: Any, node: int, ident: tuple[str, int, int], group_id: str, timeout_ms: float
) -> int:
    txn_id, pid, epoch = ident
    body = AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group_id
    )
    resp = await client.send(node, body, max_version=ADD_OFFSETS_MAX_VERSION, timeout_ms=timeout_ms)
    return int(resp.error_code)


async def end_txn(
    client: Any, node: int, ident: tuple[str, int, int], commit: bool, timeout_ms: float
) -> int:
    txn_id, pid, epoch = ident
    body = EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)
    resp = await client.send(node, body, max_version=END_TXN_MAX_VERSION, timeout_ms=timeout_ms)
    return int(resp.error_code)


async def txn_offset_commit(
    client: Any,
    node: int,
    ident: tuple[str, int, int],
    group: tuple[str, int, str, str | None],
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    timeout_ms: float,
) -> dict[TopicPartition, int]:
    """TxnOffsetCommit to the group coordinator; ``group`` is (group id, generation, member id,
    group instance id), sent from v3 on so that the coordinator fences a zombie member (KIP-447)."""
    txn_id, pid, epoch = ident
    group_id, generation, member_id, instance_id = group
    by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
    for tp, om in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    body = TxnOffsetCommitRequest(
        transactional_id=txn_id,
        group_id=group_id,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )
    resp = await client.send(node, body, max_version=TXN_OFFSET_COMMIT_MAX_VERSION, timeout_ms=timeout_ms)
    out: dict[TopicPartition, int] = {}
    for topic in resp.topics:
        for p in topic.partitions:
            out[TopicPartition(topic.name, p.partition_index)] = p.error_code
    return out
