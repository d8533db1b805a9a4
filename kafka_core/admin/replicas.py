"""Where replicas live and who leads: partition reassignments, leader elections, log dirs.

Reassignments and elections are controller business (a KRaft broker forwards them to the active
controller; NOT_CONTROLLER sends the next round elsewhere). Log dirs are each broker's own, so
DescribeLogDirs is asked of every broker named.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafka_core.admin.controller import Controller
from kafka_core.admin.engine import (
    FINAL_CODES,
    call_timeout,
    per_broker,
    per_resource,
)
from kafka_core.admin.results import LogDirDescription, PartitionReassignment, ReplicaInfo, Result
from kafka_core.client.metadata import TopicPartition, as_topic_partition
from kafka_core.errors import KafkaConfigError, KafkaError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode, error_for
from kafka_core.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient

ELECTION_TYPES = {"preferred": 0, "unclean": 1}
# Kafka marks these retriable (they are metadata errors), but for an election they are the
# answer: the leader is already the preferred one, or no replica may lead (Java's admin reports
# them per partition at once too).
ELECTION_FINAL_CODES = FINAL_CODES | {
    ErrorCode.ELECTION_NOT_NEEDED,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
}
ELECT_LEADERS_TYPE_VERSION = 1  # KIP-460: v0 knows preferred elections only
LOG_DIR_BYTES_VERSION = 4  # KIP-827: total and usable bytes


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for tp in tps:
        out[tp.topic].append(tp.partition)
    return out


class ReplicaCalls:
    """The replica calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, default_timeout_ms: float) -> None:
        self.client = client
        self.default_timeout_ms = default_timeout_ms

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition | tuple[str, int], Sequence[int] | None],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        await self.client.start()
        wanted: dict[TopicPartition, list[int] | None] = {}
        for key, replicas in reassignments.items():
            tp = as_topic_partition(key)
            if replicas is not None:
                ids = [int(r) for r in replicas]
                if not ids or len(set(ids)) != len(ids):
                    raise KafkaConfigError(
                        f"alter_partition_reassignments: {tp.topic}-{tp.partition} needs distinct "
                        f"replica ids, not {list(replicas)!r} (None cancels a reassignment)"
                    )
                wanted[tp] = ids
            else:
                wanted[tp] = None
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        controller = Controller(self.client)
        topic_cls = AlterPartitionReassignmentsRequest.ReassignableTopic
        part_cls = AlterPartitionReassignmentsRequest.ReassignablePartition

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            node = await controller.node()
            body = AlterPartitionReassignmentsRequest(
                timeout_ms=int(timeout),
                topics=[
                    topic_cls(
                        name=t,
                        partitions=[
                            part_cls(partition_index=p, replicas=wanted[TopicPartition(t, p)]) for p in ps
                        ],
                    )
                    for t, ps in _by_topic(pending).items()
                ],
            )
            resp = await self.client.send(node, body)
            error = controller.outcome(resp.error_code, "AlterPartitionReassignments", resp.error_message)
            if error is not None:
                return dict.fromkeys(pending, error)
            out: dict[TopicPartition, Any] = {}
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = controller.outcome(
                        p.error_code, f"reassigning {tp.topic}-{tp.partition}", p.error_message
                    )
            return out

        return await per_resource("alter_partition_reassignments", list(wanted), attempt, timeout)

    async def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        await self.client.start()
        wanted = None if partitions is None else [as_topic_partition(tp) for tp in partitions]
        controller = Controller(self.client)
        topic_cls = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)

        async def attempt() -> dict[TopicPartition, PartitionReassignment]:
            node = await controller.node()
            topics = (
                None
                if wanted is None
                else [topic_cls(name=t, partition_indexes=ps) for t, ps in _by_topic(wanted).items()]
            )
            resp = await self.client.send(
                node, ListPartitionReassignmentsRequest(timeout_ms=int(timeout), topics=topics)
            )
            error = controller.outcome(resp.error_code, "ListPartitionReassignments", resp.error_message)
            if error is not None:
                raise error
            out: dict[TopicPartition, PartitionReassignment] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = PartitionReassignment(
                        t.name,
                        p.partition_index,
                        tuple(p.replicas),
                        tuple(p.adding_replicas),
                        tuple(p.removing_replicas),
                    )
            return dict(sorted(out.items()))

        return await self.client.retry("list_partition_reassignments", attempt, timeout)

    async def elect_leaders(
        self,
        election_type: str = "preferred",
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        await self.client.start()
        if election_type not in ELECTION_TYPES:
            raise KafkaConfigError(
                f"elect_leaders: election_type must be one of {list(ELECTION_TYPES)}, not {election_type!r}"
            )
        wanted = (
            None if partitions is None else list(dict.fromkeys(as_topic_partition(tp) for tp in partitions))
        )
        controller = Controller(self.client)
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        topic_cls = ElectLeadersRequest.TopicPartitions

        async def elect(pending: list[TopicPartition] | None) -> dict[TopicPartition, Any]:
            node = await controller.node()
            version = await self.client.api_version(node, ApiKey.ELECT_LEADERS)
            if version < ELECT_LEADERS_TYPE_VERSION and election_type != "preferred":
                raise KafkaUnsupportedVersionError(
                    "elect_leaders: this broker knows preferred elections only (ElectLeaders v0)"
                )
            body = ElectLeadersRequest(
                election_type=ELECTION_TYPES[election_type],
                topic_partitions=None
                if pending is None
                else [topic_cls(topic=t, partitions=ps) for t, ps in _by_topic(pending).items()],
                timeout_ms=int(timeout),
            )
            resp = await self.client.send(node, body, version)
            error = controller.outcome(resp.error_code, f"ElectLeaders ({election_type})")
            if error is not None:
                if pending is None:
                    raise error
                return dict.fromkeys(pending, error)
            out: dict[TopicPartition, Any] = {}
            for r in resp.replica_election_results:
                for p in r.partition_result:
                    tp = TopicPartition(r.topic, p.partition_id)
                    out[tp] = controller.outcome(
                        p.error_code,
                        f"{election_type} election of {tp.topic}-{tp.partition}",
                        p.error_message,
                    )
                    if out[tp] is None:
                        self.client.invalidate_metadata(tp.topic)
            return out

        if wanted is None:  # every partition: the controller says which it elected
            found = await self.client.retry(f"elect_leaders ({election_type})", lambda: elect(None), timeout)
            return {
                tp: Result(error=v) if isinstance(v, KafkaError) else Result(None)
                for tp, v in sorted(found.items())
            }
        return await per_resource(
            f"elect_leaders ({election_type})", wanted, elect, timeout, final_codes=ELECTION_FINAL_CODES
        )

    async def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        *,
        topics: Iterable[str] | None = None,
        timeout_ms: float | None = None,
    ) -> dict[int, Result[dict[str, LogDirDescription]]]:
        await self.client.start()
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        names = [topics] if isinstance(topics, str) else None if topics is None else list(topics)
        meta = await self.client.retry(
            "describe_log_dirs: finding brokers",
            lambda: self.client.metadata(names or [], allow_auto_topic_creation=False),
            timeout,
        )
        nodes = (
            sorted(b.node_id for b in meta.brokers) if broker_ids is None else [int(b) for b in broker_ids]
        )
        topic_cls = DescribeLogDirsRequest.DescribableLogDirTopic
        request_topics = None
        if names is not None:
            request_topics = [
                topic_cls(topic=t.name, partitions=[p.partition for p in t.partitions])
                for t in meta.topics
                if not t.error_code
            ]

        async def ask(node: int) -> Any:
            version = await self.client.api_version(node, ApiKey.DESCRIBE_LOG_DIRS)
            resp = await self.client.send(node, DescribeLogDirsRequest(topics=request_topics), version)
            if getattr(resp, "error_code", 0):
                return error_for(resp.error_code, f"DescribeLogDirs on broker {node}")
            dirs: dict[str, LogDirDescription] = {}
            for d in resp.results:
                with_bytes = version >= LOG_DIR_BYTES_VERSION
                dirs[d.log_dir] = LogDirDescription(
                    path=d.log_dir,
                    error=error_for(d.error_code, f"log dir {d.log_dir} on broker {node}")
                    if d.error_code
                    else None,
                    replicas={
                        TopicPartition(t.name, p.partition_index): ReplicaInfo(
                            p.partition_size, p.offset_lag, p.is_future_key
                        )
                        for t in d.topics
                        for p in t.partitions
                    },
                    total_bytes=d.total_bytes if with_bytes and d.total_bytes >= 0 else None,
                    usable_bytes=d.usable_bytes if with_bytes and d.usable_bytes >= 0 else None,
                )
            return dirs

        return await per_broker("describe_log_dirs", nodes, ask, timeout)
