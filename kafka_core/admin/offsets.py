"""Partition offsets: list offsets by spec, delete records, and a consumer group's lag.

ListOffsets and DeleteRecords go to each partition's leader, one request per leader, side by side;
a leader that moved (NOT_LEADER_OR_FOLLOWER...) sends its partitions round again with fresh
metadata, while a partition that does not exist is final at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.admin.engine import call_timeout, detail_suffix, fan_out, per_resource
from kafka_core.admin.results import GroupLag, PartitionLag, Result
from kafka_core.client.metadata import ListedOffset, TopicPartition, as_topic_partition
from kafka_core.consumer.policies import IsolationLevel, parse_choice
from kafka_core.errors import KafkaConfigError, KafkaError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import DeleteRecordsRequest, ListOffsetsRequest

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient

OffsetSpec = str | int
SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3}
MAX_TIMESTAMP_MIN_VERSION = 7  # KIP-734


def spec_timestamp(spec: OffsetSpec) -> int:
    """ "earliest" | "latest" | "max_timestamp" | a timestamp in ms -> the ListOffsets timestamp."""
    if isinstance(spec, str):
        try:
            return SPECS[spec.lower()]
        except KeyError:
            raise KafkaConfigError(
                f"offset spec must be one of {list(SPECS)} or a timestamp in ms, not {spec!r}"
            ) from None
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < 0:
        raise KafkaConfigError(f"offset spec timestamp must be an int >= 0 (ms), not {spec!r}")
    return spec


class OffsetCalls:
    """The offset calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, default_timeout_ms: float) -> None:
        self.client = client
        self.default_timeout_ms = default_timeout_ms

    def partition_outcomes(
        self, resp: Any, node: int, api: str, value: Callable[[Any], Any]
    ) -> dict[TopicPartition, Any]:
        """A leader's per-partition answer: the error (stale metadata noted, the broker's message
        kept) or ``value(p)``."""
        out: dict[TopicPartition, Any] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    self.client.note_error(p.error_code, tp.topic)
                    out[tp] = error_for(
                        p.error_code,
                        f"{api} {tp.topic}-{tp.partition} on broker {node}"
                        + detail_suffix(getattr(p, "error_message", None)),
                    )
                else:
                    out[tp] = value(p)
        return out

    async def leaders(
        self, pending: list[TopicPartition]
    ) -> tuple[dict[int, list[TopicPartition]], dict[TopicPartition, Any]]:
        """Group partitions by leader from fresh metadata; those without one get their error."""
        meta = await self.client.metadata(
            sorted({tp.topic for tp in pending}), allow_auto_topic_creation=False
        )
        topics = {t.name: t for t in meta.topics}
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        failed: dict[TopicPartition, Any] = {}
        for tp in pending:
            t = topics.get(tp.topic)
            if t is None or t.error_code:
                failed[tp] = error_for(t.error_code if t is not None else 3, f"topic {tp.topic!r}")
                continue
            p = t.partition(tp.partition)
            if p is None:
                failed[tp] = error_for(3, f"{tp.topic} has no partition {tp.partition}")
            elif p.leader < 0:
                failed[tp] = error_for(5, f"{tp.topic}-{tp.partition} has no leader")
            else:
                by_leader[p.leader].append(tp)
        return by_leader, failed

    async def per_leader(
        self,
        pending: list[TopicPartition],
        ask: Callable[[int, list[TopicPartition]], Awaitable[Mapping[TopicPartition, Any]]],
    ) -> dict[TopicPartition, Any]:
        """``ask(leader, partitions)`` once per leader; a partition without one gets its error."""
        by_leader, failed = await self.leaders(pending)
        failed.update(await fan_out(by_leader, ask))
        return failed

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition | tuple[str, int], OffsetSpec],
        *,
        isolation_level: str | IsolationLevel = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[ListedOffset]]:
        await self.client.start()
        wanted = {as_topic_partition(k): spec_timestamp(v) for k, v in specs.items()}
        isolation = parse_choice("isolation_level", isolation_level, IsolationLevel)
        topic_cls = ListOffsetsRequest.ListOffsetsTopic
        part_cls = ListOffsetsRequest.ListOffsetsPartition

        async def ask(node: int, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
            version = await self.client.api_version(node, ApiKey.LIST_OFFSETS)
            out: dict[TopicPartition, Any] = {}
            if version < MAX_TIMESTAMP_MIN_VERSION:
                for tp in [tp for tp in tps if wanted[tp] == SPECS["max_timestamp"]]:
                    out[tp] = KafkaUnsupportedVersionError(
                        f"max_timestamp needs LIST_OFFSETS v{MAX_TIMESTAMP_MIN_VERSION}+; broker {node} offers v{version}"
                    )
                    tps = [x for x in tps if x != tp]
            if not tps:
                return out
            by_topic: dict[str, list[Any]] = defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append(part_cls(partition_index=tp.partition, timestamp=wanted[tp]))
            body = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=int(isolation),
                topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
                timeout_ms=int(self.client.request_timeout_ms),
            )
            resp = await self.client.send(node, body, version)
            out.update(
                self.partition_outcomes(
                    resp,
                    node,
                    "ListOffsets",
                    lambda p: ListedOffset(p.offset, p.timestamp, getattr(p, "leader_epoch", -1)),
                )
            )
            return out

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            return await self.per_leader(pending, ask)

        return await per_resource(
            "list_offsets", wanted, attempt, call_timeout(timeout_ms, self.default_timeout_ms)
        )

    async def delete_records(
        self,
        before: Mapping[TopicPartition | tuple[str, int], int],
        *,
        timeout_ms: float = 30_000,
    ) -> dict[TopicPartition, Result[int]]:
        await self.client.start()
        wanted = {as_topic_partition(k): int(v) for k, v in before.items()}
        topic_cls = DeleteRecordsRequest.DeleteRecordsTopic
        part_cls = DeleteRecordsRequest.DeleteRecordsPartition

        async def ask(node: int, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
            version = await self.client.api_version(node, ApiKey.DELETE_RECORDS)
            by_topic: dict[str, list[Any]] = defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append(part_cls(partition_index=tp.partition, offset=wanted[tp]))
            body = DeleteRecordsRequest(
                topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
                timeout_ms=int(timeout_ms),
            )
            resp = await self.client.send(node, body, version)
            return self.partition_outcomes(resp, node, "DeleteRecords", lambda p: p.low_watermark)

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            return await self.per_leader(pending, ask)

        return await per_resource("delete_records", wanted, attempt, timeout_ms)

    async def consumer_group_lag(
        self,
        group_id: str,
        *,
        isolation_level: str | IsolationLevel = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> GroupLag:
        committed = await self.client.fetch_committed_offsets(group_id, timeout_ms=timeout_ms)
        topics = sorted({tp.topic for tp in committed})
        partitions: set[TopicPartition] = set(committed)
        if topics:
            meta = await self.client.metadata(topics, allow_auto_topic_creation=False)
            for t in meta.topics:
                partitions.update(TopicPartition(t.name, p.partition) for p in t.partitions)
        ends = await self.list_offsets(
            dict.fromkeys(partitions, "latest"), isolation_level=isolation_level, timeout_ms=timeout_ms
        )
        out: dict[TopicPartition, PartitionLag] = {}
        for tp in sorted(partitions):
            om = committed.get(tp)
            res = ends[tp]
            end = res.value.offset if res.ok and res.value is not None else None
            lag = max(end - om.offset, 0) if om is not None and end is not None else None
            err: KafkaError | None = res.error
            out[tp] = PartitionLag(tp.topic, tp.partition, om.offset if om else None, end, lag, err)
        return GroupLag(group_id, out)
