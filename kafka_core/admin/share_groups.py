"""Share group (KIP-932) administration: list, describe, delete; start offsets, their lag, alter.

A share group is coordinated like any group (FindCoordinator key type 0), but described by
ShareGroupDescribe and its progress is a *start offset* per partition (where the in-flight window
of records not yet acknowledged begins), read by DescribeShareGroupOffsets and set by
AlterShareGroupOffsets, not a committed offset. A broker without share groups (before Apache
Kafka 4.1, Tansu) does not offer ShareGroupDescribe: every call here then raises
KafkaUnsupportedVersionError saying so, rather than an empty answer that looks like "no groups".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.admin.coordinator import Coordinators, assigned_partitions, merge_listings
from kafka_core.admin.engine import all_brokers, call_timeout, detail_suffix, per_broker, per_resource
from kafka_core.admin.results import (
    GroupDescription,
    GroupLag,
    GroupListing,
    MemberDescription,
    PartitionLag,
    Result,
    SharePartitionOffset,
)
from kafka_core.client.metadata import TopicPartition, as_topic_partition
from kafka_core.errors import KafkaError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ListGroupsRequest,
    ShareGroupDescribeRequest,
)
from kafka_core.share.records import KafkaShareGroupsUnsupportedError

if TYPE_CHECKING:
    from kafka_core.admin.offsets import OffsetCalls
    from kafka_core.client.cluster import KafkaClient
    from kafka_core.consumer.policies import IsolationLevel

__all__ = ["ShareGroupCalls", "describe_share_group", "no_share_groups"]

LIST_GROUPS_TYPES_VERSION = 5  # ListGroups' types filter (KIP-848, Kafka 3.8+)

# ShareGroupDescribe's states as Java's GroupState names them.
_STATES = {"empty": "Empty", "stable": "Stable", "dead": "Dead", "unknown": "Unknown"}


def no_share_groups(node: int, cause: BaseException | None = None) -> KafkaShareGroupsUnsupportedError:
    """The error for a broker that has no share groups (names what is needed); the share
    consumer's own, a KafkaUnsupportedVersionError."""
    why = f": {cause}" if cause is not None else ""
    return KafkaShareGroupsUnsupportedError(
        f"broker {node} has no share groups (KIP-932 needs Apache Kafka 4.1 or newer with "
        f"share.version 1; it does not offer ShareGroupDescribe){why}"
    )


def describe_share_group(g: Any) -> GroupDescription:
    """A share group from its ShareGroupDescribe answer (``group_type="share"``)."""
    members = [
        MemberDescription(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.client_host,
            assignment=assigned_partitions(m.assignment),
            member_epoch=m.member_epoch,
            rack_id=m.rack_id,
            subscribed_topics=sorted(m.subscribed_topic_names or []),
        )
        for m in g.members
    ]
    return GroupDescription(
        g.group_id,
        _STATES.get(g.group_state.lower(), g.group_state),
        "share",
        g.assignor_name,
        members,
        group_type="share",
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
    )


class ShareGroupCalls:
    """The share group calls of :class:`kafka_core.aio.KafkaAdmin` (Java's ``*ShareGroup*``,
    documented there); lag reads end offsets through the offset calls."""

    def __init__(
        self,
        client: KafkaClient,
        coordinators: Coordinators,
        offsets: OffsetCalls,
        default_timeout_ms: float,
    ) -> None:
        self.client = client
        self.coordinators = coordinators
        self.offsets = offsets
        self.default_timeout_ms = default_timeout_ms

    async def _version(self, node: int, api: int) -> int:
        """The version of ``api`` for ``node``; a broker without share groups raises saying so."""
        try:
            await self.client.api_version(node, ApiKey.SHARE_GROUP_DESCRIBE)
        except KafkaUnsupportedVersionError as exc:
            raise no_share_groups(node, exc) from None
        return await self.client.api_version(node, api)

    def _error(self, group_id: str, code: int, what: str, detail: str | None = None) -> KafkaError:
        return self.coordinators.error(group_id, code, what, kind="share group", detail=detail)

    # -- groups ---------------------------------------------------------------------------------

    async def list_share_groups(
        self, *, states: Iterable[str] | None = None, timeout_ms: float | None = None
    ) -> list[GroupListing]:
        await self.client.start()
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        nodes = await all_brokers(self.client, "list_share_groups", timeout)
        wanted_states = list(states or [])

        async def ask(node: int) -> Any:
            version = await self._version(node, ApiKey.LIST_GROUPS)
            if version < LIST_GROUPS_TYPES_VERSION:
                raise no_share_groups(node, KafkaUnsupportedVersionError(f"ListGroups v{version}"))
            body = ListGroupsRequest(states_filter=wanted_states, types_filter=["share"])
            resp = await self.client.send(node, body, version)
            if resp.error_code:
                return error_for(resp.error_code, f"ListGroups on broker {node}")
            return [
                GroupListing(g.group_id, g.protocol_type, g.group_state or None, g.group_type or "share")
                for g in resp.groups
                if (g.group_type or "share") == "share"
            ]

        return merge_listings(await per_broker("list_share_groups", nodes, ask, timeout))

    async def describe_share_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[GroupDescription]]:
        await self.client.start()
        ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)

        async def ask(node: int, groups: list[str]) -> dict[str, Any]:
            version = await self._version(node, ApiKey.SHARE_GROUP_DESCRIBE)
            resp = await self.client.send(node, ShareGroupDescribeRequest(group_ids=groups), version)
            out: dict[str, Any] = {}
            for g in resp.groups:
                if g.error_code:
                    out[g.group_id] = self._error(g.group_id, g.error_code, "describing", g.error_message)
                else:
                    out[g.group_id] = describe_share_group(g)
            return out

        async def attempt(pending: list[str]) -> dict[str, Any]:
            return await self.coordinators.ask(pending, lambda g: [g], ask)

        return await per_resource(
            "describe_share_groups", ids, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )

    async def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[None]]:
        await self.client.start()
        ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)

        async def ask(node: int, groups: list[str]) -> dict[str, Any]:
            await self._version(node, ApiKey.DELETE_GROUPS)
            resp = await self.client.send(node, DeleteGroupsRequest(groups_names=groups))
            return {
                r.group_id: self._error(r.group_id, r.error_code, "deleting") if r.error_code else None
                for r in resp.results
            }

        async def attempt(pending: list[str]) -> dict[str, Any]:
            return await self.coordinators.ask(pending, lambda g: [g], ask)

        return await per_resource(
            "delete_share_groups", ids, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )

    # -- start offsets --------------------------------------------------------------------------

    async def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, SharePartitionOffset]:
        await self.client.start()
        topic_cls = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic
        group_cls = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
        topics: list[Any] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in map(as_topic_partition, partitions):
                by_topic[tp.topic].append(tp.partition)
            topics = [topic_cls(topic_name=t, partitions=sorted(ps)) for t, ps in by_topic.items()]

        async def ask(node: int, _groups: list[str]) -> dict[str, Any]:
            version = await self._version(node, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
            body = DescribeShareGroupOffsetsRequest(groups=[group_cls(group_id=group_id, topics=topics)])
            resp = await self.client.send(node, body, version)
            for g in resp.groups:
                if g.group_id != group_id:
                    continue
                if g.error_code:
                    return {
                        group_id: self._error(group_id, g.error_code, "reading offsets of", g.error_message)
                    }
                return {group_id: _start_offsets(group_id, g)}
            return {}

        async def attempt(pending: list[str]) -> dict[str, Any]:
            return await self.coordinators.ask(pending, lambda g: [g], ask)

        results = await per_resource(
            "list_share_group_offsets", [group_id], attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )
        offsets: dict[TopicPartition, SharePartitionOffset] = results[group_id].result()
        return offsets

    async def share_group_lag(
        self,
        group_id: str,
        *,
        isolation_level: str | IsolationLevel = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> GroupLag:
        starts = await self.list_share_group_offsets(group_id, timeout_ms=timeout_ms)
        ends: dict[TopicPartition, Result[Any]] = {}
        if starts:
            ends = await self.offsets.list_offsets(
                dict.fromkeys(starts, "latest"), isolation_level=isolation_level, timeout_ms=timeout_ms
            )
        out: dict[TopicPartition, PartitionLag] = {}
        for tp in sorted(starts):
            so = starts[tp]
            res = ends[tp]
            end = res.value.offset if res.ok and res.value is not None else None
            start = so.start_offset if so.start_offset >= 0 and so.error is None else None
            lag: int | None = None
            if start is not None and so.lag is not None:
                lag = so.lag
            elif start is not None and end is not None:
                lag = max(end - start, 0)
            error: KafkaError | None = so.error or res.error
            out[tp] = PartitionLag(tp.topic, tp.partition, start, end, lag, error)
        return GroupLag(group_id, out)

    async def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition | tuple[str, int], int],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        await self.client.start()
        wanted = {as_topic_partition(k): int(v) for k, v in offsets.items()}
        topic_cls = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
        part_cls = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition

        async def ask(node: int, pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            version = await self._version(node, ApiKey.ALTER_SHARE_GROUP_OFFSETS)
            by_topic: dict[str, list[Any]] = defaultdict(list)
            for tp in pending:
                by_topic[tp.topic].append(part_cls(partition_index=tp.partition, start_offset=wanted[tp]))
            body = AlterShareGroupOffsetsRequest(
                group_id=group_id,
                topics=[topic_cls(topic_name=t, partitions=ps) for t, ps in by_topic.items()],
            )
            resp = await self.client.send(node, body, version)
            if resp.error_code:
                err = self._error(group_id, resp.error_code, "altering offsets of", resp.error_message)
                return dict.fromkeys(pending, err)
            out: dict[TopicPartition, Any] = {}
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.topic_name, p.partition_index)
                    out[tp] = (
                        error_for(
                            p.error_code,
                            f"setting the start offset of {tp.topic}-{tp.partition} in share group "
                            f"{group_id!r}{detail_suffix(p.error_message)}",
                        )
                        if p.error_code
                        else None
                    )
            return out

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            return await self.coordinators.ask([group_id], lambda _g: pending, lambda n, _gs: ask(n, pending))

        return await per_resource(
            "alter_share_group_offsets", wanted, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[None]]:
        await self.client.start()
        names = [topics] if isinstance(topics, str) else list(dict.fromkeys(topics))
        topic_cls = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic

        async def ask(node: int, pending: list[str]) -> dict[str, Any]:
            version = await self._version(node, ApiKey.DELETE_SHARE_GROUP_OFFSETS)
            body = DeleteShareGroupOffsetsRequest(
                group_id=group_id, topics=[topic_cls(topic_name=t) for t in pending]
            )
            resp = await self.client.send(node, body, version)
            if resp.error_code:
                err = self._error(group_id, resp.error_code, "deleting offsets of", resp.error_message)
                return dict.fromkeys(pending, err)
            return {
                t.topic_name: error_for(
                    t.error_code,
                    f"deleting the offsets of {t.topic_name!r} in share group {group_id!r}"
                    f"{detail_suffix(t.error_message)}",
                )
                if t.error_code
                else None
                for t in resp.responses
            }

        async def attempt(pending: list[str]) -> dict[str, Any]:
            return await self.coordinators.ask([group_id], lambda _g: pending, lambda n, _gs: ask(n, pending))

        return await per_resource(
            "delete_share_group_offsets", names, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )


def _start_offsets(group_id: str, g: Any) -> dict[TopicPartition, SharePartitionOffset]:
    out: dict[TopicPartition, SharePartitionOffset] = {}
    for t in g.topics:
        for p in t.partitions:
            tp = TopicPartition(t.topic_name, p.partition_index)
            error = (
                error_for(
                    p.error_code,
                    f"the start offset of {tp.topic}-{tp.partition} in share group {group_id!r}"
                    f"{detail_suffix(p.error_message)}",
                )
                if p.error_code
                else None
            )
            lag = getattr(p, "lag", -1)
            out[tp] = SharePartitionOffset(
                tp.topic,
                tp.partition,
                p.start_offset,
                p.leader_epoch if p.leader_epoch >= 0 else None,
                lag if lag is not None and lag >= 0 else None,
                error,
            )
    return out
