"""Consumer group administration: list, describe, delete groups; read, alter, delete their offsets.

Everything about a group is asked of its coordinator (``coordinator.Coordinators``);
NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE forget the cached one and the resource goes round
again, COORDINATOR_LOAD_IN_PROGRESS just waits. list_groups asks every broker and merges.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.admin.coordinator import Coordinators, assigned_partitions, merge_listings
from kafka_core.admin.engine import all_brokers, call_timeout, per_broker, per_resource
from kafka_core.admin.results import GroupDescription, GroupListing, MemberDescription, Result
from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition, as_topic_partition
from kafka_core.client.operations import OFFSETS_MAX_VERSION
from kafka_core.client.requests import offset_commit_request, offsets_by_partition
from kafka_core.consumer.group.classic_meta import decode_assignment
from kafka_core.errors import KafkaError, KafkaProtocolError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode, error_for
from kafka_core.protocol.messages import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetDeleteRequest,
)

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient

GROUP_ID_NOT_FOUND = 69


def _members(group: Any) -> list[MemberDescription]:
    out = []
    for m in group.members:
        assignment: list[TopicPartition] = []
        if group.protocol_type == "consumer" and m.member_assignment:
            try:
                parts = decode_assignment(bytes(m.member_assignment)).partitions
                assignment = sorted(TopicPartition(t, p) for t, ps in parts.items() for p in ps)
            except KafkaError:  # a member of a non-standard consumer protocol: say nothing
                assignment = []
        out.append(
            MemberDescription(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.client_host,
                assignment=assignment,
                group_instance_id=getattr(m, "group_instance_id", None),
            )
        )
    return out


# ConsumerGroupDescribe's states, as Java's GroupState names them (DescribeGroups' are already so).
_STATES = {
    "empty": "Empty",
    "assigning": "Assigning",
    "reconciling": "Reconciling",
    "stable": "Stable",
    "dead": "Dead",
    "not_ready": "NotReady",
}


def _consumer_group(g: Any) -> GroupDescription:
    """A KIP-848 group from its ConsumerGroupDescribe answer."""
    members = [
        MemberDescription(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.client_host,
            assignment=assigned_partitions(m.assignment),
            group_instance_id=m.instance_id,
            member_epoch=m.member_epoch,
            target_assignment=assigned_partitions(m.target_assignment),
            rack_id=m.rack_id,
            subscribed_topics=list(m.subscribed_topic_names or []),
            subscribed_pattern=m.subscribed_topic_regex or None,
        )
        for m in g.members
    ]
    return GroupDescription(
        g.group_id,
        _STATES.get(g.group_state, g.group_state),
        "consumer",
        g.assignor_name,
        members,
        group_type="consumer",
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
    )


class GroupCalls:
    """The group calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, coordinators: Coordinators, default_timeout_ms: float) -> None:
        self.client = client
        self.coordinators = coordinators
        self.default_timeout_ms = default_timeout_ms

    async def list_groups(self, *, timeout_ms: float | None = None) -> list[GroupListing]:
        await self.client.start()
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        nodes = await all_brokers(self.client, "list_groups", timeout)

        async def ask(node: int) -> Any:
            resp = await self.client.send(node, ListGroupsRequest(states_filter=[], types_filter=[]))
            if resp.error_code:
                return error_for(resp.error_code, f"ListGroups on broker {node}")
            return [
                GroupListing(
                    g.group_id,
                    g.protocol_type,
                    getattr(g, "group_state", None) or None,
                    getattr(g, "group_type", None) or None,  # ListGroups v5+
                )
                for g in resp.groups
            ]

        return merge_listings(await per_broker("list_groups", nodes, ask, timeout))

    async def describe_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[GroupDescription]]:
        await self.client.start()
        ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)

        async def ask(node: int, groups: list[str]) -> dict[str, Any]:
            resp = await self.client.send(node, DescribeGroupsRequest(groups=groups))
            out: dict[str, Any] = {}
            unknown: list[str] = []  # not a classic group: perhaps a KIP-848 one
            for g in resp.groups:
                if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
                    not g.error_code and g.group_state == "Dead"
                ):
                    unknown.append(g.group_id)
                elif g.error_code:
                    out[g.group_id] = self.coordinators.error(g.group_id, g.error_code, "describing")
                else:
                    out[g.group_id] = GroupDescription(
                        g.group_id, g.group_state, g.protocol_type, g.protocol_data, _members(g)
                    )
            if unknown:
                out.update(await self._describe_consumer_groups(node, unknown))
            return out

        async def attempt(pending: list[str]) -> dict[str, Any]:
            return await self.coordinators.ask(pending, lambda g: [g], ask)

        return await per_resource(
            "describe_groups", ids, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )

    async def _describe_consumer_groups(self, node: int, groups: list[str]) -> dict[str, Any]:
        """ConsumerGroupDescribe (API 69) for groups DescribeGroups did not know; a broker
        without it (before Kafka 3.7, Tansu) or without KIP-848 enabled (Kafka 3.9 answers
        UNSUPPORTED_VERSION) has none: GROUP_ID_NOT_FOUND stands."""

        def missing(group_id: str) -> KafkaProtocolError:
            return error_for(GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist")

        try:
            version = await self.client.api_version(node, ApiKey.CONSUMER_GROUP_DESCRIBE)
        except KafkaUnsupportedVersionError:
            return {g: missing(g) for g in groups}
        body = ConsumerGroupDescribeRequest(group_ids=groups)
        resp = await self.client.send(node, body, version)
        out: dict[str, Any] = {}
        for g in resp.groups:
            if g.error_code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):
                out[g.group_id] = missing(g.group_id)
            elif g.error_code:
                out[g.group_id] = self.coordinators.error(g.group_id, g.error_code, "describing")
            else:
                out[g.group_id] = _consumer_group(g)
        return out

    async def delete_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[None]]:
        await self.client.start()
        ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)

        async def ask(node: int, groups: list[str]) -> dict[str, Any]:
            resp = await self.client.send(node, DeleteGroupsRequest(groups_names=groups))
            return {
                r.group_id: self.coordinators.error(r.group_id, r.error_code, "deleting")
                if r.error_code
                else None
                for r in resp.results
            }

        async def attempt(pending: list[str]) -> dict[str, Any]:
            return await self.coordinators.ask(pending, lambda g: [g], ask)

        return await per_resource(
            "delete_groups", ids, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return await self.client.fetch_committed_offsets(
            group_id, partitions, timeout_ms=call_timeout(timeout_ms, self.default_timeout_ms)
        )

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetAndMetadata],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        await self.client.start()
        wanted = offsets_by_partition(offsets)

        async def ask(
            node: int, _groups: list[str], pending: list[TopicPartition]
        ) -> dict[TopicPartition, Any]:
            body = offset_commit_request(group_id, {tp: wanted[tp] for tp in pending})
            resp = await self.client.send(node, body, max_version=OFFSETS_MAX_VERSION)
            out: dict[TopicPartition, Any] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = (
                        self.coordinators.error(
                            group_id, p.error_code, f"committing {t.name}-{p.partition_index} for"
                        )
                        if p.error_code
                        else None
                    )
            return out

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            return await self.coordinators.ask(
                [group_id], lambda _g: pending, lambda n, gs: ask(n, gs, pending)
            )

        return await per_resource(
            "alter_group_offsets", wanted, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )

    async def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        await self.client.start()
        wanted = [as_topic_partition(k) for k in partitions]
        topic_cls = OffsetDeleteRequest.OffsetDeleteRequestTopic
        part_cls = OffsetDeleteRequest.OffsetDeleteRequestPartition

        async def ask(node: int, pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            version = await self.client.api_version(node, ApiKey.OFFSET_DELETE)
            by_topic: dict[str, list[Any]] = defaultdict(list)
            for tp in pending:
                by_topic[tp.topic].append(part_cls(partition_index=tp.partition))
            body = OffsetDeleteRequest(
                group_id=group_id, topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()]
            )
            resp = await self.client.send(node, body, version)
            if resp.error_code:  # the whole group failed (unknown group, coordinator moved...)
                return dict.fromkeys(
                    pending, self.coordinators.error(group_id, resp.error_code, "deleting offsets of")
                )
            out: dict[TopicPartition, Any] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = (
                        error_for(
                            p.error_code,
                            f"deleting the offset of {t.name}-{p.partition_index} in group {group_id!r}",
                        )
                        if p.error_code
                        else None
                    )
            return out

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            return await self.coordinators.ask([group_id], lambda _g: pending, lambda n, _gs: ask(n, pending))

        return await per_resource(
            "delete_group_offsets", wanted, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )
